// Deterministic interleavings of one lookup with writes: the lookup's test hook
// (CG_FILTER_TEST_HOOKS, test builds only) parks the reader between its loads and
// runs writer operations right there, in the same thread. Each test sets up the
// one scenario that defeats a part of the lookup rule (docs/concurrency.md), and
// checks that the scenario really happened, so that it cannot pass vacuously.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "cuckoogate/cuckoo_filter.hpp"
#include "filter_test_access.hpp"

#ifndef CG_FILTER_TEST_HOOKS
#error "interleaving_test.cpp needs CG_FILTER_TEST_HOOKS (see tests/filter/meson.build)"
#endif

namespace cg {
namespace {

using Access = CuckooFilterTestAccess;

// A key K with fingerprint fp and buckets i1, i2 whose only copy sits in i2,
// with `free_in_i1` free slots in i1 and, if fill_i2, no free slot in i2.
template <unsigned F>
struct Scene {
  using Filter = CuckooFilter<F>;
  using L = BucketLayout<F>;
  using Point = typename Filter::HookPoint;

  std::unique_ptr<Filter> f = Filter::create(64);  // 16 buckets
  std::uint64_t fp = 5;
  std::uint32_t i1 = 3;
  std::uint32_t i2 = L::alt(i1, fp, Access::mask(*f));
  std::function<void(Point)> on_hook;

  // A hash with fingerprint fp whose first bucket is b (F <= 13: no overlap).
  static std::uint64_t hash_of(std::uint64_t fp, std::uint32_t b) { return (fp << (64 - F)) | b; }
  std::uint64_t key() const { return hash_of(fp, i1); }

  Scene(unsigned free_in_i1, bool fill_i2) {
    for (std::uint64_t g = 6; g < 10; ++g) EXPECT_EQ(f->insert(hash_of(g, i1)), InsertResult::kOk);
    EXPECT_EQ(f->insert(key()), InsertResult::kOk);  // i1 is full: K lands in i2
    if (fill_i2) {
      for (std::uint64_t g = 10; g < 13; ++g) EXPECT_EQ(f->insert(hash_of(g, i2)), InsertResult::kOk);
    }
    for (unsigned n = 0; n < free_in_i1; ++n) EXPECT_TRUE(f->erase(hash_of(6 + n, i1)));
    EXPECT_FALSE(holds(i1));
    EXPECT_TRUE(holds(i2));
  }
  ~Scene() { Access::set_lookup_hook<F>(*f, nullptr, nullptr); }

  std::uint64_t word(std::uint32_t b) const { return Access::word(*f, b); }
  bool holds(std::uint32_t b) const { return L::has(word(b), fp); }
  unsigned slot_of_fp(std::uint32_t b) const { return L::find(word(b), fp); }
  bool move(std::uint32_t from, std::uint32_t to) { return Access::move(*f, from, slot_of_fp(from), to); }

  // Runs on_hook inside the lookups that follow.
  void arm() {
    Access::set_lookup_hook<F>(
        *f, [](void* ctx, Point p) { (*static_cast<std::function<void(Point)>*>(ctx))(p); }, &on_hook);
  }
  bool contains_bulk_one() const {
    const std::uint64_t k = key();
    std::uint64_t mask = 0;
    f->contains_bulk(&k, 1, &mask);
    return (mask & 1) != 0;
  }
};

template <class T>
class InterleavingTest : public ::testing::Test {};
template <unsigned F>
struct Bits {
  static constexpr unsigned kF = F;
};
using AllWidths = ::testing::Types<Bits<8>, Bits<12>, Bits<13>>;
TYPED_TEST_SUITE(InterleavingTest, AllWidths);

// Reader parked after loading i1 (no fp); K's copy moves i2 -> i1; the reader then
// loads i2 (no fp). Only the re-check of i1's counter (bumped by the move) saves it.
TYPED_TEST(InterleavingTest, ParkedReaderFindsAKeyMovedFromI2IntoI1) {
  for (const bool bulk : {false, true}) {
    Scene<TypeParam::kF> sc(1, false);
    int moved = 0;
    sc.on_hook = [&](auto p) {
      if (p == decltype(p)::kAfterFirstLoad && moved == 0) moved += sc.move(sc.i2, sc.i1) ? 1 : 100;
    };
    sc.arm();
    EXPECT_TRUE(bulk ? sc.contains_bulk_one() : sc.f->contains(sc.key())) << (bulk ? "bulk" : "single");
    EXPECT_EQ(moved, 1) << "the move did not happen inside the lookup";
    EXPECT_TRUE(sc.holds(sc.i1));
  }
}

// K's copy moves i2 -> i1 after the reader's t1, and back i1 -> i2 after its t2:
// the reader saw it in neither bucket; both moves bump i1.
TYPED_TEST(InterleavingTest, ParkedReaderFindsAKeyMovedIntoI1AndBackToI2) {
  for (const bool bulk : {false, true}) {
    Scene<TypeParam::kF> sc(1, false);
    int first = 0, second = 0;
    sc.on_hook = [&](auto p) {
      if (p == decltype(p)::kAfterFirstLoad && first == 0) first += sc.move(sc.i2, sc.i1) ? 1 : 100;
      if (p == decltype(p)::kAfterSecondLoad && second == 0) second += sc.move(sc.i1, sc.i2) ? 1 : 100;
    };
    sc.arm();
    EXPECT_TRUE(bulk ? sc.contains_bulk_one() : sc.f->contains(sc.key())) << (bulk ? "bulk" : "single");
    EXPECT_EQ(first, 1);
    EXPECT_EQ(second, 1);
    EXPECT_TRUE(sc.holds(sc.i2));
  }
}

// The teleport without a move: after the reader's t1, another key K2 with K's
// fingerprint and buckets {i2, i1} is inserted (i2 is full, so into i1) and then
// erased (erase looks in K2's first bucket i2 first, so it takes the copy there).
// K's fingerprint went i2 -> i1 by an insert and an erase: only the insert's
// counter bump tells the reader.
TYPED_TEST(InterleavingTest, ParkedReaderFindsAKeyTeleportedByAnInsertAndAnErase) {
  for (const bool bulk : {false, true}) {
    Scene<TypeParam::kF> sc(1, true);
    const std::uint64_t k2 = Scene<TypeParam::kF>::hash_of(sc.fp, sc.i2);
    int done = 0;
    sc.on_hook = [&](auto p) {
      if (p != decltype(p)::kAfterFirstLoad || done != 0) return;
      done = 1;
      EXPECT_EQ(sc.f->insert(k2), InsertResult::kOk);
      EXPECT_TRUE(sc.holds(sc.i1)) << "K2 did not go to i1";
      EXPECT_TRUE(sc.f->erase(k2));
      EXPECT_FALSE(sc.holds(sc.i2)) << "erase did not take the copy in i2";
    };
    sc.arm();
    EXPECT_TRUE(bulk ? sc.contains_bulk_one() : sc.f->contains(sc.key())) << (bulk ? "bulk" : "single");
    EXPECT_EQ(done, 1);
    EXPECT_TRUE(sc.holds(sc.i1));
  }
}

template <class T>
class CounterWrapTest : public ::testing::Test {};
// F = 8 has a 31-bit counter: 2^31 bumps to wrap, too long for a unit test.
using WrapWidths = ::testing::Types<Bits<12>, Bits<13>>;
TYPED_TEST_SUITE(CounterWrapTest, WrapWidths);

// The wrap case: after the reader's t1, K's copy moves i2 -> i1 (one bump of i1)
// and 2^c - 1 insert/erase pairs of another key cycle i1's counter back to the
// value the reader saw. The counter alone cannot tell; the wrap word does.
TYPED_TEST(CounterWrapTest, ParkedReaderFindsAKeyAfterI1sCounterWrappedAround) {
  constexpr unsigned F = TypeParam::kF;
  using L = BucketLayout<F>;
  for (const bool bulk : {false, true}) {
    Scene<F> sc(2, false);
    const std::uint64_t other = Scene<F>::hash_of(13, sc.i1);
    const std::uint64_t counter_before = L::counter(sc.word(sc.i1));
    const std::uint64_t wraps_before = Access::wraps(*sc.f);
    bool cycled = false;
    sc.on_hook = [&](auto p) {
      if (p != decltype(p)::kAfterFirstLoad || cycled) return;
      cycled = true;
      ASSERT_TRUE(sc.move(sc.i2, sc.i1));
      for (std::uint64_t n = 0; n + 1 < (std::uint64_t{1} << L::kCounterBits); ++n) {
        ASSERT_EQ(sc.f->insert(other), InsertResult::kOk);
        ASSERT_TRUE(sc.f->erase(other));
      }
      EXPECT_EQ(L::counter(sc.word(sc.i1)), counter_before) << "the counter did not come back around";
    };
    sc.arm();
    EXPECT_TRUE(bulk ? sc.contains_bulk_one() : sc.f->contains(sc.key())) << (bulk ? "bulk" : "single");
    EXPECT_TRUE(cycled);
    EXPECT_EQ(Access::wraps(*sc.f), wraps_before + 1) << "one wrap of i1, published once";
  }
}

// Erase uses the lookup rule on a miss, so it needs the wrap word as much: a
// wrap of a bucket's counter by a move increments it too (not only inserts).
TYPED_TEST(CounterWrapTest, MovesThatWrapACounterArePublished) {
  constexpr unsigned F = TypeParam::kF;
  using L = BucketLayout<F>;
  Scene<F> sc(1, false);
  const std::uint64_t wraps_before = Access::wraps(*sc.f);
  const std::uint64_t bumps = std::uint64_t{1} << L::kCounterBits;
  // Every move bumps both buckets: 2^c moves back and forth wrap both counters.
  for (std::uint64_t n = 0; n < bumps; ++n)
    ASSERT_TRUE(n % 2 == 0 ? sc.move(sc.i2, sc.i1) : sc.move(sc.i1, sc.i2));
  EXPECT_EQ(Access::wraps(*sc.f), wraps_before + 2) << "i1 and i2 each wrapped once";
  EXPECT_TRUE(sc.f->contains(sc.key()));
  EXPECT_TRUE(sc.f->erase(sc.key()));
  EXPECT_FALSE(sc.f->contains(sc.key()));
}

}  // namespace
}  // namespace cg
