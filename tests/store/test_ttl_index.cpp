#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "cuckoogate/store/ttl_index.hpp"
#include "test_util.hpp"

namespace cg::store {
namespace {

TEST(TtlIndex, EncodingOrdersDeadlinesNumericallyIncludingNegative) {
  const std::int64_t ds[] = {INT64_MIN, -1000, -1, 0, 1, 1'700'000'000'000, INT64_MAX};
  for (std::size_t i = 0; i + 1 < std::size(ds); ++i) {
    EXPECT_LT(TtlIndex::encode(ds[i], "zzz"), TtlIndex::encode(ds[i + 1], "a"));
    EXPECT_EQ(TtlIndex::decode_deadline(TtlIndex::encode(ds[i], "k")), ds[i]);
  }
}

TEST(TtlIndex, PopDueReturnsDueEntriesEarliestFirstAndOnlyOnce) {
  TtlIndex t;
  EXPECT_TRUE(t.schedule(300, "c"));
  EXPECT_TRUE(t.schedule(100, "a"));
  EXPECT_TRUE(t.schedule(200, "b"));
  EXPECT_TRUE(t.schedule(200, "a2"));
  EXPECT_FALSE(t.schedule(200, "b"));  // same pair twice
  EXPECT_EQ(t.next_deadline(), 100);
  EXPECT_TRUE(t.pop_due(99).empty());
  auto due = t.pop_due(200);
  ASSERT_EQ(due.size(), 3U);
  EXPECT_EQ(due[0], (std::pair<std::int64_t, std::string>(100, "a")));
  EXPECT_EQ(due[1], (std::pair<std::int64_t, std::string>(200, "a2")));
  EXPECT_EQ(due[2], (std::pair<std::int64_t, std::string>(200, "b")));
  EXPECT_TRUE(t.pop_due(200).empty());
  EXPECT_EQ(t.next_deadline(), 300);
  EXPECT_TRUE(t.cancel(300, "c"));
  EXPECT_FALSE(t.cancel(300, "c"));
  EXPECT_EQ(t.next_deadline(), std::nullopt);
}

TEST(TtlIndex, PopDueHonoursTheLimit) {
  TtlIndex t;
  for (int i = 0; i < 10; ++i) t.schedule(i, "k" + std::to_string(i));
  EXPECT_EQ(t.pop_due(100, 4).size(), 4U);
  EXPECT_EQ(t.size(), 6U);
  EXPECT_EQ(t.pop_due(INT64_MAX).size(), 6U);
}

TEST(TtlIndexConcurrency, ConcurrentPoppersReturnEachEntryExactlyOnce) {
  TtlIndex t;
  const int n = test::kSlowBuild ? 2000 : 20000;
  for (int i = 0; i < n; ++i) t.schedule(i % 97, "k" + std::to_string(i));
  std::atomic<int> total{0};
  std::vector<std::thread> ts;
  for (int w = 0; w < 3; ++w) {
    ts.emplace_back([&] {
      for (std::int64_t now = 0; now < 100; now += 3) {
        total.fetch_add(static_cast<int>(t.pop_due(now, 50).size()));
      }
      total.fetch_add(static_cast<int>(t.pop_due(INT64_MAX).size()));
    });
  }
  for (auto& th : ts) th.join();
  EXPECT_EQ(total.load(), n);
  EXPECT_EQ(t.size(), 0U);
}

}  // namespace
}  // namespace cg::store
