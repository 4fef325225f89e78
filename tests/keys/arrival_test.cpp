// ip_ttl() and tcp_option_marks(): what the stream inspector compares
// between a TCP client's segments (docs/reassembly.md, "Copies that arrive
// otherwise").
#include <gtest/gtest.h>

#include "cuckoogate/keys/arrival.hpp"
#include "packet_builder.hpp"

namespace cg {
namespace {

using test::Bytes;
using test::Packet;

PacketMeta meta(const Bytes& f) {
  PacketMeta m;
  parse_packet(f.data(), f.size(), m);
  return m;
}

TcpOptionMarks options(const Bytes& opts) {
  const Bytes f = Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 443).tcp_options(opts).payload("hello").frame();
  return tcp_option_marks(f.data(), meta(f));
}
uint8_t marks(const Bytes& opts) { return options(opts).marks; }

TEST(Arrival, TheTtlOrHopLimitOfTheInnermostHeader) {
  for (const uint8_t ttl : {uint8_t{1}, uint8_t{64}, uint8_t{255}}) {
    const Bytes v4 = Packet().ipv4("10.0.0.1", "10.0.0.2").ttl(ttl).tcp(40000, 443).payload("x").frame();
    EXPECT_EQ(ip_ttl(v4.data(), meta(v4)), ttl);
    const Bytes v6 = Packet().ipv6("2001:db8::1", "2001:db8::2").ttl(ttl).udp(40000, 443).payload("x").frame();
    EXPECT_EQ(ip_ttl(v6.data(), meta(v6)), ttl);
    // IPv4 options and a VLAN tag move the header, not the answer.
    const Bytes opt = Packet().vlan(7).ipv4("10.0.0.1", "10.0.0.2").ipv4_options({1, 1, 1, 0}).ttl(ttl).tcp(1, 2).frame();
    EXPECT_EQ(ip_ttl(opt.data(), meta(opt)), ttl);
  }
  const Bytes arp = Packet().eth_type(0x0806).payload(Bytes(28, 0)).frame();
  EXPECT_EQ(ip_ttl(arp.data(), meta(arp)), 0);
}

TEST(Arrival, SignatureAndTimestampOptionsAreMarkedAsLinuxReadsThem) {
  Bytes md5 = {19, 18};
  md5.resize(18, 0xab);
  Bytes ts = {8, 10, 0, 0, 0, 1, 0, 0, 0, 0};
  EXPECT_EQ(marks({}), 0);
  EXPECT_EQ(marks({2, 4, 0x05, 0xb4}), 0);  // MSS only
  EXPECT_EQ(marks(md5), kTcpMarkMd5);
  Bytes nop_md5 = {1, 1};
  nop_md5.insert(nop_md5.end(), md5.begin(), md5.end());
  EXPECT_EQ(marks(nop_md5), kTcpMarkMd5);
  EXPECT_EQ(marks({19, 10, 0, 0, 0, 0, 0, 0, 0, 0}), kTcpMarkOdd);  // an MD5 kind Linux does not take for one
  EXPECT_EQ(marks({29, 4, 1, 2}), kTcpMarkAo);
  EXPECT_EQ(marks({29, 3, 1, 0}), kTcpMarkOdd);
  EXPECT_EQ(marks(ts), kTcpMarkTimestamps);
  EXPECT_EQ(marks({8, 6, 0, 0, 0, 1}), kTcpMarkOdd);
  Bytes both = ts;
  both.insert(both.end(), md5.begin(), md5.end());
  EXPECT_EQ(marks(both), kTcpMarkTimestamps | kTcpMarkMd5);
  // End of list: what follows is not read.
  Bytes ended = {0, 0};
  ended.insert(ended.end(), md5.begin(), md5.end());
  EXPECT_EQ(marks(ended), 0);
  // A length below 2 or past the header ends the list too, marked.
  EXPECT_EQ(marks({3, 1, 19, 18}), kTcpMarkCut);
  EXPECT_EQ(marks({3, 3, 1, 19, 18, 0, 0, 0}), kTcpMarkCut);
  // Not TCP: nothing.
  const Bytes udp = Packet().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).payload("x").frame();
  EXPECT_EQ(tcp_option_marks(udp.data(), meta(udp)).marks, 0);
}

uint16_t delivery(const Bytes& f, uint64_t seed = 7) { return delivery_digest(f.data(), meta(f), seed); }

TEST(Arrival, TheDeliveryDigestCoversTheMacDestinationTagsAndIpExtras) {
  const Bytes plain = Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 443).payload("hello").frame();
  EXPECT_NE(delivery(plain), 0);
  EXPECT_EQ(delivery(plain), delivery(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 443).payload("other").frame()));
  EXPECT_NE(delivery(plain), delivery(plain, 8));  // keyed
  Bytes other_mac = plain;
  other_mac[5] ^= 0x99;  // sent to another next hop
  EXPECT_NE(delivery(plain), delivery(other_mac));
  Bytes other_src_mac = plain;
  other_src_mac[11] ^= 0x99;  // the source MAC decides nothing
  EXPECT_EQ(delivery(plain), delivery(other_src_mac));
  const Bytes tagged = Packet().vlan(5).ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 443).payload("hello").frame();
  EXPECT_NE(delivery(plain), delivery(tagged));
  // IPv4 options: a Record Route with a bad pointer (routers drop it) against NOPs of the same length.
  const auto v4opts = [](Bytes o) {
    return Packet().ipv4("10.0.0.1", "10.0.0.2").ipv4_options(std::move(o)).tcp(40000, 443).payload("hello").frame();
  };
  EXPECT_NE(delivery(v4opts({7, 3, 2, 0})), delivery(v4opts({1, 1, 1, 1})));
  EXPECT_NE(delivery(plain), delivery(v4opts({1, 1, 1, 1})));
  // IPv6 extension headers.
  const Bytes v6 = Packet().ipv6("2001:db8::1", "2001:db8::2").tcp(40000, 443).payload("hello").frame();
  const Bytes hbh = Packet().ipv6("2001:db8::1", "2001:db8::2").ipv6_ext(0).tcp(40000, 443).payload("hello").frame();
  const Bytes dst = Packet().ipv6("2001:db8::1", "2001:db8::2").ipv6_ext(60).tcp(40000, 443).payload("hello").frame();
  EXPECT_NE(delivery(v6), delivery(hbh));
  EXPECT_NE(delivery(hbh), delivery(dst));
  const Bytes arp = Packet().eth_type(0x0806).payload(Bytes(28, 0)).frame();
  EXPECT_EQ(delivery(arp), 0);
}

TEST(Arrival, TimestampValuesAreTheLastOptionsAsLinuxTakesThem) {
  const Bytes ts = {1, 1, 8, 10, 0x80, 0, 0, 2, 0, 0, 0x12, 0x34};
  TcpOptionMarks o = options(ts);
  EXPECT_EQ(o.marks, kTcpMarkTimestamps);
  EXPECT_EQ(o.tsval, 0x80000002u);
  EXPECT_EQ(o.tsecr, 0x1234u);
  Bytes twice = ts;
  twice.insert(twice.end(), {8, 10, 0, 0, 0, 7, 0, 0, 0, 9});
  o = options(twice);
  EXPECT_EQ(o.marks, kTcpMarkTimestamps | kTcpMarkOdd);
  EXPECT_EQ(o.tsval, 7u);
  EXPECT_EQ(o.tsecr, 9u);
  o = options({8, 6, 0, 0, 0, 1});  // too short: no values
  EXPECT_EQ(o.marks, kTcpMarkOdd);
  EXPECT_EQ(o.tsval, 0u);
}

}  // namespace
}  // namespace cg
