// classify() on every prefix and on single-byte corruptions of sample
// packets: it must never crash or read past the frame (each input is a heap
// copy of exactly that many bytes, so the ASan build of this test catches any
// overread), must keep its output within bounds, and must stay consistent.
#include <gtest/gtest.h>

#include "cuckoogate/keys/classify.hpp"
#include "keys_test_util.hpp"

namespace cg {
namespace {

using test::Bytes;
using test::Packet;

std::vector<Bytes> samples() {
  std::string long_host;
  for (int i = 0; i < 100; ++i) long_host += "x.";
  long_host += "example.org";
  return {
      Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1234, 80).frame(),
      Packet().vlan(100, 0x88a8).vlan(7).ipv4("10.0.0.1", "10.0.0.2")
          .ipv4_options({0x94, 0x04, 0, 0}).tcp(1, 80)
          .payload("GET /a/b?c HTTP/1.1\r\nAccept: */*\r\nHost: Www.Example.com:8080\r\n\r\n").frame(),
      Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 3128)
          .payload("GET http://user@proxy.example:81/x HTTP/1.0\r\n\r\n").frame(),
      Packet().ipv6("2001:db8::1", "2001:db8::2").ipv6_ext(0).ipv6_ext(43, 14).ipv6_ext(60)
          .tcp(1, 443).payload(test::tls_client_hello("sni.example.net")).frame(),
      Packet().ipv6("2001:db8::1", "2001:db8::2").fragment(0, true).udp(1, 53)
          .payload(test::dns_query("a.b.c.example.org")).frame(),
      Packet().ipv4("10.0.0.1", "10.0.0.2").fragment(0, true).udp(1, 53)
          .payload(test::dns_query(long_host.substr(long_host.size() - 200))).frame(),
      Packet().ipv4("10.0.0.1", "10.0.0.2").fragment(3, false).udp(1, 53).frame(),
      Packet().ipv4("10.0.0.1", "10.0.0.2").sctp(1, 2).frame(),
      Packet().ipv6("2001:db8::1", "2001:db8::2").icmp().frame(),
      Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 80)
          .payload("PUT / HTTP/1.1\r\nHost: " + long_host + "\r\n\r\n").frame(),
  };
}

void check_bounds(const PacketKeys& k) {
  ASSERT_LE(k.n, kMaxKeysPerPacket);
  for (unsigned i = 0; i < k.n; ++i) {
    ASSERT_GT(k.key[i].len, 0u);
    ASSERT_LE(std::size_t{k.key[i].offset} + k.key[i].len, kKeyBytesCapacity);
    ASSERT_EQ(k.key_bytes(i)[0], static_cast<uint8_t>(k.key[i].kind));
    ASSERT_EQ(k.key[i].hash, key_hash(k.key_bytes(i), k.key[i].len));
  }
}

TEST(Truncation, EveryPrefixOfEverySampleIsSafe) {
  for (const Bytes& full : samples()) {
    const auto whole = test::classify_frame(full);
    ASSERT_FALSE(whole.malformed());
    for (std::size_t len = 0; len <= full.size(); ++len) {
      const auto c = test::classify_frame(Bytes(full.begin(), full.begin() + static_cast<long>(len)));
      check_bounds(*c.keys);
      // A prefix never yields more keys than the whole packet.
      ASSERT_LE(c.keys->n, whole.keys->n) << "prefix " << len;
    }
  }
}

TEST(Truncation, PrefixesThatCutTheIpPacketAreMalformedAndKeepAddresses) {
  const Bytes full = Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1234, 80).payload("x").frame();
  for (std::size_t len = 14 + 20; len < full.size(); ++len) {
    const auto c = test::classify_frame(Bytes(full.begin(), full.begin() + static_cast<long>(len)));
    EXPECT_TRUE(c.malformed()) << len;
    EXPECT_TRUE(c.matches("src 10.0.0.1")) << len;
  }
}

TEST(Truncation, SingleByteCorruptionsAreSafe) {
  for (const Bytes& full : samples()) {
    for (std::size_t i = 0; i < full.size(); ++i) {
      for (uint8_t v : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0x07}, uint8_t{0x2e},
                        static_cast<uint8_t>(full[i] ^ 0x80)}) {
        Bytes f = full;
        f[i] = v;
        const auto c = test::classify_frame(f);
        check_bounds(*c.keys);
      }
    }
  }
}

}  // namespace
}  // namespace cg
