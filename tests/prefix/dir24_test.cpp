// Dir24 (app/prefix): the IPv4 longest-prefix table the workers read.
// Checked against a brute-force model, at the edges of every prefix, with
// its memory budget, its group reclamation, and with a reader running
// while prefixes come and go.
#include "cuckoogate/prefix/dir24.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <thread>
#include <utility>

namespace {

using cg::prefix::Dir24;
using cg::prefix::Reclaimer;
using Status = Dir24::Status;

uint32_t ip(unsigned a, unsigned b, unsigned c, unsigned d) { return (a << 24) | (b << 16) | (c << 8) | d; }
uint32_t mask(unsigned len) { return len == 0 ? 0 : ~uint32_t{0} << (32 - len); }

std::unique_ptr<Dir24> make(Dir24::Options o = {}) {
  std::string err;
  auto t = Dir24::create(o, &err);
  EXPECT_NE(t, nullptr) << err;
  return t;
}

// The longest prefix in `rules` covering addr: (depth, value), (0, 0) if none.
using Model = std::map<std::pair<uint32_t, unsigned>, uint32_t>;
std::pair<unsigned, uint32_t> expected(const Model& rules, uint32_t addr) {
  for (unsigned l = 32; l >= 1; --l) {
    auto it = rules.find({addr & mask(l), l});
    if (it != rules.end()) return {l, it->second};
  }
  return {0, 0};
}

void expect_matches(const Dir24& t, const Model& rules, uint32_t addr) {
  const uint32_t e = t.lookup(addr);
  const auto [len, value] = expected(rules, addr);
  ASSERT_EQ(Dir24::depth(e), len) << std::hex << addr;
  if (len != 0) {
    ASSERT_EQ(Dir24::value(e), value) << std::hex << addr;
  }
}

TEST(Dir24, LongestPrefixWinsAtEveryEdge) {
  auto t = make();
  ASSERT_EQ(t->add(ip(10, 0, 0, 0), 8, 1), Status::kOk);
  ASSERT_EQ(t->add(ip(10, 1, 0, 0), 16, 2), Status::kOk);
  ASSERT_EQ(t->add(ip(10, 1, 2, 0), 24, 3), Status::kOk);
  ASSERT_EQ(t->add(ip(10, 1, 2, 128), 25, 4), Status::kOk);
  ASSERT_EQ(t->add(ip(10, 1, 2, 200), 32, 5), Status::kOk);
  const std::pair<uint32_t, unsigned> cases[] = {
      {ip(9, 255, 255, 255), 0}, {ip(10, 0, 0, 0), 1},     {ip(10, 255, 255, 255), 1},
      {ip(11, 0, 0, 0), 0},      {ip(10, 1, 0, 0), 2},     {ip(10, 1, 255, 255), 2},
      {ip(10, 0, 255, 255), 1},  {ip(10, 2, 0, 0), 1},     {ip(10, 1, 2, 0), 3},
      {ip(10, 1, 2, 127), 3},    {ip(10, 1, 2, 128), 4},   {ip(10, 1, 2, 199), 4},
      {ip(10, 1, 2, 200), 5},    {ip(10, 1, 2, 201), 4},   {ip(10, 1, 2, 255), 4},
      {ip(10, 1, 3, 0), 2},      {ip(10, 1, 1, 255), 2},
  };
  for (auto [addr, value] : cases) {
    const uint32_t e = t->lookup(addr);
    EXPECT_EQ(value == 0 ? 0u : Dir24::value(e), value) << std::hex << addr;
    EXPECT_EQ(Dir24::depth(e) == 0, value == 0) << std::hex << addr;
  }
  EXPECT_EQ(Dir24::depth(t->lookup(ip(10, 1, 2, 200))), 32u);
  EXPECT_EQ(t->size(), 5u);
  EXPECT_EQ(t->groups_in_use(), 1u);

  // Removing a middle prefix hands its addresses to the next one out.
  ASSERT_EQ(t->remove(ip(10, 1, 0, 0), 16), Status::kOk);
  EXPECT_EQ(Dir24::value(t->lookup(ip(10, 1, 0, 0))), 1u);
  EXPECT_EQ(Dir24::value(t->lookup(ip(10, 1, 2, 5))), 3u);
  ASSERT_EQ(t->remove(ip(10, 1, 2, 0), 24), Status::kOk);
  EXPECT_EQ(Dir24::value(t->lookup(ip(10, 1, 2, 5))), 1u);    // in the group, below /25
  EXPECT_EQ(Dir24::value(t->lookup(ip(10, 1, 2, 130))), 4u);  // the /25 still there
  ASSERT_EQ(t->remove(ip(10, 1, 2, 128), 25), Status::kOk);
  ASSERT_EQ(t->remove(ip(10, 1, 2, 200), 32), Status::kOk);
  EXPECT_EQ(t->groups_in_use(), 0u);  // the /24 is one tbl24 entry again
  EXPECT_EQ(Dir24::value(t->lookup(ip(10, 1, 2, 200))), 1u);
  ASSERT_EQ(t->remove(ip(10, 0, 0, 0), 8), Status::kOk);
  EXPECT_EQ(Dir24::depth(t->lookup(ip(10, 1, 2, 200))), 0u);
  EXPECT_EQ(t->size(), 0u);
}

TEST(Dir24, BadArgumentsAndDuplicatesChangeNothing) {
  auto t = make();
  EXPECT_EQ(t->add(ip(10, 0, 0, 0), 0, 1), Status::kInvalid);
  EXPECT_EQ(t->add(ip(10, 0, 0, 0), 33, 1), Status::kInvalid);
  EXPECT_EQ(t->add(ip(10, 0, 0, 1), 24, 1), Status::kInvalid);  // host bits
  EXPECT_EQ(t->add(ip(10, 0, 0, 0), 24, Dir24::kMaxValue + 1), Status::kInvalid);
  ASSERT_EQ(t->add(ip(10, 0, 0, 0), 24, Dir24::kMaxValue), Status::kOk);
  EXPECT_EQ(Dir24::value(t->lookup(ip(10, 0, 0, 9))), Dir24::kMaxValue);
  EXPECT_EQ(t->add(ip(10, 0, 0, 0), 24, 7), Status::kExists);
  EXPECT_EQ(Dir24::value(t->lookup(ip(10, 0, 0, 9))), Dir24::kMaxValue);  // not overwritten
  EXPECT_EQ(t->remove(ip(10, 0, 0, 0), 25), Status::kNotFound);
  EXPECT_EQ(t->remove(ip(10, 0, 0, 1), 24), Status::kInvalid);
  EXPECT_EQ(t->remove(ip(10, 0, 1, 0), 24), Status::kNotFound);
  uint32_t v = 0;
  EXPECT_TRUE(t->find(ip(10, 0, 0, 0), 24, &v));
  EXPECT_EQ(v, Dir24::kMaxValue);
  EXPECT_FALSE(t->find(ip(10, 0, 0, 0), 23, &v));
  EXPECT_EQ(t->size(), 1u);
}

TEST(Dir24, WholeSpacePrefixesAndHostRoutes) {
  auto t = make();
  ASSERT_EQ(t->add(ip(128, 0, 0, 0), 1, 1), Status::kOk);  // half the space: 2^23 entries
  ASSERT_EQ(t->add(ip(255, 255, 255, 255), 32, 2), Status::kOk);
  ASSERT_EQ(t->add(ip(0, 0, 0, 0), 32, 3), Status::kOk);
  EXPECT_EQ(Dir24::value(t->lookup(ip(128, 0, 0, 0))), 1u);
  EXPECT_EQ(Dir24::value(t->lookup(ip(255, 255, 255, 254))), 1u);
  EXPECT_EQ(Dir24::value(t->lookup(ip(255, 255, 255, 255))), 2u);
  EXPECT_EQ(Dir24::value(t->lookup(0)), 3u);
  EXPECT_EQ(Dir24::depth(t->lookup(1)), 0u);
  EXPECT_EQ(Dir24::depth(t->lookup(ip(127, 255, 255, 255))), 0u);
  ASSERT_EQ(t->remove(ip(128, 0, 0, 0), 1), Status::kOk);
  EXPECT_EQ(Dir24::depth(t->lookup(ip(200, 1, 1, 1))), 0u);
  EXPECT_EQ(Dir24::value(t->lookup(ip(255, 255, 255, 255))), 2u);
}

// Random adds and removes of nested prefixes in two /16s, every address of
// both checked against the model after every 200 operations and the edges
// of each changed prefix after every one.
TEST(Dir24, RandomChangesMatchABruteForceModel) {
  auto t = make();
  Model rules;
  std::mt19937 rng(12345);
  const uint32_t bases[] = {ip(10, 0, 0, 0), ip(172, 16, 0, 0)};
  auto check_all = [&] {
    for (uint32_t base : bases)
      for (uint32_t a = 0; a < 65536; ++a) expect_matches(*t, rules, base | a);
  };
  for (int op = 0; op < 6000; ++op) {
    // Lengths weighted towards the interesting ones: around /24 and long.
    static const unsigned lens[] = {12, 16, 18, 20, 22, 23, 24, 24, 25, 26, 28, 30, 31, 32, 32};
    const unsigned len = lens[rng() % std::size(lens)];
    const uint32_t base = bases[rng() % 2];
    // Addresses drawn from a few /24s so that prefixes overlap often.
    const uint32_t addr = (base | ((rng() % 6) << 8) | (rng() % 256)) & mask(len);
    const auto key = std::make_pair(addr, len);
    const bool present = rules.count(key) != 0;
    if (present && rng() % 3 != 0) {
      ASSERT_EQ(t->remove(addr, len), Status::kOk);
      rules.erase(key);
    } else if (!present) {
      const uint32_t value = rng() % (Dir24::kMaxValue + 1);
      ASSERT_EQ(t->add(addr, len, value), Status::kOk);
      rules[key] = value;
    } else {
      ASSERT_EQ(t->add(addr, len, 1), Status::kExists);
    }
    const uint32_t last = addr | ~mask(len);
    for (uint32_t a : {addr, last, addr - 1, last + 1, static_cast<uint32_t>(addr | (~mask(len) & rng()))})
      ASSERT_NO_FATAL_FAILURE(expect_matches(*t, rules, a));
    if (op % 200 == 199) {
      ASSERT_NO_FATAL_FAILURE(check_all());
    }
  }
  EXPECT_EQ(t->size(), rules.size());
  // Drain: everything goes, groups included.
  for (const auto& [k, v] : Model(rules)) {
    ASSERT_EQ(t->remove(k.first, k.second), Status::kOk);
    rules.erase(k);
  }
  ASSERT_NO_FATAL_FAILURE(check_all());
  EXPECT_EQ(t->groups_in_use(), 0u);
}

TEST(Dir24, TheRuleIndexGrowsPastAMillionPrefixesAndShrinksAfterMassDeletes) {
  cg::prefix::Budget budget;  // no limit: counts what is charged
  Dir24::Options o;
  o.budget = &budget;
  auto t = make(o);
  for (uint32_t i = 0; i < (1u << 20); ++i) ASSERT_EQ(t->add(i << 8, 24, i), Status::kOk);
  EXPECT_EQ(t->size(), 1u << 20);
  for (uint32_t i = 0; i < (1u << 20); i += 997) {
    EXPECT_EQ(Dir24::value(t->lookup((i << 8) | 77)), i);
    uint32_t v = 0;
    EXPECT_TRUE(t->find(i << 8, 24, &v));
  }
  const auto m = t->memory();
  EXPECT_GE(m.index, (1u << 20) * 8u);            // a slot each, at most 3/4 full
  EXPECT_LE(m.index, (1u << 20) * 8u * 8 / 3);
  EXPECT_GE(m.tbl24, (1u << 20) * 4u);            // 1 M entries written
  for (uint32_t i = 0; i < (1u << 20); i += 2) ASSERT_EQ(t->remove(i << 8, 24), Status::kOk);
  for (uint32_t i = 0; i < 4096; ++i) EXPECT_EQ(Dir24::depth(t->lookup(i << 8)), (i % 2) ? 24u : 0u) << i;
  // Half deleted: the index keeps its size (at most 1/8 full shrinks it).
  EXPECT_EQ(t->memory().index, m.index);
  // The index after half a million backward-shift deletions: every
  // survivor found with its value, no deleted one.
  for (uint32_t i = 0; i < (1u << 20); ++i) {
    uint32_t v = 0;
    ASSERT_EQ(t->find(i << 8, 24, &v), i % 2 == 1) << i;
    if (i % 2 == 1) {
      ASSERT_EQ(v, i) << i;
    }
  }
  // All but 1000 gone: the index is halved down to at most 1/4 full (4096
  // slots), charged as such, and still finds every survivor.
  for (uint32_t i = 1; i < (1u << 20) - 2000; i += 2) ASSERT_EQ(t->remove(i << 8, 24), Status::kOk);
  EXPECT_EQ(t->size(), 1000u);
  EXPECT_EQ(t->memory().index, 4096u * 8);
  EXPECT_EQ(budget.used, t->memory().index + t->memory().groups);
  for (uint32_t i = (1u << 20) - 2000; i < (1u << 20); ++i) {
    uint32_t v = 0;
    ASSERT_EQ(t->find(i << 8, 24, &v), i % 2 == 1) << i;
    EXPECT_EQ(Dir24::depth(t->lookup((i << 8) | 5)), i % 2 == 1 ? 24u : 0u) << i;
  }
}

// A fake reclaimer: a token per retirement; readers "quiescent" once the
// test says so.
struct FakeQsbr {
  uint64_t started = 0, quiescent_up_to = 0;
  int waits = 0;
  static Reclaimer of(FakeQsbr* q) {
    Reclaimer r;
    r.ctx = q;
    r.start = [](void* c) noexcept { return ++static_cast<FakeQsbr*>(c)->started; };
    r.check = [](void* c, uint64_t token, bool wait) noexcept {
      auto* q = static_cast<FakeQsbr*>(c);
      if (wait && token > q->quiescent_up_to) {
        ++q->waits;
        q->quiescent_up_to = token;  // the readers moved on while we waited
      }
      return token <= q->quiescent_up_to;
    };
    return r;
  }
};

// Fill the one chunk the budget allows (256 groups), so the next group can
// only come from a retired one. The retired and the reusing /24 have
// different covering /8s, so a reused group that was not refilled shows.
TEST(Dir24, RetiredGroupsAreReusedOnlyAfterTheReaders) {
  FakeQsbr q;
  Dir24::Options o;
  o.reclaim = FakeQsbr::of(&q);
  cg::prefix::Budget budget{256 * 1024 + 8 * 1024, 0};  // one chunk + the smallest index
  o.budget = &budget;
  auto t = make(o);
  ASSERT_EQ(t->add(ip(10, 0, 0, 0), 8, 100), Status::kOk);
  ASSERT_EQ(t->add(ip(11, 0, 0, 0), 8, 200), Status::kOk);
  for (uint32_t i = 0; i < 256; ++i) ASSERT_EQ(t->add(ip(10, 0, i, 128), 25, i), Status::kOk) << i;
  EXPECT_EQ(t->groups_in_use(), 256u);
  EXPECT_EQ(budget.used, 256u * 1024 + 8 * 1024);
  const auto before = t->memory();
  EXPECT_EQ(t->add(ip(11, 1, 0, 128), 25, 1), Status::kNoMemory);
  EXPECT_EQ(Dir24::value(t->lookup(ip(11, 1, 0, 200))), 200u);  // nothing half-added
  EXPECT_EQ(t->size(), 258u);
  // A /24 (no group needed) still fits.
  ASSERT_EQ(t->add(ip(10, 2, 0, 0), 24, 9), Status::kOk);

  ASSERT_EQ(t->remove(ip(10, 0, 7, 128), 25), Status::kOk);  // group retired, token 1
  EXPECT_EQ(q.started, 1u);
  EXPECT_EQ(t->groups_in_use(), 255u);
  EXPECT_EQ(Dir24::value(t->lookup(ip(10, 0, 7, 200))), 100u);  // the /8 again
  // Readers not quiescent yet and no budget: the writer waits for them.
  ASSERT_EQ(t->add(ip(11, 1, 0, 128), 25, 1), Status::kOk);
  EXPECT_EQ(q.waits, 1);
  EXPECT_EQ(Dir24::value(t->lookup(ip(11, 1, 0, 200))), 1u);
  // The reused group was refilled with this /24's answer, not the old one's.
  EXPECT_EQ(Dir24::value(t->lookup(ip(11, 1, 0, 100))), 200u);
  EXPECT_EQ(Dir24::depth(t->lookup(ip(11, 1, 0, 100))), 8u);
  EXPECT_EQ(Dir24::value(t->lookup(ip(10, 0, 7, 200))), 100u);

  // Quiescent already: reused without waiting.
  ASSERT_EQ(t->remove(ip(10, 0, 8, 128), 25), Status::kOk);
  q.quiescent_up_to = q.started;
  ASSERT_EQ(t->add(ip(11, 1, 1, 128), 25, 2), Status::kOk);
  EXPECT_EQ(q.waits, 1);
  EXPECT_EQ(Dir24::value(t->lookup(ip(11, 1, 1, 5))), 200u);
  EXPECT_EQ(t->memory().groups, before.groups);  // no chunk beyond the budget
}

// Two tables charged to one budget: what one takes, the other cannot; what
// a table held is given back when it goes.
TEST(Dir24, TablesShareABudget) {
  cg::prefix::Budget budget{2 * 256 * 1024 + 16 * 1024, 0};
  Dir24::Options o;
  o.budget = &budget;
  auto a = make(o);
  auto b = make(o);
  // a takes both chunks' worth of groups (257 distinct /24s need two).
  for (uint32_t i = 0; i < 257; ++i) ASSERT_EQ(a->add(ip(10, i / 256, i % 256, 128), 25, i), Status::kOk) << i;
  EXPECT_EQ(budget.used, 2u * 256 * 1024 + 8 * 1024);
  EXPECT_EQ(b->add(ip(10, 0, 0, 0), 24, 1), Status::kOk);  // its index: the last 8 KiB
  EXPECT_EQ(b->add(ip(10, 0, 0, 128), 25, 1), Status::kNoMemory);  // no chunk left for b
  a.reset();
  EXPECT_EQ(budget.used, 8u * 1024);  // b's index alone
  EXPECT_EQ(b->add(ip(10, 0, 0, 128), 25, 1), Status::kOk);
  EXPECT_EQ(Dir24::value(b->lookup(ip(10, 0, 0, 130))), 1u);
}

TEST(Dir24, WithoutABudgetGroupsGrowAndStayBoundedByUse) {
  FakeQsbr q;
  Dir24::Options o;
  o.reclaim = FakeQsbr::of(&q);
  auto t = make(o);
  // A retired group is not reused while readers may hold it: a fresh one
  // is taken instead (there is room).
  ASSERT_EQ(t->add(ip(10, 0, 0, 128), 25, 1), Status::kOk);
  ASSERT_EQ(t->remove(ip(10, 0, 0, 128), 25), Status::kOk);
  for (uint32_t i = 0; i < 300; ++i) ASSERT_EQ(t->add(ip(10, 0, i, 0), 32, i), Status::kOk);
  EXPECT_EQ(q.waits, 0);
  EXPECT_EQ(t->groups_in_use(), 300u);
  EXPECT_EQ(t->memory().groups, 2u * 256 * 1024);  // 301 groups ever: two chunks
}

// One reader thread looks up addresses under two stable /16s while the
// writer adds and removes longer and shorter prefixes over them, with a
// QSBR-style reclaimer (the reader reports after each pass). The reader
// must always find its /16 or a prefix inside it, never nothing and never
// an answer from the other /16.
TEST(Dir24, AReaderNeverMissesWhilePrefixesChange) {
  struct Qsbr {
    std::atomic<uint64_t> token{0};
    std::atomic<uint64_t> reader_seen{0};
    std::atomic<bool> stop{false};
  } q;
  Dir24::Options o;
  o.reclaim.ctx = &q;
  o.reclaim.start = [](void* c) noexcept {
    // acq_rel: the retirement (the tbl24 store before it) is ordered before
    // the new token any reader can observe.
    return static_cast<Qsbr*>(c)->token.fetch_add(1, std::memory_order_acq_rel) + 1;
  };
  o.reclaim.check = [](void* c, uint64_t tok, bool wait) noexcept {
    auto* q = static_cast<Qsbr*>(c);
    while (q->reader_seen.load(std::memory_order_acquire) < tok) {
      if (!wait) return false;
      std::this_thread::yield();
    }
    return true;
  };
  cg::prefix::Budget budget{256 * 1024 + 64 * 1024, 0};  // one chunk: reuse is forced
  o.budget = &budget;
  auto t = make(o);
  // Values: 1..999 inside 10.0/16, 1000..1999 inside 10.1/16.
  ASSERT_EQ(t->add(ip(10, 0, 0, 0), 16, 1), Status::kOk);
  ASSERT_EQ(t->add(ip(10, 1, 0, 0), 16, 1000), Status::kOk);
  std::atomic<uint64_t> bad{0}, lookups{0};
  std::thread reader([&] {
    std::mt19937 rng(7);
    while (!q.stop.load(std::memory_order_relaxed)) {
      // A pass holds no reference across the report below.
      const uint64_t tok = q.token.load(std::memory_order_acquire);
      for (int i = 0; i < 256; ++i) {
        const uint32_t half = rng() % 2;
        const uint32_t a = ip(10, half, rng() % 8, rng() % 256);
        const uint32_t e = t->lookup(a);
        const uint32_t v = Dir24::value(e);
        const bool ok = Dir24::depth(e) >= 16 && (half == 0 ? v < 1000 : (v >= 1000 && v < 2000));
        if (!ok) bad.fetch_add(1, std::memory_order_relaxed);
      }
      lookups.fetch_add(256, std::memory_order_relaxed);
      q.reader_seen.store(tok, std::memory_order_release);  // quiescent
    }
  });
  std::mt19937 rng(99);
  Model present;
  for (int op = 0; op < 40000; ++op) {
    const uint32_t half = rng() % 2;
    static const unsigned lens[] = {20, 24, 25, 26, 28, 32};
    const unsigned len = lens[rng() % std::size(lens)];
    const uint32_t addr = ip(10, half, rng() % 8, rng() % 256) & mask(len);
    const auto key = std::make_pair(addr, len);
    if (present.count(key) != 0) {
      ASSERT_EQ(t->remove(addr, len), Status::kOk);
      present.erase(key);
    } else {
      const uint32_t v = (half == 0 ? 2 : 1001) + rng() % 900;
      const Status s = t->add(addr, len, v);
      ASSERT_TRUE(s == Status::kOk || s == Status::kNoMemory);
      if (s == Status::kOk) present[key] = v;
    }
  }
  q.stop.store(true);
  reader.join();
  EXPECT_EQ(bad.load(), 0u) << "of " << lookups.load();
  EXPECT_GT(lookups.load(), 0u);
}

}  // namespace
