// RuleStore's 24-byte PackedMeta and its side table (docs/store.md, "Rule
// metadata in memory"): what does not fit a node's packed word (a text, an
// added time or set id out of range) lives in the side table by key, and
// every API shows the rule exactly as it was added, through deletes,
// replacements, moves, expiry, flush, snapshots and restarts.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cuckoogate/store/rule_store.hpp"
#include "test_util.hpp"

namespace cg::store {
namespace {

struct Clock {
  std::atomic<std::int64_t> now{1'700'000'000'000};
  RuleStore::Clock fn() {
    return [this] { return now.load(); };
  }
};

std::unique_ptr<RuleStore> open_store(const std::string& dir, Clock* clock) {
  RuleStore::Options o;
  o.state_dir = dir;
  o.clock = clock->fn();
  std::unique_ptr<RuleStore> s;
  const Status st = RuleStore::open(o, &s);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return s;
}

struct Seen {
  std::uint64_t id;
  std::int64_t added, expiry;
  std::string text, set;
  bool operator==(const Seen&) const = default;
};

// Every rule as list() shows it, with get() checked against it.
std::map<std::string, Seen> contents(const RuleStore& s) {
  std::map<std::string, Seen> out;
  for (auto c = s.list(); c.next();) {
    const RuleMeta& m = c.value();
    const Seen seen{m.id, m.added_unix_ms, m.expiry_unix_ms, m.text.str(), s.set_name(m.set_id)};
    const auto g = s.get(c.key());
    EXPECT_TRUE(g.has_value()) << c.key();
    if (g) {
      EXPECT_EQ(*g, m) << c.key();
    }
    out.emplace(std::string(c.key()), seen);
  }
  return out;
}

constexpr std::int64_t kAddedMax = (std::int64_t{1} << 47) - 1;
constexpr std::int64_t kAddedMin = -(std::int64_t{1} << 47);

TEST(PackedMeta, HoldsWhatFitsAndMarksTheRestForTheSideTable) {
  EXPECT_EQ(sizeof(PackedMeta), 24U);
  for (const std::int64_t added : {std::int64_t{0}, std::int64_t{1'700'000'000'123}, std::int64_t{-1}, kAddedMin,
                                   kAddedMax}) {
    for (const std::uint32_t set : {0U, 1U, 32767U}) {
      const PackedMeta p(7, added, 99, "", set);
      EXPECT_FALSE(p.has_side()) << added << " " << set;
      EXPECT_EQ(p.id, 7U);
      EXPECT_EQ(p.expiry_unix_ms, 99);
      EXPECT_EQ(p.added_unix_ms(), added);
      EXPECT_EQ(p.set_id(), set);
    }
  }
  EXPECT_TRUE(PackedMeta(1, 0, 0, "a text", 0).has_side());
  EXPECT_TRUE(PackedMeta(1, kAddedMax + 1, 0, "", 0).has_side());
  EXPECT_TRUE(PackedMeta(1, kAddedMin - 1, 0, "", 0).has_side());
  EXPECT_TRUE(PackedMeta(1, 0, 0, "", 32768).has_side());
  EXPECT_TRUE(PackedMeta(1, 0, 0, "", UINT32_MAX).has_side());
  const PackedMeta side(5, INT64_MAX, -3, "t", 0);
  EXPECT_EQ(side.id, 5U);
  EXPECT_EQ(side.expiry_unix_ms, -3);
}

// A rule without text costs no side entry; one with a text has one, shown by
// get() and list(), kept through an update of its lifetime, and freed by a
// delete, an expiry and a flush.
TEST(RuleStoreSide, TextsAreShownKeptThroughUpdatesAndFreedWithTheirRule) {
  test::TempDir dir;
  Clock clock;
  auto s = open_store(dir.path(), &clock);
  ASSERT_TRUE(s->add("plain", "").ok());
  EXPECT_EQ(s->side_entries(), 0U);
  const std::size_t plain_bytes = s->rules_memory_bytes();
  ASSERT_TRUE(s->add("a", "text of a").ok());
  ASSERT_TRUE(s->add("b", "text of b", 5'000).ok());
  ASSERT_TRUE(s->add("c", std::string(300, 'c')).ok());
  EXPECT_EQ(s->side_entries(), 3U);
  EXPECT_GT(s->rules_memory_bytes(), plain_bytes + 3 * sizeof(SideMeta) + 300);  // the side table counts
  auto m = contents(*s);
  ASSERT_EQ(m.size(), 4U);
  EXPECT_EQ(m["plain"].text, "");
  EXPECT_EQ(m["a"].text, "text of a");
  EXPECT_EQ(m["b"].text, "text of b");
  EXPECT_EQ(m["b"].expiry, clock.now + 5'000);
  EXPECT_EQ(m["c"].text, std::string(300, 'c'));
  EXPECT_EQ(m["a"].added, clock.now);

  // An update replaces the lifetime: id, added time and text stay.
  clock.now += 1'000;
  EXPECT_EQ(s->add("a", "ignored", 60'000).code(), Errc::updated);
  auto a = s->get("a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->text, "text of a");
  EXPECT_EQ(a->id, m["a"].id);
  EXPECT_EQ(a->added_unix_ms, m["a"].added);
  EXPECT_EQ(a->expiry_unix_ms, clock.now + 60'000);
  EXPECT_EQ(s->side_entries(), 3U);

  // A delete hands the text back and frees the entry.
  RuleMeta removed;
  ASSERT_TRUE(s->del("c", &removed).ok());
  EXPECT_EQ(removed.text, std::string(300, 'c'));
  EXPECT_EQ(s->side_entries(), 2U);
  EXPECT_FALSE(s->get("c"));
  // Re-added without a text: no entry, and the old text does not come back.
  ASSERT_TRUE(s->add("c", "").ok());
  EXPECT_EQ(s->side_entries(), 2U);
  EXPECT_EQ(s->get("c")->text, "");

  // Expiry.
  clock.now += 10'000;
  std::vector<RuleStore::Removed> expired;
  ASSERT_TRUE(s->expire_due(&expired).ok());
  ASSERT_EQ(expired.size(), 1U);
  EXPECT_EQ(expired[0].key, "b");
  EXPECT_EQ(expired[0].meta.text, "text of b");
  EXPECT_EQ(s->side_entries(), 1U);

  // Flush.
  std::vector<RuleStore::Removed> flushed;
  ASSERT_TRUE(s->flush(&flushed).ok());
  std::map<std::string, std::string> texts;
  for (auto& r : flushed) texts[r.key] = r.meta.text.str();
  EXPECT_EQ(texts, (std::map<std::string, std::string>{{"a", "text of a"}, {"c", ""}, {"plain", ""}}));
  EXPECT_EQ(s->side_entries(), 0U);
  for (int i = 0; i < 3; ++i) s->reclaim();
  EXPECT_EQ(s->rules_memory_bytes(), 0U);
}

// What needs a side entry — a text, an added time past 48 bits, a set id past
// 15 bits — comes back exactly after a restart from the journal and from a
// snapshot, next to rules that need none.
TEST(RuleStoreSide, EverythingThatNeedsASideEntrySurvivesRestartsAndSnapshots) {
  test::TempDir dir;
  Clock clock;
  std::map<std::string, Seen> before;
  {
    auto s = open_store(dir.path(), &clock);
    ASSERT_TRUE(s->add("plain", "").ok());
    ASSERT_TRUE(s->add("text", "old text", 90'000'000).ok());
    clock.now = kAddedMax + 10;  // far future: does not fit 48 bits
    ASSERT_TRUE(s->add("future", "").ok());
    clock.now = kAddedMin - 10;  // far past
    ASSERT_TRUE(s->add("past", "").ok());
    clock.now = kAddedMax;  // the largest that fits
    ASSERT_TRUE(s->add("edge", "").ok());
    clock.now = 1'700'000'000'000;
    // 32 800 named sets: the later ones' ids need more than 15 bits.
    constexpr int kSets = 32'800;
    std::vector<std::string> keys, sets;
    for (int i = 0; i < kSets; ++i) {
      keys.push_back("set-rule-" + std::to_string(100'000 + i));
      sets.push_back("s" + std::to_string(i));
    }
    std::vector<RuleStore::AddRequest> reqs;
    for (int i = 0; i < kSets; ++i) reqs.push_back({keys[i], {}, 0, sets[i]});
    std::vector<Errc> res;
    ASSERT_TRUE(s->add_batch(reqs, &res).ok());
    // "plain", "edge" and the first 32 767 named sets (ids 1..32767) fit.
    EXPECT_EQ(s->side_entries(), 3U + (kSets - 32'767));
    EXPECT_EQ(s->get("edge")->added_unix_ms, kAddedMax);
    EXPECT_EQ(s->get("future")->added_unix_ms, kAddedMax + 10);
    EXPECT_EQ(s->get("past")->added_unix_ms, kAddedMin - 10);
    const auto last = s->get(keys.back());
    ASSERT_TRUE(last);
    EXPECT_GT(last->set_id, 32'767U);
    EXPECT_EQ(s->set_name(last->set_id), sets.back());
    before = contents(*s);
    ASSERT_EQ(before.size(), 5U + kSets);
  }
  const std::size_t sides = 3U + (32'800 - 32'767);
  {
    auto s = open_store(dir.path(), &clock);  // from the journal
    EXPECT_EQ(contents(*s), before);
    EXPECT_EQ(s->side_entries(), sides);
    ASSERT_TRUE(s->snapshot().ok());
  }
  auto s = open_store(dir.path(), &clock);  // from the snapshot
  EXPECT_EQ(contents(*s), before);
  EXPECT_EQ(s->side_entries(), sides);
  // A move takes the given text: the old one's entry goes, the new key gets one.
  std::vector<RuleStore::Move> moves{{"text", "text2", "new text"}, {"future", "future2", ""}};
  std::vector<Errc> res;
  ASSERT_TRUE(s->move(moves, &res).ok());
  EXPECT_EQ(res, (std::vector<Errc>{Errc::ok, Errc::ok}));
  EXPECT_EQ(s->get("text2")->text, "new text");
  EXPECT_EQ(s->get("text2")->id, before["text"].id);
  EXPECT_EQ(s->get("future2")->added_unix_ms, kAddedMax + 10);  // its side entry moved with it
  EXPECT_EQ(s->side_entries(), sides);
  EXPECT_FALSE(s->get("text"));
}

// Readers racing a writer that deletes, re-adds and replaces rules with
// texts never see a rule with another rule's text or without its own (the
// side entry's id check): a churned rule's text names the round that added
// it, and its added time and expiry (the latter from the node, not the side
// entry) must be that round's. Every rule that stays is found.
TEST(RuleStoreSide, ReadersNeverSeeAnotherRulesText) {
  Clock clock;
  constexpr std::int64_t kBase = 1'700'000'000'000;
  clock.now = kBase;
  auto s = open_store("", &clock);  // in memory
  constexpr int kKeys = 64;
  auto key = [](int i) { return "k" + std::to_string(100 + i); };
  for (int i = 0; i < kKeys; ++i) ASSERT_TRUE(s->add(key(i), i % 2 ? "stay " + key(i) : "v0").ok());
  std::atomic<bool> stop{false};
  std::atomic<long> bad{0}, reads{0};
  // A churned rule as round r left it: text v<r> or w<r>, added kBase + r,
  // expiring a second later when r % 3 == 0.
  auto consistent = [&](const RuleMeta& m) {
    const std::string t = m.text.str();
    if (t.size() < 2 || (t[0] != 'v' && t[0] != 'w')) return false;
    const int r = std::stoi(t.substr(1));
    return m.added_unix_ms == kBase + r && m.expiry_unix_ms == (r % 3 == 0 ? kBase + r + 1'000 : 0);
  };
  auto reader = [&] {
    while (!stop.load(std::memory_order_relaxed)) {
      int stayed = 0;
      for (auto c = s->list(); c.next();) {
        const std::string k(c.key());
        const int i = std::stoi(k.substr(1)) - 100;
        if (i % 2) {
          ++stayed;
          if (c.value().text != "stay " + k) ++bad;
        } else if (c.value().added_unix_ms != kBase && !consistent(c.value())) {
          ++bad;
        }
      }
      if (stayed != kKeys / 2) ++bad;
      for (int i = 0; i < kKeys; ++i) {
        const auto g = s->get(key(i));
        if (i % 2 ? !g || g->text != "stay " + key(i) : g && g->added_unix_ms != kBase && !consistent(*g)) ++bad;
      }
      ++reads;
    }
  };
  std::thread r1(reader), r2(reader);
  const int rounds = test::kSlowBuild ? 600 : 3000;
  for (int round = 1; round <= rounds; ++round) {
    clock.now = kBase + round;
    for (int i = 0; i < kKeys; i += 2) {
      ASSERT_TRUE(s->del(key(i)).ok());
      ASSERT_TRUE(s->add(key(i), (round % 2 ? "v" : "w") + std::to_string(round), round % 3 ? 0 : 1'000).ok());
      if (round % 3 == 0) {
        EXPECT_EQ(s->add(key(i), "x", 1'000).code(), Errc::updated);  // a replacement
      }
    }
    if (round % 64 == 0) s->reclaim();
  }
  stop = true;
  r1.join();
  r2.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(reads.load(), 0);
}

}  // namespace
}  // namespace cg::store
