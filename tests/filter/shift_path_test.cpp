// Shift-path test (after DPDK's lock-free hash test): the table is filled so
// that every further insert needs a cuckoo path; readers keep looking up the keys
// already present, whose fingerprints the writers keep moving. Zero misses.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "cuckoogate/cuckoo_filter.hpp"
#include "test_support.hpp"

namespace cg {
namespace {

void run_shift_path(std::size_t slots, int writers, const char* name) {
  const std::uint64_t seed = test::seed_for(name);
  auto f = DefaultFilter::create(slots, heap_allocator(), seed);
  ASSERT_TRUE(f);
  test::Rng rng(seed);
  // Residents: fill to 85%; these are looked up and never erased.
  std::vector<std::uint64_t> resident;
  while (resident.size() < f->capacity() * 85 / 100) {
    resident.push_back(rng.next());
    ASSERT_EQ(f->insert(resident.back()), InsertResult::kOk);
  }
  // Each writer cycles its extra keys: insert up to ~97% (long paths), erase, again.
  const std::size_t extra_per_writer = f->capacity() * 12 / 100 / static_cast<std::size_t>(writers);
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> misses{0}, lookups{0}, retries{0};
  std::vector<std::thread> ts;
  for (int w = 0; w < writers; ++w)
    ts.emplace_back([&, w] {
      test::Rng wr(seed ^ (0x5151 + w));
      std::vector<std::uint64_t> extra(extra_per_writer), in;
      while (!stop.load(std::memory_order_relaxed)) {
        for (auto& k : extra) k = wr.next();
        for (std::uint64_t k : extra)
          if (f->insert(k) == InsertResult::kOk) in.push_back(k);
        for (std::uint64_t k : in)
          if (!f->erase(k)) ADD_FAILURE() << "erase of a present key failed";
        in.clear();
      }
    });
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      LookupStats st;
      std::uint64_t miss = 0;
      std::vector<std::uint64_t> mask((resident.size() + 63) / 64);
      while (!stop.load(std::memory_order_relaxed)) {
        if (r == 0) {
          for (std::uint64_t k : resident) miss += !f->contains(k, &st);
        } else {
          f->contains_bulk(resident.data(), resident.size(), mask.data(), &st);
          for (std::size_t i = 0; i < resident.size(); ++i) miss += ((mask[i / 64] >> (i % 64)) & 1) == 0;
        }
      }
      misses += miss;
      lookups += st.lookups;
      retries += st.retries;
    });
  std::this_thread::sleep_for(test::stress_duration());
  stop = true;
  for (auto& t : ts) t.join();
  const FilterStats s = f->stats();
  std::uint64_t long_paths = 0;
  for (unsigned i = 2; i <= kMaxPathMoves; ++i) long_paths += s.path_len_hist[i];
  std::printf("%s: lookups %llu misses %llu retries %llu kicks %llu inserts with >=2 moves %llu k-cas retries %llu\n",
              name, static_cast<unsigned long long>(lookups.load()), static_cast<unsigned long long>(misses.load()),
              static_cast<unsigned long long>(retries.load()), static_cast<unsigned long long>(s.kicks),
              static_cast<unsigned long long>(long_paths), static_cast<unsigned long long>(s.kcas_retries));
  EXPECT_EQ(misses.load(), 0u);
  EXPECT_GT(s.kicks, 100u) << "the test did not move fingerprints";
  EXPECT_GT(long_paths, 0u) << "no insert needed a path of two or more moves";
  for (std::uint64_t k : resident) ASSERT_TRUE(f->contains(k));
  EXPECT_EQ(f->stats().items, resident.size());
}

TEST(ShiftPath, ReadersNeverMissKeysWhoseFingerprintsMoveSmallTable) {
  run_shift_path(256, 1, "ShiftPathSmallTable");
}

TEST(ShiftPath, ReadersNeverMissKeysWhoseFingerprintsMoveTwoWriters) {
  run_shift_path(1 << 14, 2, "ShiftPathTwoWriters");
}

}  // namespace
}  // namespace cg
