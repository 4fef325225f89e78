// Blocklist::apply_group, the Redis sync's catch-up path (issue 14): a group
// of adds and dels applied in rule-key order, each rule's changes reduced to
// their net effect, one journal sync with the stream mark. These tests pin
// what that must keep: the outcomes and the final state (rules, lifetimes,
// lookup tables, mark) of apply(), the same group applied in order, for any
// group (repeats, an add then a del of one rule, a del then an add, lifetime
// changes), also after a restart; and a crash at any byte of the group's
// journal write, followed by the sync's resume (the group again, from the
// mark that survived), ends with exactly the in-order set.
//
// Seeds are printed on failure; --gtest_random_seed does not change them.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "control/blocklist.hpp"
#include "eal_test_main.hpp"
#include "rule_text.hpp"

namespace cg {
namespace {

std::string g_dir;
int g_name = 0;

using test::R;

constexpr int64_t kNow = 1'800'000'000'000;  // a fixed clock: lifetimes compare exactly

std::unique_ptr<Blocklist> open(const std::string& state) {
  Blocklist::Options o;
  o.capacity = 256;  // small: the groups below make the tables grow
  o.name = "bg" + std::to_string(g_name++);
  o.state_dir = state;
  o.clock = [] { return kNow; };
  std::string err;
  auto b = Blocklist::create(o, &err);
  EXPECT_NE(b, nullptr) << err;
  return b;
}

// Every rule with its remaining lifetime, in listing order.
std::vector<std::string> listed(const Blocklist& b) {
  std::vector<std::string> out;
  b.for_each(std::nullopt, "", [&](std::string_view t, int64_t ttl) {
    out.push_back(std::string(t) + " ttl=" + std::to_string(ttl));
  });
  return out;
}

std::vector<Rule> universe() {
  std::vector<Rule> u;
  for (int i = 0; i < 12; ++i) u.push_back(R("src 10.0.0." + std::to_string(i)));
  for (int i = 0; i < 6; ++i) u.push_back(R("host h" + std::to_string(i) + ".example"));
  for (int i = 0; i < 4; ++i) u.push_back(R("dst 192.0." + std::to_string(i) + ".0/24"));
  u.push_back(R("url example.org/a"));
  u.push_back(R("flow tcp 10.1.1.1:1000 10.2.2.2:80"));
  return u;
}

// A group over a small universe, so that rules repeat: adds without and with
// a lifetime (two different ones), dels.
std::vector<Blocklist::Change> random_group(std::mt19937& rng, const std::vector<Rule>& u, std::size_t n) {
  std::vector<Blocklist::Change> g;
  for (std::size_t i = 0; i < n; ++i) {
    const Rule& r = u[rng() % u.size()];
    switch (rng() % 4) {
      case 0: g.push_back({Blocklist::Change::Op::kDel, r, 0, {}}); break;
      case 1: g.push_back({Blocklist::Change::Op::kAdd, r, 60000, {}}); break;
      case 2: g.push_back({Blocklist::Change::Op::kAdd, r, 120000, {}}); break;
      default: g.push_back({Blocklist::Change::Op::kAdd, r, 0, {}}); break;
    }
  }
  return g;
}

TEST(BlocklistGroup, OutcomesAndFinalStateAreThoseOfApplyInOrder) {
  const std::vector<Rule> u = universe();
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    const std::string dir = g_dir + "/same-" + std::to_string(seed);
    auto a = open(dir + "/a");  // apply, in order
    auto b = open(dir + "/b");  // apply_group
    ASSERT_TRUE(a && b);
    // The same starting state: some rules present, some with a lifetime.
    const std::vector<Blocklist::Change> before = random_group(rng, u, 20);
    ASSERT_EQ(a->apply(before, false), b->apply(before, false));
    const std::vector<Blocklist::Change> group = random_group(rng, u, seed % 5 == 0 ? 1 : 120);
    const std::string id = "1-" + std::to_string(seed);
    const store::RuleStore::Mark mark{"sync.last_id", id};
    const std::vector<Blocklist::Outcome> want = a->apply(group, false, &mark);
    const std::vector<Blocklist::Outcome> got = b->apply_group(group, &mark);
    ASSERT_EQ(got, want);
    EXPECT_EQ(listed(*b), listed(*a));
    EXPECT_EQ(b->exact().size(), a->size());  // the lookup tables hold exactly the stored rules
    EXPECT_EQ(b->exact().size(), b->size());
    for (const Rule& r : u) ASSERT_EQ(b->contains(r), a->contains(r)) << format_rule(r);
    EXPECT_EQ(b->mark("sync.last_id"), id);
    EXPECT_EQ(b->ms_to_next_expiry(), a->ms_to_next_expiry());
    // The journal holds the same: a restart restores it.
    const std::vector<std::string> after = listed(*a);
    a.reset();
    b.reset();
    b = open(dir + "/b");
    ASSERT_TRUE(b);
    EXPECT_EQ(listed(*b), after);
    EXPECT_EQ(b->exact().size(), after.size());
    EXPECT_EQ(b->mark("sync.last_id"), id);
  }
}

// The journal file the group was written to (the only one: no snapshot yet).
std::filesystem::path journal_of(const std::string& state) {
  std::filesystem::path p;
  for (const auto& e : std::filesystem::directory_iterator(state))
    if (e.path().extension() == ".cgj") p = e.path();
  return p;
}

TEST(BlocklistGroup, ACrashAnywhereInTheGroupsJournalWriteResumesToTheInOrderSet) {
  const std::vector<Rule> u = universe();
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed * 7919);
    const std::string dir = g_dir + "/crash-" + std::to_string(seed);
    const std::vector<Blocklist::Change> before = random_group(rng, u, 20);
    const std::vector<Blocklist::Change> group = random_group(rng, u, 100);
    const store::RuleStore::Mark old_mark{"sync.last_id", "1-0"}, new_mark{"sync.last_id", "2-0"};
    std::vector<std::string> want;
    {
      auto a = open(dir + "/in-order");
      ASSERT_TRUE(a);
      a->apply(before, false, &old_mark);
      a->apply(group, false, &new_mark);
      want = listed(*a);
    }
    std::uintmax_t start = 0, end = 0;
    {
      auto b = open(dir + "/b");
      ASSERT_TRUE(b);
      b->apply(before, false, &old_mark);
      start = std::filesystem::file_size(journal_of(dir + "/b"));
      b->apply_group(group, &new_mark);
      end = std::filesystem::file_size(journal_of(dir + "/b"));
    }
    ASSERT_GT(end, start);
    // A crash after `cut` bytes of the group's records reached the disk: at
    // about 40 places, records cut short and whole (the first and last byte
    // included), each different for each seed.
    const std::uintmax_t stride = std::max<std::uintmax_t>(1, (end - start) / 20);
    for (std::uintmax_t cut = start; cut <= end; cut = cut == end ? end + 1 : std::min(end, cut + 1 + rng() % stride)) {
      SCOPED_TRACE("journal cut at byte " + std::to_string(cut) + " of " + std::to_string(start) + ".." +
                   std::to_string(end));
      const std::string copy = dir + "/cut";
      std::filesystem::remove_all(copy);
      std::filesystem::copy(dir + "/b", copy);
      std::filesystem::remove(copy + "/lock");
      std::filesystem::resize_file(journal_of(copy), cut);
      auto c = open(copy);
      ASSERT_TRUE(c);
      // The rules and the lookup tables agree, and the mark is the new one
      // only if the whole group is there.
      EXPECT_EQ(c->exact().size(), c->size());
      const std::optional<std::string> m = c->mark("sync.last_id");
      ASSERT_TRUE(m.has_value());
      if (*m == "2-0") {
        EXPECT_EQ(listed(*c), want);
        continue;
      }
      ASSERT_EQ(*m, "1-0");
      // The sync resumes after the mark: the group is read and applied again.
      c->apply_group(group, &new_mark);
      EXPECT_EQ(listed(*c), want);
      EXPECT_EQ(c->exact().size(), want.size());
      EXPECT_EQ(c->mark("sync.last_id"), "2-0");
    }
  }
}

}  // namespace
}  // namespace cg

int main(int argc, char** argv) { return cg::test::run_eal_tests(argc, argv, "blocklist_group", &cg::g_dir); }
