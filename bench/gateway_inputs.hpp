// What gateway_bench and pipeline_bench both feed the gateway: the rule mix
// (all seven kinds in equal shares, none matching the benchmark traffic) and
// 64-byte TCP frames. Generated outside every timed region.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "packet_builder.hpp"

namespace cg::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

inline std::string addr(uint32_t i) {  // 10.x.y.z from an index
  return "10." + std::to_string((i >> 16) & 255) + "." + std::to_string((i >> 8) & 255) + "." +
         std::to_string(i & 255);
}

// n rules as rule-file text, one per line: src, dst, ip, flow, service, host
// and url in turn, so every key of a packet is looked up. Every address is in
// `prefix`.0.0.0/8, every name is h`tag`N.example.net or example.org/p`tag`/N;
// none matches traffic from outside that /8. A different tag and prefix give
// rules disjoint from the defaults.
inline std::string rule_mix(std::size_t n, const std::string& tag = "", uint32_t prefix = 10) {
  auto a = [&](uint32_t i) { return std::to_string(prefix) + addr(i).substr(2); };
  std::string text;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t j = i / 7;
    switch (i % 7) {
      case 0:
        text += "src " + a(j);
        break;
      case 1:
        text += "dst " + a(j);
        break;
      case 2:
        text += "ip " + a(j);
        break;
      case 3:
        text += "flow tcp " + a(j) + ":1000 " + a(j + 1) + ":80";
        break;
      case 4:
        text += "service tcp " + a(j) + ":443";
        break;
      case 5:
        text += "host h" + tag + std::to_string(j) + ".example.net";
        break;
      default:
        text += "url example.org/p" + tag + "/" + std::to_string(j);
        break;
    }
    text += "\n";
  }
  return text;
}

// One IPv4 TCP frame of 60 bytes (64 on the wire with the FCS), no payload.
inline test::Bytes tcp64(const std::string& src, const std::string& dst, uint16_t sport,
                         uint16_t dport, uint8_t flags = 0x18) {
  // With its TCP checksum, as hosts send (docs/reassembly.md, "Checksums":
  // a worker checks every bare SYN until it has seen a valid one).
  auto f = test::Packet().ipv4(src, dst).tcp(sport, dport, flags).checksum().frame();
  f.resize(60, 0);
  return f;
}

}  // namespace cg::bench
