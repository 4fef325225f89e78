// Named sets and atomic groups in the rule store (issue 12, item 6): the set
// of each rule is journalled, replayed and snapshotted; journals written
// before sets existed load with every rule in the default set; an atomic
// group cut short by a crash is restored whole or not at all.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <fstream>
#include <iterator>
#include <map>

#include "cuckoogate/store/journal.hpp"
#include "cuckoogate/store/rule_store.hpp"
#include "test_util.hpp"

namespace cg::store {
namespace {

std::unique_ptr<RuleStore> open_store(const std::string& dir, RecoveryReport* rep = nullptr) {
  RuleStore::Options o;
  o.state_dir = dir;
  std::unique_ptr<RuleStore> s;
  const Status st = RuleStore::open(o, &s, rep);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return s;
}

// key -> set name, for every rule.
std::map<std::string, std::string> sets_of(const RuleStore& s) {
  std::map<std::string, std::string> m;
  for (auto c = s.list(); c.next();) m.emplace(std::string(c.key()), s.set_name(c.value().set_id));
  return m;
}

// The payload of an add record as the store wrote it before sets existed.
std::string old_add_payload(std::string_view key, std::string_view text, std::uint64_t id) {
  std::string p(kStoreRecordFixed, '\0');
  p[0] = 1;  // add
  p[1] = 1;  // version 1, bytes 2-3 reserved (0)
  const auto key_len = static_cast<std::uint32_t>(key.size());
  std::memcpy(&p[4], &key_len, 4);
  std::memcpy(&p[8], &id, 8);
  const std::int64_t added = 1'700'000'000'000;
  std::memcpy(&p[16], &added, 8);
  p.append(key);
  p.append(text);
  return p;
}

TEST(RecordSets, TheSetIsEncodedAndOldRecordsMeanTheDefaultSet) {
  StoreRecord r;
  r.op = RecordOp::add;
  r.id = 7;
  r.key = "k";
  r.text = "host a.example";
  r.set = "spamhaus";
  std::string p;
  encode_record(r, &p);
  EXPECT_EQ(p[1], 2);  // version 2: with a set
  StoreRecord back;
  ASSERT_TRUE(decode_record(p, &back));
  EXPECT_EQ(back, r);
  // Without a set the encoding is byte for byte what older versions wrote.
  r.set.clear();
  p.clear();
  encode_record(r, &p);
  EXPECT_EQ(p, old_add_payload("k", "host a.example", 7).replace(16, 8, p.substr(16, 8)));
  ASSERT_TRUE(decode_record(old_add_payload("k", "t", 3), &back));
  EXPECT_EQ(back.set, "");
  EXPECT_EQ(back.text, "t");
  // Version 1 with a set length, or an unknown version, does not decode.
  std::string bad = old_add_payload("k", "t", 3);
  bad[2] = 1;
  EXPECT_FALSE(decode_record(bad, &back));
  bad = old_add_payload("k", "t", 3);
  bad[1] = 4;  // (3: with an action byte, test_actions.cpp)
  EXPECT_FALSE(decode_record(bad, &back));
  // A set length past the payload.
  r.set = "abc";
  p.clear();
  encode_record(r, &p);
  p.resize(kStoreRecordFixed + 2);
  EXPECT_FALSE(decode_record(p, &back));
}

TEST(RuleStoreSets, MembershipSurvivesReopenAndSnapshotAndTheFirstSetKeepsARule) {
  test::TempDir dir;
  {
    auto s = open_store(dir.path());
    std::vector<Errc> res;
    const RuleStore::AddRequest reqs[] = {{"a1", "t", 0, "ads"}, {"a2", "t", 0, "ads"}, {"d1", "t", 0, ""}};
    ASSERT_TRUE(s->add_batch(reqs, &res).ok());
    const RuleStore::Change ch[] = {{RuleStore::Change::Op::add, "s1", "t", 0, "spamhaus"},
                                    {RuleStore::Change::Op::add, "a1", "t", 5000, "spamhaus"}};
    ASSERT_TRUE(s->apply(ch, &res).ok());
    EXPECT_EQ(res[1], Errc::updated);  // a lifetime change; a1 stays in "ads"
    const std::map<std::string, std::string> want = {
        {"a1", "ads"}, {"a2", "ads"}, {"d1", ""}, {"s1", "spamhaus"}};
    EXPECT_EQ(sets_of(*s), want);
    const std::vector<std::pair<std::string, std::size_t>> counts = {{"", 1}, {"ads", 2}, {"spamhaus", 1}};
    auto got = s->set_counts();
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, counts);
    EXPECT_EQ(s->find_set("ads").has_value(), true);
    EXPECT_FALSE(s->find_set("never"));
  }
  {
    auto s = open_store(dir.path());  // from the journal
    EXPECT_EQ(sets_of(*s).at("s1"), "spamhaus");
    EXPECT_EQ(sets_of(*s).at("a1"), "ads");
    ASSERT_TRUE(s->snapshot().ok());
  }
  auto s = open_store(dir.path());  // from the snapshot
  const std::map<std::string, std::string> want = {{"a1", "ads"}, {"a2", "ads"}, {"d1", ""}, {"s1", "spamhaus"}};
  EXPECT_EQ(sets_of(*s), want);
}

TEST(RuleStoreSets, AJournalWrittenBeforeSetsLoadsEveryRuleIntoTheDefaultSet) {
  test::TempDir dir;
  {
    std::unique_ptr<JournalWriter> w;
    ASSERT_TRUE(JournalWriter::create(dir.file(DurableLog::journal_name(1)), 1, &w).ok());
    ASSERT_TRUE(w->append(old_add_payload("k1", "src 192.0.2.1", 1)).ok());
    ASSERT_TRUE(w->append(old_add_payload("k2", "host a.example", 2)).ok());
    ASSERT_TRUE(w->sync().ok());
  }
  auto s = open_store(dir.path());
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ(s->get("k2")->text, "host a.example");
  EXPECT_EQ(s->get("k2")->set_id, 0u);
  const std::vector<std::pair<std::string, std::size_t>> counts = {{"", 2}};
  EXPECT_EQ(s->set_counts(), counts);
  // And it goes on: a new record with a set after the old ones.
  std::vector<Errc> res;
  const RuleStore::AddRequest req[] = {{"k3", "t", 0, "x"}};
  ASSERT_TRUE(s->add_batch(req, &res).ok());
  s.reset();
  s = open_store(dir.path());
  EXPECT_EQ(sets_of(*s), (std::map<std::string, std::string>{{"k1", ""}, {"k2", ""}, {"k3", "x"}}));
}

// The offsets at which each record of the journal ends.
std::vector<std::size_t> record_ends(const std::string& data) {
  std::vector<std::size_t> ends;
  std::size_t off = kFileHeaderSize;
  ParsedRecord rec;
  while (off < data.size() && parse_record(std::string_view(data).substr(off), &rec) == RecordParse::ok) {
    off += rec.size;
    ends.push_back(off);
  }
  return ends;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(RuleStoreSets, AnAtomicGroupCutShortByACrashIsRestoredWholeOrNotAtAll) {
  // The journal of: 10 rules added alone, then one atomic group deleting 5 of
  // them and adding 20 others. Cut it at every point inside the group.
  test::TempDir src;
  std::size_t before_group = 0;
  {
    auto s = open_store(src.path());
    std::vector<Errc> res;
    std::vector<std::string> keys;
    for (int i = 0; i < 10; ++i) keys.push_back("old" + std::to_string(i));
    std::vector<RuleStore::AddRequest> reqs;
    for (const auto& k : keys) reqs.push_back({k, "t", 0, "feed"});
    ASSERT_TRUE(s->add_batch(reqs, &res).ok());
    before_group = record_ends(slurp(src.file(DurableLog::journal_name(1)))).size();
    std::vector<std::string> fresh;
    for (int i = 0; i < 20; ++i) fresh.push_back("new" + std::to_string(i));
    std::vector<RuleStore::Change> group;
    for (const auto& k : fresh) group.push_back({RuleStore::Change::Op::add, k, "t", 0, "feed"});
    for (int i = 0; i < 5; ++i) group.push_back({RuleStore::Change::Op::del, keys[static_cast<std::size_t>(i)], {}, 0, {}});
    ASSERT_TRUE(s->apply(group, &res, nullptr, /*atomic=*/true).ok());
  }
  const std::string full = slurp(src.file(DurableLog::journal_name(1)));
  const std::vector<std::size_t> ends = record_ends(full);
  ASSERT_EQ(ends.size(), before_group + 1 + 25);  // the txn record, then the group's 25
  for (std::size_t cut = ends[before_group - 1]; cut <= full.size(); cut += 8) {
    test::TempDir dir;
    {
      std::ofstream f(dir.file(DurableLog::journal_name(1)), std::ios::binary);
      f.write(full.data(), static_cast<std::streamsize>(cut));
    }
    RecoveryReport rep;
    auto s = open_store(dir.path(), &rep);
    ASSERT_NE(s, nullptr) << cut;
    const bool whole = cut == full.size();
    EXPECT_EQ(s->size(), whole ? 25u : 10u) << "journal cut at " << cut << " of " << full.size();
    EXPECT_EQ(s->contains("old0"), !whole) << cut;
    EXPECT_EQ(s->contains("new0"), whole) << cut;
    // What is written after the restart stands alone, at the next start too.
    std::vector<Errc> res;
    const RuleStore::AddRequest after[] = {{"after", "t", 0, {}}};
    ASSERT_TRUE(s->add_batch(after, &res).ok());
    s.reset();
    s = open_store(dir.path());
    EXPECT_TRUE(s->contains("after")) << cut;
    EXPECT_EQ(s->size(), whole ? 26u : 11u) << cut;
  }
}

TEST(RuleStoreSets, AnAtomicGroupOfOneChangeNeedsNoTransactionRecord) {
  test::TempDir dir;
  auto s = open_store(dir.path());
  std::vector<Errc> res;
  const RuleStore::Change one[] = {{RuleStore::Change::Op::add, "k", "t", 0, {}}};
  ASSERT_TRUE(s->apply(one, &res, nullptr, true).ok());
  EXPECT_EQ(record_ends(slurp(dir.file(DurableLog::journal_name(1)))).size(), 1u);
}

}  // namespace
}  // namespace cg::store

namespace cg::store {
namespace {

// Rules per set by a walk of every rule: what set_counts() counted before
// it kept counts, and must still say.
std::vector<std::pair<std::string, std::size_t>> counts_by_walk(const RuleStore& s) {
  std::map<std::string, std::size_t> n;
  for (auto c = s.list(); c.next();) ++n[s.set_name(c.value().set_id)];
  return {n.begin(), n.end()};
}

std::vector<std::pair<std::string, std::size_t>> sorted_counts(const RuleStore& s) {
  auto v = s.set_counts();
  std::sort(v.begin(), v.end());
  return v;
}

// A journal that adds one key twice, in two sets, both records with a text
// (so both rules have side entries): the replay replaces the first rule by
// the second, and the count moves from the first set to the second (a
// review found the first set's count left at 1: the second record's side
// entry had replaced the first's before the first was erased).
TEST(RuleStoreSets, AReplayedReAddMovesTheCountToTheNewSet) {
  test::TempDir dir;
  {
    std::unique_ptr<JournalWriter> w;
    ASSERT_TRUE(JournalWriter::create(dir.file(DurableLog::journal_name(1)), 1, &w).ok());
    for (const auto& [id, set] : {std::pair<std::uint64_t, const char*>{1, "a"}, {2, "b"}}) {
      StoreRecord r;
      r.op = RecordOp::add;
      r.id = id;
      r.key = "k";
      r.text = "host k.example";
      r.set = set;
      r.added_unix_ms = 1'700'000'000'000;
      std::string p;
      encode_record(r, &p);
      ASSERT_TRUE(w->append(p).ok());
    }
    ASSERT_TRUE(w->sync().ok());
  }
  auto s = open_store(dir.path());
  ASSERT_EQ(s->size(), 1u);
  EXPECT_EQ(s->set_name(s->get("k")->set_id), "b");
  const std::vector<std::pair<std::string, std::size_t>> want = {{"b", 1}};
  EXPECT_EQ(s->set_counts(), want);
  ASSERT_TRUE(s->del("k").ok());
  EXPECT_TRUE(s->set_counts().empty());
}

// Every way a rule enters or leaves the store, in random order, with the
// counts checked against a walk after each: single adds (and lifetime
// updates), bulk adds, ordered and unordered groups, deletes, moves,
// expiry, flush, and a reopen from the journal and from a snapshot.
TEST(RuleStoreSets, SetCountsFollowEveryWayRulesComeAndGo) {
  test::TempDir dir;
  std::int64_t now = 1'700'000'000'000;
  auto open_at = [&] {
    RuleStore::Options o;
    o.state_dir = dir.path();
    o.clock = [&now] { return now; };
    std::unique_ptr<RuleStore> s;
    EXPECT_TRUE(RuleStore::open(o, &s).ok());
    return s;
  };
  auto s = open_at();
  std::mt19937 rng(77);
  const std::string sets[] = {"", "ads", "spam", "x"};
  auto key = [&] { return "k" + std::to_string(rng() % 200); };
  auto set = [&] { return sets[rng() % 4]; };
  using Op = RuleStore::Change::Op;
  for (int step = 0; step < 600; ++step) {
    std::vector<Errc> res;
    const unsigned what = rng() % 100;
    std::vector<std::string> keys;  // backing for views below
    if (what < 25) {
      keys = {key(), set()};
      ASSERT_TRUE(s->apply(std::vector<RuleStore::Change>{{Op::add, keys[0], {}, (rng() % 3 == 0) ? 1000 : 0, keys[1]}},
                           &res).ok());
    } else if (what < 40) {
      std::vector<RuleStore::AddRequest> reqs;
      const std::string st = set();
      for (int i = 0; i < 20; ++i) keys.push_back(key());
      for (const auto& k : keys) reqs.push_back({k, {}, 0, st});
      ASSERT_TRUE(s->add_batch(reqs, &res).ok());
    } else if (what < 55) {
      // A group, sorted (apply_sorted) or with a repeated key (the general path).
      for (int i = 0; i < 12; ++i) keys.push_back(key());
      std::vector<std::string> ss;
      for (int i = 0; i < 12; ++i) ss.push_back(set());
      std::vector<RuleStore::Change> ch;
      for (int i = 0; i < 12; ++i) ch.push_back({rng() % 3 == 0 ? Op::del : Op::add, keys[i], {}, 0, ss[i]});
      if (rng() % 2 == 0) {
        std::sort(ch.begin(), ch.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
        ch.erase(std::unique(ch.begin(), ch.end(), [](const auto& a, const auto& b) { return a.key == b.key; }),
                 ch.end());
      } else {
        ch.push_back(ch.front());
      }
      ASSERT_TRUE(s->apply(ch, &res, nullptr, rng() % 2 == 0).ok());
    } else if (what < 75) {
      keys = {key()};
      const Status st = s->del(keys[0]);
      ASSERT_TRUE(st.ok() || st.code() == Errc::absent) << st.to_string();
    } else if (what < 82) {
      keys = {key(), key()};
      const RuleStore::Move mv[] = {{keys[0], keys[1], {}}};
      if (keys[0] != keys[1]) {
        ASSERT_TRUE(s->move(mv, &res).ok());
      }
    } else if (what < 88) {
      now += 2000;
      std::vector<RuleStore::Removed> gone;
      ASSERT_TRUE(s->expire_due(&gone).ok());
    } else if (what < 90) {
      ASSERT_TRUE(s->flush().ok());
    } else if (what < 95) {
      s.reset();
      s = open_at();  // replays the journal
    } else {
      ASSERT_TRUE(s->snapshot().ok());
      s.reset();
      s = open_at();
    }
    ASSERT_EQ(sorted_counts(*s), counts_by_walk(*s)) << "step " << step << " op " << what;
  }
}

}  // namespace
}  // namespace cg::store
