// exact::KeyTable: the exact set's cuckoo table (one writer, lock-free
// readers). Sequential semantics, a table filled until inserts fail, keys
// forced into shared buckets (cuckoo paths), and readers racing a writer that
// moves, erases and reuses entries (run under TSan in build-tsan).
#include "cuckoogate/exact/key_table.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace cg::exact {
namespace {

// Zeroed, bucket-aligned memory for a table of `capacity` keys.
struct Memory {
  explicit Memory(std::size_t capacity) : bytes(KeyTable::bytes_for(capacity)) {
    p = std::aligned_alloc(KeyTable::kBucketBytes, bytes);
    std::memset(p, 0, bytes);
  }
  ~Memory() { std::free(p); }
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;
  std::size_t bytes;
  void* p;
};

std::vector<Key128> random_keys(std::size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Key128> keys(n);
  for (Key128& k : keys) k = {rng(), rng()};
  return keys;
}

uint32_t value_of(std::size_t i) { return static_cast<uint32_t>(i * 8 + 1); }  // never 0

TEST(KeyTable, SizedForCapacityAt80PercentWithAMinimum) {
  EXPECT_EQ(KeyTable::buckets_for(0), KeyTable::kMinBuckets);
  EXPECT_EQ(KeyTable::buckets_for(1'200'000), 500'000u);  // 3 entries a bucket, 80 %
  EXPECT_EQ(KeyTable::bytes_for(1'200'000), 500'000u * 64);
}

TEST(KeyTable, InsertFindUpdateEraseAndReuse) {
  constexpr std::size_t kN = 100'000;
  Memory m(kN);
  KeyTable t(m.p, kN);
  const std::vector<Key128> keys = random_keys(2 * kN, 1);  // the second half is never inserted
  for (std::size_t i = 0; i < kN; ++i) ASSERT_EQ(t.insert(keys[i], value_of(i)), 0) << i;
  EXPECT_EQ(t.size(), kN);
  uint32_t v = 0;
  for (std::size_t i = 0; i < kN; ++i) {
    ASSERT_TRUE(t.find(keys[i], &v)) << i;
    ASSERT_EQ(v, value_of(i));
  }
  for (std::size_t i = kN; i < 2 * kN; ++i) ASSERT_FALSE(t.find(keys[i], &v)) << i;
  // A present key's value is replaced, not added twice.
  ASSERT_EQ(t.insert(keys[7], 12345), 0);
  EXPECT_EQ(t.size(), kN);
  ASSERT_TRUE(t.find(keys[7], &v));
  EXPECT_EQ(v, 12345u);
  // Erase the even ones; the odd ones stay; erased entries take new keys.
  for (std::size_t i = 0; i < kN; i += 2) ASSERT_TRUE(t.erase(keys[i])) << i;
  EXPECT_FALSE(t.erase(keys[0]));
  EXPECT_FALSE(t.erase(keys[kN]));
  EXPECT_EQ(t.size(), kN / 2);
  for (std::size_t i = 0; i < kN; ++i) {
    ASSERT_EQ(t.find(keys[i], &v), i % 2 == 1) << i;
    if (i % 2 == 1) {
      ASSERT_EQ(v, i == 7 ? 12345u : value_of(i));
    }
  }
  for (std::size_t i = kN; i < kN + kN / 2; ++i) ASSERT_EQ(t.insert(keys[i], value_of(i)), 0) << i;
  for (std::size_t i = 0; i < kN + kN / 2; ++i) {
    const bool present = i >= kN || i % 2 == 1;
    ASSERT_EQ(t.find(keys[i], &v), present) << i;
    if (present && i != 7) {
      ASSERT_EQ(v, value_of(i));
    }
  }
  EXPECT_EQ(t.size(), kN);
}

// Past capacity the table fills to ~95 % through cuckoo paths; the insert
// that finds none fails and every key inserted before is still found.
TEST(KeyTable, FillsWellPastCapacityThenRefusesAndLosesNothing) {
  constexpr std::size_t kCap = 30'000;
  Memory m(kCap);
  KeyTable t(m.p, kCap);
  const std::size_t entries = t.buckets() * KeyTable::kSlots;
  const std::vector<Key128> keys = random_keys(entries + 1, 2);
  std::size_t n = 0;
  while (n < keys.size() && t.insert(keys[n], value_of(n)) == 0) ++n;
  ASSERT_LT(n, keys.size()) << "a table cannot hold more keys than entries";
  EXPECT_GT(n, entries * 9 / 10) << "cuckoo paths fill a 3-entry-bucket table past 90 %";
  EXPECT_EQ(t.size(), n);
  uint32_t v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(t.find(keys[i], &v)) << i;
    ASSERT_EQ(v, value_of(i));
  }
  EXPECT_FALSE(t.find(keys[n], &v));
  // Room again after erases (a tenth of the keys: one free entry may be
  // beyond the search's reach).
  for (std::size_t i = 0; i < n; i += 10) ASSERT_TRUE(t.erase(keys[i]));
  EXPECT_EQ(t.insert(keys[n], value_of(n)), 0);
  EXPECT_TRUE(t.find(keys[n], &v));
  for (std::size_t i = 1; i < n; ++i) {
    ASSERT_EQ(t.find(keys[i], &v), i % 10 != 0) << i;
  }
}

// Keys whose two buckets are among five (first in 0-2, second in 3-4):
// every insert past the first few needs a cuckoo path, and the fifteen
// entries of those buckets take exactly fifteen such keys.
TEST(KeyTable, KeysSharingFewBucketsMoveAlongCuckooPaths) {
  Memory m(0);
  KeyTable t(m.p, 0);
  const uint64_t nb = t.buckets();
  // The key word whose bucket is b: ((w >> 32) * nb) >> 32 == b.
  const auto word_for = [&](uint64_t b, uint64_t low) { return (((b << 32) + nb - 1) / nb) << 32 | low; };
  std::vector<Key128> keys;
  for (uint64_t i = 0; i < 16; ++i) keys.push_back({word_for(i % 3, i), word_for(3 + i % 2, i)});
  uint32_t v = 0;
  for (std::size_t i = 0; i < 15; ++i) {
    ASSERT_EQ(t.insert(keys[i], value_of(i)), 0) << i;
    for (std::size_t j = 0; j <= i; ++j) {
      ASSERT_TRUE(t.find(keys[j], &v)) << i << " " << j;
      ASSERT_EQ(v, value_of(j));
    }
  }
  EXPECT_EQ(t.insert(keys[15], value_of(15)), -ENOSPC) << "five buckets of three entries hold 15 keys";
  EXPECT_EQ(t.size(), 15u);
  for (std::size_t j = 0; j < 15; ++j) {
    ASSERT_TRUE(t.find(keys[j], &v)) << j;
    ASSERT_EQ(v, value_of(j));
  }
  EXPECT_FALSE(t.find(keys[15], &v));
  ASSERT_TRUE(t.erase(keys[4]));
  EXPECT_EQ(t.insert(keys[15], value_of(15)), 0);
  EXPECT_TRUE(t.find(keys[15], &v));
}

// Readers look up keys present throughout (always found, with their value)
// and keys never inserted (never found) while the writer fills the table to
// ~93 % (cuckoo moves), erases and reinserts keys of its own, and updates the
// values of others. Under TSan this also checks that every shared access is
// an atomic.
TEST(KeyTableConcurrency, ReadersNeverMissAKeyPresentThroughout) {
  constexpr std::size_t kCap = 20'000;
  Memory m(kCap);
  KeyTable t(m.p, kCap);
  const std::size_t entries = t.buckets() * KeyTable::kSlots;
  const std::size_t stable_n = entries / 2, churn_n = entries * 43 / 100;
  const std::vector<Key128> stable = random_keys(stable_n, 3), churn = random_keys(churn_n, 4),
                            absent = random_keys(2000, 5);
  for (std::size_t i = 0; i < stable_n; ++i) ASSERT_EQ(t.insert(stable[i], value_of(i)), 0);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> misses{0}, wrong{0}, false_hits{0}, lookups{0};
  auto reader = [&](unsigned seed) {
    std::mt19937 rng(seed);
    uint64_t n = 0;
    uint32_t v = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      const std::size_t i = rng() % stable_n;
      if (!t.find(stable[i], &v)) {
        misses.fetch_add(1, std::memory_order_relaxed);
      } else if (v != value_of(i) && v != value_of(i) + 4) {
        wrong.fetch_add(1, std::memory_order_relaxed);
      }
      if (t.find(absent[rng() % absent.size()], &v)) false_hits.fetch_add(1, std::memory_order_relaxed);
      ++n;
    }
    lookups.fetch_add(n, std::memory_order_relaxed);
  };
  std::vector<std::thread> readers;
  for (unsigned r = 0; r < 2; ++r) readers.emplace_back(reader, 10 + r);
  for (int round = 0; round < 30; ++round) {
    for (std::size_t i = 0; i < churn_n; ++i) ASSERT_EQ(t.insert(churn[i], 3), 0) << round << " " << i;
    for (std::size_t i = round % 2; i < stable_n; i += 7) {  // value updates in place
      ASSERT_EQ(t.insert(stable[i], round % 2 == 0 ? value_of(i) + 4 : value_of(i)), 0);
    }
    for (std::size_t i = 0; i < churn_n; ++i) ASSERT_TRUE(t.erase(churn[i]));
  }
  stop.store(true, std::memory_order_relaxed);
  for (std::thread& th : readers) th.join();
  EXPECT_EQ(misses.load(), 0u);
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_EQ(false_hits.load(), 0u);
  EXPECT_GT(lookups.load(), 0u);
  EXPECT_EQ(t.size(), stable_n);
}

// The same race on five buckets, 0-4: nine keys stay (first bucket in 0-2,
// second in 3-4) while the writer inserts six keys that live only in 0-2
// (pushing six stable keys to their second buckets), erases them, inserts
// six that live only in 3-4 (pushing those back to their first buckets),
// erases them, and again. So stable keys keep moving both ways while the
// readers look them up: a lookup that missed a key moving from its second
// bucket to its first must notice the move and look again.
TEST(KeyTableConcurrency, ReadersFindKeysTheWriterKeepsMoving) {
  Memory m(0);
  KeyTable t(m.p, 0);
  const uint64_t nb = t.buckets();
  const auto word_for = [&](uint64_t b, uint64_t low) { return (((b << 32) + nb - 1) / nb) << 32 | low; };
  constexpr std::size_t kStable = 9;
  std::vector<Key128> keys, low_only, high_only;
  for (uint64_t i = 0; i < kStable; ++i) keys.push_back({word_for(i % 3, i), word_for(3 + i % 2, i)});
  for (uint64_t j = 0; j < 6; ++j) {
    low_only.push_back({word_for(j % 3, 100 + j), word_for((j + 1) % 3, 100 + j)});
    high_only.push_back({word_for(3 + j % 2, 200 + j), word_for(4 - j % 2, 200 + j)});
  }
  for (std::size_t i = 0; i < kStable; ++i) ASSERT_EQ(t.insert(keys[i], value_of(i)), 0);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> misses{0}, wrong{0}, lookups{0};
  auto reader = [&]() {
    uint32_t v = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      for (std::size_t i = 0; i < kStable; ++i) {
        if (!t.find(keys[i], &v)) {
          misses.fetch_add(1, std::memory_order_relaxed);
        } else if (v != value_of(i)) {
          wrong.fetch_add(1, std::memory_order_relaxed);
        }
      }
      lookups.fetch_add(kStable, std::memory_order_relaxed);
    }
  };
  std::vector<std::thread> readers;
  for (unsigned r = 0; r < 2; ++r) readers.emplace_back(reader);
  // Until the readers made 10 M lookups between them (or 20 s pass: a loaded
  // machine), at least 20 000 rounds.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int round = 0; round < 20000 || (lookups.load(std::memory_order_relaxed) < 10'000'000 &&
                                        std::chrono::steady_clock::now() < until);
       ++round) {
    for (const std::vector<Key128>* group : {&low_only, &high_only}) {
      for (const Key128& k : *group) ASSERT_EQ(t.insert(k, 3), 0) << round;
      for (const Key128& k : *group) ASSERT_TRUE(t.erase(k));
    }
  }
  EXPECT_EQ(t.size(), kStable);
  stop.store(true, std::memory_order_relaxed);
  for (std::thread& th : readers) th.join();
  EXPECT_EQ(misses.load(), 0u);
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(lookups.load(), 0u);
}

}  // namespace
}  // namespace cg::exact
