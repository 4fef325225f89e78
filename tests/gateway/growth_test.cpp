// Growth of the lookup tables (issue 12, item 2; docs/concurrency.md,
// "Growth"), in process with EAL: from a tiny capacity to 100x by single
// adds and by batches, every rule found in the published tables after each
// growth, one fingerprint per rule (deleting everything leaves the filter
// empty), hit counters kept, max_memory as the only limit, and a reader
// thread registered with the QSBR variable that never misses a present key
// while the control thread grows the tables.
#include <gtest/gtest.h>
#include <rte_malloc.h>
#include <rte_rcu_qsbr.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "control/blocklist.hpp"
#include "eal_test_main.hpp"
#include "rule_text.hpp"

namespace cg {
namespace {

std::string g_dir;
int g_instance = 0;

using test::R;

// Rule i of a mix of kinds, including IPv6 prefixes (probed in the filter).
std::string rule_text(std::size_t i) {
  switch (i % 4) {
    case 0: return "host h" + std::to_string(i) + ".example";
    case 1: return "src 10." + std::to_string((i >> 16) & 255) + "." + std::to_string((i >> 8) & 255) + "." +
                   std::to_string(i & 255);
    case 2: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "dst 2001:db8:%zx:%zx::/64", i & 0xffff, i >> 16);
      return buf;
    }
    default: return "url example.com/p" + std::to_string(i);
  }
}

// What a worker finds for a rule in one tables snapshot: the filter reports
// its key and the exact set confirms it.
bool found(const LookupTables& t, const Rule& r) {
  const std::string key = rule_key(r);
  RuleKind kind;
  uint32_t slot;
  return t.filter->contains(key_hash(key.data(), key.size())) &&
         t.exact->contains(key_hash128(key.data(), key.size()), &kind, &slot);
}

class Growth : public testing::Test {
 protected:
  void TearDown() override {
    bl_.reset();  // before the QSBR variable its exact sets refer to
    rte_free(qsv_);
  }
  void open(std::size_t capacity, std::size_t max_memory = 0, unsigned readers = 0) {
    bl_.reset();
    if (readers != 0) {
      qsv_ = static_cast<rte_rcu_qsbr*>(rte_zmalloc("grow_qsv", rte_rcu_qsbr_get_memsize(readers), 64));
      ASSERT_NE(qsv_, nullptr);
      ASSERT_EQ(rte_rcu_qsbr_init(qsv_, readers), 0);
    }
    Blocklist::Options o;
    o.capacity = capacity;
    o.max_memory = max_memory;
    o.qsv = qsv_;
    o.name = "gr" + std::to_string(++g_instance);
    std::string err;
    bl_ = Blocklist::create(o, &err);
    ASSERT_TRUE(bl_) << err;
    hits_.assign(1u << 16, 0);
    bl_->set_hit_reader([this](uint32_t s) { return s < hits_.size() ? hits_[s] : 0; });
  }
  const LookupTables& tables() const { return *bl_->tables().load(std::memory_order_acquire); }
  // Every rule 0..n-1 is found in the current tables.
  void expect_all_found(std::size_t n) {
    std::size_t missing = 0;
    for (std::size_t i = 0; i < n; ++i) missing += !found(tables(), R(rule_text(i)));
    EXPECT_EQ(missing, 0u) << "after " << bl_->growths() << " growths, " << n << " rules";
  }

  std::unique_ptr<Blocklist> bl_;
  rte_rcu_qsbr* qsv_ = nullptr;
  std::vector<uint64_t> hits_;
};

TEST_F(Growth, SingleAddsGrowFromTinyTo100xWithoutLosingARule) {
  open(64);
  const std::size_t n = 6400;
  uint64_t growths = 0;
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(bl_->add(R(rule_text(i))), Blocklist::Result::kOk) << i << ": " << bl_->last_error();
    if (bl_->growths() != growths) {
      growths = bl_->growths();
      expect_all_found(i + 1);
    }
  }
  EXPECT_GE(bl_->growths(), 6u);  // 64 -> 128 -> ... -> 8192
  EXPECT_GE(bl_->capacity(), n);
  expect_all_found(n);
  EXPECT_EQ(bl_->prefixes().size(), n / 4);
  // One table sized for the rules (not a chain): its slots are what a filter
  // built for the capacity gets, and its false-positive rate that of 12-bit
  // fingerprints at this load (2 buckets x 4 slots: ~0.2%).
  const FilterStats fs = bl_->filter().stats();
  EXPECT_EQ(fs.items, n);
  EXPECT_LE(fs.capacity_slots, 4 * bl_->capacity());
  std::size_t fp = 0;
  const std::size_t probes = 200000;
  for (std::size_t i = 0; i < probes; ++i) {
    const std::string k = "absent-key-" + std::to_string(i);
    fp += tables().filter->contains(key_hash(k.data(), k.size()));
  }
  EXPECT_LT(fp, probes / 100) << "false positives " << fp << " of " << probes;
}

TEST_F(Growth, OneFingerprintPerRuleAcrossGrowthsAndHitCountersKept) {
  open(64);
  ASSERT_EQ(bl_->add(R("host counted.example")), Blocklist::Result::kOk);
  // A worker counted 7 hits for it (its slot, as the exact set names it).
  {
    const std::string key = rule_key(R("host counted.example"));
    RuleKind kind;
    uint32_t slot = 0;
    ASSERT_TRUE(tables().exact->contains(key_hash128(key.data(), key.size()), &kind, &slot));
    hits_[slot] += 7;
  }
  for (std::size_t i = 0; i < 2000; ++i) ASSERT_EQ(bl_->add(R(rule_text(i))), Blocklist::Result::kOk);
  ASSERT_GE(bl_->growths(), 4u);
  EXPECT_EQ(bl_->hits(R("host counted.example")), 7u);
  // Delete every rule: each delete erases the one fingerprint its rule put
  // in the current filter, so none is left over and none was missing.
  for (std::size_t i = 0; i < 2000; ++i) ASSERT_EQ(bl_->del(R(rule_text(i))), Blocklist::Result::kOk);
  ASSERT_EQ(bl_->del(R("host counted.example")), Blocklist::Result::kOk);
  EXPECT_EQ(bl_->filter().stats().items, 0u);
  EXPECT_EQ(bl_->exact().size(), 0u);
  EXPECT_EQ(bl_->prefixes().size(), 0u);
}

TEST_F(Growth, BatchesAndAtomicGroupsGrowToo) {
  open(64);
  std::vector<Rule> batch;
  for (std::size_t i = 0; i < 5000; ++i) batch.push_back(R(rule_text(i)));
  const Blocklist::BatchResult br = bl_->add_batch(batch);
  ASSERT_EQ(br.result, Blocklist::Result::kOk) << bl_->last_error();
  EXPECT_EQ(br.added, 5000u);
  expect_all_found(5000);
  // An atomic group whose inserts grow the tables in the middle: the rules
  // inserted before the growth (not in the store yet) are copied too.
  std::vector<Blocklist::Change> group;
  for (std::size_t i = 5000; i < 12000; ++i) group.push_back({Blocklist::Change::Op::kAdd, R(rule_text(i)), 0, {}});
  const uint64_t before = bl_->growths();
  for (const Blocklist::Outcome o : bl_->apply(group, /*atomic=*/true)) ASSERT_EQ(o, Blocklist::Outcome::kAdded);
  EXPECT_GT(bl_->growths(), before);
  expect_all_found(12000);
  EXPECT_EQ(bl_->filter().stats().items, 12000u);
}

TEST_F(Growth, MassDeletesShrinkTheTablesAndKeepTheRest) {
  open(64);
  for (std::size_t i = 0; i < 8000; ++i) ASSERT_EQ(bl_->add(R(rule_text(i))), Blocklist::Result::kOk);
  const std::size_t big = bl_->capacity();
  const std::size_t big_bytes = bl_->table_bytes();
  ASSERT_GE(big, 8000u);
  for (std::size_t i = 100; i < 8000; ++i) ASSERT_EQ(bl_->del(R(rule_text(i))), Blocklist::Result::kOk);
  bl_->maybe_snapshot();  // the control loop's housekeeping
  EXPECT_LT(bl_->capacity(), big / 8);
  EXPECT_GE(bl_->capacity(), 400u);  // at most 1/4 full after the shrink
  EXPECT_LT(bl_->table_bytes(), big_bytes);
  expect_all_found(100);
  EXPECT_EQ(bl_->filter().stats().items, 100u);
  for (std::size_t i = 100; i < 8000; i += 97) EXPECT_FALSE(found(tables(), R(rule_text(i)))) << i;
  // And it grows again.
  for (std::size_t i = 100; i < 3000; ++i) ASSERT_EQ(bl_->add(R(rule_text(i))), Blocklist::Result::kOk);
  expect_all_found(3000);
}

TEST_F(Growth, MaxMemoryIsTheOnlyLimitAndSaysSo) {
  const std::size_t max = 512 << 10;
  open(64, max);
  std::size_t added = 0;
  Blocklist::Result r = Blocklist::Result::kOk;
  for (; added < 100000; ++added) {
    r = bl_->add(R(rule_text(added)));
    if (r != Blocklist::Result::kOk) break;
  }
  ASSERT_EQ(r, Blocklist::Result::kFull);
  EXPECT_NE(bl_->last_error().find("max_memory reached"), std::string::npos) << bl_->last_error();
  EXPECT_LE(bl_->table_bytes(), max);
  // Refused only when the next doubling would not fit, not before.
  EXPECT_GT(2 * bl_->table_bytes() + 4096, max);
  EXPECT_GE(added, bl_->capacity());
  expect_all_found(added);  // nothing lost by the refused growth
  EXPECT_FALSE(bl_->contains(R(rule_text(added))));
}

TEST_F(Growth, AReaderNeverMissesAPresentKeyWhileTheTablesGrow) {
  open(64, 0, 1);
  std::vector<Rule> fixed;
  for (std::size_t i = 0; i < 40; ++i) {
    fixed.push_back(R("host fixed" + std::to_string(i) + ".example"));
    ASSERT_EQ(bl_->add(fixed.back()), Blocklist::Result::kOk);
  }
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> passes{0}, misses{0};
  std::thread reader([&] {
    ASSERT_EQ(rte_rcu_qsbr_thread_register(qsv_, 0), 0);
    rte_rcu_qsbr_thread_online(qsv_, 0);
    // relaxed: a stop flag; results are read after join.
    while (!stop.load(std::memory_order_relaxed)) {
      // One "burst", as Worker::process does it: generation, then tables.
      (void)bl_->generation().load(std::memory_order_acquire);
      const LookupTables* t = bl_->tables().load(std::memory_order_acquire);
      for (const Rule& r : fixed) misses.fetch_add(!found(*t, r), std::memory_order_relaxed);
      passes.fetch_add(1, std::memory_order_relaxed);
      rte_rcu_qsbr_quiescent(qsv_, 0);
    }
    rte_rcu_qsbr_thread_offline(qsv_, 0);
    rte_rcu_qsbr_thread_unregister(qsv_, 0);
  });
  for (std::size_t i = 0; i < 20000; ++i) {
    ASSERT_EQ(bl_->add(R(rule_text(i))), Blocklist::Result::kOk) << bl_->last_error();
    if (i % 4 == 3) {
      ASSERT_EQ(bl_->del(R(rule_text(i))), Blocklist::Result::kOk);  // changes in between
    }
  }
  stop.store(true, std::memory_order_relaxed);
  reader.join();
  EXPECT_GE(bl_->growths(), 7u);
  EXPECT_GT(passes.load(), 0u);
  EXPECT_EQ(misses.load(), 0u) << "in " << passes.load() << " passes";
}

}  // namespace
}  // namespace cg

int main(int argc, char** argv) { return cg::test::run_eal_tests(argc, argv, "growth-test", &cg::g_dir); }
