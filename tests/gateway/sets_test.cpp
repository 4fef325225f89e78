// Named sets and `load set=NAME replace` in process (EAL for the Blocklist's
// memory, no ports; issue 12, item 6): what a replace adds, deletes and leaves
// untouched (hit counters kept), all or nothing, through the protocol, and
// refused when the blocklist is shared through Redis.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "control/blocklist.hpp"
#include "control/protocol.hpp"
#include "eal_test_main.hpp"
#include "rule_text.hpp"

namespace cg {
namespace {

std::string g_dir;

using test::R;

std::vector<Rule> rules(const std::vector<std::string>& texts) {
  std::vector<Rule> out;
  for (const auto& t : texts) out.push_back(R(t));
  return out;
}

class Sets : public testing::Test {
 protected:
  void make(std::size_t capacity, std::size_t max_memory = 0) {
    Blocklist::Options o;
    o.capacity = capacity;
    o.max_memory = max_memory;
    o.name = "sets" + std::to_string(++seq_);
    std::string err;
    bl_ = Blocklist::create(o, &err);
    ASSERT_NE(bl_, nullptr) << err;
    hits_.assign(capacity, 0);
    bl_->set_hit_reader([this](uint32_t slot) { return hits_[slot]; });
  }
  void SetUp() override { make(1024); }
  // Texts of one set's rules, in listing order.
  std::vector<std::string> listed(const std::string& set) {
    std::vector<std::string> out;
    bl_->for_each_in_set(std::nullopt, "", set, [&](std::string_view t, int64_t, std::string_view s, RuleAction) {
      EXPECT_EQ(s, set);
      out.emplace_back(t);
    });
    return out;
  }
  std::unique_ptr<Blocklist> bl_;
  std::vector<uint64_t> hits_;  // per slot, as the workers' counters would be
  static inline int seq_ = 0;
};

TEST_F(Sets, ReplaceDeletesTheUnlistedAddsTheNewAndKeepsTheRestWithTheirHits) {
  ASSERT_EQ(bl_->add_batch(rules({"host a.feed", "host b.feed", "host c.feed"}), "feed").added, 3u);
  ASSERT_EQ(bl_->add(R("src 192.0.2.1")), Blocklist::Result::kOk);  // the default set
  // Every present rule dropped 7 packets: workers count only in the slots
  // rules hold (a slot never handed out stays 0, which take_slot() relies on).
  for (std::size_t slot = 0; slot < bl_->slots_used(); ++slot) hits_[slot] += 7;
  ASSERT_EQ(bl_->hits(R("host b.feed")), 7u);
  const uint64_t gen = bl_->generation().load();

  const Blocklist::ReplaceResult r =
      bl_->replace_set("feed", rules({"host b.feed", "host c.feed", "host e.feed", "src 192.0.2.1"}));
  ASSERT_EQ(r.result, Blocklist::Result::kOk);
  EXPECT_EQ(r.added, 1u);      // e
  EXPECT_EQ(r.deleted, 1u);    // a
  EXPECT_EQ(r.kept, 2u);       // b, c: untouched
  EXPECT_EQ(r.elsewhere, 1u);  // src 192.0.2.1 stays in the default set
  EXPECT_FALSE(bl_->contains(R("host a.feed")));
  EXPECT_TRUE(bl_->contains(R("host e.feed")));
  EXPECT_EQ(bl_->hits(R("host b.feed")), 7u);  // kept rules keep their slot and count
  EXPECT_EQ(bl_->hits(R("host c.feed")), 7u);
  EXPECT_EQ(bl_->hits(R("host e.feed")), 0u);
  EXPECT_GT(bl_->generation().load(), gen);
  EXPECT_EQ(listed("feed"), (std::vector<std::string>{"host b.feed", "host c.feed", "host e.feed"}));
  EXPECT_EQ(listed("default"), std::vector<std::string>{"src 192.0.2.1"});
  auto counts = bl_->set_counts();
  std::sort(counts.begin(), counts.end());
  EXPECT_EQ(counts, (std::vector<std::pair<std::string, std::size_t>>{{"default", 1}, {"feed", 3}}));

  // The same list again changes nothing; an empty list empties the set.
  const Blocklist::ReplaceResult same =
      bl_->replace_set("feed", rules({"host b.feed", "host c.feed", "host e.feed"}));
  EXPECT_EQ(same.added + same.deleted, 0u);
  EXPECT_EQ(same.kept, 3u);
  const Blocklist::ReplaceResult none = bl_->replace_set("feed", std::vector<Rule>{});
  EXPECT_EQ(none.deleted, 3u);
  EXPECT_TRUE(listed("feed").empty());
  EXPECT_TRUE(bl_->contains(R("src 192.0.2.1")));
}

// A replace makes the set exactly the stream's rules, and a stream's rules
// carry no ttl: a kept rule that had one becomes permanent, as a plain load
// makes it (it used to keep its expiry, and went although the feed listed
// it). Its hit count stays; a listed rule of another set keeps its ttl.
TEST_F(Sets, AReplaceMakesAKeptRuleWithATtlPermanent) {
  const std::vector<Blocklist::Change> adds = {
      {Blocklist::Change::Op::kAdd, R("src 198.51.100.7"), 600'000, "feed"},
      {Blocklist::Change::Op::kAdd, R("host b.feed"), 0, "feed"},
      {Blocklist::Change::Op::kAdd, R("host other.test"), 600'000, "other"}};
  for (const Blocklist::Outcome o : bl_->apply(adds, /*atomic=*/true)) ASSERT_EQ(o, Blocklist::Outcome::kAdded);
  for (std::size_t slot = 0; slot < bl_->slots_used(); ++slot) hits_[slot] += 3;
  const Blocklist::ReplaceResult r =
      bl_->replace_set("feed", rules({"src 198.51.100.7", "host b.feed", "host other.test", "host c.feed"}));
  ASSERT_EQ(r.result, Blocklist::Result::kOk);
  EXPECT_EQ(r.kept, 2u);
  EXPECT_EQ(r.added, 1u);
  EXPECT_EQ(r.elsewhere, 1u);
  std::map<std::string, int64_t> ttl;
  bl_->for_each_in_set(std::nullopt, "", std::nullopt,
                       [&](std::string_view t, int64_t left, std::string_view, RuleAction) { ttl[std::string(t)] = left; });
  EXPECT_EQ(ttl.at("src 198.51.100.7"), 0);  // permanent now
  EXPECT_EQ(ttl.at("host b.feed"), 0);
  EXPECT_GT(ttl.at("host other.test"), 0);   // another set's: untouched
  EXPECT_EQ(bl_->hits(R("src 198.51.100.7")), 3u);
  EXPECT_TRUE(bl_->contains(R("host c.feed")));
}

TEST_F(Sets, ARuleBelongsToTheSetThatAddedItFirst) {
  ASSERT_EQ(bl_->add_batch(rules({"host shared.test"}), "one").added, 1u);
  EXPECT_EQ(bl_->add_batch(rules({"host shared.test"}), "two").existed, 1u);
  EXPECT_EQ(listed("one"), std::vector<std::string>{"host shared.test"});
  EXPECT_TRUE(listed("two").empty());
  // Replacing "two" with it listed leaves it in "one"; replacing "one"
  // without it deletes it.
  EXPECT_EQ(bl_->replace_set("two", rules({"host shared.test"})).elsewhere, 1u);
  EXPECT_EQ(bl_->replace_set("one", std::vector<Rule>{}).deleted, 1u);
  EXPECT_FALSE(bl_->contains(R("host shared.test")));
}

// Random rounds against a model: the set's rules, another set's and the
// default set's interleaved in key order, the file with repeats and with
// rules of the other sets; after each replace the counts and all three
// listings are the model's (replace_set merges the sorted file with the
// store's listing: a key missed or matched wrongly shows here).
TEST_F(Sets, RandomReplacesMatchAModel) {
  make(4096);
  std::vector<std::string> universe;
  for (int i = 0; i < 60; ++i) {
    universe.push_back("host h" + std::to_string(i) + ".t");
    universe.push_back("src 10.0." + std::to_string(i) + ".9");
    universe.push_back("src 10.1." + std::to_string(i) + ".0/24");
    universe.push_back("url u.t/" + std::to_string(i));
  }
  std::mt19937 rng(2024);
  std::map<std::string, std::string> where;  // rule -> set ("" absent)
  for (const auto& r : universe) {
    const std::string sets[] = {"", "feed", "other", "default"};
    const std::string& s = sets[rng() % 4];
    if (s.empty()) continue;
    ASSERT_EQ(bl_->add_batch(rules({r}), s == "default" ? "" : s).added, 1u) << r;
    where[r] = s;
  }
  auto set_of = [&](const std::string& name) {
    std::vector<std::string> v;
    for (const auto& [r, s] : where)
      if (s == name) v.push_back(r);
    std::sort(v.begin(), v.end());
    return v;
  };
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  for (int round = 0; round < 25; ++round) {
    std::vector<std::string> file;
    std::set<std::string> listed_once;
    const std::size_t n = rng() % 120;
    for (std::size_t i = 0; i < n; ++i) {
      file.push_back(universe[rng() % universe.size()]);
      if (rng() % 5 == 0) file.push_back(file.back());  // a repeat
      listed_once.insert(file.back());
    }
    Blocklist::ReplaceResult want;
    for (const auto& r : listed_once) {
      const auto it = where.find(r);
      if (it == where.end()) {
        ++want.added;
        where[r] = "feed";
      } else {
        ++(it->second == "feed" ? want.kept : want.elsewhere);
      }
    }
    for (auto it = where.begin(); it != where.end();) {
      if (it->second == "feed" && listed_once.count(it->first) == 0) {
        ++want.deleted;
        it = where.erase(it);
      } else {
        ++it;
      }
    }
    const Blocklist::ReplaceResult got = bl_->replace_set("feed", rules(file));
    ASSERT_EQ(got.result, Blocklist::Result::kOk) << "round " << round;
    EXPECT_EQ(got.added, want.added) << "round " << round;
    EXPECT_EQ(got.deleted, want.deleted) << "round " << round;
    EXPECT_EQ(got.kept, want.kept) << "round " << round;
    EXPECT_EQ(got.elsewhere, want.elsewhere) << "round " << round;
    EXPECT_EQ(sorted(listed("feed")), set_of("feed")) << "round " << round;
    EXPECT_EQ(sorted(listed("other")), set_of("other")) << "round " << round;
    EXPECT_EQ(sorted(listed("default")), set_of("default")) << "round " << round;
    EXPECT_EQ(bl_->size(), where.size());
    for (const auto& r : universe) ASSERT_EQ(bl_->contains(R(r)), where.count(r) != 0) << r;
  }
}

TEST_F(Sets, AReplaceThatDoesNotFitChangesNothing) {
  // The tables grow past the capacity; max_memory at their first size is
  // what makes them full.
  make(4);
  make(4, bl_->table_bytes());
  ASSERT_EQ(bl_->add_batch(rules({"host a.t", "host b.t"}), "feed").added, 2u);
  ASSERT_EQ(bl_->add(R("host c.t")), Blocklist::Result::kOk);
  // Three new rules while two old ones still hold their slots: full.
  const Blocklist::ReplaceResult r = bl_->replace_set("feed", rules({"host x.t", "host y.t", "host z.t"}));
  EXPECT_EQ(r.result, Blocklist::Result::kFull);
  EXPECT_EQ(r.added + r.deleted, 0u);
  EXPECT_EQ(listed("feed"), (std::vector<std::string>{"host a.t", "host b.t"}));
  EXPECT_FALSE(bl_->contains(R("host x.t")));
  EXPECT_EQ(bl_->size(), 3u);
}

// The protocol: `add ... set=`, `load set=NAME replace`, `list set=`, `info`.
void lines(CommandHandler& h, Session& s, std::string& out, const std::vector<std::string>& ls) {
  for (const auto& l : ls) h.handle_line(s, l, out);
  h.commit();
}

TEST_F(Sets, TheProtocolLoadsReplacesListsAndCountsSets) {
  CommandHandler h(*bl_, [](std::string&) {}, [](std::string& o) { o += "rules 0\n"; });
  Session s;
  std::string out;
  lines(h, s, out, {"add host d.test set=ads", "load set=ads", "host a.test", "host b.test", "."});
  EXPECT_EQ(out, "OK added\nOK loaded 2 added 2 existed 0 updated 0\n");
  out.clear();
  lines(h, s, out, {"load set=ads replace", "host b.test", "host c.test", "."});
  EXPECT_EQ(out, "OK replaced set ads: loaded 2 added 1 deleted 2 kept 1 elsewhere 0\n");
  out.clear();
  lines(h, s, out, {"add src 192.0.2.9 ttl=600", "list set=ads", "list src"});
  EXPECT_EQ(out, "OK added\nOK 2\nhost b.test set=ads\nhost c.test set=ads\n.\nOK 1\nsrc 192.0.2.9 ttl=600\n.\n");
  out.clear();
  lines(h, s, out, {"info"});
  EXPECT_NE(out.find("\nsets.ads 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("\nsets.default 1\n"), std::string::npos) << out;
  out.clear();
  // A list line is an add argument: the set comes back with it.
  lines(h, s, out, {"del host b.test", "add host b.test set=ads", "list set=ads host b."});
  EXPECT_EQ(out, "OK deleted\nOK added\nOK 1\nhost b.test set=ads\n.\n");
}

// A replicator that takes everything (the sync is tested elsewhere): named
// sets must not reach it.
class AcceptAll : public Replicator {
 public:
  bool changes(const std::vector<Blocklist::Change>&, bool, std::vector<Blocklist::Outcome>*,
               std::string*) override {
    ++calls;
    return false;
  }
  bool load(const std::vector<Rule>&, Blocklist::BatchResult*, std::string*) override {
    ++calls;
    return false;
  }
  bool flush(std::optional<RuleKind>, Blocklist::Result*, std::size_t*, std::string*) override {
    ++calls;
    return false;
  }
  int calls = 0;
};

TEST_F(Sets, WithTheRedisSyncNamedSetsAndReplaceAreRefusedClearly) {
  CommandHandler h(*bl_, [](std::string&) {}, [](std::string&) {});
  AcceptAll repl;
  h.set_replicator(&repl);
  Session s;
  std::string out;
  lines(h, s, out, {"add host a.test set=ads"});
  EXPECT_EQ(out.rfind("ERR 501 named sets and load replace are not replicated by the Redis sync", 0), 0u) << out;
  out.clear();
  lines(h, s, out, {"load set=ads replace", "host a.test", "."});
  EXPECT_EQ(out.rfind("ERR 501 load rejected, nothing applied: named sets", 0), 0u) << out;
  out.clear();
  lines(h, s, out, {"batch", "add host a.test set=ads", "."});
  EXPECT_EQ(out.rfind("ERR 501 batch rejected, nothing applied: line 1: named sets", 0), 0u) << out;
  EXPECT_EQ(repl.calls, 0);
  EXPECT_EQ(bl_->size(), 0u);
  out.clear();
  lines(h, s, out, {"ping"});
  EXPECT_EQ(out, "OK pong\n");  // the connection goes on
}

}  // namespace
}  // namespace cg

int main(int argc, char** argv) { return cg::test::run_eal_tests(argc, argv, "sets_test", &cg::g_dir); }
