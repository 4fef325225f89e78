// check_checksums(): the IPv4 header and TCP/UDP checksums, against frames
// whose checksums the test packet builder computes the plain way.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "cuckoogate/keys/checksum.hpp"
#include "packet_builder.hpp"

namespace cg {
namespace {

using test::Bytes;
using test::Packet;

Checksum check(const Bytes& f) {
  PacketMeta m;
  parse_packet(f.data(), f.size(), m);
  return check_checksums(f.data(), f.size(), m);
}

TEST(Checksums, TcpAndUdpOverIpv4AndIpv6VerifyAtEveryPayloadLength) {
  for (std::size_t n = 0; n <= 67; ++n) {
    SCOPED_TRACE(n);
    const std::string p(n, static_cast<char>('a' + n % 26));
    EXPECT_EQ(check(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 443).payload(p).checksum().frame()),
              Checksum::kGood);
    EXPECT_EQ(check(Packet().ipv4("10.0.0.1", "10.0.0.2").udp(40000, 53).payload(p).checksum().frame()),
              Checksum::kGood);
    EXPECT_EQ(check(Packet().ipv6("2001:db8::1", "2001:db8::2").tcp(40000, 80).payload(p).checksum().frame()),
              Checksum::kGood);
    EXPECT_EQ(check(Packet().ipv6("2001:db8::1", "2001:db8::2").udp(40000, 443).payload(p).checksum().frame()),
              Checksum::kGood);
    EXPECT_EQ(check(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 443).payload(p).checksum(1).frame()),
              Checksum::kBad);
    EXPECT_EQ(check(Packet().ipv6("2001:db8::1", "2001:db8::2").udp(40000, 443).payload(p).checksum(0x100).frame()),
              Checksum::kBad);
  }
}

TEST(Checksums, HeadersBeforeTheTransportAreSkippedAndTheIpv4HeaderIsChecked) {
  EXPECT_EQ(check(Packet().vlan(7).vlan(8).ipv4("10.0.0.1", "10.0.0.2").ipv4_options({1, 1, 1, 0}).tcp(1, 2)
                      .payload("x").checksum().frame()),
            Checksum::kGood);
  EXPECT_EQ(check(Packet().ipv6("2001:db8::1", "2001:db8::2").ipv6_ext(0).ipv6_ext(60, 14).tcp(1, 2)
                      .payload("hello").checksum().frame()),
            Checksum::kGood);
  Bytes f = Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2).payload("hello").checksum().frame();
  f[14 + 8] = 3;  // the TTL, after the IPv4 header's checksum was computed
  EXPECT_EQ(check(f), Checksum::kBad);
}

TEST(Checksums, AnyChangedByteIsBad) {
  const Bytes good = Packet().ipv4("192.0.2.1", "198.51.100.2").tcp(40000, 443).payload("a ClientHello").checksum().frame();
  ASSERT_EQ(check(good), Checksum::kGood);
  for (std::size_t i = 14 + 12; i < good.size(); ++i) {  // addresses, ports, ..., payload
    if (i == 14 + 20 + 12) continue;  // the data offset: a header of 4 bytes is no header (unchecked)
    Bytes f = good;
    f[i] ^= 0x40;
    EXPECT_EQ(check(f), Checksum::kBad) << "byte " << i;
  }
}

TEST(Checksums, WhatCannotBeVerifiedIsUnchecked) {
  // UDP over IPv4 may go without a checksum (RFC 768): 0.
  EXPECT_EQ(check(Packet().ipv4("10.0.0.1", "10.0.0.2").udp(1, 53).payload("q").frame()), Checksum::kUnchecked);
  // TCP has no such thing: a 0 that is not the sum is bad.
  EXPECT_EQ(check(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2).payload("q").frame()), Checksum::kBad);
  EXPECT_EQ(check(Packet().ipv4("10.0.0.1", "10.0.0.2").icmp().frame()), Checksum::kUnchecked);
  EXPECT_EQ(check(Packet().ipv4("10.0.0.1", "10.0.0.2").proto(132).payload("12345678").frame()), Checksum::kUnchecked);
  // A route still to follow, or options that do not parse: end hosts drop it.
  Bytes srh = Packet().ipv6("2001:db8::1", "2001:db8::2").ipv6_ext(43, 22).tcp(1, 2).payload("x").checksum().frame();
  EXPECT_EQ(check(srh), Checksum::kGood);  // segments left 0
  srh[14 + 40 + 3] = 1;
  EXPECT_EQ(check(srh), Checksum::kBad);
  EXPECT_EQ(check(Packet().ipv4("10.0.0.1", "10.0.0.2").ipv4_options({131, 7, 4, 10, 0, 0, 9}).tcp(1, 2).payload("x")
                      .checksum().frame()),
            Checksum::kBad);
  EXPECT_EQ(check(Packet().ipv4("10.0.0.1", "10.0.0.2").ipv4_options({7, 9, 4, 0}).tcp(1, 2).payload("x")
                      .checksum().frame()),
            Checksum::kBad);  // a record route option longer than the options
  // Shorter than the IP header says (one byte cut): dropped by the receiver.
  Bytes shortf = Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2).payload("abcdef").checksum().frame();
  shortf.pop_back();
  EXPECT_EQ(check(shortf), Checksum::kBad);
  // A fragment: the checksum covers the whole datagram.
  EXPECT_EQ(check(Packet().ipv4("10.0.0.1", "10.0.0.2").fragment(0, true).tcp(1, 2).payload(std::string(64, 'y'))
                      .checksum().frame()),
            Checksum::kUnchecked);
}

TEST(Checksums, TheOnesSumFoldsCarriesAndPadsAnOddByte) {
  auto bytes = [](uint16_t v) {  // the sum as it lies in memory: network order
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    return std::pair<int, int>{p[0], p[1]};
  };
  const uint8_t a[] = {0xff, 0xff, 0xff, 0xff, 0x00, 0x01};
  EXPECT_EQ(bytes(ones_sum(a, 6)), (std::pair<int, int>{0x00, 0x01}));  // ffff + ffff + 0001, carries folded
  const uint8_t b[] = {0x12};
  EXPECT_EQ(bytes(ones_sum(b, 1)), (std::pair<int, int>{0x12, 0x00}));  // the byte, then a zero pad
  const uint8_t c[] = {0x12, 0x34, 0x56};
  EXPECT_EQ(bytes(ones_sum(c, 3, ones_sum(b, 1))), (std::pair<int, int>{0x7a, 0x34}));  // 1200 + 1234 + 5600
}

}  // namespace
}  // namespace cg
