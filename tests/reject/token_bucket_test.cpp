// The reject rate limit: burst first, then the rate, on a fake clock.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "cuckoogate/reject/token_bucket.hpp"

namespace cg::reject {
namespace {

constexpr uint64_t kHz = 1000;  // fake clock: one tick per millisecond

TEST(TokenBucket, BurstThenRate) {
  TokenBucket b(10, 5, kHz, 0);  // 10 per second, 5 saved up
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(b.allow(0));
  EXPECT_FALSE(b.allow(0));
  EXPECT_FALSE(b.allow(99));  // 0.99 of a token
  EXPECT_TRUE(b.allow(100));
  EXPECT_FALSE(b.allow(100));
  // A flood over one second gets exactly the rate through.
  int passed = 0;
  for (uint64_t t = 101; t <= 1100; ++t) passed += b.allow(t);
  EXPECT_EQ(passed, 10);
  EXPECT_EQ(b.allowed(), 5u + 1 + 10);
  EXPECT_EQ(b.suppressed(), 1u + 1 + 1 + (1000 - 10));
}

TEST(TokenBucket, IdleTimeRefillsUpToTheBurstOnly) {
  TokenBucket b(10, 5, kHz, 0);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(b.allow(0));
  EXPECT_TRUE(b.allow(3'600'000));  // an hour later
  EXPECT_EQ(b.tokens(), 4u);
  // Ages later, with a TSC-like clock: no overflow, still only the burst.
  TokenBucket c(TokenBucket::kMaxTokens, 5, 3'000'000'000, 0);
  int passed = 0;
  for (int i = 0; i < 10; ++i) passed += c.allow(std::numeric_limits<uint64_t>::max() - 1);
  EXPECT_EQ(passed, 5);
}

TEST(TokenBucket, FractionsAccumulateExactly) {
  // One token every 333.33 ticks; a burst of 2 so that no fraction is cut
  // off at the top of the bucket.
  TokenBucket b(3, 2, kHz, 0);
  ASSERT_TRUE(b.allow(0, 2));
  EXPECT_FALSE(b.allow(333));
  EXPECT_TRUE(b.allow(334));
  EXPECT_FALSE(b.allow(666));
  EXPECT_TRUE(b.allow(667));
  EXPECT_FALSE(b.allow(999));
  EXPECT_TRUE(b.allow(1000));  // three tokens in exactly one second
}

TEST(TokenBucket, CostIsAllOrNothing) {
  TokenBucket b(1, 3, kHz, 0);
  EXPECT_TRUE(b.allow(0, 2));   // the two RSTs of one segment
  EXPECT_FALSE(b.allow(0, 2));  // one token left: not enough, and not taken
  EXPECT_TRUE(b.allow(0, 1));
  EXPECT_FALSE(b.allow(0, 4));  // more than the burst: never
  EXPECT_FALSE(b.allow(10'000, 4));
  EXPECT_FALSE(b.allow(10'000, std::numeric_limits<uint64_t>::max()));
  EXPECT_TRUE(b.allow(10'000, 3));
  EXPECT_EQ(b.allowed(), 3u);
  EXPECT_EQ(b.suppressed(), 4u);
}

TEST(TokenBucket, ClockGoingBackAddsNothing) {
  TokenBucket b(1, 1, kHz, 5000);
  ASSERT_TRUE(b.allow(5000));
  EXPECT_FALSE(b.allow(100));   // back in time: no tokens, new reference
  EXPECT_FALSE(b.allow(1099));
  EXPECT_TRUE(b.allow(1100));   // a second after the new reference
}

TEST(TokenBucket, RateZeroIsTheBurstOnce) {
  TokenBucket b(0, 2, kHz, 0);
  EXPECT_TRUE(b.allow(0));
  EXPECT_TRUE(b.allow(1'000'000));
  EXPECT_FALSE(b.allow(std::numeric_limits<uint64_t>::max()));
}

TEST(TokenBucket, OutOfRangeArgumentsAreClamped) {
  const uint64_t big = std::numeric_limits<uint64_t>::max();
  TokenBucket b(big, big, big, 0);
  EXPECT_EQ(b.tokens(), TokenBucket::kMaxTokens);
  uint64_t passed = 0;
  while (b.allow(0)) ++passed;
  EXPECT_EQ(passed, TokenBucket::kMaxTokens);
  EXPECT_TRUE(b.allow(TokenBucket::kMaxTicksPerSecond / TokenBucket::kMaxTokens));  // one token's time
  TokenBucket z(1, 0, 0, 0);  // burst 0 as 1, 0 ticks per second as 1
  EXPECT_TRUE(z.allow(0));
  EXPECT_FALSE(z.allow(0));
  EXPECT_TRUE(z.allow(1));
}

}  // namespace
}  // namespace cg::reject
