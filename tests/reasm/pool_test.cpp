// Tests for cg::reasm::Pool: ordering, first-copy-wins overlaps, sequence
// wraparound, budgets, consume and slot reuse.
#include "cuckoogate/reasm/pool.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using cg::reasm::Append;
using cg::reasm::Pool;
using cg::reasm::PoolConfig;

Pool::Ptr make_pool(uint32_t slots = 4, uint32_t slot_bytes = 1024, uint32_t max_pending = 4) {
  PoolConfig cfg;
  cfg.slots = slots;
  cfg.slot_bytes = slot_bytes;
  cfg.max_pending = max_pending;
  const char* err = nullptr;
  Pool::Ptr p = Pool::create(cfg, {}, &err);
  EXPECT_NE(p, nullptr) << (err ? err : "");
  return p;
}

std::string held(const Pool& p, uint32_t h) {
  const auto d = p.data(h);
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

Append add(Pool& p, uint32_t h, uint32_t seq, const std::string& s) {
  return p.append(h, seq, reinterpret_cast<const uint8_t*>(s.data()),
                  static_cast<uint32_t>(s.size()));
}

TEST(ReasmPool, CreateRejectsInvalidConfig) {
  PoolConfig cfg;
  cfg.slots = 0;
  const char* err = nullptr;
  EXPECT_EQ(Pool::create(cfg, {}, &err), nullptr);
  EXPECT_NE(err, nullptr);
  cfg = {};
  cfg.slot_bytes = 10;
  EXPECT_EQ(Pool::create(cfg), nullptr);
  cfg = {};
  cfg.max_pending = cg::reasm::kMaxPending + 1;
  EXPECT_EQ(Pool::create(cfg), nullptr);
}

TEST(ReasmPool, MemoryIsHeadersStackAndBudgetPerSlot) {
  auto p = make_pool(100, 16384 + 512, 4);
  // 100 slot bytes of 16 896 (a multiple of 64) plus 120-byte headers and a
  // 4-byte free-stack entry each, rounded to cache lines.
  EXPECT_EQ(p->memory_bytes(), std::size_t{100} * 16896 + 12032 + 448);
  EXPECT_EQ(p->free_slots(), 100u);
}

TEST(ReasmPool, InOrderSegmentsAppendToContiguousData) {
  auto p = make_pool();
  const uint32_t h = p->begin(1000);
  ASSERT_NE(h, 0u);
  EXPECT_EQ(add(*p, h, 1000, "GET / HT"), Append::kAdvanced);
  EXPECT_EQ(add(*p, h, 1008, "TP/1.1\r\n"), Append::kAdvanced);
  EXPECT_EQ(held(*p, h), "GET / HTTP/1.1\r\n");
  EXPECT_EQ(p->first_seq(h), 1000u);
  EXPECT_EQ(p->next_seq(h), 1016u);
  EXPECT_EQ(p->stats().segments, 2u);
  EXPECT_EQ(p->stats().ooo_held, 0u);
}

TEST(ReasmPool, OutOfOrderSegmentIsHeldUntilTheGapFills) {
  auto p = make_pool();
  const uint32_t h = p->begin(1);
  EXPECT_EQ(add(*p, h, 5, "EFGH"), Append::kHeld);
  EXPECT_EQ(held(*p, h), "");
  EXPECT_EQ(add(*p, h, 1, "ABCD"), Append::kAdvanced);
  EXPECT_EQ(held(*p, h), "ABCDEFGH");
  EXPECT_EQ(p->stats().ooo_held, 1u);
}

TEST(ReasmPool, SeveralHeldRangesMergeWhenTheGapsFill) {
  auto p = make_pool();
  const uint32_t h = p->begin(0);
  EXPECT_EQ(add(*p, h, 9, "JK"), Append::kHeld);
  EXPECT_EQ(add(*p, h, 3, "DE"), Append::kHeld);
  EXPECT_EQ(add(*p, h, 6, "GH"), Append::kHeld);
  EXPECT_EQ(add(*p, h, 5, "F"), Append::kHeld);  // joins DE and GH
  EXPECT_EQ(add(*p, h, 0, "ABC"), Append::kAdvanced);
  EXPECT_EQ(held(*p, h), "ABCDEFGH");
  EXPECT_EQ(add(*p, h, 8, "I"), Append::kAdvanced);
  EXPECT_EQ(held(*p, h), "ABCDEFGHIJK");
}

TEST(ReasmPool, RetransmissionIsIgnoredAndCounted) {
  auto p = make_pool();
  const uint32_t h = p->begin(100);
  add(*p, h, 100, "hello");
  EXPECT_EQ(add(*p, h, 100, "hello"), Append::kNothing);
  EXPECT_EQ(held(*p, h), "hello");
  EXPECT_EQ(p->stats().overlaps, 1u);
  EXPECT_EQ(p->stats().conflicts, 0u);
}

TEST(ReasmPool, OverlapAtTheFrontKeepsTheFirstCopy) {
  // The new segment starts inside the held prefix and goes past it.
  auto p = make_pool();
  const uint32_t h = p->begin(0);
  add(*p, h, 0, "abcdef");
  EXPECT_EQ(add(*p, h, 4, "efZW"), Append::kAdvanced);
  EXPECT_EQ(held(*p, h), "abcdefZW");
  EXPECT_EQ(p->stats().overlaps, 1u);
  EXPECT_EQ(add(*p, h, 6, "zwXY"), Append::kConflict);  // new bytes kept, the old copy too
  EXPECT_EQ(held(*p, h), "abcdefZWXY");
}

TEST(ReasmPool, OverlapAtTheBackKeepsTheFirstCopy) {
  // The new segment ends inside a held out-of-order range.
  auto p = make_pool();
  const uint32_t h = p->begin(0);
  EXPECT_EQ(add(*p, h, 6, "ghij"), Append::kHeld);
  // Different bytes over out-of-order ones: kept, stored, and flagged.
  EXPECT_EQ(add(*p, h, 0, "abcdefGHI"), Append::kConflict);
  EXPECT_EQ(held(*p, h), "abcdefghij");
  EXPECT_EQ(p->stats().overlaps, 1u);
  EXPECT_EQ(p->stats().conflicts, 1u);
}

TEST(ReasmPool, SegmentCoveringHeldRangesFillsOnlyTheHoles) {
  auto p = make_pool();
  const uint32_t h = p->begin(0);
  add(*p, h, 0, "ab");
  add(*p, h, 4, "ef");
  add(*p, h, 8, "ij");
  EXPECT_EQ(add(*p, h, 1, "XXXXXXXXXXXX"), Append::kConflict);  // offsets 1..12
  EXPECT_EQ(held(*p, h), "abXXefXXijXXX");
}

TEST(ReasmPool, SegmentInsideAHeldRangeAddsNothing) {
  auto p = make_pool();
  const uint32_t h = p->begin(0);
  add(*p, h, 10, "klmnop");
  EXPECT_EQ(add(*p, h, 12, "mn"), Append::kNothing);
  EXPECT_EQ(add(*p, h, 12, "MN"), Append::kConflict);
  EXPECT_EQ(p->stats().conflicts, 1u);
  add(*p, h, 0, "abcdefghij");
  EXPECT_EQ(held(*p, h), "abcdefghijklmnop");
}

TEST(ReasmPool, SameBytesOverHeldOnesAreNoConflict) {
  auto p = make_pool();
  const uint32_t h = p->begin(0);
  add(*p, h, 4, "efgh");
  EXPECT_EQ(add(*p, h, 2, "cdefghij"), Append::kHeld);
  EXPECT_EQ(add(*p, h, 0, "abcdefghijk"), Append::kAdvanced);
  EXPECT_EQ(held(*p, h), "abcdefghijk");
  EXPECT_EQ(p->stats().overlaps, 2u);
  EXPECT_EQ(p->stats().conflicts, 0u);
  // Different bytes over the in-order prefix: kept as they are, but flagged
  // (the first copy may never have reached the receiver: a low TTL, a bad
  // checksum), as over out-of-order bytes.
  EXPECT_EQ(add(*p, h, 0, "ABC"), Append::kConflict);
  EXPECT_EQ(held(*p, h), "abcdefghijk");
  EXPECT_EQ(p->stats().conflicts, 1u);
  // Also when the segment brings new bytes after the prefix: those are kept.
  EXPECT_EQ(add(*p, h, 9, "JKLM"), Append::kConflict);
  EXPECT_EQ(held(*p, h), "abcdefghijkLM");
}

TEST(ReasmPool, SequenceNumbersWrapAround) {
  auto p = make_pool();
  const uint32_t h = p->begin(0xfffffffcu);
  EXPECT_EQ(add(*p, h, 0x00000002u, "GHI"), Append::kHeld);    // after the wrap
  EXPECT_EQ(add(*p, h, 0xfffffffcu, "ABCDEF"), Append::kAdvanced);  // crosses 0
  EXPECT_EQ(held(*p, h), "ABCDEFGHI");
  EXPECT_EQ(p->next_seq(h), 5u);
  // A retransmission from before the wrap is old, not 4 GiB ahead.
  EXPECT_EQ(add(*p, h, 0xfffffffeu, "CD"), Append::kNothing);
  EXPECT_EQ(p->stats().overlaps, 1u);
  EXPECT_EQ(p->stats().slot_overflow, 0u);
}

TEST(ReasmPool, BytesBeforeTheStartAreDropped) {
  auto p = make_pool();
  const uint32_t h = p->begin(50);
  EXPECT_EQ(add(*p, h, 45, "xxxxxABC"), Append::kAdvanced);
  EXPECT_EQ(held(*p, h), "ABC");
}

TEST(ReasmPool, SlotBudgetOverflowKeepsWhatFits) {
  auto p = make_pool(2, 64);
  const uint32_t h = p->begin(0);
  const std::string a(60, 'a');
  EXPECT_EQ(add(*p, h, 0, a), Append::kAdvanced);
  EXPECT_EQ(add(*p, h, 60, "bbbbbbbb"), Append::kOverflow);
  EXPECT_EQ(held(*p, h), a + "bbbb");
  EXPECT_EQ(p->stats().slot_overflow, 1u);
  EXPECT_EQ(add(*p, h, 64, "c"), Append::kOverflow);
  EXPECT_EQ(p->stats().slot_overflow, 2u);
  EXPECT_EQ(held(*p, h).size(), 64u);
}

TEST(ReasmPool, OutOfOrderSegmentBeyondTheBudgetOverflows) {
  auto p = make_pool(2, 64);
  const uint32_t h = p->begin(0);
  EXPECT_EQ(add(*p, h, 1000, "far"), Append::kOverflow);
  EXPECT_EQ(p->stats().slot_overflow, 1u);
  EXPECT_EQ(p->stats().ooo_held, 0u);
}

TEST(ReasmPool, FullWindowRefusesANewRangeButMergesIntoHeldOnes) {
  auto p = make_pool(2, 1024, 2);
  const uint32_t h = p->begin(0);
  EXPECT_EQ(add(*p, h, 10, "k"), Append::kHeld);
  EXPECT_EQ(add(*p, h, 20, "u"), Append::kHeld);
  EXPECT_EQ(add(*p, h, 30, "E"), Append::kOverflow);  // a third range
  EXPECT_EQ(p->stats().window_full, 1u);
  EXPECT_EQ(add(*p, h, 11, "l"), Append::kHeld);  // touches the first: still two
  std::string all(22, '.');
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<char>('a' + i % 26);
  EXPECT_EQ(add(*p, h, 0, all.substr(0, 21)), Append::kAdvanced);
  EXPECT_EQ(held(*p, h), all.substr(0, 10) + "kl" + all.substr(12, 8) + "u");
}

TEST(ReasmPool, ExhaustedPoolReturnsNoSlotAndCounts) {
  auto p = make_pool(2);
  const uint32_t a = p->begin(0);
  const uint32_t b = p->begin(0);
  EXPECT_NE(a, 0u);
  EXPECT_NE(b, 0u);
  EXPECT_NE(a, b);
  EXPECT_EQ(p->begin(0), 0u);
  EXPECT_EQ(p->stats().pool_exhausted, 1u);
  EXPECT_EQ(p->stats().in_use, 2u);
  EXPECT_TRUE(p->release(a));
  EXPECT_NE(p->begin(0), 0u);
}

TEST(ReasmPool, ReleasedSlotIsReusedClean) {
  auto p = make_pool(1);
  uint32_t h = p->begin(0);
  add(*p, h, 0, "old");
  add(*p, h, 10, "pending");
  ASSERT_TRUE(p->release(h));
  EXPECT_EQ(p->stats().in_use, 0u);
  h = p->begin(500);
  ASSERT_NE(h, 0u);
  EXPECT_EQ(held(*p, h), "");
  EXPECT_EQ(add(*p, h, 503, "D"), Append::kHeld);
  EXPECT_EQ(add(*p, h, 500, "ABC"), Append::kAdvanced);
  EXPECT_EQ(held(*p, h), "ABCD");  // nothing of the old stream's pending bytes
}

TEST(ReasmPool, BadHandlesAreRefused) {
  auto p = make_pool(2);
  const uint8_t b = 'x';
  const uint32_t first = p->begin(0);
  ASSERT_TRUE(p->release(first));
  EXPECT_EQ(p->append(0, 0, &b, 1), Append::kBadHandle);
  EXPECT_EQ(p->append(first, 0, &b, 1), Append::kBadHandle);  // released
  EXPECT_EQ(p->append(first + 1, 0, &b, 1), Append::kBadHandle);  // never taken
  EXPECT_EQ(p->append(first + 2, 0, &b, 1), Append::kBadHandle);  // index out of range
  const uint32_t h = p->begin(0);
  EXPECT_TRUE(p->release(h));
  EXPECT_FALSE(p->release(h));
  EXPECT_FALSE(p->consume(h, 1));
  EXPECT_TRUE(p->data(h).empty());
  EXPECT_EQ(p->free_slots(), 2u);
  EXPECT_EQ(p->stats().segments, 0u);
}

TEST(ReasmPool, StaleHandleIsRefusedAfterTheSlotIsReused) {
  auto p = make_pool(1);
  const uint32_t old = p->begin(0);
  add(*p, old, 0, "old flow");
  ASSERT_TRUE(p->release(old));
  const uint32_t h = p->begin(100);
  ASSERT_NE(h, 0u);
  EXPECT_NE(h, old);
  add(*p, h, 100, "new flow");
  EXPECT_EQ(add(*p, old, 8, "!"), Append::kBadHandle);
  EXPECT_TRUE(p->data(old).empty());
  EXPECT_FALSE(p->release(old));
  EXPECT_EQ(held(*p, h), "new flow");
}

TEST(ReasmPool, HandlesStayUniqueAcrossGenerationWrap) {
  auto p = make_pool(1);
  uint32_t prev = p->begin(0);
  for (int i = 0; i < 10000; ++i) {
    ASSERT_TRUE(p->release(prev));
    const uint32_t h = p->begin(0);
    ASSERT_NE(h, 0u);
    ASSERT_NE(h, prev);
    ASSERT_TRUE(p->data(prev).empty() && p->first_seq(prev) == 0 && !p->release(prev));
    prev = h;
  }
}

TEST(ReasmPool, IdleSlotIsTakenOverWhenThePoolIsFull) {
  PoolConfig cfg;
  cfg.slots = 2;
  cfg.slot_bytes = 256;
  cfg.idle_ticks = 100;
  auto p = Pool::create(cfg);
  const uint32_t a = p->begin(0, 0);
  const uint32_t b = p->begin(0, 50);
  add(*p, a, 0, "aaa");
  EXPECT_EQ(p->begin(0, 100), 0u);  // a is 100 ticks old: not idle yet
  EXPECT_EQ(p->stats().pool_exhausted, 1u);
  const uint32_t c = p->begin(7, 101);
  ASSERT_NE(c, 0u);
  EXPECT_EQ(p->stats().reclaimed, 1u);
  EXPECT_EQ(add(*p, a, 3, "a"), Append::kBadHandle);  // a's flow lost its slot
  EXPECT_TRUE(p->data(c).empty());
  EXPECT_EQ(p->first_seq(c), 7u);
  // b is kept busy by its appends: not idle at 200.
  EXPECT_EQ(p->append(b, 0, reinterpret_cast<const uint8_t*>("b"), 1, 150), Append::kAdvanced);
  EXPECT_EQ(p->begin(0, 200), 0u);
  EXPECT_EQ(p->stats().in_use, 2u);
}

TEST(ReasmPool, ReclaimFreesOnlyIdleSlots) {
  PoolConfig cfg;
  cfg.slots = 4;
  cfg.slot_bytes = 256;
  cfg.idle_ticks = 10;
  auto p = Pool::create(cfg);
  const uint32_t old1 = p->begin(0, 0);
  const uint32_t old2 = p->begin(0, 5);
  const uint32_t fresh = p->begin(0, 20);
  EXPECT_EQ(p->reclaim(21, 4), 2u);
  EXPECT_EQ(p->free_slots(), 3u);
  EXPECT_EQ(p->stats().reclaimed, 2u);
  EXPECT_FALSE(p->release(old1));
  EXPECT_FALSE(p->release(old2));
  EXPECT_TRUE(p->release(fresh));
  // Without idle_ticks nothing is ever idle.
  auto q = make_pool(1);
  q->begin(0, 0);
  EXPECT_EQ(q->reclaim(~uint64_t{0}, 1), 0u);
  EXPECT_EQ(q->begin(0, ~uint64_t{0}), 0u);
}

TEST(ReasmPool, ConsumeDropsAJudgedRequest) {
  auto p = make_pool();
  const uint32_t h = p->begin(10);
  add(*p, h, 10, "req1req2");
  add(*p, h, 20, "XY");  // held: offset 10
  ASSERT_TRUE(p->consume(h, 4));
  EXPECT_EQ(held(*p, h), "req2");
  EXPECT_EQ(p->first_seq(h), 14u);
  EXPECT_EQ(add(*p, h, 18, "ab"), Append::kAdvanced);
  EXPECT_EQ(held(*p, h), "req2abXY");
  // A retransmission of consumed bytes is old.
  EXPECT_EQ(add(*p, h, 10, "req1"), Append::kNothing);
  EXPECT_EQ(p->stats().overlaps, 1u);
}

TEST(ReasmPool, ConsumePastTheHeldBytesSkipsABody) {
  auto p = make_pool();
  const uint32_t h = p->begin(0);
  add(*p, h, 0, "HEADbo");       // head (4) + the body's first bytes
  add(*p, h, 12, "NEXT");        // held: the next request, body is 8 bytes
  ASSERT_TRUE(p->consume(h, 12));  // head + body
  EXPECT_EQ(held(*p, h), "NEXT");
  // The body's missing bytes arrive late: dropped, not counted as overlaps.
  EXPECT_EQ(add(*p, h, 6, "dyBODY"), Append::kNothing);
  EXPECT_EQ(p->stats().overlaps, 0u);
  EXPECT_EQ(add(*p, h, 16, "!"), Append::kAdvanced);
  EXPECT_EQ(held(*p, h), "NEXT!");
  EXPECT_FALSE(p->consume(h, 1u << 30));
}

// Random segmentations (random order, duplicates with other contents,
// overlaps) of a stream: the held bytes always equal the stream's prefix, and
// when every byte has been sent at least once, the whole stream. Seeded;
// CG_REASM_SEED replays one seed.
TEST(ReasmPool, AnySegmentationGivesTheStream) {
  uint64_t seed0 = 1;
  if (const char* s = std::getenv("CG_REASM_SEED")) seed0 = std::strtoull(s, nullptr, 0);
  for (uint64_t seed = seed0; seed < seed0 + 300; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    auto p = make_pool(1, 4096, 8);
    const uint32_t isn = static_cast<uint32_t>(rng());
    std::vector<uint8_t> stream(1 + rng() % 3000);
    for (auto& b : stream) b = static_cast<uint8_t>(rng());
    // Cut into segments, shuffle, add duplicates with garbage after their original.
    struct Seg { uint32_t off, len; bool garbage; };
    std::vector<Seg> segs;
    for (uint32_t off = 0; off < stream.size();) {
      const uint32_t len = std::min<uint32_t>(1 + rng() % 400, stream.size() - off);
      segs.push_back({off, len, false});
      off += len;
    }
    std::shuffle(segs.begin(), segs.end(), rng);
    const std::size_t originals = segs.size();
    for (std::size_t i = 0; i < originals; ++i)
      if (rng() % 3 == 0) {
        const uint32_t off = rng() % stream.size();
        const uint32_t len = std::min<uint32_t>(1 + rng() % 500, stream.size() - off);
        segs.insert(segs.begin() + static_cast<long>(i + 1 + rng() % (segs.size() - i)),
                    {off, len, true});
      }
    const uint32_t h = p->begin(isn);
    std::vector<std::pair<uint32_t, uint32_t>> sent;  // first copies
    std::vector<uint8_t> buf;
    for (const Seg& s : segs) {
      buf.assign(stream.begin() + s.off, stream.begin() + s.off + s.len);
      // A garbage copy differs only where the original was already sent:
      // first copy wins, so its bytes must never show.
      if (s.garbage)
        for (uint32_t k = 0; k < s.len; ++k) {
          bool was_sent = false;
          for (auto [o, l] : sent) was_sent |= s.off + k >= o && s.off + k < o + l;
          if (was_sent) buf[k] ^= 0x5a;
        }
      const Append r = p->append(h, isn + s.off, buf.data(), s.len);
      ASSERT_NE(r, Append::kBadHandle);
      if (r == Append::kOverflow) {  // 4096 bytes never overflow: a full window
        ASSERT_GT(p->stats().window_full, 0u);
        ASSERT_EQ(p->stats().slot_overflow, 0u);
      } else {
        sent.push_back({s.off, s.len});
      }
      const auto d = p->data(h);
      ASSERT_LE(d.size(), stream.size());
      ASSERT_EQ(std::memcmp(d.data(), stream.data(), d.size()), 0);
    }
    if (p->stats().window_full == 0) {
      ASSERT_EQ(p->data(h).size(), stream.size());
      ASSERT_EQ(p->next_seq(h), static_cast<uint32_t>(isn + stream.size()));
    }
  }
}

}  // namespace
