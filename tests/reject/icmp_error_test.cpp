// The ICMP/ICMPv6 administratively-prohibited error, how much of the packet
// it quotes, and every packet that gets no reply at all.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "cuckoogate/reject/reject.hpp"
#include "reply_view.hpp"

namespace cg {
namespace {

using reject::Direction;
using reject::Kind;
using reject::Reason;
using reject::Status;
using test::be16;
using test::Bytes;
using test::Packet;

// Builds, checks the common fields, returns the ICMP message (type, code,
// checksum, 4 unused bytes, quote).
Bytes icmp_error(const Bytes& frame) {
  const test::Built b = test::build(frame);
  EXPECT_EQ(b.result.status, Status::kBuilt) << reject::name(b.result.reason);
  EXPECT_EQ(b.result.kind, Kind::kIcmpUnreachable);
  EXPECT_EQ(b.result.count, 1);
  if (b.replies.size() != 1) return Bytes(8);
  const test::Layers o = test::layers(frame);
  const Bytes& reply = b.replies[0];
  const test::Layers r = test::check_reply(reply, frame, Direction::kToSender, o.family == 4 ? 1 : 58);
  const Bytes m = test::slice(reply, r.l4, r.l4_len);
  EXPECT_EQ(m.at(0), o.family == 4 ? 3 : 1);   // destination unreachable
  EXPECT_EQ(m.at(1), o.family == 4 ? 13 : 1);  // administratively prohibited
  EXPECT_EQ(test::be32(m, 4), 0u);
  return m;
}

Bytes quote_of(const Bytes& frame, size_t n) {
  return test::slice(frame, test::layers(frame).ip, n);
}

TEST(IcmpError, UdpIpv4BehindVlanQuotesTheWholeSmallPacket) {
  const Bytes f = Packet().vlan(7).ipv4("10.0.0.1", "10.0.0.2").udp(1000, 2000).payload("hello").frame();
  const Bytes m = icmp_error(f);
  EXPECT_EQ(m.size(), 8u + 20 + 8 + 5);
  EXPECT_EQ(test::slice(m, 8, m.size() - 8), quote_of(f, 20 + 8 + 5));
}

TEST(IcmpError, Ipv4QuoteStopsAt576BytesOfReply) {
  const Bytes f = Packet().ipv4("10.0.0.1", "10.0.0.2").udp(1000, 2000).payload(std::string(1400, 'x')).frame();
  const test::Built b = test::build(f);
  ASSERT_EQ(b.replies.size(), 1u);
  EXPECT_EQ(be16(b.replies[0], 14 + 2), 576);
  const Bytes m = icmp_error(f);
  EXPECT_EQ(test::slice(m, 8, m.size() - 8), quote_of(f, 576 - 28));
}

TEST(IcmpError, Ipv6QuoteFillsTheMinimumMtu) {
  const Bytes f = Packet().vlan(1).vlan(2).ipv6("2001:db8::1", "2001:db8::2").udp(1000, 2000)
                      .payload(std::string(1400, 'x')).frame();
  const test::Built b = test::build(f);
  ASSERT_EQ(b.replies.size(), 1u);
  EXPECT_EQ(b.replies[0].size(), reject::kMaxReplyLen);  // the longest reply there is
  EXPECT_EQ(be16(b.replies[0], 22 + 4), 1280 - 40);
  const Bytes m = icmp_error(f);
  EXPECT_EQ(test::slice(m, 8, m.size() - 8), quote_of(f, 1280 - 48));
}

TEST(IcmpError, Ipv6SmallPacketWithExtensionHeadersQuotedWhole) {
  const Bytes f = Packet().ipv6("2001:db8::1", "2001:db8::2").ipv6_ext(0).ipv6_ext(60).udp(1, 2)
                      .payload("abc").frame();
  const Bytes m = icmp_error(f);
  EXPECT_EQ(test::slice(m, 8, m.size() - 8), quote_of(f, f.size() - 14));
}

TEST(IcmpError, Ipv4OptionsAreQuoted) {
  const Bytes f = Packet().ipv4("10.0.0.1", "10.0.0.2").ipv4_options({7, 7, 4, 0, 0, 0, 0})
                      .udp(1, 2).payload(std::string(600, 'y')).frame();
  const Bytes m = icmp_error(f);
  EXPECT_EQ(test::slice(m, 8, 28 + 8), quote_of(f, 28 + 8));  // header, options, UDP header
}

TEST(IcmpError, EthernetPaddingIsNotQuoted) {
  Bytes f = Packet().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).frame();  // 42 bytes
  f.resize(60, 0x5a);
  const Bytes m = icmp_error(f);
  EXPECT_EQ(m.size(), 8u + 28);
}

TEST(IcmpError, OtherProtocolsAndIcmpQueries) {
  EXPECT_EQ(icmp_error(Packet().ipv4("10.0.0.1", "10.0.0.2").sctp(1, 2).frame()).size(), 8u + 32);
  icmp_error(Packet().ipv4("10.0.0.1", "10.0.0.2").proto(47).payload("gre").frame());
  icmp_error(Packet().ipv6("2001:db8::1", "2001:db8::2").proto(59).frame());  // no next header
  icmp_error(Packet().ipv4("10.0.0.1", "10.0.0.2").icmp().frame());           // echo request
  Bytes echo6 = Packet().ipv6("2001:db8::1", "2001:db8::2").icmp().frame();
  echo6[14 + 40] = 128;  // ICMPv6 echo request
  icmp_error(echo6);
}

Reason why_not(const Bytes& f) {
  const test::Built b = test::build(f);
  EXPECT_EQ(b.result.status, Status::kNotApplicable);
  EXPECT_EQ(b.result.count, 0);
  return b.result.reason;
}

Bytes icmp4_type(uint8_t type) {
  Bytes f = Packet().ipv4("10.0.0.1", "10.0.0.2").icmp().frame();
  f[14 + 20] = type;
  return f;
}
Bytes icmp6_type(uint8_t type) {
  Bytes f = Packet().ipv6("2001:db8::1", "2001:db8::2").icmp().frame();
  f[14 + 40] = type;
  return f;
}

TEST(IcmpError, NeverAnIcmpErrorForAnIcmpError) {
  for (uint8_t t : {3, 4, 5, 11, 12, 9, 10, 42}) EXPECT_EQ(why_not(icmp4_type(t)), Reason::kIcmpError) << int(t);
  for (uint8_t t : {0, 8, 13, 14, 17}) EXPECT_EQ(test::build(icmp4_type(t)).result.status, Status::kBuilt);
  for (uint8_t t : {1, 2, 3, 4, 100, 127}) EXPECT_EQ(why_not(icmp6_type(t)), Reason::kIcmpError) << int(t);
  for (uint8_t t : {133, 134, 135, 136, 137}) EXPECT_EQ(why_not(icmp6_type(t)), Reason::kIcmpError) << int(t);
  for (uint8_t t : {128, 129}) EXPECT_EQ(test::build(icmp6_type(t)).result.status, Status::kBuilt);
  // An IPv4 ICMP header with no byte of it present.
  EXPECT_EQ(why_not(Packet().ipv4("10.0.0.1", "10.0.0.2").proto(1).frame()), Reason::kMalformed);
}

TEST(IcmpError, NothingToGroupDestinations) {
  EXPECT_EQ(why_not(Packet().ipv4("10.0.0.1", "224.0.0.251").udp(5353, 5353).frame()), Reason::kGroupDestination);
  EXPECT_EQ(why_not(Packet().ipv4("10.0.0.1", "255.255.255.255").udp(68, 67).frame()), Reason::kGroupDestination);
  EXPECT_EQ(why_not(Packet().ipv4("10.0.0.1", "240.0.0.1").udp(1, 2).frame()), Reason::kGroupDestination);
  EXPECT_EQ(why_not(Packet().ipv6("fe80::1", "ff02::1").udp(1, 2).frame()), Reason::kGroupDestination);
  // TCP and DNS too, not only the ICMP error.
  EXPECT_EQ(why_not(Packet().ipv4("10.0.0.1", "239.1.1.1").tcp(1, 2).frame()), Reason::kGroupDestination);
  for (uint8_t first : {0xff, 0x01, 0x33}) {  // broadcast, IPv4 and IPv6 multicast MACs
    Bytes f = Packet().ipv4("10.0.0.1", "10.0.0.2").udp(1, 53).payload(test::dns_query("a.example")).frame();
    f[0] = first;
    EXPECT_EQ(why_not(f), Reason::kGroupDestination);
  }
}

TEST(IcmpError, NothingToSourcesThatAreNotOneHost) {
  for (const char* s : {"0.0.0.0", "0.1.2.3", "127.0.0.1", "224.0.0.1", "240.0.0.1", "255.255.255.255"}) {
    EXPECT_EQ(why_not(Packet().ipv4(s, "10.0.0.2").udp(1, 2).frame()), Reason::kSourceNotUnicast) << s;
  }
  for (const char* s : {"::", "::1", "ff02::1"}) {
    EXPECT_EQ(why_not(Packet().ipv6(s, "2001:db8::2").tcp(1, 2).frame()), Reason::kSourceNotUnicast) << s;
  }
  Bytes f = Packet().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).frame();
  f[6] |= 1;  // a group MAC as source
  EXPECT_EQ(why_not(f), Reason::kSourceNotUnicast);
  // Link-local and IPv4-compatible-looking sources are hosts.
  EXPECT_EQ(test::build(Packet().ipv6("fe80::1", "fe80::2").udp(1, 2).frame()).result.status, Status::kBuilt);
  EXPECT_EQ(test::build(Packet().ipv6("::2", "::3").udp(1, 2).frame()).result.status, Status::kBuilt);
}

TEST(IcmpError, NothingToNonFirstFragments) {
  EXPECT_EQ(why_not(Packet().ipv4("10.0.0.1", "10.0.0.2").fragment(1, true).udp(1, 2).frame()),
            Reason::kNonFirstFragment);
  EXPECT_EQ(why_not(Packet().ipv4("10.0.0.1", "10.0.0.2").fragment(100, false).proto(6).payload("x").frame()),
            Reason::kNonFirstFragment);
  EXPECT_EQ(why_not(Packet().ipv6("2001:db8::1", "2001:db8::2").fragment(3, false).udp(1, 2).frame()),
            Reason::kNonFirstFragment);
  // The first fragment is answered, quoting what it has.
  const Bytes first = Packet().ipv6("2001:db8::1", "2001:db8::2").fragment(0, true).udp(1, 2).payload("ab").frame();
  const Bytes m = icmp_error(first);
  EXPECT_EQ(test::slice(m, 8, m.size() - 8), quote_of(first, first.size() - 14));
}

TEST(IcmpError, NothingForWhatIsNotAnAcceptableIpPacket) {
  EXPECT_EQ(why_not(Packet().eth_type(0x0806).payload(std::string(28, '\0')).frame()), Reason::kNotIp);
  EXPECT_EQ(why_not(Packet().vlan(1).vlan(2).vlan(3).ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).frame()),
            Reason::kNotIp);
  Bytes f = Packet().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).frame();
  f[14 + 10] ^= 1;
  EXPECT_EQ(why_not(f), Reason::kBadIpChecksum);
  f = Packet().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).payload("abcd").frame();
  f.pop_back();  // IPv4 total length beyond the frame
  EXPECT_EQ(why_not(f), Reason::kMalformed);
  f = Packet().ipv6("2001:db8::1", "2001:db8::2").udp(1, 2).payload("abcd").frame();
  f.pop_back();
  EXPECT_EQ(why_not(f), Reason::kMalformed);
  f = Packet().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).payload("abcd").frame();
  f[14 + 20 + 5] = 40;  // UDP length beyond the datagram
  EXPECT_EQ(why_not(f), Reason::kMalformed);
  // An option running past the header (the checksum redone so it is the option that fails).
  f = Packet().ipv4("10.0.0.1", "10.0.0.2").ipv4_options({7, 9, 4, 0}).udp(1, 2).frame();
  f[14 + 10] = f[14 + 11] = 0;
  const uint16_t c = test::internet_checksum(test::slice(f, 14, 24));
  f[14 + 10] = static_cast<uint8_t>(c >> 8);
  f[14 + 11] = static_cast<uint8_t>(c);
  EXPECT_EQ(why_not(f), Reason::kMalformed);
}

TEST(IcmpError, EveryPrefixOfAFrameIsRefusedOrAnswered) {
  const Bytes frames[] = {
      Packet().vlan(1, 0x88a8).vlan(2).ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2, 0x18).payload("abc").frame(),
      Packet().vlan(3).ipv6("2001:db8::1", "2001:db8::2").ipv6_ext(0).ipv6_ext(51).udp(1, 53)
          .payload(test::dns_query("a.example")).frame(),
  };
  for (const Bytes& f : frames) {
    for (size_t n = 0; n < f.size(); ++n) {
      const Bytes cut = test::slice(f, 0, n);
      EXPECT_EQ(test::build(cut).result.status, Status::kNotApplicable) << n;
    }
    EXPECT_EQ(test::build(f).result.status, Status::kBuilt);
  }
}

TEST(Names, EveryReasonAndKindHasItsOwnName) {
  std::set<std::string> names;
  for (int r = 0; r <= static_cast<int>(Reason::kSourceNotUnicast); ++r) {
    names.insert(reject::name(static_cast<Reason>(r)));
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(Reason::kSourceNotUnicast) + 1);
  EXPECT_STREQ(reject::name(Kind::kDnsAnswer), "dns-answer");
}

}  // namespace
}  // namespace cg
