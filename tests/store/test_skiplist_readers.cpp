// Readers of SkipListMap (contains, find, Cursor) must not allocate, even
// while deleters leave nodes half-removed in front of them (issue 13,
// finding 4: readers used to append missing delete markers with `new`).
//
// This binary replaces the global operator new with one that counts, per
// thread, how often it is called; a reader thread checks its own count stays
// 0 while writers churn inserts and erases around the keys it reads.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cuckoogate/store/skiplist_map.hpp"
#include "test_util.hpp"

namespace {
thread_local std::uint64_t t_allocations = 0;

void* counted_alloc(std::size_t n) {
  ++t_allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace cg::store {
namespace {

std::string key_name(int i) {
  char b[16];
  std::snprintf(b, sizeof b, "r%05d", i);  // short: std::string keeps it inline
  return b;
}

TEST(SkipListMapReaders, CounterSeesThisThreadsAllocations) {
  // The instrument itself: a node insert allocates on this thread. Nodes come
  // from the map's NodeArena (mapped blocks, not operator new) unless they
  // are too big for it: a key of kMaxChunk bytes makes such a node.
  SkipListMap<std::uint64_t> m;
  ASSERT_EQ(m.insert("a", 1), InsertResult::inserted);
  const std::string big(NodeArena::kMaxChunk, 'k');
  const std::uint64_t before = t_allocations;
  ASSERT_EQ(m.insert(big, 1), InsertResult::inserted);
  const std::uint64_t after = t_allocations;
  EXPECT_GT(after, before);
}

// Two writers erase and re-insert every key of a small range as fast as they
// can, so readers keep meeting nodes that are deleted but not yet unlinked
// (with and without their marker). The reader's lookups and scans over the
// same range must make no allocation at all.
TEST(SkipListMapReaders, LookupsAndScansNeverAllocateDuringDeleteChurn) {
  const std::uint64_t seed = cg::store::test::test_seed();
  constexpr int kKeys = 256;
  SkipListMap<std::uint64_t> m(seed);
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back(key_name(i));
  for (int i = 0; i < kKeys; i += 2) ASSERT_EQ(m.insert(keys[i], i), InsertResult::inserted);

  std::atomic<bool> stop{false};
  std::atomic<long> writes{0};
  auto writer = [&](int w) {
    std::mt19937_64 rng(seed + 17 + static_cast<std::uint64_t>(w));
    long n = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      // Odd keys only: even keys stay, so every lookup of one must hit.
      const int i = static_cast<int>(rng() % (kKeys / 2)) * 2 + 1;
      if (m.erase(keys[i]) == EraseResult::absent) (void)m.insert(keys[i], i);
      ++n;
    }
    writes.fetch_add(n);
  };

  std::uint64_t reader_allocs = 0;
  long lookups = 0, scans = 0;
  auto reader = [&] {
    std::mt19937_64 rng(seed);
    const std::uint64_t start = t_allocations;
    while (!stop.load(std::memory_order_relaxed)) {
      for (int r = 0; r < 64; ++r) {
        const int i = static_cast<int>(rng() % kKeys);
        if (i % 2 == 0) {
          EXPECT_TRUE(m.contains(keys[i])) << keys[i];
          EXPECT_EQ(m.find(keys[i]).value_or(~0ULL), static_cast<std::uint64_t>(i));
        } else {
          (void)m.contains(keys[i]);
        }
        ++lookups;
      }
      const int lo = static_cast<int>(rng() % kKeys);
      int stable = 0;
      for (auto c = m.scan(keys[lo], keys[std::min(kKeys - 1, lo + 32)]); c.next();) {
        stable += (c.value() % 2 == 0) ? 1 : 0;
      }
      EXPECT_EQ(stable, (std::min(kKeys - 1, lo + 32) - lo + (lo % 2 == 0 ? 1 : 0)) / 2);
      ++scans;
    }
    reader_allocs = t_allocations - start;
  };

  std::thread r(reader);
  std::thread w1(writer, 0), w2(writer, 1);
  std::this_thread::sleep_for(test::stress_duration(1000));
  stop = true;
  w1.join();
  w2.join();
  r.join();
  std::printf("[ stats    ] writes=%ld lookups=%ld scans=%ld reader allocations=%llu\n",
              writes.load(), lookups, scans, static_cast<unsigned long long>(reader_allocs));
  EXPECT_GT(writes.load(), 0);
  EXPECT_EQ(reader_allocs, 0U);
}

}  // namespace
}  // namespace cg::store
