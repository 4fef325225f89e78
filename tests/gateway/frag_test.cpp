// IP reassembly end to end (issue 11, item 4), through `cuckoogate replay`:
// rules are matched on the reassembled datagram and the verdict applies to
// every original fragment, which leave byte for byte as they came; tiny first
// fragments (RFC 1858), names cut by fragmentation, overlaps, incomplete
// datagrams, the table-full policy, IPv6, and fragments of a blocked flow.
// Each case also runs with `--fragments off` where that shows what the stage
// changes (the pre-reassembly behaviour that let these through).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gateway_test_env.hpp"
#include "packet_builder.hpp"
#include "pcap_file.hpp"
#include "replay_fixture.hpp"
#include "subprocess.hpp"

namespace cg::test {
namespace {

class Frags : public ReplayTest {
 protected:
  // Every fragment dropped, byte for byte and in order, each counted under
  // `kind`; judged one by one (--fragments off) every fragment passes.
  void expect_dropped_whole(const std::vector<Bytes>& fr, const std::string& rules, const char* kind) {
    const auto s = replay(fr, rules);
    EXPECT_EQ(passed(), std::vector<Bytes>{});
    EXPECT_EQ(dropped(), fr);
    EXPECT_EQ(s["dropped_by_kind"][kind], fr.size());
    EXPECT_EQ(s["frags"]["reassembled"], 1);
    replay(fr, rules, {"--fragments", "off"});
    EXPECT_EQ(passed(), fr);
  }
};

// One piece of a datagram's fragmentable part: [off, off + len), with MF.
struct Piece {
  std::size_t off, len;
  bool more;
};

// Pieces that cut `total` bytes at the given offsets (MF on all but the last).
std::vector<Piece> cuts(std::size_t total, std::vector<std::size_t> at) {
  std::vector<Piece> p;
  std::size_t start = 0;
  at.push_back(total);
  for (std::size_t end : at) {
    p.push_back({start, end - start, end != total});
    start = end;
  }
  return p;
}

uint16_t ip_checksum(const uint8_t* h, std::size_t n) {
  uint32_t s = 0;
  for (std::size_t i = 0; i + 1 < n; i += 2) s += static_cast<uint32_t>(h[i] << 8 | h[i + 1]);
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return static_cast<uint16_t>(~s);
}

// IPv4 fragments of an unfragmented frame (IP header at l2), with a given id.
std::vector<Bytes> frag4(const Bytes& whole, const std::vector<Piece>& pieces, uint16_t id = 0x4242,
                         std::size_t l2 = 14) {
  const std::size_t ihl = static_cast<std::size_t>(whole[l2] & 0x0f) * 4;
  const std::size_t total = static_cast<std::size_t>(whole[l2 + 2] << 8 | whole[l2 + 3]);
  const Bytes body(whole.begin() + static_cast<long>(l2 + ihl), whole.begin() + static_cast<long>(l2 + total));
  std::vector<Bytes> out;
  for (const Piece& p : pieces) {
    Bytes f(whole.begin(), whole.begin() + static_cast<long>(l2 + ihl));
    const auto tl = static_cast<uint16_t>(ihl + p.len);
    f[l2 + 2] = static_cast<uint8_t>(tl >> 8);
    f[l2 + 3] = static_cast<uint8_t>(tl);
    f[l2 + 4] = static_cast<uint8_t>(id >> 8);
    f[l2 + 5] = static_cast<uint8_t>(id);
    const auto fo = static_cast<uint16_t>((p.more ? 0x2000 : 0) | (p.off / 8));
    f[l2 + 6] = static_cast<uint8_t>(fo >> 8);
    f[l2 + 7] = static_cast<uint8_t>(fo);
    f[l2 + 10] = f[l2 + 11] = 0;
    const uint16_t c = ip_checksum(f.data() + l2, ihl);
    f[l2 + 10] = static_cast<uint8_t>(c >> 8);
    f[l2 + 11] = static_cast<uint8_t>(c);
    f.insert(f.end(), body.begin() + static_cast<long>(p.off), body.begin() + static_cast<long>(p.off + p.len));
    out.push_back(f);
  }
  return out;
}

// IPv6 fragments of an unfragmented frame without extension headers: a
// fragment header right after the fixed header.
std::vector<Bytes> frag6(const Bytes& whole, const std::vector<Piece>& pieces, uint32_t id = 0x42424242) {
  const std::size_t l2 = 14;
  const std::size_t plen = static_cast<std::size_t>(whole[l2 + 4] << 8 | whole[l2 + 5]);
  const uint8_t nh = whole[l2 + 6];
  const Bytes body(whole.begin() + l2 + 40, whole.begin() + static_cast<long>(l2 + 40 + plen));
  std::vector<Bytes> out;
  for (const Piece& p : pieces) {
    Bytes f(whole.begin(), whole.begin() + l2 + 40);
    const auto pl = static_cast<uint16_t>(8 + p.len);
    f[l2 + 4] = static_cast<uint8_t>(pl >> 8);
    f[l2 + 5] = static_cast<uint8_t>(pl);
    f[l2 + 6] = 44;
    const auto fo = static_cast<uint16_t>(p.off | (p.more ? 1 : 0));
    const Bytes fh = {nh, 0, static_cast<uint8_t>(fo >> 8), static_cast<uint8_t>(fo),
                      static_cast<uint8_t>(id >> 24), static_cast<uint8_t>(id >> 16),
                      static_cast<uint8_t>(id >> 8), static_cast<uint8_t>(id)};
    f.insert(f.end(), fh.begin(), fh.end());
    f.insert(f.end(), body.begin() + static_cast<long>(p.off), body.begin() + static_cast<long>(p.off + p.len));
    out.push_back(f);
  }
  return out;
}

std::size_t l4_bytes4(const Bytes& whole) {
  return static_cast<std::size_t>(whole[16] << 8 | whole[17]) - static_cast<std::size_t>(whole[14] & 0x0f) * 4;
}

std::vector<Bytes> cat(std::vector<Bytes> a, const std::vector<Bytes>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The insertion of a TLS connection's first flight: its SYN and SYN-ACK, a
// fake ClientHello naming a fine host and the real one naming a blocked
// host at the same sequence number, all with valid checksums.
struct Insertion {
  static Packet c2s(uint8_t flags, uint32_t seq) {
    return Packet().ipv4("10.8.0.1", "10.9.0.1").tcp(40000, 443, flags).seq_ack(seq, 501).checksum();
  }
  Bytes syn = Packet().ipv4("10.8.0.1", "10.9.0.1").tcp(40000, 443, 0x02).seq_ack(100, 0).checksum().frame();
  Bytes synack = Packet().ipv4("10.9.0.1", "10.8.0.1").tcp(443, 40000, 0x12).seq_ack(500, 101).checksum().frame();
  Bytes fake = c2s(0x18, 101).payload(tls_client_hello("fine.example")).frame();
  Bytes real = c2s(0x18, 101).payload(tls_client_hello("blocked.example")).frame();
};

const char* kHttpBlocked = "GET / HTTP/1.1\r\nHost: blocked.example\r\nUser-Agent: t\r\n\r\n";

// RFC 1858: the first fragment holds 8 bytes of the TCP header (the ports,
// not the flags: the classifier cannot even read it as TCP), then 16.
TEST_F(Frags, TinyFirstFragmentsOfASynToABlockedServiceAreDroppedWhole) {
  const Bytes syn = Packet().ipv4("10.8.0.1", "10.9.0.1").tcp(40000, 22, 0x02).tcp_options({2, 4, 5, 0xb4}).frame();
  const Bytes other = Packet().ipv4("10.8.0.1", "10.9.0.1").tcp(40001, 80, 0x02).frame();
  for (const std::size_t first : {std::size_t{8}, std::size_t{16}}) {
    SCOPED_TRACE(first);
    const std::vector<Bytes> fr = frag4(syn, cuts(l4_bytes4(syn), {first}));
    ASSERT_EQ(fr.size(), 2u);
    const auto s = replay({fr[0], other, fr[1]}, "service tcp 10.9.0.1:22\n");
    EXPECT_EQ(passed(), (std::vector<Bytes>{other}));
    EXPECT_EQ(dropped(), fr);  // both, byte for byte, in order
    EXPECT_EQ(s["dropped_by_kind"]["service"], 2);  // each original under the rule
    EXPECT_EQ(s["frags"]["reassembled"], 1);
    EXPECT_EQ(s["rx"], 3);
    // Judged one by one, neither fragment shows the service: both pass.
    replay({fr[0], other, fr[1]}, "service tcp 10.9.0.1:22\n", {"--fragments", "off"});
    EXPECT_EQ(passed(), (std::vector<Bytes>{fr[0], other, fr[1]}));
  }
}

TEST_F(Frags, TinyFirstFragmentOfASynUnderAFlowRule) {
  const Bytes syn = Packet().ipv4("10.8.0.1", "10.9.0.1").tcp(40000, 22, 0x02).frame();
  expect_dropped_whole(frag4(syn, cuts(l4_bytes4(syn), {8})), "flow tcp 10.8.0.1:40000 10.9.0.1:22\n", "flow");
}

TEST_F(Frags, AHostHeaderCutByFragmentationIsCaught) {
  const Bytes req = Packet().ipv4("10.8.0.1", "10.9.0.1").tcp(40000, 80).payload(kHttpBlocked).frame();
  // TCP header (20) + "GET / HTTP/1.1\r\nHost: bloc" | "ked.example..."
  expect_dropped_whole(frag4(req, cuts(l4_bytes4(req), {48})), "host blocked.example\n", "host");
}

TEST_F(Frags, ADnsQueryInTwoFragmentsIsCaught) {
  const Bytes q = Packet().ipv4("10.8.0.1", "10.9.0.53").udp(5353, 53).payload(dns_query("blocked.example")).frame();
  // The UDP header and 8 bytes of the DNS header, then the rest.
  expect_dropped_whole(frag4(q, cuts(l4_bytes4(q), {16})), "host blocked.example\n", "host");
}

TEST_F(Frags, ABenignDatagramPassesByteIdenticalInArrivalOrderEvenOutOfOrder) {
  std::string body(900, 'x');
  const Bytes req = Packet().ipv4("10.8.0.1", "10.9.0.1").tcp(40000, 80)
                        .payload("GET / HTTP/1.1\r\nHost: fine.example\r\n\r\n" + body).frame();
  const std::vector<Bytes> fr = frag4(req, cuts(l4_bytes4(req), {24, 400, 800}));
  ASSERT_EQ(fr.size(), 4u);
  const std::vector<Bytes> shuffled = {fr[2], fr[0], fr[3], fr[1]};
  const auto s = replay(shuffled, "host blocked.example\nservice tcp 10.9.0.1:22\n");
  EXPECT_EQ(passed(), shuffled);  // as they came, unchanged
  EXPECT_EQ(dropped(), std::vector<Bytes>{});
  EXPECT_EQ(s["frags"]["held"], 4);
  EXPECT_EQ(s["frags"]["reassembled"], 1);
  EXPECT_EQ(s["passed"], 4);
  // The same fragments carrying a blocked name, out of order: all dropped.
  const Bytes bad = Packet().ipv4("10.8.0.1", "10.9.0.1").tcp(40000, 80)
                        .payload(std::string(kHttpBlocked) + body).frame();
  const std::vector<Bytes> bf = frag4(bad, cuts(l4_bytes4(bad), {24, 400, 800}), 0x77);
  replay({bf[3], bf[1], bf[2], bf[0]}, "host blocked.example\n");
  EXPECT_EQ(passed(), std::vector<Bytes>{});
  EXPECT_EQ(dropped(), (std::vector<Bytes>{bf[3], bf[1], bf[2], bf[0]}));
}

// RFC 1858's second attack: a later fragment rewrites the TCP header the
// first one showed (here its destination port, 80 -> 22).
TEST_F(Frags, OverlappingFragmentsAreDroppedAndCounted) {
  const Bytes syn80 = Packet().ipv4("10.8.0.1", "10.9.0.1").tcp(40000, 80, 0x02).payload(std::string(16, 'a')).frame();
  const Bytes syn22 = Packet().ipv4("10.8.0.1", "10.9.0.1").tcp(40000, 22, 0x02).payload(std::string(16, 'a')).frame();
  const Bytes first = frag4(syn80, {{0, 16, true}})[0];
  const Bytes over = frag4(syn22, {{0, 24, true}})[0];  // offset 0 again, a longer first piece
  const Bytes later = frag4(syn22, {{8, 28, false}})[0];
  const Bytes unrelated = Packet().ipv4("10.8.0.2", "10.9.0.1").tcp(40000, 80, 0x02).frame();
  auto s = replay({first, over, unrelated}, "service tcp 10.9.0.1:22\n", {"--frag-timeout", "200"});
  EXPECT_EQ(passed(), (std::vector<Bytes>{unrelated}));
  EXPECT_EQ(dropped(), (std::vector<Bytes>{first, over}));
  EXPECT_EQ(s["frags"]["overlap"], 1);
  // A partial overlap (bytes 8..16 twice): the same, and a fragment of the
  // dropped datagram that comes after it is dropped too.
  const Bytes tail = frag4(syn80, {{16, 20, false}})[0];
  s = replay({first, later, tail}, "service tcp 10.9.0.1:22\n", {"--frag-timeout", "200"});
  EXPECT_EQ(passed(), std::vector<Bytes>{});
  EXPECT_EQ(dropped(), (std::vector<Bytes>{first, later, tail}));
  EXPECT_EQ(s["frags"]["overlap"], 1);
  EXPECT_EQ(s["frags"]["dead"], 1);
  // Judged one by one, the first is too short to read as TCP and the rest
  // have no ports: all pass.
  replay({first, later, tail}, "service tcp 10.9.0.1:22\n", {"--fragments", "off"});
  EXPECT_EQ(passed(), (std::vector<Bytes>{first, later, tail}));
}

TEST_F(Frags, AnIncompleteDatagramIsDroppedAfterTheTimeout) {
  const Bytes req = Packet().ipv4("10.8.0.1", "10.9.0.1").tcp(40000, 80).payload(kHttpBlocked).frame();
  const std::vector<Bytes> fr = frag4(req, cuts(l4_bytes4(req), {24}));
  const Bytes other = Packet().ipv4("10.8.0.3", "10.9.0.1").udp(1000, 2000).payload("x").frame();
  const auto s = replay({fr[0], other}, "dst 192.0.2.1\n", {"--frag-timeout", "300"});
  EXPECT_EQ(passed(), (std::vector<Bytes>{other}));
  EXPECT_EQ(dropped(), (std::vector<Bytes>{fr[0]}));
  EXPECT_EQ(s["frags"]["timeout"], 1);
  EXPECT_EQ(s["rx"], 2);
  replay({fr[0], other}, "dst 192.0.2.1\n", {"--fragments", "off"});
  EXPECT_EQ(passed(), (std::vector<Bytes>{fr[0], other}));
}

// Policy when full: the new fragment is dropped (as Linux does above
// ipfrag_high_thresh); datagrams already being collected go on.
TEST_F(Frags, WhenTheTableIsFullTheNewFragmentIsDropped) {
  const Bytes a = Packet().ipv4("10.8.0.1", "10.9.0.1").udp(1000, 2000).payload(std::string(64, 'a')).frame();
  const Bytes b = Packet().ipv4("10.8.0.2", "10.9.0.1").udp(1000, 2000).payload(std::string(64, 'b')).frame();
  const std::vector<Bytes> fa = frag4(a, cuts(l4_bytes4(a), {32}), 1);
  const std::vector<Bytes> fb = frag4(b, cuts(l4_bytes4(b), {32}), 2);
  const auto s = replay({fa[0], fb[0], fa[1], fb[1]}, "dst 192.0.2.1\n",
                        {"--frag-datagrams", "1", "--frag-timeout", "200"});
  EXPECT_EQ(passed(), fa);
  // b's first fragment found no room; its second is held alone until its timeout.
  EXPECT_EQ(dropped(), (std::vector<Bytes>{fb[0], fb[1]}));
  EXPECT_EQ(s["frags"]["table_full"], 1);
  EXPECT_EQ(s["frags"]["timeout"], 1);
  // The bound on held fragments works the same way.
  const auto t = replay({fa[0], fb[0], fa[1], fb[1]}, "dst 192.0.2.1\n", {"--frag-held", "1", "--frag-timeout", "200"});
  EXPECT_EQ(passed(), fa);
  EXPECT_EQ(t["frags"]["table_full"], 1);
}

TEST_F(Frags, Ipv6FragmentsAreReassembled) {
  const Bytes req = Packet().ipv6("2001:db8::1", "2001:db8::2").tcp(40000, 80).payload(kHttpBlocked).frame();
  const std::size_t l4 = req.size() - 14 - 40;
  expect_dropped_whole(frag6(req, cuts(l4, {40})), "host blocked.example\n", "host");
  // A tiny first fragment to a blocked IPv6 service.
  const Bytes syn = Packet().ipv6("2001:db8::1", "2001:db8::2").tcp(40000, 22, 0x02).frame();
  const std::vector<Bytes> sf = frag6(syn, cuts(20, {8}));
  auto s = replay(sf, "service tcp [2001:db8::2]:22\n");
  EXPECT_EQ(dropped(), sf);
  EXPECT_EQ(s["dropped_by_kind"]["service"], 2);
  // A benign one passes unchanged.
  const Bytes ok = Packet().ipv6("2001:db8::1", "2001:db8::2").udp(1000, 2000).payload(std::string(100, 'z')).frame();
  const std::vector<Bytes> of = frag6(ok, cuts(108, {48}));
  s = replay(of, "host blocked.example\n");
  EXPECT_EQ(passed(), of);
  EXPECT_EQ(s["frags"]["reassembled"], 1);
}

// A fragmented IP-in-IP datagram whose inner packet is itself a fragment:
// the stage reassembles the outer datagram and that frame is judged as it is
// (tunneled, on its outer and inner headers), never offered to the stage
// again as if it had come off the wire. Every original passes, or drops
// under an outer-address rule, and nothing is counted twice.
TEST_F(Frags, AReassembledTunnelCarryingAnInnerFragmentIsJudgedOnce) {
  const Bytes inner = Packet().ipv4("10.20.0.1", "10.30.0.1").fragment(0, true, 0x99).udp(1000, 2000)
                          .payload(std::string(200, 'i')).frame();
  const Bytes inner_ip(inner.begin() + 14, inner.end());
  const Bytes outer = Packet().ipv4("10.8.0.1", "10.9.0.1").proto(4).payload(inner_ip).frame();
  const std::vector<Bytes> fr = frag4(outer, cuts(l4_bytes4(outer), {96}), 0x5151);
  ASSERT_EQ(fr.size(), 2u);
  auto s = replay(fr, "host blocked.example\n");
  EXPECT_EQ(passed(), fr);
  EXPECT_EQ(dropped(), std::vector<Bytes>{});
  EXPECT_EQ(s["frags"]["reassembled"], 1);
  EXPECT_EQ(s["frags"]["unsupported"], 0);
  EXPECT_EQ(s["passed"], 2);
  EXPECT_EQ(s["dropped"], 0);
  s = replay(fr, "src 10.8.0.1\n");
  EXPECT_EQ(passed(), std::vector<Bytes>{});
  EXPECT_EQ(dropped(), fr);
  EXPECT_EQ(s["dropped_by_kind"]["src"], 2);
  EXPECT_EQ(s["dropped"], 2);
}

// An IPv6 fragment header behind another extension header is not
// reassembled (rte_ip_frag wants it first): dropped and counted, never
// judged on the partial transport header.
TEST_F(Frags, Ipv6FragmentHeaderBehindOtherHeadersIsDroppedAndCounted) {
  const Bytes fr = Packet().ipv6("2001:db8::1", "2001:db8::2").ipv6_ext(60).fragment(0, true, 9)
                       .tcp(40000, 22, 0x02).frame();
  const Bytes other = Packet().ipv6("2001:db8::1", "2001:db8::2").tcp(40001, 80, 0x02).frame();
  const auto s = replay({fr, other}, "service tcp [2001:db8::2]:22\n");
  EXPECT_EQ(passed(), (std::vector<Bytes>{other}));
  EXPECT_EQ(dropped(), (std::vector<Bytes>{fr}));
  EXPECT_EQ(s["frags"]["unsupported"], 1);
}

// A blocked flow (its ClientHello named a blocked host) stays blocked for
// its fragmented segments, which have no ports after the first fragment.
TEST_F(Frags, FragmentsOfABlockedFlowAreDropped) {
  auto c2s = [](uint8_t flags, uint32_t seq) {
    return Packet().ipv4("10.8.0.1", "10.9.0.1").tcp(40000, 443, flags).seq_ack(seq, 501);
  };
  const Bytes syn = Packet().ipv4("10.8.0.1", "10.9.0.1").tcp(40000, 443, 0x02).seq_ack(100, 0).frame();
  const Bytes synack = Packet().ipv4("10.9.0.1", "10.8.0.1").tcp(443, 40000, 0x12).seq_ack(500, 101).frame();
  const Bytes hello = c2s(0x18, 101).payload(tls_client_hello("blocked.example")).frame();
  const Bytes data = c2s(0x18, 600).payload(std::string(600, 'd')).frame();
  const std::vector<Bytes> fr = frag4(data, cuts(l4_bytes4(data), {304}));
  const auto s = replay(cat({syn, synack, hello}, fr), "host blocked.example\n");
  EXPECT_EQ(passed(), (std::vector<Bytes>{syn, synack}));
  EXPECT_EQ(dropped(), cat({hello}, fr));
  EXPECT_EQ(s["dropped_by_kind"]["host"], 3);
  // One by one, the second fragment has no flow and passes.
  replay(cat({syn, synack, hello}, fr), "host blocked.example\n", {"--fragments", "off"});
  EXPECT_EQ(passed(), (std::vector<Bytes>{syn, synack, fr[1]}));
}

// The insertion attack through fragments: a fake ClientHello (a fine name)
// whose second fragment has a bad IPv4 header checksum, so the server drops
// it and never completes the datagram, then the real one at the same
// sequence number. The reassembled fake carries "IP header bad" and is not
// read, so the real one is judged; with the fragment intact the fake is
// read and the real one passes as a retransmission (the control).
TEST_F(Frags, ADatagramWithABadFragmentHeaderIsNotReadAsTheClientsBytes) {
  const Insertion k;
  const Bytes &syn = k.syn, &synack = k.synack, &fake = k.fake, &real = k.real;
  std::vector<Bytes> fr = frag4(fake, cuts(l4_bytes4(fake), {64}));
  {  // the control: every fragment whole
    replay(cat({syn, synack}, cat(fr, {real})), "host blocked.example\n", {"--checksums", "verify", "--pps", "50"});
    EXPECT_EQ(dropped(), std::vector<Bytes>{});
  }
  fr[1][14 + 11] ^= 0x01;  // the header checksum's low byte
  const auto s = replay(cat({syn, synack}, cat(fr, {real})), "host blocked.example\n", {"--checksums", "verify", "--pps", "50"});
  EXPECT_EQ(dropped(), std::vector<Bytes>{real});
  EXPECT_EQ(s["reassembly"]["bad_checksum"], 1);
}

// The same fake with every fragment valid, but one whose TTL runs out behind
// the gateway, or sent to another next hop's MAC: its server never completes
// the datagram. The rebuilt header keeps the first fragment's TTL and MAC,
// so the fake was judged as if whole and the real one passed as a
// retransmission; now the judged frame gets the smallest TTL (and no MAC when
// they differ), the real one does not arrive as the fake did, and the flow's
// client data is dropped (docs/reassembly.md, "Copies that arrive otherwise").
TEST_F(Frags, AFragmentItsServerNeverGetsLeavesATraceInTheJudgedDatagram) {
  const Insertion k;
  const Bytes &syn = k.syn, &synack = k.synack, &fake = k.fake, &real = k.real;
  for (const bool low_ttl : {true, false}) {
    SCOPED_TRACE(low_ttl ? "a fragment with TTL 2" : "a fragment to another MAC");
    std::vector<Bytes> fr = frag4(fake, cuts(l4_bytes4(fake), {64}));
    if (low_ttl) {
      fr[1][14 + 8] = 2;
      fr[1][14 + 10] = fr[1][14 + 11] = 0;
      const uint16_t c = ip_checksum(fr[1].data() + 14, 20);
      fr[1][14 + 10] = static_cast<uint8_t>(c >> 8);
      fr[1][14 + 11] = static_cast<uint8_t>(c);
    } else {
      fr[1][5] ^= 0x99;
    }
    const auto s = replay(cat({syn, synack}, cat(fr, {real})), "host blocked.example\n", {"--pps", "50"});
    EXPECT_EQ(dropped(), std::vector<Bytes>{real});
    EXPECT_EQ(s["reassembly"]["conflicts"], 1);
  }
}

// With the reject action one reply set is built from the reassembled
// datagram (here a DNS query whose name only the whole datagram shows):
// REFUSED to the client, none per fragment.
TEST_F(Frags, RejectAnswersTheReassembledDatagramOnce) {
  const Bytes q = Packet().ipv4("10.8.0.1", "10.9.0.53").udp(5353, 53).payload(dns_query("blocked.example")).frame();
  const std::vector<Bytes> fr = frag4(q, cuts(l4_bytes4(q), {16}));
  const auto s = replay(fr, "host blocked.example\n", {"--action", "reject", "--reply", path("reply.pcap")});
  EXPECT_EQ(dropped(), fr);
  EXPECT_EQ(s["rejects"]["sent"], 1);
  const auto rep = read_pcap(path("reply.pcap"));
  ASSERT_EQ(rep.size(), 1u);
  const Bytes& r = rep[0];
  ASSERT_GE(r.size(), 14u + 20 + 8 + 12);
  EXPECT_EQ(r[14 + 9], 17);                             // UDP
  EXPECT_EQ(r[14 + 6] & 0x3f, 0);                       // not a fragment itself
  EXPECT_EQ(r[14 + 12], 10);
  EXPECT_EQ(r[14 + 15], 53);                            // from 10.9.0.53
  EXPECT_EQ(r[14 + 20] << 8 | r[14 + 21], 53);          // sport 53
  EXPECT_EQ(r[14 + 22] << 8 | r[14 + 23], 5353);        // to the client's port
  EXPECT_EQ(r[14 + 28 + 3] & 0x0f, 5);                  // rcode REFUSED
}

TEST_F(Frags, DuplicatesAndTooManyFragments) {
  const Bytes u = Packet().ipv4("10.8.0.1", "10.9.0.1").udp(1000, 2000).payload(std::string(64, 'u')).frame();
  const std::vector<Bytes> fr = frag4(u, cuts(l4_bytes4(u), {32}));
  auto s = replay({fr[0], fr[0], fr[1]}, "dst 192.0.2.1\n");
  EXPECT_EQ(passed(), fr);  // the datagram, once
  EXPECT_EQ(dropped(), (std::vector<Bytes>{fr[0]}));
  EXPECT_EQ(s["frags"]["duplicate"], 1);
  // Nine fragments of 8 bytes: more than rte_ip_frag's 8.
  const Bytes big = Packet().ipv4("10.8.0.1", "10.9.0.1").udp(1000, 2000).payload(std::string(64, 'v')).frame();
  const std::vector<Bytes> nine = frag4(big, cuts(72, {8, 16, 24, 32, 40, 48, 56, 64}));
  ASSERT_EQ(nine.size(), 9u);
  s = replay(nine, "dst 192.0.2.1\n", {"--frag-timeout", "200"});
  EXPECT_EQ(passed(), std::vector<Bytes>{});
  EXPECT_EQ(dropped(), nine);
  EXPECT_EQ(s["frags"]["too_many"], 1);
}

}  // namespace
}  // namespace cg::test

int main(int argc, char** argv) { return cg::test::gateway_test_main(argc, argv); }
