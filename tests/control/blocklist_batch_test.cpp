// Blocklist::add_batch, the bulk `load` path (issue 12, item 4), in process
// (EAL for the lookup tables' memory, no ports). The batch is sorted once by
// order key and de-duplicated as neighbours; these tests pin what that must
// keep: the counts of added / existed / updated rules with repeats in any
// order, present rules and present rules with an expiry, every rule in the
// store, the exact set and the filter, listed with its canonical text, and
// the same state after a restart from the journal.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "control/blocklist.hpp"
#include "control/protocol.hpp"
#include "cuckoogate/store/rule_store.hpp"
#include "eal_test_main.hpp"
#include "rule_text.hpp"

namespace cg {
namespace {

std::string g_dir;

using test::R;

std::unique_ptr<Blocklist> open(const std::string& name, const std::string& state, std::size_t capacity = 4096) {
  Blocklist::Options o;
  o.capacity = capacity;
  o.name = name;
  o.state_dir = state;
  std::string err;
  auto b = Blocklist::create(o, &err);
  EXPECT_NE(b, nullptr) << err;
  return b;
}

std::vector<std::string> listed(const Blocklist& b) {
  std::vector<std::string> out;
  b.for_each(std::nullopt, "", [&](std::string_view t, int64_t) { out.emplace_back(t); });
  return out;
}

// Every kind, both families, prefixes, names whose keys share long prefixes.
std::vector<std::string> mixed(std::size_t n) {
  std::vector<std::string> t;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string a = "10." + std::to_string(i / 65536 % 256) + "." + std::to_string(i / 256 % 256) + "." +
                          std::to_string(i % 256);
    switch (i % 9) {
      case 0: t.push_back("src " + a); break;
      case 1: t.push_back("dst " + a); break;
      case 2: t.push_back("ip 2001:db8::" + std::to_string(i % 10000)); break;
      case 3: t.push_back("flow tcp " + a + ":1000 10.9.9.9:80"); break;
      case 4: t.push_back("service udp " + a + ":53"); break;
      case 5: t.push_back("host h" + std::to_string(i) + ".example.net"); break;
      case 6: t.push_back("url example.org/p/" + std::to_string(i)); break;
      case 7: t.push_back("src 10." + std::to_string(i % 256) + ".0.0/16"); break;
      default: t.push_back("host example.net"); break;  // the same rule many times
    }
  }
  return t;
}

// The canonical set: what separate adds of the rules would leave, sorted.
std::vector<std::string> canonical_set(const std::vector<Rule>& rules) {
  std::vector<std::string> want;
  for (const Rule& r : rules) want.push_back(format_rule(r));
  std::sort(want.begin(), want.end());
  want.erase(std::unique(want.begin(), want.end()), want.end());
  return want;
}

// The journal is compacted once the state directory holds as many dead
// records (replayed at a restart, but not a live rule's one record) as the
// store holds rules, and at least Options::snapshot_every: growing a large
// blocklist by loads never rewrites it; deletes and updates do, once they
// outnumber what stays.
// A blocklist of 4096 rules kept in `state`, compacted past `snapshot_every`
// dead records.
Blocklist::Options durable(const std::string& state, const char* name, uint64_t snapshot_every) {
  Blocklist::Options o;
  o.capacity = 4096;
  o.name = name;
  o.state_dir = state;
  o.snapshot_every = snapshot_every;
  return o;
}

// A compaction that fails (here: its snapshot file cannot be created; a
// full disk in the field) is said in `info` and tried again after a pause,
// not after every change: each try rotates the journal (one new file) and
// scans the whole store. An outside check counted 109 journals for 100 adds.
TEST(BlocklistBatch, AFailedCompactionIsReportedAndRetriedAfterAPause) {
  const std::string state = g_dir + "/compaction-fails";
  Blocklist::Options o = durable(state, "bbfail", 100);
  std::string err;
  auto b = Blocklist::create(o, &err);
  ASSERT_NE(b, nullptr) << err;
  auto snap = [](std::size_t seq) {
    std::string n = std::to_string(seq);
    return "snap-" + std::string(20 - n.size(), '0') + n + ".cgs.tmp";
  };
  for (std::size_t seq = 1; seq <= 1000; ++seq) std::filesystem::create_directory(state + "/" + snap(seq));
  auto files = [&](const char* prefix) {
    std::size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(state))
      n += e.path().filename().string().rfind(prefix, 0) == 0 && e.is_regular_file();
    return n;
  };
  auto rule = [](std::size_t i) { return R("host f" + std::to_string(i) + ".example.com"); };
  std::vector<Rule> rules;
  for (std::size_t i = 0; i < 300; ++i) rules.push_back(rule(i));
  ASSERT_EQ(b->add_batch(rules).added, 300u);
  for (std::size_t i = 0; i < 200; ++i) ASSERT_EQ(b->del(rule(i)), Blocklist::Result::kOk);
  b->maybe_snapshot();  // 500 records, 100 rules: due, and it fails
  EXPECT_EQ(b->compaction_failures(), 1u);
  EXPECT_NE(b->compaction_error(), "");
  const std::size_t journals = files("wal-");
  for (std::size_t i = 200; i < 250; ++i) {
    ASSERT_EQ(b->del(rule(i)), Blocklist::Result::kOk);
    b->maybe_snapshot();
  }
  EXPECT_EQ(b->compaction_failures(), 1u);  // not tried again within the pause
  EXPECT_EQ(files("wal-"), journals);
  for (std::size_t seq = 1; seq <= 1000; ++seq) std::filesystem::remove(state + "/" + snap(seq));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  ASSERT_EQ(b->del(rule(250)), Blocklist::Result::kOk);
  b->maybe_snapshot();  // the pause is over: compacted
  EXPECT_EQ(files("snap-"), 1u);
  EXPECT_EQ(b->compaction_error(), "");
  EXPECT_EQ(b->compaction_failures(), 1u);
  EXPECT_FALSE(b->store_read_only());
}

// Salvage keeps the valid part of a damaged snapshot; the state directory
// must then be whole again (an outside check found every later start
// refused the same damage and needed --salvage again).
TEST(BlocklistBatch, ASalvagedSnapshotIsRewrittenSoTheNextStartNeedsNoSalvage) {
  const std::string state = g_dir + "/salvage";
  Blocklist::Options o = durable(state, "bbsalv", 10);
  std::string err;
  auto rule = [](std::size_t i) { return R("host s" + std::to_string(i) + ".example.com"); };
  {
    auto b = Blocklist::create(o, &err);
    ASSERT_NE(b, nullptr) << err;
    std::vector<Rule> rules;
    for (std::size_t i = 0; i < 100; ++i) rules.push_back(rule(i));
    ASSERT_EQ(b->add_batch(rules).added, 100u);
    for (std::size_t i = 0; i < 60; ++i) ASSERT_EQ(b->del(rule(i)), Blocklist::Result::kOk);
    b->maybe_snapshot();  // 160 records, 40 rules: compacted
  }
  std::string snap;
  for (const auto& e : std::filesystem::directory_iterator(state))
    if (e.path().extension() == ".cgs") snap = e.path().string();
  ASSERT_FALSE(snap.empty());
  {  // a flipped byte in the middle of the snapshot
    std::FILE* f = std::fopen(snap.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, static_cast<long>(std::filesystem::file_size(snap) / 2), SEEK_SET);
    const int c = std::fgetc(f);
    std::fseek(f, -1, SEEK_CUR);
    std::fputc(c ^ 0x10, f);
    std::fclose(f);
  }
  o.name = "bbsalv2";
  EXPECT_EQ(Blocklist::create(o, &err), nullptr);  // refused: damage
  o.salvage = true;
  o.name = "bbsalv3";
  std::size_t kept = 0;
  {
    std::vector<std::string> notes;
    auto b = Blocklist::create(o, &err, &notes);
    ASSERT_NE(b, nullptr) << err;
    kept = b->size();
    EXPECT_GT(kept, 0u);
    EXPECT_LT(kept, 40u);
    EXPECT_NE(std::find(notes.begin(), notes.end(), "wrote a snapshot of the salvaged state"), notes.end());
  }
  o.salvage = false;
  o.name = "bbsalv4";
  auto b = Blocklist::create(o, &err);
  ASSERT_NE(b, nullptr) << err;  // whole again without --salvage
  EXPECT_EQ(b->size(), kept);
}

// kForget (an add whose expiry passed before it was applied): removes the
// rule if it is there; its absence fails no atomic group, unlike kDel's.
TEST(BlocklistBatch, ForgetRemovesIfPresentAndFailsNothing) {
  Blocklist::Options o;
  o.capacity = 1024;
  o.name = "bbforget";
  std::string err;
  auto b = Blocklist::create(o, &err);
  ASSERT_NE(b, nullptr) << err;
  using C = Blocklist::Change;
  using O = Blocklist::Outcome;
  const Rule gone = R("host gone.example"), kept = R("host kept.example"), there = R("host there.example");
  EXPECT_EQ(b->apply({C{C::Op::kForget, gone, 0, {}}, C{C::Op::kAdd, kept, 0, {}}}, /*atomic=*/true),
            (std::vector<O>{O::kAbsent, O::kAdded}));
  EXPECT_TRUE(b->contains(kept));
  ASSERT_EQ(b->add(there), Blocklist::Result::kOk);
  EXPECT_EQ(b->apply({C{C::Op::kForget, there, 0, {}}}, true), (std::vector<O>{O::kDeleted}));
  EXPECT_FALSE(b->contains(there));
  // A strict del of an absent rule still fails the whole group.
  ASSERT_EQ(b->add(there), Blocklist::Result::kOk);
  EXPECT_EQ(b->apply({C{C::Op::kForget, there, 0, {}}, C{C::Op::kDel, gone, 0, {}}}, true),
            (std::vector<O>{O::kNotApplied, O::kAbsent}));
  EXPECT_TRUE(b->contains(there));
  EXPECT_EQ(b->apply_group({C{C::Op::kForget, gone, 0, {}}, C{C::Op::kForget, kept, 0, {}}}, nullptr),
            (std::vector<O>{O::kAbsent, O::kDeleted}));
  EXPECT_FALSE(b->contains(kept));
}

TEST(BlocklistBatch, JournalIsCompactedWhenItsDeadRecordsOutnumberTheRules) {
  const std::string state = g_dir + "/compaction";
  Blocklist::Options o = durable(state, "bbsnap", 100);
  std::string err;
  auto b = Blocklist::create(o, &err);
  ASSERT_NE(b, nullptr) << err;
  auto snapshot_name = [&] {
    std::string name;
    for (const auto& e : std::filesystem::directory_iterator(state))
      if (e.path().filename().string().rfind("snap-", 0) == 0) name = e.path().filename().string();
    return name;
  };
  auto rule = [](std::size_t i) { return R("host n" + std::to_string(i) + ".example.com"); };
  std::size_t next = 0;
  auto add = [&](std::size_t n) {
    std::vector<Rule> rules;
    for (std::size_t i = 0; i < n; ++i, ++next) rules.push_back(rule(next));
    ASSERT_EQ(b->add_batch(rules).added, n);
    b->maybe_snapshot();
  };
  auto del = [&](std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to; ++i) ASSERT_EQ(b->del(rule(i)), Blocklist::Result::kOk) << i;
    b->maybe_snapshot();
  };
  add(150);  // 150 records, all live: counting records (>= 100) would compact here
  add(150);
  EXPECT_EQ(snapshot_name(), "");
  del(0, 50);  // 350 records, 250 rules: 100 dead < 250
  EXPECT_EQ(snapshot_name(), "");
  del(50, 130);  // 430 records, 170 rules: 260 dead >= 170: compacted
  const std::string first = snapshot_name();
  ASSERT_FALSE(first.empty());
  add(400);  // the snapshot's 170 + 400 records, 570 rules: none dead
  EXPECT_EQ(snapshot_name(), first);
  b.reset();
  o.name = "bbsnap2";
  auto again = Blocklist::create(o, &err);  // snapshot + journal give every rule back
  ASSERT_NE(again, nullptr) << err;
  EXPECT_EQ(again->size(), 570u);
  for (std::size_t i = 0; i < 130; i += 13) EXPECT_FALSE(again->contains(rule(i))) << i;
  for (std::size_t i = 130; i < 700; i += 7) EXPECT_TRUE(again->contains(rule(i))) << i;
  // The restored snapshot's records count as replayed: after 200 deletes,
  // 370 rules, 170 + 400 + 200 records, 400 dead >= 370 (without the
  // snapshot's 170, 230 dead would not be).
  for (std::size_t i = 130; i < 330; ++i) ASSERT_EQ(again->del(rule(i)), Blocklist::Result::kOk) << i;
  again->maybe_snapshot();
  EXPECT_NE(snapshot_name(), first);
  EXPECT_FALSE(snapshot_name().empty());
}

TEST(BlocklistBatch, RepeatsInAnyOrderCountOnceAndTheFirstWins) {
  const std::string state = g_dir + "/repeats";
  auto b = open("bb1", state);
  ASSERT_NE(b, nullptr);
  std::vector<std::string> texts = mixed(3000);
  std::mt19937 rng(7);
  std::shuffle(texts.begin(), texts.end(), rng);
  std::vector<Rule> rules;
  for (const auto& t : texts) rules.push_back(R(t));
  const std::vector<std::string> want = canonical_set(rules);

  const Blocklist::BatchResult res = b->add_batch(rules, "feed");
  ASSERT_EQ(res.result, Blocklist::Result::kOk);
  EXPECT_EQ(res.added, want.size());
  EXPECT_EQ(res.existed, rules.size() - want.size());
  EXPECT_EQ(res.updated, 0u);
  EXPECT_EQ(b->size(), want.size());
  for (const Rule& r : rules) ASSERT_TRUE(b->contains(r)) << format_rule(r);
  std::vector<std::string> got = listed(*b);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want);
  EXPECT_EQ(b->exact().size(), want.size());
  const auto counts = b->set_counts();
  ASSERT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts[0], (std::pair<std::string, std::size_t>("feed", want.size())));

  // A second load of the same rules adds nothing; the listing is unchanged.
  std::shuffle(rules.begin(), rules.end(), rng);
  const Blocklist::BatchResult again = b->add_batch(rules);
  EXPECT_EQ(again.added, 0u);
  EXPECT_EQ(again.existed, rules.size());
  EXPECT_EQ(b->size(), want.size());

  // A restart restores exactly this from the journal (keys only, no texts).
  b.reset();
  b = open("bb1r", state);
  ASSERT_NE(b, nullptr);
  got = listed(*b);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want);
  EXPECT_EQ(b->exact().size(), want.size());
  for (const Rule& r : rules) ASSERT_TRUE(b->contains(r)) << format_rule(r);
}

TEST(BlocklistBatch, PresentRulesWithAnExpiryBecomePermanentOthersExist) {
  const std::string state = g_dir + "/present";
  auto b = open("bb2", state);
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->add(R("host b.example"), 60000), Blocklist::Result::kOk);  // expires
  ASSERT_EQ(b->add(R("src 10.0.0.2")), Blocklist::Result::kOk);           // permanent
  const std::vector<Rule> batch = {R("src 10.0.0.3"), R("host b.example"), R("src 10.0.0.2"),
                                   R("src 10.0.0.1"), R("host b.example"), R("src 10.0.0.3"),
                                   R("url a.example/x")};
  const Blocklist::BatchResult res = b->add_batch(batch);
  ASSERT_EQ(res.result, Blocklist::Result::kOk);
  EXPECT_EQ(res.added, 3u);    // 10.0.0.3, 10.0.0.1, the url
  EXPECT_EQ(res.updated, 1u);  // host b.example: now permanent
  EXPECT_EQ(res.existed, 3u);  // 10.0.0.2, and the repeats of host b.example and 10.0.0.3
  EXPECT_EQ(b->size(), 5u);
  EXPECT_FALSE(b->ms_to_next_expiry().has_value());
  const std::vector<std::string> want = {"src 10.0.0.1", "src 10.0.0.2", "src 10.0.0.3", "url a.example/x",
                                         "host b.example"};
  EXPECT_EQ(listed(*b), want);  // listing order: kind, then the key
}

// New rules around present rules with an expiry (which the store must get
// too, and after which add_batch lists its new rules' indices: before the
// first such rule they are not stored, the identity), repeats and present
// permanent rules (which are no requests: from the first one on the
// requests' batch positions are listed), into tables that must grow for
// the batch: every rule ends up in the store, the exact set
// and the listing, the expiring ones permanent, and a restart agrees.
TEST(BlocklistBatch, NewRulesAroundExpiringPresentOnesIntoGrowingTables) {
  const std::string state = g_dir + "/around";
  auto b = open("bb5", state, 64);
  ASSERT_NE(b, nullptr);
  std::vector<std::string> texts = mixed(3000);
  std::vector<std::string> expiring, permanent;  // present before the batch
  for (std::size_t i = 0; i < texts.size(); i += 97) {
    if (texts[i] == "host example.net") continue;
    expiring.push_back(texts[i]);
    ASSERT_EQ(b->add(R(texts[i]), 60000), Blocklist::Result::kOk) << texts[i];
  }
  for (std::size_t i = 50; i < texts.size(); i += 301) {
    if (texts[i] == "host example.net" || b->contains(R(texts[i]))) continue;
    permanent.push_back(texts[i]);
    ASSERT_EQ(b->add(R(texts[i])), Blocklist::Result::kOk) << texts[i];
  }
  ASSERT_FALSE(permanent.empty());
  std::vector<Rule> rules;
  for (const auto& t : texts) rules.push_back(R(t));
  const std::vector<std::string> want = canonical_set(rules);
  const Blocklist::BatchResult res = b->add_batch(rules);
  ASSERT_EQ(res.result, Blocklist::Result::kOk);
  EXPECT_EQ(res.updated, expiring.size());
  EXPECT_EQ(res.added, want.size() - expiring.size() - permanent.size());
  EXPECT_EQ(res.existed, rules.size() - want.size() + permanent.size());
  EXPECT_GT(b->growths(), 0u);
  EXPECT_FALSE(b->ms_to_next_expiry().has_value());
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(b->size(), want.size());
    EXPECT_EQ(b->exact().size(), want.size());
    for (const Rule& r : rules) ASSERT_TRUE(b->contains(r)) << format_rule(r);
    std::vector<std::string> got = listed(*b);
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want);
    b.reset();
    b = open("bb5r" + std::to_string(round), state, 64);
    ASSERT_NE(b, nullptr);
  }
  EXPECT_FALSE(b->ms_to_next_expiry().has_value());
}

// Hit-counter slots cost no resident memory until a slot is reused: a new
// rule's slot was never counted, so only a reused slot needs the base that
// hits() subtracts (issue 12, item 3: 8 bytes a rule before, for every slot),
// and only a reused slot's counters are read.
TEST(BlocklistBatch, HitCounterBasesAreWrittenOnlyForReusedSlots) {
  auto b = open("bb3", "", 8192);
  ASSERT_NE(b, nullptr);
  std::vector<uint64_t> counters(4096, 0);  // slots are handed out from 0
  std::size_t reads = 0;
  b->set_hit_reader([&](uint32_t s) {
    ++reads;
    return s < counters.size() ? counters[s] : 0;
  });
  std::vector<Rule> rules;
  for (int i = 0; i < 3000; ++i) rules.push_back(R("src 10.1." + std::to_string(i / 256) + "." + std::to_string(i % 256)));
  ASSERT_EQ(b->add_batch(rules).added, 3000u);
  EXPECT_EQ(b->memory_use().hits, 0u);  // no slot reused: nothing committed
  EXPECT_EQ(reads, 0u);  // nor are the workers' counters of new slots read (their pages stay untouched)
  // Hits on a rule, then it goes and another takes its slot: the newcomer
  // starts at zero although the worker's counter kept the old count.
  for (uint64_t& c : counters) c += 5;
  EXPECT_EQ(b->hits(R("src 10.1.0.7")), 5u);
  ASSERT_EQ(b->del(R("src 10.1.0.7")), Blocklist::Result::kOk);
  ASSERT_EQ(b->add(R("host reused.example")), Blocklist::Result::kOk);
  EXPECT_EQ(b->hits(R("host reused.example")), 0u);
  EXPECT_EQ(b->hits(R("src 10.1.0.8")), 5u);
  // One slot released: its generation and base, 16 bytes.
  EXPECT_EQ(b->memory_use().hits, 16u);
}

// A `load` is held as order keys while it streams (issue 12, item 4: a
// 104-byte Rule per line before, ~22 % of the control thread in the faults of
// that vector's growth), and applied from them like the rules themselves.
TEST(BlocklistBatch, ALoadIsHeldAsOrderKeysAndAppliedLikeItsRules) {
  std::vector<std::string> texts = mixed(2000);
  std::vector<Rule> rules;
  for (const auto& t : texts) rules.push_back(R(t));
  Blocklist::KeyBatch keys;
  std::size_t key_bytes = 0;
  for (const Rule& r : rules) {
    keys.add(r);
    key_bytes += rule_order_key(r).size();
  }
  ASSERT_EQ(keys.size(), rules.size());
  EXPECT_EQ(keys.bytes(), key_bytes);
  EXPECT_EQ(keys.key(5), rule_order_key(rules[5]));
  EXPECT_EQ(keys.rules(), rules);  // every key decodes to its rule

  // Through the protocol: held per rule is its key, its end offset and the
  // bytes applying it will need, no parsed Rule.
  auto b = open("bb4", g_dir + "/keys");
  ASSERT_NE(b, nullptr);
  CommandHandler h(*b, [](std::string&) {}, [](std::string&) {});
  Session s;
  std::string out;
  h.handle_line(s, "load", out);
  for (const auto& t : texts) h.handle_line(s, t, out);
  EXPECT_EQ(h.load_bytes_held(), key_bytes + texts.size() * (Blocklist::KeyBatch::kIndexBytes + kLoadBytesPerRule));
  h.handle_line(s, ".", out);
  EXPECT_EQ(h.load_bytes_held(), 0u);
  // The same rules one by one elsewhere: the same outcome and listing.
  auto one = open("bb5", "");
  ASSERT_NE(one, nullptr);
  std::size_t added = 0;
  for (const Rule& r : rules) added += one->add(r) == Blocklist::Result::kOk;
  EXPECT_EQ(out, "OK loaded " + std::to_string(texts.size()) + " added " + std::to_string(added) + " existed " +
                     std::to_string(texts.size() - added) + " updated 0\n");
  EXPECT_EQ(listed(*b), listed(*one));
  for (const Rule& r : rules) ASSERT_TRUE(b->contains(r)) << format_rule(r);
}

// A restart puts every stored rule back into the lookup tables (Blocklist::
// create restores them in groups of 32, keys first, then the inserts): more
// rules than a group, every kind, both families, prefixes.
TEST(BlocklistBatch, ARestartPutsEveryStoredRuleBackIntoTheLookupTables) {
  const std::vector<std::string> texts = mixed(2000);
  std::vector<Rule> rules;
  for (const auto& t : texts) rules.push_back(R(t));
  const std::string state = g_dir + "/restore";
  std::size_t stored = 0;
  {
    auto b = open("bb6", state);
    ASSERT_NE(b, nullptr);
    ASSERT_EQ(b->add_batch(rules).result, Blocklist::Result::kOk);
    stored = b->size();
  }
  auto b = open("bb7", state);
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->size(), stored);
  EXPECT_EQ(b->exact().size(), stored);
  EXPECT_EQ(b->filter().stats().items, stored);
  for (const Rule& r : rules) {
    const std::string key = rule_key(r);
    RuleKind kind;
    uint32_t slot;
    ASSERT_TRUE(b->filter().contains(key_hash(key.data(), key.size()))) << format_rule(r);
    ASSERT_TRUE(b->exact().contains(key_hash128(key.data(), key.size()), &kind, &slot)) << format_rule(r);
    EXPECT_EQ(kind, r.kind) << format_rule(r);
  }
}

// A stored key that is no rule (not written by this version: a damaged or
// foreign state directory) fails the start with its size and kind, however
// many rules come before it.
TEST(BlocklistBatch, AStoredKeyThatIsNoRuleFailsTheStart) {
  const std::string state = g_dir + "/norule";
  {
    auto b = open("bb8", state);
    ASSERT_NE(b, nullptr);
    std::vector<Rule> rules;
    for (const auto& t : mixed(100)) rules.push_back(R(t));
    ASSERT_EQ(b->add_batch(rules).result, Blocklist::Result::kOk);
  }
  {
    store::RuleStore::Options so;
    so.state_dir = state;
    std::unique_ptr<store::RuleStore> st;
    ASSERT_TRUE(store::RuleStore::open(so, &st, nullptr).ok());
    ASSERT_TRUE(st->add(std::string("\x7fnot a rule", 12), "").ok());  // sorts after every kind
  }
  Blocklist::Options o;
  o.capacity = 4096;
  o.name = "bb9";
  o.state_dir = state;
  std::string err;
  EXPECT_EQ(Blocklist::create(o, &err), nullptr);
  EXPECT_NE(err.find("holds a rule key that is no rule (12 bytes, kind 127)"), std::string::npos) << err;
}

}  // namespace
}  // namespace cg

int main(int argc, char** argv) { return cg::test::run_eal_tests(argc, argv, "blocklist_batch", &cg::g_dir); }
