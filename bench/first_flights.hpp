// pipeline_bench's first-flight capture (issue 11, "Performance"): n
// connections of what clients send first, with realistic sizes, in four
// kinds taking turns, none matching the benchmark's rules:
//   TLS   SYN, SYN-ACK, ACK, a 1.8 KB post-quantum ClientHello in two
//         segments, the server's first 1400 bytes              (6 packets)
//   HTTP  SYN, SYN-ACK, ACK, a GET of ~350 bytes, a 1400-byte answer (5)
//   DNS   a UDP query and its answer                                   (2)
//   QUIC  a v1 ClientHello of 1.8 KB over two 1200-byte Initials, the
//         server's first 1200-byte datagram                            (3)
// Clients are 100.64.0.0/10 (outside the rule mix's 10/8), servers 198.18.0.0/15.
// Generated outside every timed region; needs libcrypto (the QUIC Initials).
#pragma once

#include <random>
#include <string>
#include <vector>

#include "packet_builder.hpp"
#include "quic_initial_builder.hpp"

namespace cg::bench {

inline std::vector<test::Bytes> first_flights(uint32_t n) {
  using test::Bytes;
  using test::Packet;
  std::mt19937_64 rng(42);
  std::vector<Bytes> out;
  auto ip = [](uint32_t base, uint32_t i) {
    const uint32_t a = base + i;
    return std::to_string(a >> 24) + "." + std::to_string(a >> 16 & 255) + "." + std::to_string(a >> 8 & 255) +
           "." + std::to_string(a & 255);
  };
  for (uint32_t i = 0; i < n; ++i) {
    const std::string c = ip(100u << 24 | 64u << 16, i), s = ip(198u << 24 | 18u << 16, i % 4096);
    const auto cport = static_cast<uint16_t>(20000 + i % 40000);
    const std::string name = "site" + std::to_string(i) + ".example.com";
    auto c2s = [&](uint16_t dport, uint8_t flags, uint32_t seq, uint32_t ack) {
      return Packet().ipv4(c, s).tcp(cport, dport, flags).seq_ack(seq, ack);
    };
    auto s2c = [&](uint16_t sport, uint8_t flags, uint32_t seq, uint32_t ack) {
      return Packet().ipv4(s, c).tcp(sport, cport, flags).seq_ack(seq, ack);
    };
    switch (i % 4) {
      case 0: {  // TLS
        const Bytes hs = test::quic::client_hello(name, 1800, &rng);
        Bytes rec = {22, 3, 1, static_cast<uint8_t>(hs.size() >> 8), static_cast<uint8_t>(hs.size())};
        rec.insert(rec.end(), hs.begin(), hs.end());
        const Bytes a(rec.begin(), rec.begin() + 1400), b(rec.begin() + 1400, rec.end());
        out.push_back(c2s(443, 0x02, 1000, 0).frame());
        out.push_back(s2c(443, 0x12, 5000, 1001).frame());
        out.push_back(c2s(443, 0x10, 1001, 5001).frame());
        out.push_back(c2s(443, 0x10, 1001, 5001).payload(a).frame());
        out.push_back(c2s(443, 0x18, 1001 + 1400, 5001).payload(b).frame());
        out.push_back(s2c(443, 0x10, 5001, 1001 + static_cast<uint32_t>(rec.size())).payload(Bytes(1400, 0x16)).frame());
        break;
      }
      case 1: {  // HTTP
        const std::string get = "GET /index.html?q=" + std::to_string(i) + " HTTP/1.1\r\nHost: " + name +
                                "\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 "
                                "Firefox/128.0\r\nAccept: text/html,application/xhtml+xml,application/xml;"
                                "q=0.9,*/*;q=0.8\r\nAccept-Language: en-US,en;q=0.5\r\nAccept-Encoding: gzip, "
                                "deflate\r\nConnection: keep-alive\r\n\r\n";
        out.push_back(c2s(80, 0x02, 1000, 0).frame());
        out.push_back(s2c(80, 0x12, 5000, 1001).frame());
        out.push_back(c2s(80, 0x10, 1001, 5001).frame());
        out.push_back(c2s(80, 0x18, 1001, 5001).payload(get).frame());
        out.push_back(s2c(80, 0x10, 5001, 1001 + static_cast<uint32_t>(get.size())).payload(Bytes(1400, 'x')).frame());
        break;
      }
      case 2: {  // DNS
        out.push_back(Packet().ipv4(c, s).udp(cport, 53).payload(test::dns_query(name)).frame());
        out.push_back(Packet().ipv4(s, c).udp(53, cport).payload(test::dns_query(name, true)).frame());
        break;
      }
      default: {  // QUIC v1
        const Bytes hs = test::quic::client_hello(name, 1800, &rng);
        const auto parts = test::quic::split_crypto(hs, 2, rng);
        Bytes dcid(8);
        for (auto& b : dcid) b = static_cast<uint8_t>(rng());
        for (unsigned k = 0; k < 2; ++k)
          out.push_back(Packet().ipv4(c, s).udp(cport, 443)
                            .payload(test::quic::datagram({{.dcid = dcid, .pn = k, .frames = parts[k]}}))
                            .frame());
        out.push_back(Packet().ipv4(s, c).udp(443, cport).payload(Bytes(1200, 0xc3)).frame());
        break;
      }
    }
  }
  return out;
}

}  // namespace cg::bench
