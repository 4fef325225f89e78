// The DNS answer to a blocked query: the query's ID and question, REFUSED or
// NXDOMAIN, no records, from port 53; a query that does not parse gets the
// ICMP error instead.
#include <gtest/gtest.h>

#include "cuckoogate/reject/reject.hpp"
#include "reply_view.hpp"

namespace cg {
namespace {

using reject::Direction;
using reject::Kind;
using reject::Status;
using test::be16;
using test::Bytes;
using test::Packet;

Bytes query_msg(std::string_view name, uint16_t id = 0xbeef) {
  Bytes m = test::dns_query(name);
  m[0] = static_cast<uint8_t>(id >> 8);
  m[1] = static_cast<uint8_t>(id);
  return m;
}

Bytes query4(const Bytes& msg) {
  return Packet().vlan(42).ipv4("10.0.0.1", "10.0.0.53").udp(33333, 53).payload(msg).frame();
}
Bytes query6(const Bytes& msg) {
  return Packet().ipv6("2001:db8::1", "2001:db8::53").udp(33333, 53).payload(msg).frame();
}

// Checks the reply's headers and UDP, returns its DNS message.
Bytes answer(const Bytes& frame, const reject::Options& opt = {}) {
  const test::Built b = test::build(frame, opt);
  EXPECT_EQ(b.result.status, Status::kBuilt);
  EXPECT_EQ(b.result.kind, Kind::kDnsAnswer);
  EXPECT_EQ(b.result.count, 1);
  if (b.replies.size() != 1) return {};
  const Bytes& reply = b.replies[0];
  const test::Layers r = test::check_reply(reply, frame, Direction::kToSender, 17);
  EXPECT_EQ(be16(reply, r.l4), 53);
  EXPECT_EQ(be16(reply, r.l4 + 2), 33333);
  EXPECT_EQ(be16(reply, r.l4 + 4), r.l4_len);
  EXPECT_NE(be16(reply, r.l4 + 6), 0);  // computed, for IPv4 too
  return test::slice(reply, r.l4 + 8, r.l4_len - 8);
}

TEST(DnsAnswer, RefusedCarriesIdAndQuestion) {
  const Bytes q = query_msg("ads.blocked.example");
  for (const Bytes& f : {query4(q), query6(q)}) {
    const Bytes a = answer(f);
    ASSERT_EQ(a.size(), q.size());  // header and question, nothing more
    EXPECT_EQ(be16(a, 0), 0xbeef);
    EXPECT_EQ(a[2], 0x81);  // QR, opcode 0, AA 0, TC 0, RD copied
    EXPECT_EQ(a[3], 0x05);  // RA 0, Z 0, AD 0, CD 0, REFUSED
    EXPECT_EQ(be16(a, 4), 1);
    EXPECT_EQ(be16(a, 6), 0);
    EXPECT_EQ(be16(a, 8), 0);
    EXPECT_EQ(be16(a, 10), 0);
    EXPECT_EQ(test::slice(a, 12, a.size() - 12), test::slice(q, 12, q.size() - 12));
  }
}

TEST(DnsAnswer, NxDomainOnRequest) {
  reject::Options opt;
  opt.dns_rcode = reject::DnsRcode::kNxDomain;
  for (const Bytes& f : {query4(query_msg("a.example")), query6(query_msg("a.example"))}) {
    const Bytes a = answer(f, opt);
    ASSERT_GE(a.size(), 12u);
    EXPECT_EQ(a[3] & 0x0f, 3);
  }
}

TEST(DnsAnswer, RdAndCdAreCopiedOtherBitsAreNot) {
  Bytes q = query_msg("a.example");
  q[2] = 0x06;  // AA and TC set in a query (meaningless), RD clear
  q[3] = 0xf0;  // RA, Z, AD, CD
  const Bytes a = answer(query4(q));
  ASSERT_GE(a.size(), 12u);
  EXPECT_EQ(a[2], 0x80);
  EXPECT_EQ(a[3], 0x10 | 5);
}

TEST(DnsAnswer, QuestionCaseAndTypeKeptAdditionalRecordsDropped) {
  Bytes q = query_msg("MiXeD.Example", 7);
  q[q.size() - 3] = 28;  // QTYPE AAAA
  // An EDNS OPT record in the additional section (ARCOUNT 1).
  q[11] = 1;
  const Bytes opt_rr = {0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0};
  Bytes with_opt = q;
  with_opt.insert(with_opt.end(), opt_rr.begin(), opt_rr.end());
  const Bytes a = answer(query6(with_opt));
  ASSERT_EQ(a.size(), q.size());
  EXPECT_EQ(be16(a, 10), 0);
  EXPECT_EQ(test::slice(a, 12, a.size() - 12), test::slice(q, 12, q.size() - 12));
}

TEST(DnsAnswer, NamesUpTo255BytesOnWire) {
  // 4 labels of 63 bytes: 4 * 64 + 1 = 257 bytes on the wire, too long;
  // 3 of 63 and one of 61: 255 bytes exactly.
  const std::string l63(63, 'a');
  const std::string max = l63 + "." + l63 + "." + l63 + "." + std::string(61, 'b');
  EXPECT_EQ(answer(query4(query_msg(max))).size(), 12u + 255 + 4);
  const test::Built b = test::build(query4(query_msg(max + "b")));
  EXPECT_EQ(b.result.kind, Kind::kIcmpUnreachable);
  const test::Built c = test::build(query4(query_msg(l63 + "." + l63 + "." + l63 + "." + l63)));
  EXPECT_EQ(c.result.kind, Kind::kIcmpUnreachable);
}

TEST(DnsAnswer, WhatDoesNotParseGetsTheIcmpError) {
  const Bytes good = query_msg("a.example");
  std::vector<Bytes> bad;
  bad.push_back(test::slice(good, 0, good.size() - 1));  // QCLASS cut
  bad.push_back(test::slice(good, 0, 14));               // name cut
  bad.push_back(test::slice(good, 0, 11));               // header cut
  Bytes b = good;
  b[2] |= 0x80;  // a response
  bad.push_back(b);
  b = good;
  b[2] = 0x28 | 0x01;  // opcode 5 (UPDATE)
  bad.push_back(b);
  b = good;
  b[5] = 2;  // QDCOUNT 2
  bad.push_back(b);
  b = good;
  b[5] = 0;  // QDCOUNT 0
  bad.push_back(b);
  b = good;
  b[12] = 0xc0;  // a compression pointer
  bad.push_back(b);
  b = good;
  b[12] = 0x41;  // reserved label type
  bad.push_back(b);
  b = good;
  b[12] = 60;  // label runs past the end
  bad.push_back(b);
  for (const Bytes& m : bad) {
    const Bytes f = query4(m);
    const test::Built r = test::build(f);
    ASSERT_EQ(r.result.status, Status::kBuilt);
    EXPECT_EQ(r.result.kind, Kind::kIcmpUnreachable);
    ASSERT_EQ(r.replies.size(), 1u);
    test::check_reply(r.replies[0], f, Direction::kToSender, 1);
  }
}

TEST(DnsAnswer, OnlyToPort53FromANonZeroPort) {
  const Bytes q = query_msg("a.example");
  const Bytes mdns = Packet().ipv4("10.0.0.1", "10.0.0.53").udp(33333, 5353).payload(q).frame();
  EXPECT_EQ(test::build(mdns).result.kind, Kind::kIcmpUnreachable);
  const Bytes port0 = Packet().ipv4("10.0.0.1", "10.0.0.53").udp(0, 53).payload(q).frame();
  EXPECT_EQ(test::build(port0).result.kind, Kind::kIcmpUnreachable);
  const Bytes frag = Packet().ipv4("10.0.0.1", "10.0.0.53").fragment(0, true).udp(33333, 53).payload(q).frame();
  EXPECT_EQ(test::build(frag).result.kind, Kind::kIcmpUnreachable);
}

TEST(DnsAnswer, UdpChecksumIsNeverZero) {
  // The checksum depends on the ID alone here: every value comes up once,
  // and the one that sums to zero is sent as 0xffff (RFC 768).
  bool saw_ffff = false;
  std::array<uint8_t, reject::kMaxReplyLen> buf;
  const reject::Buffer out[] = {{buf.data(), buf.size()}};
  Bytes f = query4(query_msg("a.example"));
  const test::Layers l = test::layers(f);
  for (uint32_t id = 0; id <= 0xffff; ++id) {
    f[l.l4 + 8] = static_cast<uint8_t>(id >> 8);
    f[l.l4 + 9] = static_cast<uint8_t>(id);
    const reject::Result r = reject::build(f.data(), f.size(), out);
    ASSERT_EQ(r.status, Status::kBuilt);
    const Bytes reply(buf.begin(), buf.begin() + r.reply[0].len);
    const uint16_t c = be16(reply, l.l4 + 6);
    ASSERT_NE(c, 0);
    if (c == 0xffff) {
      saw_ffff = true;
      ASSERT_TRUE(test::l4_checksum_ok(reply, test::layers(reply)));
    }
  }
  EXPECT_TRUE(saw_ffff);
}

}  // namespace
}  // namespace cg
