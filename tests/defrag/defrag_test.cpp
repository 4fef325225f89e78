// app/defrag: which frames are fragments (and which are not reassembled),
// and the tracker's decisions: completion in any order, duplicates,
// overlaps (RFC 5722 / Linux: the whole datagram goes), more than
// kMaxFragments, the bounds on datagrams and held fragments, timeouts.
#include <gtest/gtest.h>

#include <vector>

#include "cuckoogate/defrag/defrag.hpp"
#include "packet_builder.hpp"

namespace cg::defrag {
namespace {

using test::Bytes;
using test::Packet;

Fragment frag(uint32_t off, uint32_t len, bool more, uint32_t id = 7) {
  Fragment f;
  f.key.family = 4;
  f.key.proto = 17;
  f.key.id = id;
  f.key.src[0] = 10;
  f.key.dst[0] = 11;
  f.offset = off;
  f.len = len;
  f.more = more;
  return f;
}

void* ref(uintptr_t i) { return reinterpret_cast<void*>(i); }

TrackerConfig cfg(uint32_t datagrams = 8, uint32_t fragments = 64, uint64_t timeout = 100) {
  TrackerConfig c;
  c.datagrams = datagrams;
  c.fragments = fragments;
  c.timeout_ticks = timeout;
  return c;
}

TEST(Classify, FragmentsWholeAndUnsupported) {
  Fragment f;
  const Bytes whole = Packet().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).payload("abcdefgh").frame();
  EXPECT_EQ(classify_frame(whole.data(), whole.size(), &f), FrameKind::kWhole);
  const Bytes first = Packet().ipv4("10.0.0.1", "10.0.0.2").fragment(0, true, 0x99).udp(1, 2).payload("abcdefgh").frame();
  ASSERT_TRUE(maybe_fragment(first.data(), first.size()));
  ASSERT_EQ(classify_frame(first.data(), first.size(), &f), FrameKind::kFragment);
  EXPECT_EQ(f.key.family, 4);
  EXPECT_EQ(f.key.id, 0x99u);
  EXPECT_EQ(f.offset, 0u);
  EXPECT_EQ(f.len, 16u);
  EXPECT_TRUE(f.more);
  EXPECT_EQ(f.l2_len, 14);
  EXPECT_EQ(f.l3_len, 20);
  // A tiny first fragment (8 bytes of a TCP header) is still a fragment.
  const Bytes tiny = Packet().ipv4("10.0.0.1", "10.0.0.2").fragment(0, true).proto(6).payload("12345678").frame();
  EXPECT_EQ(classify_frame(tiny.data(), tiny.size(), &f), FrameKind::kFragment);
  // Behind a VLAN tag: the L2 header grows.
  const Bytes tagged = Packet().vlan(5).ipv4("10.0.0.1", "10.0.0.2").fragment(3, false).proto(17).payload("xy").frame();
  ASSERT_EQ(classify_frame(tagged.data(), tagged.size(), &f), FrameKind::kFragment);
  EXPECT_EQ(f.l2_len, 18);
  EXPECT_EQ(f.key.vlan, 5);
  EXPECT_EQ(f.offset, 24u);
  // With more to come, a length that is not a multiple of 8 is invalid.
  const Bytes odd = Packet().ipv4("10.0.0.1", "10.0.0.2").fragment(0, true).proto(17).payload("12345").frame();
  EXPECT_EQ(classify_frame(odd.data(), odd.size(), &f), FrameKind::kInvalid);
  // Ending past 65535 (ping of death).
  const Bytes pod = Packet().ipv4("10.0.0.1", "10.0.0.2").fragment(8190, false).proto(17).payload(std::string(100, 'p')).frame();
  EXPECT_EQ(classify_frame(pod.data(), pod.size(), &f), FrameKind::kInvalid);
  // IPv6: the fragment header right after the fixed header is reassembled;
  // behind a destination options header it is not.
  const Bytes v6 = Packet().ipv6("2001:db8::1", "2001:db8::2").fragment(1, false, 0xabcdef).proto(17).payload("zz").frame();
  ASSERT_EQ(classify_frame(v6.data(), v6.size(), &f), FrameKind::kFragment);
  EXPECT_EQ(f.key.id, 0xabcdefu);
  EXPECT_EQ(f.offset, 8u);
  EXPECT_EQ(f.l3_len, 48);
  const Bytes v6ext = Packet().ipv6("2001:db8::1", "2001:db8::2").ipv6_ext(60).fragment(0, true).proto(17)
                          .payload("12345678").frame();
  EXPECT_TRUE(maybe_fragment(v6ext.data(), v6ext.size()));
  EXPECT_EQ(classify_frame(v6ext.data(), v6ext.size(), &f), FrameKind::kUnsupported);
  // An atomic fragment (offset 0, M = 0) is a whole packet.
  const Bytes atomic = Packet().ipv6("2001:db8::1", "2001:db8::2").fragment(0, false).udp(1, 2).payload("a").frame();
  EXPECT_EQ(classify_frame(atomic.data(), atomic.size(), &f), FrameKind::kWhole);
  // A fragment inside an IP-in-IP tunnel is not reassembled.
  const Bytes inner = Packet().ipv4("10.1.1.1", "10.2.2.2").fragment(0, true).proto(6).payload("12345678").frame();
  const Bytes tun = Packet().ipv4("192.0.2.1", "192.0.2.2").proto(4).payload(Bytes(inner.begin() + 14, inner.end())).frame();
  EXPECT_TRUE(maybe_fragment(tun.data(), tun.size()));
  EXPECT_EQ(classify_frame(tun.data(), tun.size(), &f), FrameKind::kUnsupported);
  // Plain TCP is not even looked at twice.
  const Bytes tcp = Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2).frame();
  EXPECT_FALSE(maybe_fragment(tcp.data(), tcp.size()));
}

TEST(Tracker, CompletesInAnyOrderAndKeepsArrivalOrder) {
  Tracker t(cfg());
  uint32_t s = 0;
  EXPECT_EQ(t.add(frag(16, 5, false), ref(1), 0, &s), Add::kHeld);
  EXPECT_EQ(t.add(frag(0, 8, true), ref(2), 1, &s), Add::kHeld);
  EXPECT_EQ(t.fragments(), 2u);
  ASSERT_EQ(t.add(frag(8, 8, true), ref(3), 2, &s), Add::kComplete);
  const auto r = t.take(s);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0], ref(1));
  EXPECT_EQ(r[1], ref(2));
  EXPECT_EQ(r[2], ref(3));
  EXPECT_EQ(t.offset(s, 0), 16u);
  t.release(s);
  EXPECT_EQ(t.datagrams(), 0u);
  EXPECT_EQ(t.fragments(), 0u);
  EXPECT_EQ(t.stats().completed, 1u);
}

TEST(Tracker, DuplicateIsDroppedAndTheDatagramGoesOn) {
  Tracker t(cfg());
  uint32_t s = 0;
  EXPECT_EQ(t.add(frag(0, 8, true), ref(1), 0, &s), Add::kHeld);
  EXPECT_EQ(t.add(frag(0, 8, true), ref(2), 0, &s), Add::kDuplicate);
  EXPECT_EQ(t.add(frag(8, 3, false), ref(3), 0, &s), Add::kComplete);
  EXPECT_EQ(t.take(s).size(), 2u);
}

TEST(Tracker, OverlapDropsTheWholeDatagramAndItsLaterFragments) {
  Tracker t(cfg());
  uint32_t s = 0;
  EXPECT_EQ(t.add(frag(0, 16, true), ref(1), 0, &s), Add::kHeld);
  ASSERT_EQ(t.add(frag(8, 16, false), ref(2), 1, &s), Add::kOverlap);
  const auto r = t.take(s);
  ASSERT_EQ(r.size(), 1u);  // the caller drops these and the overlapping one
  EXPECT_EQ(r[0], ref(1));
  t.release(s);
  EXPECT_EQ(t.fragments(), 0u);
  EXPECT_EQ(t.add(frag(16, 8, false), ref(3), 2, &s), Add::kDead);
  // The tombstone leaves at the timeout; the id may then be used again.
  std::vector<void*> out;
  EXPECT_EQ(t.expire(100, 100, [&](void* p) { out.push_back(p); }), 0u);
  EXPECT_EQ(t.datagrams(), 0u);
  EXPECT_EQ(t.stats().timeout, 0u);  // a dropped datagram is not counted twice
  EXPECT_EQ(t.add(frag(0, 8, true), ref(4), 101, &s), Add::kHeld);
  EXPECT_EQ(t.stats().overlap, 1u);
}

TEST(Tracker, InconsistentEndsAreOverlaps) {
  uint32_t s = 0;
  {
    Tracker t(cfg());  // two different last fragments
    EXPECT_EQ(t.add(frag(16, 8, false), ref(1), 0, &s), Add::kHeld);
    EXPECT_EQ(t.add(frag(32, 8, false), ref(2), 0, &s), Add::kOverlap);
  }
  {
    Tracker t(cfg());  // a fragment past the end the last one set
    EXPECT_EQ(t.add(frag(16, 8, false), ref(1), 0, &s), Add::kHeld);
    EXPECT_EQ(t.add(frag(24, 8, true), ref(2), 0, &s), Add::kOverlap);
  }
  {
    Tracker t(cfg());  // a last fragment before bytes already held
    EXPECT_EQ(t.add(frag(32, 8, true), ref(1), 0, &s), Add::kHeld);
    EXPECT_EQ(t.add(frag(8, 8, false), ref(2), 0, &s), Add::kOverlap);
  }
}

TEST(Tracker, MoreThanTheFragmentLimitDropsTheDatagram) {
  Tracker t(cfg());
  uint32_t s = 0;
  for (uint32_t i = 0; i < kMaxFragments; ++i) ASSERT_EQ(t.add(frag(i * 8, 8, true), ref(i + 1), 0, &s), Add::kHeld);
  ASSERT_EQ(t.add(frag(kMaxFragments * 8, 8, false), ref(99), 0, &s), Add::kTooMany);
  EXPECT_EQ(t.take(s).size(), kMaxFragments);
  t.release(s);
  EXPECT_EQ(t.stats().too_many, 1u);
}

TEST(Tracker, BoundsDropTheNewFragmentButLetADatagramComplete) {
  uint32_t s = 0;
  Tracker t(cfg(/*datagrams=*/1, /*fragments=*/1));
  EXPECT_EQ(t.add(frag(0, 8, true, 1), ref(1), 0, &s), Add::kHeld);
  EXPECT_EQ(t.add(frag(0, 8, true, 2), ref(2), 0, &s), Add::kFull);   // no datagram slot
  EXPECT_EQ(t.add(frag(8, 8, true, 1), ref(3), 0, &s), Add::kFull);   // no room, does not complete
  ASSERT_EQ(t.add(frag(8, 2, false, 1), ref(4), 0, &s), Add::kComplete);  // completes: taken
  t.release(s);
  EXPECT_EQ(t.stats().full, 2u);
  EXPECT_EQ(t.add(frag(0, 8, true, 2), ref(5), 0, &s), Add::kHeld);
}

TEST(Tracker, ExpireReturnsTheOldestFirstWithinTheBudget) {
  Tracker t(cfg(8, 64, 100));
  uint32_t s = 0;
  t.add(frag(0, 8, true, 1), ref(1), 0, &s);
  t.add(frag(8, 8, true, 1), ref(2), 5, &s);
  t.add(frag(0, 8, true, 2), ref(3), 10, &s);
  std::vector<void*> out;
  auto sink = [&](void* p) { out.push_back(p); };
  EXPECT_EQ(t.expire(99, 100, sink), 0u);  // the first datagram is 99 ticks old
  EXPECT_EQ(t.expire(100, 1, sink), 0u);   // its two fragments do not fit a budget of one
  EXPECT_EQ(t.expire(100, 100, sink), 2u);
  EXPECT_EQ(out, (std::vector<void*>{ref(1), ref(2)}));
  EXPECT_EQ(t.expire(110, 100, sink), 1u);
  EXPECT_EQ(t.stats().timeout, 2u);
  EXPECT_EQ(t.datagrams(), 0u);
  EXPECT_EQ(t.fragments(), 0u);
}

TEST(Tracker, KeysKeepDatagramsApart) {
  Tracker t(cfg());
  uint32_t s = 0;
  Fragment a = frag(0, 8, true);
  Fragment b = a;
  b.key.vlan = 9;  // same addresses and id, another zone
  Fragment c = a;
  c.key.proto = 6;
  EXPECT_EQ(t.add(a, ref(1), 0, &s), Add::kHeld);
  EXPECT_EQ(t.add(b, ref(2), 0, &s), Add::kHeld);
  EXPECT_EQ(t.add(c, ref(3), 0, &s), Add::kHeld);
  EXPECT_EQ(t.datagrams(), 3u);
}

}  // namespace
}  // namespace cg::defrag
