// Bucket word layout, SWAR slot test and hashing.
#include "cuckoogate/bucket_layout.hpp"

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace cg {
namespace {

template <class L>
class BucketLayoutTest : public ::testing::Test {};
using Layouts = ::testing::Types<BucketLayout<8>, BucketLayout<12>, BucketLayout<13>>;
TYPED_TEST_SUITE(BucketLayoutTest, Layouts);

TYPED_TEST(BucketLayoutTest, AlternateIndexIsAnInvolutionAndNeverTheSameBucket) {
  using L = TypeParam;
  test::Rng rng(test::seed_for("AlternateIndexIsAnInvolution"));
  for (std::uint32_t bits = 1; bits <= 32; ++bits) {
    const std::uint32_t mask = bits == 32 ? 0xffffffffu : (1u << bits) - 1;
    for (int k = 0; k < 2000; ++k) {
      const std::uint64_t h = rng.next();
      const std::uint64_t fp = L::fingerprint(h);
      const std::uint32_t i = L::index1(h, mask);
      const std::uint32_t a = L::alt(i, fp, mask);
      ASSERT_LE(a, mask);
      ASSERT_NE(a, i);
      ASSERT_EQ(L::alt(a, fp, mask), i);
    }
  }
}

TYPED_TEST(BucketLayoutTest, FingerprintIsNeverZeroAndFitsItsSlot) {
  using L = TypeParam;
  EXPECT_EQ(L::fingerprint(0), 1u);
  test::Rng rng(1);
  for (int k = 0; k < 100000; ++k) {
    const std::uint64_t fp = L::fingerprint(rng.next());
    ASSERT_GE(fp, 1u);
    ASSERT_LE(fp, L::kFpMax);
  }
}

TYPED_TEST(BucketLayoutTest, SwarTestAgreesWithASlotLoop) {
  using L = TypeParam;
  test::Rng rng(test::seed_for("SwarTestAgreesWithASlotLoop"));
  for (int k = 0; k < 200000; ++k) {
    std::uint64_t w = (rng.next() & L::kCounterMask);
    // Small fingerprint alphabet so that hits, misses and empty slots all occur.
    for (unsigned s = 0; s < L::kSlots; ++s) w = L::set_slot(w, s, rng.below(6));
    const std::uint64_t fp = rng.below(6);
    bool naive = false;
    for (unsigned s = 0; s < L::kSlots; ++s) naive |= L::slot(w, s) == fp;
    ASSERT_EQ(L::has(w, fp), naive) << std::hex << w << " fp " << fp;
    ASSERT_EQ(L::find(w, fp) != L::kSlots, naive);
  }
  // Every slot position, extreme fingerprint values, full counter.
  for (unsigned s = 0; s < L::kSlots; ++s) {
    for (std::uint64_t fp : {std::uint64_t{1}, L::kFpMax, L::kFpMax - 1}) {
      std::uint64_t w = L::kCounterMask;
      for (unsigned o = 0; o < L::kSlots; ++o) w = L::set_slot(w, o, o == s ? fp : (fp == 1 ? 2 : 1));
      EXPECT_TRUE(L::has(w, fp));
      EXPECT_EQ(L::find(w, fp), s);
      EXPECT_FALSE(L::has_empty(w));
    }
  }
}

TYPED_TEST(BucketLayoutTest, CounterWrapsInsideItsFieldWithoutTouchingSlotsOrTagBit) {
  using L = TypeParam;
  std::uint64_t w = L::kCounterMask;  // counter at its maximum
  for (unsigned s = 0; s < L::kSlots; ++s) w = L::set_slot(w, s, L::kFpMax - s);
  const std::uint64_t b = L::bump(w);
  EXPECT_EQ(L::counter(b), 0u);
  EXPECT_EQ(b & L::kSlotsMask, w & L::kSlotsMask);
  EXPECT_EQ(b >> 63, 0u);
  EXPECT_EQ(L::counter(L::bump(b)), 1u);
  // bump_wraps says which bump is the one that wraps (the filter publishes it).
  EXPECT_TRUE(L::bump_wraps(w));
  EXPECT_FALSE(L::bump_wraps(b));
  EXPECT_FALSE(L::bump_wraps(L::bump(b)));
}

}  // namespace
}  // namespace cg
