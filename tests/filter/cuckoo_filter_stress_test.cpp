// Checked stress: writers insert and erase their own keys while readers look up
// keys that stay present; no miss allowed; final content equals the shadow.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <thread>
#include <vector>

#include "cuckoogate/cuckoo_filter.hpp"
#include "filter_test_access.hpp"
#include "test_support.hpp"

namespace cg {
namespace {

template <class Filter>
class FilterStress : public ::testing::Test {};
using Filters = ::testing::Types<CuckooFilter<8>, CuckooFilter<12>>;
TYPED_TEST_SUITE(FilterStress, Filters);

TYPED_TEST(FilterStress, WritersAndReadersAgainstShadow) {
  constexpr int kWriters = 2, kReaders = 2;
  const std::uint64_t seed = test::seed_for("WritersAndReadersAgainstShadow");
  // Small table at high load: most inserts move fingerprints.
  auto f = TypeParam::create(1 << 12, heap_allocator(), seed);
  ASSERT_TRUE(f);
  const std::size_t cap = f->capacity();
  const std::size_t stable_per_writer = cap * 80 / 100 / kWriters;
  const std::size_t churn_per_writer = cap * 30 / 100 / kWriters;  // about half present at a time

  std::vector<std::vector<std::uint64_t>> stable(kWriters), churn(kWriters);
  for (int w = 0; w < kWriters; ++w) {
    test::Rng rng(seed * 31 + w);
    for (std::size_t i = 0; i < stable_per_writer; ++i) {
      stable[w].push_back(rng.next());
      ASSERT_EQ(f->insert(stable[w].back()), InsertResult::kOk);
    }
    for (std::size_t i = 0; i < churn_per_writer; ++i) churn[w].push_back(rng.next());
  }

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> misses{0}, lookups{0}, retries{0};
  std::vector<std::map<std::uint64_t, int>> shadow(kWriters);
  std::vector<std::thread> ts;
  for (int w = 0; w < kWriters; ++w)
    ts.emplace_back([&, w] {
      test::Rng rng(seed * 97 + w);
      std::vector<int> present(churn[w].size(), 0);
      auto& sh = shadow[w];
      while (!stop.load(std::memory_order_relaxed)) {
        const std::size_t i = rng.below(churn[w].size());
        const std::uint64_t k = churn[w][i];
        if (present[i] > 0 && (present[i] > 1 || rng.below(2))) {
          if (!f->erase(k)) {
            ADD_FAILURE() << "erase of a present key failed";
            break;
          }
          --present[i];
        } else if (f->insert(k) == InsertResult::kOk) {
          ++present[i];
        }
      }
      for (std::size_t i = 0; i < churn[w].size(); ++i)
        if (present[i] > 0) sh[churn[w][i]] += present[i];
      for (std::uint64_t k : stable[w]) ++sh[k];
    });
  for (int r = 0; r < kReaders; ++r)
    ts.emplace_back([&, r] {
      LookupStats st;
      std::uint64_t miss = 0;
      std::vector<std::uint64_t> all;
      for (int w = 0; w < kWriters; ++w) all.insert(all.end(), stable[w].begin(), stable[w].end());
      std::vector<std::uint64_t> mask((all.size() + 63) / 64);
      while (!stop.load(std::memory_order_relaxed)) {
        if (r == 0) {
          for (std::uint64_t k : all) miss += !f->contains(k, &st);
        } else {
          f->contains_bulk(all.data(), all.size(), mask.data(), &st);
          for (std::size_t i = 0; i < all.size(); ++i) miss += ((mask[i / 64] >> (i % 64)) & 1) == 0;
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
  std::printf("lookups %llu, misses %llu, lookup retries %llu, kicks %llu, k-cas retries %llu, restarts %llu\n",
              static_cast<unsigned long long>(lookups.load()), static_cast<unsigned long long>(misses.load()),
              static_cast<unsigned long long>(retries.load()), static_cast<unsigned long long>(s.kicks),
              static_cast<unsigned long long>(s.kcas_retries), static_cast<unsigned long long>(s.path_restarts));
  EXPECT_EQ(misses.load(), 0u);
  EXPECT_GT(lookups.load(), 0u);
  std::map<CuckooFilterTestAccess::Canon, int> expect;
  std::size_t total = 0;
  for (const auto& sh : shadow)
    for (const auto& [k, n] : sh) {
      expect[CuckooFilterTestAccess::canon(*f, k)] += n;
      total += n;
    }
  EXPECT_EQ(CuckooFilterTestAccess::content(*f), expect);
  EXPECT_EQ(s.items, total);
  for (const auto& sh : shadow) {
    for (const auto& kv : sh) {
      ASSERT_TRUE(f->contains(kv.first));
    }
  }
}

}  // namespace
}  // namespace cg
