// Writes the bundled sample captures (deterministic: same bytes every run).
//
//   make_pcaps OUTDIR      -> OUTDIR/demo.pcap
//
// demo.pcap is ordinary-looking traffic (web, TLS, DNS, UDP, ICMP, IPv4 and
// IPv6, VLAN-tagged) in which some packets match config/demo.rules, at least
// one per rule kind, plus two malformed frames. Regenerate with
// scripts/make-pcaps.sh after changing it.
#include <cstdio>
#include <string>
#include <vector>

#include "packet_builder.hpp"
#include "pcap_file.hpp"

using cg::test::Bytes;
using cg::test::Packet;

namespace {

std::string http_get(const std::string& host, const std::string& path) {
  return "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nUser-Agent: demo\r\nAccept: */*\r\n\r\n";
}

// A tiny deterministic generator (xorshift), so the capture never changes.
struct Rng {
  uint32_t s = 0x9e3779b9;
  uint32_t next() {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    return s;
  }
};

std::vector<Bytes> demo() {
  std::vector<Bytes> v;
  Rng r;
  const char* sites[] = {"www.example.com", "news.example.org", "cdn.example.net", "api.example.com"};
  const char* names[] = {"www.example.com", "mail.example.org", "example.net", "docs.example.com"};
  for (int i = 0; i < 120; ++i) {
    const std::string c4 = "10.0.0." + std::to_string(10 + r.next() % 200);
    const std::string s4 = "93.184.216." + std::to_string(1 + r.next() % 30);
    const auto sport = static_cast<uint16_t>(30000 + r.next() % 30000);
    const char* site = sites[r.next() % 4];
    switch (i % 8) {
      case 0: v.push_back(Packet().ipv4(c4, s4).tcp(sport, 80).payload(http_get(site, "/index.html")).frame()); break;
      case 1: v.push_back(Packet().ipv4(s4, c4).tcp(80, sport).payload("HTTP/1.1 200 OK\r\n\r\n").frame()); break;
      case 2: v.push_back(Packet().ipv4(c4, s4).tcp(sport, 443).payload(cg::test::tls_client_hello(site)).frame()); break;
      case 3: v.push_back(Packet().ipv4(c4, "10.0.0.53").udp(sport, 53).payload(cg::test::dns_query(names[r.next() % 4])).frame()); break;
      case 4: v.push_back(Packet().ipv6("2001:db8::10", "2001:db8:1::" + std::to_string(1 + r.next() % 50)).tcp(sport, 443).frame()); break;
      case 5: v.push_back(Packet().vlan(100).ipv4(c4, s4).udp(sport, 4789).payload("data").frame()); break;
      case 6: v.push_back(Packet().ipv4(c4, s4).icmp().frame()); break;
      default: v.push_back(Packet().ipv4(c4, s4).tcp(sport, 22, 0x02).frame()); break;
    }
  }
  // Blocked traffic: one or more per rule kind in config/demo.rules.
  const std::vector<Bytes> blocked = {
      Packet().ipv4("10.0.0.66", "93.184.216.34").tcp(40000, 80).payload("hello").frame(),       // flow
      Packet().ipv6("2001:db8::66", "2001:db8::1").udp(5000, 5353).payload("x").frame(),          // flow (v6)
      Packet().ipv4("192.0.2.66", "93.184.216.7").tcp(41000, 443).frame(),                         // src
      Packet().vlan(200).ipv4("10.0.0.12", "198.51.100.66").udp(41001, 9999).frame(),              // dst, VLAN
      Packet().ipv4("203.0.113.99", "10.0.0.12").tcp(443, 41002).frame(),                          // ip (as src)
      Packet().ipv4("10.0.0.13", "203.0.113.99").icmp().frame(),                                   // ip (as dst)
      Packet().ipv4("10.0.0.14", "203.0.113.5").tcp(41003, 443).frame(),                           // service
      Packet().ipv4("10.0.0.15", "93.184.216.20").tcp(41004, 80)
          .payload(http_get("Example.COM", "/malware/payload.exe")).frame(),                     // url
      Packet().ipv4("10.0.0.16", "10.0.0.53").udp(41005, 53)
          .payload(cg::test::dns_query("beacon.tracker.example.net")).frame(),                    // host (DNS)
      Packet().ipv4("10.0.0.17", "93.184.216.21").tcp(41006, 443)
          .payload(cg::test::tls_client_hello("ads.example.org")).frame(),                        // host (SNI)
      Packet().vlan(300, 0x88a8).vlan(301).ipv4("10.0.0.18", "93.184.216.22").tcp(41007, 8080)
          .payload(http_get("tracker.example.net:8080", "/pixel.gif")).frame(),                  // host (HTTP, QinQ)
  };
  // Spread the blocked packets through the background traffic.
  std::vector<Bytes> out;
  std::size_t b = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    out.push_back(v[i]);
    if (i % 10 == 5 && b < blocked.size()) out.push_back(blocked[b++]);
  }
  while (b < blocked.size()) out.push_back(blocked[b++]);
  // Malformed: an IPv4 header claiming more bytes than the frame has, and a
  // TCP header cut short.
  Bytes bad = Packet().ipv4("10.0.0.19", "93.184.216.23").tcp(41008, 80).frame();
  bad.resize(14 + 12);
  out.push_back(bad);
  Bytes cut = Packet().ipv4("10.0.0.20", "93.184.216.24").tcp(41009, 80).frame();
  cut.resize(14 + 20 + 8);
  out.push_back(cut);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_pcaps OUTDIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  try {
    cg::test::write_pcap(dir + "/demo.pcap", demo());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_pcaps: %s\n", e.what());
    return 1;
  }
  std::printf("wrote %s/demo.pcap\n", dir.c_str());
  return 0;
}
