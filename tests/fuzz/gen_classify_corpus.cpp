// Writes the seed corpus of classify_fuzz (tests/fuzz/corpus/classify/) from
// the packet builder, so the seeds cover every layer the classifier parses.
//   build-keys-fuzz/tests/fuzz/gen_classify_corpus tests/fuzz/corpus/classify
#include <cstdio>
#include <string>

#include "packet_builder.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  using cg::test::Packet;
  using cg::test::Bytes;
  // Inner packets for the tunnel seeds: an IP packet (its Ethernet header
  // cut off) and a whole Ethernet frame (VXLAN).
  auto ip_of = [](const Bytes& f) { return Bytes(f.begin() + 14, f.end()); };
  const Bytes inner4 = Packet().ipv4("10.1.1.1", "10.2.2.2").tcp(40000, 443)
                           .payload(cg::test::tls_client_hello("inner.example")).frame();
  const Bytes inner6 = Packet().ipv6("2001:db8::1", "2001:db8::2").udp(5353, 53)
                           .payload(cg::test::dns_query("inner6.example")).frame();
  auto cat = [](Bytes a, const Bytes& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  const std::pair<const char*, cg::test::Bytes> seeds[] = {
      {"gre_key_seq", Packet().ipv4("198.51.100.1", "198.51.100.2").proto(47)
                          .payload(cat({0x30, 0x00, 0x08, 0x00, 0, 0, 0, 7, 0, 0, 0, 1}, ip_of(inner4))).frame()},
      {"vxlan", Packet().ipv4("198.51.100.1", "198.51.100.2").udp(50000, 4789)
                    .payload(cat({0x08, 0, 0, 0, 0, 0, 42, 0}, inner4)).frame()},
      {"geneve_opt", Packet().ipv6("2001:db8::a", "2001:db8::b").udp(50000, 6081)
                         .payload(cat({0x01, 0x00, 0x86, 0xdd, 0, 0, 42, 0, 0x01, 0x02, 0x80, 0x01, 0, 0, 0, 0},
                                      ip_of(inner6))).frame()},
      {"ipip", Packet().ipv4("198.51.100.1", "198.51.100.2").proto(4).payload(ip_of(inner4)).frame()},
      {"6in4", Packet().ipv4("198.51.100.1", "198.51.100.2").proto(41).payload(ip_of(inner6)).frame()},
      {"mpls2", Packet().eth_type(0x8847).payload(cat({0, 0x01, 0x00, 0x40, 0, 0x02, 0x01, 0x40}, ip_of(inner4)))
                    .frame()},
      {"pppoe", Packet().eth_type(0x8864)
                    .payload(cat({0x11, 0x00, 0x12, 0x34, static_cast<uint8_t>((ip_of(inner4).size() + 2) >> 8),
                                  static_cast<uint8_t>(ip_of(inner4).size() + 2), 0x00, 0x21},
                                 ip_of(inner4))).frame()},
      {"vlan3_9100", Packet().vlan(1, 0x9100).vlan(2, 0x88a8).vlan(3).ipv4("10.0.0.1", "10.0.0.2").tcp(1, 80).frame()},
      {"tcp4", Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1234, 80).frame()},
      {"udp6_vlan", Packet().vlan(7).ipv6("2001:db8::1", "2001:db8::2").udp(1, 2).frame()},
      {"qinq_sctp", Packet().vlan(1, 0x88a8).vlan(2).ipv4("10.0.0.1", "10.0.0.2").sctp(1, 2).frame()},
      {"icmp4", Packet().ipv4("10.0.0.1", "10.0.0.2").icmp().frame()},
      {"http_origin", Packet().ipv4("10.0.0.1", "10.0.0.2").ipv4_options({0x94, 4, 0, 0}).tcp(1, 80)
                          .payload("GET /a?b HTTP/1.1\r\nUser-Agent: x\r\nHost: Www.Example.com:8080\r\n\r\n")
                          .frame()},
      {"http_absolute", Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 3128)
                            .payload("POST http://u@proxy.example:80/x HTTP/1.0\r\n\r\n").frame()},
      {"http_connect", Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 3128)
                           .payload("CONNECT [2001:db8::1]:443 HTTP/1.1\r\nHost: x\r\n\r\n").frame()},
      {"tls_sni", Packet().ipv6("2001:db8::1", "2001:db8::2").ipv6_ext(0).ipv6_ext(43, 14)
                      .ipv6_ext(60).tcp(1, 443).payload(cg::test::tls_client_hello("sni.example.net"))
                      .frame()},
      {"dns_query", Packet().ipv6("2001:db8::1", "2001:db8::2").fragment(0, true).udp(1, 53)
                        .payload(cg::test::dns_query("a.b.example.org")).frame()},
      {"frag4_later", Packet().ipv4("10.0.0.1", "10.0.0.2").fragment(3, false).udp(1, 53).frame()},
      {"frag6_later", Packet().ipv6("2001:db8::1", "2001:db8::2").fragment(3, true).tcp(1, 2).frame()},
  };
  for (const auto& [name, frame] : seeds) {
    const std::string path = std::string(argv[1]) + "/" + name + ".bin";
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || std::fwrite(frame.data(), 1, frame.size(), f) != frame.size()) {
      std::perror(path.c_str());
      return 1;
    }
    std::fclose(f);
  }
  return 0;
}
