// The TCP RSTs: to the sender (RFC 9293 3.10.7.1) and onward to the
// destination, byte by byte, for IPv4 and IPv6 behind VLAN tags.
#include <gtest/gtest.h>

#include "cuckoogate/reject/reject.hpp"
#include "reply_view.hpp"

namespace cg {
namespace {

using reject::Direction;
using reject::Kind;
using reject::Reason;
using reject::Status;
using test::be16;
using test::be32;
using test::Bytes;
using test::Packet;

constexpr uint8_t kFin = 0x01, kSyn = 0x02, kRst = 0x04, kPsh = 0x08, kAck = 0x10;

// The builder writes seq 1000 and ack 0; a test sets its own.
Bytes with_seq_ack(Bytes f, uint32_t seq, uint32_t ack) {
  const test::Layers l = test::layers(f);
  test::set32(f, l.l4 + 4, seq);
  test::set32(f, l.l4 + 8, ack);
  return f;
}

struct Rst {
  uint16_t sport, dport;
  uint32_t seq, ack;
  uint8_t flags;
};

// Checks the reply's headers against the frame and reads its RST.
Rst rst(const Bytes& reply, const Bytes& frame, Direction dir) {
  const test::Layers r = test::check_reply(reply, frame, dir, 6);
  EXPECT_EQ(r.l4_len, 20u);
  EXPECT_EQ(reply.at(r.l4 + 12), 0x50);       // data offset 5, no options
  EXPECT_EQ(be16(reply, r.l4 + 14), 0);       // window
  EXPECT_EQ(be16(reply, r.l4 + 18), 0);       // urgent pointer
  return {be16(reply, r.l4), be16(reply, r.l4 + 2), be32(reply, r.l4 + 4),
          be32(reply, r.l4 + 8), reply.at(r.l4 + 13)};
}

test::Built build_rsts(const Bytes& frame) {
  test::Built b = test::build(frame);
  EXPECT_EQ(b.result.status, Status::kBuilt) << reject::name(b.result.reason);
  EXPECT_EQ(b.result.kind, Kind::kTcpReset);
  EXPECT_EQ(b.result.count, 2);
  EXPECT_EQ(b.result.reply[0].dir, Direction::kToSender);
  EXPECT_EQ(b.result.reply[1].dir, Direction::kToDestination);
  if (b.replies.size() != 2) b.replies.resize(2, Bytes(60));
  return b;
}

Bytes client_hello4() {
  return with_seq_ack(Packet().vlan(100).ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 443, kPsh | kAck)
                          .payload(test::tls_client_hello("blocked.example")).frame(),
                      0x11223344, 0xaabbccdd);
}

TEST(TcpReset, ClientHelloWithAckResetsSenderFromItsAckNumber) {
  const Bytes f = client_hello4();
  const test::Built b = build_rsts(f);
  const Rst r = rst(b.replies[0], f, Direction::kToSender);
  EXPECT_EQ(r.sport, 443);
  EXPECT_EQ(r.dport, 40000);
  EXPECT_EQ(r.seq, 0xaabbccddu);  // <SEQ=SEG.ACK><CTL=RST>
  EXPECT_EQ(r.ack, 0u);
  EXPECT_EQ(r.flags, kRst);
  EXPECT_EQ(b.replies[0].size(), 60u);  // 58 bytes, padded
}

TEST(TcpReset, ClientHelloWithAckResetsDestinationAtTheDroppedSegmentsSeq) {
  const Bytes f = client_hello4();
  const test::Built b = build_rsts(f);
  const Rst r = rst(b.replies[1], f, Direction::kToDestination);
  EXPECT_EQ(r.sport, 40000);
  EXPECT_EQ(r.dport, 443);
  // The server never got the ClientHello: it expects exactly its seq.
  EXPECT_EQ(r.seq, 0x11223344u);
  EXPECT_EQ(r.ack, 0xaabbccddu);
  EXPECT_EQ(r.flags, kRst | kAck);
}

TEST(TcpReset, Ipv6QinQClientHello) {
  const Bytes f = with_seq_ack(Packet().vlan(100, 0x88a8).vlan(200).ipv6("2001:db8::1", "2001:db8::2")
                                   .tcp(40000, 443, kPsh | kAck)
                                   .payload(test::tls_client_hello("blocked.example")).frame(),
                               7, 9);
  const test::Built b = build_rsts(f);
  const Rst s = rst(b.replies[0], f, Direction::kToSender);
  EXPECT_EQ(s.sport, 443);
  EXPECT_EQ(s.dport, 40000);
  EXPECT_EQ(s.seq, 9u);
  EXPECT_EQ(s.flags, kRst);
  const Rst d = rst(b.replies[1], f, Direction::kToDestination);
  EXPECT_EQ(d.seq, 7u);
  EXPECT_EQ(d.ack, 9u);
  EXPECT_EQ(d.flags, kRst | kAck);
  EXPECT_EQ(b.replies[0].size(), 14u + 8 + 40 + 20);
  EXPECT_EQ(test::layers(b.replies[0]).tags,
            (std::vector<std::pair<uint16_t, uint16_t>>{{0x88a8, 100}, {0x8100, 200}}));
}

TEST(TcpReset, BareSynGetsRstAckForSynPlusOne) {
  for (const Bytes& f :
       {with_seq_ack(Packet().vlan(5).ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80, kSyn).frame(), 5000, 0),
        with_seq_ack(Packet().ipv6("2001:db8::1", "2001:db8::2").tcp(40000, 80, kSyn).frame(), 5000, 0)}) {
    const test::Built b = build_rsts(f);
    const Rst s = rst(b.replies[0], f, Direction::kToSender);
    EXPECT_EQ(s.seq, 0u);     // <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>
    EXPECT_EQ(s.ack, 5001u);  // the SYN counts one
    EXPECT_EQ(s.flags, kRst | kAck);
    const Rst d = rst(b.replies[1], f, Direction::kToDestination);
    EXPECT_EQ(d.seq, 5001u);  // what a destination in SYN-RECEIVED expects
    EXPECT_EQ(d.ack, 0u);
    EXPECT_EQ(d.flags, kRst);  // no ACK to echo
  }
}

TEST(TcpReset, FinWithAck) {
  for (const Bytes& f :
       {with_seq_ack(Packet().vlan(5).ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80, kFin | kAck).frame(), 300, 400),
        with_seq_ack(Packet().vlan(5).ipv6("2001:db8::1", "2001:db8::2").tcp(40000, 80, kFin | kAck).frame(), 300, 400)}) {
    const test::Built b = build_rsts(f);
    const Rst s = rst(b.replies[0], f, Direction::kToSender);
    EXPECT_EQ(s.seq, 400u);
    EXPECT_EQ(s.ack, 0u);
    EXPECT_EQ(s.flags, kRst);
    const Rst d = rst(b.replies[1], f, Direction::kToDestination);
    EXPECT_EQ(d.seq, 300u);  // the FIN never arrived: RCV.NXT is its seq
    EXPECT_EQ(d.ack, 400u);
    EXPECT_EQ(d.flags, kRst | kAck);
  }
}

TEST(TcpReset, SynAckFromAServerResetsBothEnds) {
  // The blocked packet goes server -> client: the server is the sender.
  const Bytes f = with_seq_ack(
      Packet().ipv4("10.0.0.2", "10.0.0.1").tcp(443, 40000, kSyn | kAck).frame(), 9000, 5001);
  const test::Built b = build_rsts(f);
  const Rst s = rst(b.replies[0], f, Direction::kToSender);
  EXPECT_EQ(s.sport, 40000);
  EXPECT_EQ(s.dport, 443);
  EXPECT_EQ(s.seq, 5001u);  // what the server in SYN-RECEIVED expects
  EXPECT_EQ(s.flags, kRst);
  const Rst d = rst(b.replies[1], f, Direction::kToDestination);
  EXPECT_EQ(d.seq, 9001u);
  EXPECT_EQ(d.ack, 5001u);  // a client in SYN-SENT needs an acceptable ACK
  EXPECT_EQ(d.flags, kRst | kAck);
}

TEST(TcpReset, WithoutAckTheSenderIsAckedForPayloadSynAndFin) {
  const Bytes f = with_seq_ack(
      Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80, kFin | kPsh).payload("abcde").frame(), 100, 0);
  const test::Built b = build_rsts(f);
  const Rst s = rst(b.replies[0], f, Direction::kToSender);
  EXPECT_EQ(s.seq, 0u);
  EXPECT_EQ(s.ack, 100u + 5 + 1);
  EXPECT_EQ(s.flags, kRst | kAck);
  EXPECT_EQ(rst(b.replies[1], f, Direction::kToDestination).seq, 100u);
}

TEST(TcpReset, OptionsAreNotPayloadAndAreNotCopied) {
  // SYN with MSS, SACK-permitted and window scale, behind IPv4 options.
  const Bytes f = with_seq_ack(Packet().ipv4("10.0.0.1", "10.0.0.2")
                                   .ipv4_options({7, 7, 4, 0, 0, 0, 0})  // record route
                                   .tcp_options({2, 4, 0x05, 0xb4, 4, 2, 3, 3, 7})
                                   .tcp(40000, 80, kSyn).frame(),
                               0xfffffffe, 0);
  const test::Built b = build_rsts(f);
  EXPECT_EQ(rst(b.replies[0], f, Direction::kToSender).ack, 0xffffffffu);
  EXPECT_EQ(rst(b.replies[1], f, Direction::kToDestination).seq, 0xffffffffu);
}

TEST(TcpReset, SequenceNumbersWrap) {
  const Bytes f = with_seq_ack(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2, kSyn).frame(), 0xffffffff, 0);
  const test::Built b = build_rsts(f);
  EXPECT_EQ(rst(b.replies[0], f, Direction::kToSender).ack, 0u);
  EXPECT_EQ(rst(b.replies[1], f, Direction::kToDestination).seq, 0u);
}

TEST(TcpReset, Ipv6ExtensionHeadersAreSkippedAndNotCopied) {
  const Bytes f = with_seq_ack(Packet().ipv6("2001:db8::1", "2001:db8::2").ipv6_ext(0).ipv6_ext(60)
                                   .ipv6_ext(43).tcp(40000, 80, kAck).payload("xyz").frame(),
                               10, 20);
  const test::Built b = build_rsts(f);
  EXPECT_EQ(rst(b.replies[0], f, Direction::kToSender).seq, 20u);
  EXPECT_EQ(rst(b.replies[1], f, Direction::kToDestination).seq, 10u);
  EXPECT_EQ(b.replies[0].size(), 14u + 40 + 20);
}

TEST(TcpReset, OnlyTheSenderWhenAsked) {
  reject::Options opt;
  opt.tcp_reset_destination = false;
  const test::Built b = test::build(client_hello4(), opt);
  ASSERT_EQ(b.result.status, Status::kBuilt);
  EXPECT_EQ(b.result.count, 1);
  EXPECT_EQ(rst(b.replies.at(0), client_hello4(), Direction::kToSender).seq, 0xaabbccddu);
}

TEST(TcpReset, ResetIsNeverAnswered) {
  for (uint8_t flags : {kRst, uint8_t{kRst | kAck}}) {
    const test::Built b = test::build(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2, flags).frame());
    EXPECT_EQ(b.result.status, Status::kNotApplicable);
    EXPECT_EQ(b.result.reason, Reason::kTcpReset);
    EXPECT_EQ(b.result.count, 0);
  }
}

TEST(TcpReset, FirstFragmentAndSourceRouteGetTheIcmpErrorInstead) {
  const Bytes frags[] = {
      Packet().ipv4("10.0.0.1", "10.0.0.2").fragment(0, true).tcp(1, 2, kAck).payload("abc").frame(),
      Packet().ipv6("2001:db8::1", "2001:db8::2").fragment(0, true).tcp(1, 2, kAck).frame(),
      // loose source route through 192.0.2.9: 10.0.0.2 is not the last hop
      Packet().ipv4("10.0.0.1", "10.0.0.2").ipv4_options({131, 7, 4, 192, 0, 2, 9}).tcp(1, 2, kAck).frame(),
  };
  for (const Bytes& f : frags) {
    const test::Built b = test::build(f);
    ASSERT_EQ(b.result.status, Status::kBuilt);
    EXPECT_EQ(b.result.kind, Kind::kIcmpUnreachable);
    EXPECT_EQ(b.result.count, 1);
  }
  // A routing header with a segment left: the destination is a waypoint.
  Bytes f = Packet().ipv6("2001:db8::1", "2001:db8::2").ipv6_ext(43, 22).tcp(1, 2, kAck).frame();
  f.at(14 + 40 + 3) = 1;  // segments left
  EXPECT_EQ(test::build(f).result.kind, Kind::kIcmpUnreachable);
}

TEST(TcpReset, MalformedHeaderGetsNothing) {
  Bytes f = Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2, kAck).payload("abc").frame();
  f.at(14 + 20 + 12) = 0xf0;  // data offset 60 > 23 bytes of segment
  EXPECT_EQ(test::build(f).result.reason, Reason::kMalformed);
  f.at(14 + 20 + 12) = 0x40;  // data offset 16 < 20
  EXPECT_EQ(test::build(f).result.reason, Reason::kMalformed);
  // 10 bytes of TCP header only
  const Bytes cut = Packet().ipv4("10.0.0.1", "10.0.0.2").proto(6).payload("0123456789").frame();
  EXPECT_EQ(test::build(cut).result.reason, Reason::kMalformed);
}

TEST(TcpReset, TooSmallBuffersWriteNothingAndSayWhatIsNeeded) {
  const Bytes f = client_hello4();
  uint8_t a[200], b[200];
  std::fill(std::begin(a), std::end(a), 0xee);
  std::fill(std::begin(b), std::end(b), 0xee);
  const reject::Buffer small[] = {{a, 60}, {b, 59}};
  reject::Result r = reject::build(f.data(), f.size(), small);
  EXPECT_EQ(r.status, Status::kBufferTooSmall);
  EXPECT_EQ(r.count, 2);
  EXPECT_EQ(r.reply[0].len, 60);
  EXPECT_EQ(r.reply[1].len, 60);
  for (uint8_t x : a) ASSERT_EQ(x, 0xee);
  for (uint8_t x : b) ASSERT_EQ(x, 0xee);
  // A dry run: no buffers at all.
  r = reject::build(f.data(), f.size(), {});
  EXPECT_EQ(r.status, Status::kBufferTooSmall);
  EXPECT_EQ(r.kind, Kind::kTcpReset);
  EXPECT_EQ(r.count, 2);
  // One buffer for two replies.
  r = reject::build(f.data(), f.size(), std::span<const reject::Buffer>(small, 1));
  EXPECT_EQ(r.status, Status::kBufferTooSmall);
  // Exactly enough.
  const reject::Buffer exact[] = {{a, 60}, {b, 60}};
  EXPECT_EQ(reject::build(f.data(), f.size(), exact).status, Status::kBuilt);
  EXPECT_EQ(a[60], 0xee);
  EXPECT_EQ(b[60], 0xee);
}

}  // namespace
}  // namespace cg
