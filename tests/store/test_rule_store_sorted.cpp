// RuleStore::apply for changes whose keys never decrease (what
// Blocklist::apply_group sends: the Redis sync's catch-up batches). Such a
// group takes an ordered path (one finder pass, new rules through the ordered
// inserter, records encoded without a map of touched keys); these tests pin
// that it gives what apply() of the same changes gives in any other order
// that keeps each key's changes in their order, in memory and after a
// restart, and that readers running meanwhile always find the rules the
// group does not touch. Randomised: CG_SEED=<n> replays a seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cuckoogate/store/rule_store.hpp"
#include "test_util.hpp"

namespace cg::store {
namespace {

constexpr std::int64_t kNow = 1'700'000'000'000;

std::unique_ptr<RuleStore> open_store(const std::string& dir) {
  RuleStore::Options o;
  o.state_dir = dir;
  o.clock = [] { return kNow; };
  std::unique_ptr<RuleStore> s;
  const Status st = RuleStore::open(o, &s);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return s;
}

// What a rule is apart from its id (ids follow the order records are made in).
using Shown = std::tuple<std::int64_t, std::int64_t, std::string, std::string>;  // added, expiry, text, set
std::map<std::string, Shown> contents(const RuleStore& s) {
  std::map<std::string, Shown> m;
  for (auto c = s.list(); c.next();)
    m[std::string(c.key())] = {c.value().added_unix_ms, c.value().expiry_unix_ms, c.value().text.str(),
                               s.set_name(c.value().set_id)};
  return m;
}

struct Op {
  RuleStore::Change::Op op;
  std::string key, text, set;
  std::int64_t ttl;
};

std::vector<RuleStore::Change> changes_of(const std::vector<Op>& ops) {
  std::vector<RuleStore::Change> c;
  for (const Op& o : ops) c.push_back({o.op, o.key, o.text, o.ttl, o.set});
  return c;
}

std::vector<Op> random_ops(std::mt19937& rng, std::size_t n) {
  std::vector<Op> ops;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string key = "k" + std::to_string(rng() % 30);
    switch (rng() % 5) {
      case 0: ops.push_back({RuleStore::Change::Op::del, key, {}, {}, 0}); break;
      case 1: ops.push_back({RuleStore::Change::Op::add, key, "t" + std::to_string(i), {}, 60000}); break;
      case 2: ops.push_back({RuleStore::Change::Op::add, key, {}, "feed", 0}); break;
      case 3: ops.push_back({RuleStore::Change::Op::add, key, {}, {}, 5000}); break;
      default: ops.push_back({RuleStore::Change::Op::add, key, {}, {}, 0}); break;
    }
  }
  return ops;
}

// Two stores in dir/<tag>a and dir/<tag>b holding the same random rules.
struct Twins {
  std::string a_dir, b_dir;
  std::unique_ptr<RuleStore> a, b;
};
// Closes both stores and reopens b from its journal: it must hold what a held.
void reopen_b_expecting_a(Twins& t) {
  const auto want = contents(*t.a);
  t.a.reset();
  t.b.reset();
  t.b = open_store(t.b_dir);
  ASSERT_TRUE(t.b);
  EXPECT_EQ(contents(*t.b), want);
}

Twins twin_stores(const std::string& dir, const std::string& tag, std::mt19937& rng) {
  Twins t{dir + "/" + tag + "a", dir + "/" + tag + "b", nullptr, nullptr};
  t.a = open_store(t.a_dir);
  t.b = open_store(t.b_dir);
  if (!t.a || !t.b) return t;
  std::vector<Errc> ra, rb;
  const std::vector<Op> before = random_ops(rng, 15);
  EXPECT_TRUE(t.a->apply(changes_of(before), &ra).ok());
  EXPECT_TRUE(t.b->apply(changes_of(before), &rb).ok());
  return t;
}

TEST(RuleStoreSorted, KeyOrderedGroupsGiveWhatAnyOrderKeepingEachKeysChangesGives) {
  std::mt19937 rng(static_cast<uint32_t>(test::test_seed()));  // prints CG_SEED
  test::TempDir dir;
  for (int round = 0; round < 30; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    // a: the group as written (apply's map of touched keys); b: the same
    // group, stably sorted by key (the ordered path).
    Twins t = twin_stores(dir.path(), std::to_string(round), rng);
    auto& [a_dir, b_dir, a, b] = t;
    ASSERT_TRUE(a && b);
    std::vector<Errc> ra, rb;
    std::vector<Op> ops = random_ops(rng, 80);
    if (round % 3 == 0) ops.push_back({RuleStore::Change::Op::add, "k0", {}, {}, -1});  // invalid: refused alone
    std::vector<std::size_t> pos(ops.size());
    for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = i;
    std::stable_sort(pos.begin(), pos.end(), [&](std::size_t x, std::size_t y) { return ops[x].key < ops[y].key; });
    std::vector<Op> sorted;
    for (std::size_t i : pos) sorted.push_back(ops[i]);
    const bool atomic = round % 4 == 1;
    const std::string id = "7-" + std::to_string(round);
    const RuleStore::Mark mark{"sync.last_id", id};  // views: id outlives it
    ASSERT_TRUE(a->apply(changes_of(ops), &ra, &mark, atomic).ok());
    ASSERT_TRUE(b->apply(changes_of(sorted), &rb, &mark, atomic).ok());
    for (std::size_t j = 0; j < pos.size(); ++j) ASSERT_EQ(rb[j], ra[pos[j]]) << "change " << pos[j];
    EXPECT_EQ(contents(*b), contents(*a));
    EXPECT_EQ(b->next_expiry(), a->next_expiry());
    EXPECT_EQ(b->mark("sync.last_id"), mark.value);
    // The journal says the same.
    reopen_b_expecting_a(t);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->mark("sync.last_id"), mark.value);
  }
}

// add_batch with requests made on demand (what a bulk load uses instead of
// an array of AddRequest): the results, contents and journal of add_batch
// of the same requests as an array, in key order and not, with repeats,
// present rules with and without an expiry, and refused requests.
TEST(RuleStoreSorted, RequestsMadeOnDemandGiveWhatAnArrayOfThemGives) {
  std::mt19937 rng(static_cast<uint32_t>(test::test_seed()));  // prints CG_SEED
  test::TempDir dir;
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Twins t = twin_stores(dir.path(), "q" + std::to_string(round), rng);
    auto& [a_dir, b_dir, a, b] = t;
    ASSERT_TRUE(a && b);
    std::vector<Errc> ra, rb;
    std::vector<Op> ops;
    for (const Op& o : random_ops(rng, 60))
      if (o.op == RuleStore::Change::Op::add) ops.push_back(o);
    if (round % 3 == 0) ops.push_back({RuleStore::Change::Op::add, "k1", {}, {}, -1});  // refused alone
    if (round % 3 == 1) ops.push_back({RuleStore::Change::Op::add, "", {}, {}, 0});
    if (round % 2 == 0)
      std::stable_sort(ops.begin(), ops.end(), [](const Op& x, const Op& y) { return x.key < y.key; });
    std::vector<RuleStore::AddRequest> reqs;
    for (const Op& o : ops) reqs.push_back({o.key, o.text, o.ttl, o.set});
    ASSERT_TRUE(a->add_batch(reqs, &ra).ok());
    const auto at = [](const void* ctx, std::size_t i) -> RuleStore::AddRequest {
      const Op& o = (*static_cast<const std::vector<Op>*>(ctx))[i];
      return {o.key, o.text, o.ttl, o.set};
    };
    ASSERT_TRUE(b->add_batch(ops.size(), at, &ops, &rb).ok());
    EXPECT_EQ(rb, ra);
    EXPECT_EQ(contents(*b), contents(*a));
    EXPECT_EQ(b->next_expiry(), a->next_expiry());
    reopen_b_expecting_a(t);
    ASSERT_TRUE(b);
  }
}

// Readers meanwhile (the control socket's `list` and `check` run on the
// same thread in the gateway, but the store promises lock-free readers):
// rules the groups never touch are always found, and scans see keys in
// strictly increasing order.
TEST(RuleStoreSorted, ReadersDuringKeyOrderedGroupsAlwaysFindUntouchedRules) {
  std::mt19937 rng(static_cast<uint32_t>(test::test_seed()));  // prints CG_SEED
  test::TempDir dir;
  auto s = open_store(dir.path() + "/s");
  ASSERT_TRUE(s);
  // "s<i>" stay; "m<i>" are added and deleted by the groups, between them in key order.
  std::vector<RuleStore::Change> stay;
  std::vector<std::string> stay_keys;
  for (int i = 0; i < 200; ++i) stay_keys.push_back("s" + std::to_string(1000 + i));
  for (const auto& k : stay_keys) stay.push_back({RuleStore::Change::Op::add, k, {}, 0, {}});
  std::vector<Errc> res;
  ASSERT_TRUE(s->apply(stay, &res).ok());
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> misses{0}, disorder{0}, scans{0};
  std::thread reader([&] {
    std::size_t i = 0;
    while (!stop.load(std::memory_order_acquire)) {
      if (!s->contains(stay_keys[i++ % stay_keys.size()])) misses.fetch_add(1, std::memory_order_relaxed);
      std::string prev;
      std::size_t found = 0;
      for (auto c = s->list(); c.next();) {
        if (!prev.empty() && std::string(c.key()) <= prev) disorder.fetch_add(1, std::memory_order_relaxed);
        prev = std::string(c.key());
        found += prev.find('m') == std::string::npos;  // a rule that stays
      }
      if (found != stay_keys.size()) misses.fetch_add(1, std::memory_order_relaxed);
      scans.fetch_add(1, std::memory_order_relaxed);
    }
  });
  for (int round = 0; round < (test::kSlowBuild ? 60 : 200); ++round) {
    std::vector<std::string> keys;
    for (int j = 0; j < 100; ++j) keys.push_back("s" + std::to_string(1000 + rng() % 200) + "m" + std::to_string(rng() % 50));
    std::sort(keys.begin(), keys.end());
    std::vector<RuleStore::Change> g;
    for (const auto& k : keys)
      g.push_back({rng() % 3 == 0 ? RuleStore::Change::Op::del : RuleStore::Change::Op::add, k, {}, 0, {}});
    const std::string id = std::to_string(round);
    const RuleStore::Mark mark{"sync.last_id", id};
    ASSERT_TRUE(s->apply(g, &res, &mark).ok());
    s->reclaim();
  }
  while (scans.load(std::memory_order_relaxed) < 3) std::this_thread::yield();
  stop.store(true, std::memory_order_release);
  reader.join();
  EXPECT_EQ(misses.load(), 0u);
  EXPECT_EQ(disorder.load(), 0u);
  for (const auto& k : stay_keys) EXPECT_TRUE(s->contains(k)) << k;
}

}  // namespace
}  // namespace cg::store
