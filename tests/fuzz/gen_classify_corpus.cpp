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
  const std::pair<const char*, cg::test::Bytes> seeds[] = {
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
