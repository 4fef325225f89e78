// Sequential semantics of the cuckoo filter, for 8- and 12-bit fingerprints.
#include "cuckoogate/cuckoo_filter.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <map>
#include <vector>

#include "filter_test_access.hpp"
#include "test_support.hpp"

namespace cg {
namespace {

using Access = CuckooFilterTestAccess;

template <class Filter>
class CuckooFilterTest : public ::testing::Test {};
using Filters = ::testing::Types<CuckooFilter<8>, CuckooFilter<12>>;
TYPED_TEST_SUITE(CuckooFilterTest, Filters);

// The shadow's content in the filter's canonical form.
template <class Filter>
std::map<Access::Canon, int> shadow_content(const Filter& f, const std::map<std::uint64_t, int>& shadow) {
  std::map<Access::Canon, int> m;
  for (const auto& [k, n] : shadow)
    if (n > 0) m[Access::canon(f, k)] += n;
  return m;
}

TYPED_TEST(CuckooFilterTest, CreateRoundsUpToPowerOfTwoBuckets) {
  auto f = TypeParam::create(1000);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->capacity(), 1024u);
  EXPECT_EQ(TypeParam::create(1)->capacity(), 8u);  // at least 2 buckets
  EXPECT_EQ(TypeParam::create(4096)->capacity(), 4096u);
  EXPECT_GE(f->memory_bytes(), 256u * 8u);
}

TYPED_TEST(CuckooFilterTest, UsesTheInjectedAllocatorAndReportsFailure) {
  struct Ctx {
    int allocs = 0, frees = 0;
    bool fail = false;
  } ctx;
  FilterAllocator a{[](void* c, std::size_t bytes, std::size_t align) -> void* {
                      auto* x = static_cast<Ctx*>(c);
                      if (x->fail) return nullptr;
                      ++x->allocs;
                      EXPECT_EQ(align, 64u);
                      return heap_allocator().alloc(nullptr, bytes, align);
                    },
                    [](void* c, void* p) {
                      ++static_cast<Ctx*>(c)->frees;
                      heap_allocator().free(nullptr, p);
                    },
                    &ctx};
  {
    auto f = TypeParam::create(4096, a);
    ASSERT_TRUE(f);
    EXPECT_EQ(ctx.allocs, 1);
    EXPECT_EQ(f->insert(42), InsertResult::kOk);
    EXPECT_TRUE(f->contains(42));
  }
  EXPECT_EQ(ctx.frees, 1);
  ctx.fail = true;
  EXPECT_FALSE(TypeParam::create(4096, a));
  EXPECT_FALSE(TypeParam::create(std::size_t{1} << 40));
}

TYPED_TEST(CuckooFilterTest, MatchesShadowMultisetUnderRandomInsertsAndErases) {
  test::Rng rng(test::seed_for("MatchesShadowMultiset"));
  auto f = TypeParam::create(4096, heap_allocator(), rng.next());
  ASSERT_TRUE(f);
  std::vector<std::uint64_t> keys(3000);
  for (auto& k : keys) k = rng.next();
  std::map<std::uint64_t, int> shadow;
  std::size_t items = 0;
  for (int op = 0; op < 60000; ++op) {
    const std::uint64_t k = keys[rng.below(keys.size())];
    const bool do_insert = rng.below(100) < (items < 3700 ? 60 : 40);
    if (do_insert) {
      const InsertResult r = f->insert(k);
      if (r == InsertResult::kOk) {
        ++shadow[k];
        ++items;
      }
    } else if (shadow[k] > 0) {
      ASSERT_TRUE(f->erase(k)) << "op " << op;
      --shadow[k];
      --items;
    }
    ASSERT_TRUE(shadow[k] == 0 || f->contains(k)) << "op " << op;
  }
  for (const auto& [k, n] : shadow) {
    if (n > 0) {
      ASSERT_TRUE(f->contains(k));
    }
  }
  EXPECT_EQ(Access::content(*f), shadow_content(*f, shadow));
  EXPECT_EQ(f->stats().items, items);
  EXPECT_EQ(f->count_occupied(), items);
}

TYPED_TEST(CuckooFilterTest, DuplicatesAreCountedAndErasedOneAtATime) {
  auto f = TypeParam::create(1024);
  const std::uint64_t k = 0x123456789abcdefull;
  for (int i = 0; i < 3; ++i) ASSERT_EQ(f->insert(k), InsertResult::kOk);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(f->contains(k));
    EXPECT_TRUE(f->erase(k));
  }
  EXPECT_FALSE(f->contains(k));
  EXPECT_FALSE(f->erase(k));
  // Two buckets of four slots hold at most 8 copies; the 9th must fail cleanly.
  for (int i = 0; i < 8; ++i) ASSERT_EQ(f->insert(k), InsertResult::kOk);
  const auto before = Access::content(*f);
  EXPECT_EQ(f->insert(k), InsertResult::kFull);
  EXPECT_EQ(Access::content(*f), before);
  EXPECT_EQ(f->stats().items, 8u);
}

TYPED_TEST(CuckooFilterTest, EveryInsertedKeyIsFoundAndFailedInsertsChangeNothing) {
  test::Rng rng(test::seed_for("FailedInsertsChangeNothing"));
  auto f = TypeParam::create(1 << 14, heap_allocator(), rng.next());
  std::vector<std::uint64_t> in;
  int failures = 0;
  while (failures < 20) {
    const std::uint64_t k = rng.next();
    const auto before = failures == 0 && in.size() < 15000 ? std::map<Access::Canon, int>{} : Access::content(*f);
    if (f->insert(k) == InsertResult::kOk) {
      in.push_back(k);
      continue;
    }
    ++failures;
    if (!before.empty()) {
      ASSERT_EQ(Access::content(*f), before) << "failed insert changed the table";
    }
  }
  for (std::uint64_t k : in) ASSERT_TRUE(f->contains(k));
  EXPECT_EQ(f->stats().items, in.size());
  EXPECT_EQ(f->stats().insert_failures, 20u);
}

TYPED_TEST(CuckooFilterTest, EverySeedReaches95PercentLoad) {
  const std::uint64_t base = test::seed_for("EverySeedReaches95PercentLoad");
  for (std::uint64_t s = 0; s < 24; ++s) {
    test::Rng rng(base + s);
    const std::size_t slots = s < 20 ? (1u << 14) : (1u << 20);
    auto f = TypeParam::create(slots, heap_allocator(), rng.next());
    std::size_t n = 0;
    while (f->insert(rng.next()) == InsertResult::kOk) ++n;
    const double load = static_cast<double>(n) / static_cast<double>(f->capacity());
    EXPECT_GE(load, 0.95) << "seed " << (base + s) << " slots " << slots;
    const FilterStats st = f->stats();
    EXPECT_EQ(st.items, n);
    EXPECT_NEAR(st.load_factor, load, 1e-9);
  }
}

TYPED_TEST(CuckooFilterTest, FalsePositiveRateIsWithinTheory) {
  test::Rng rng(test::seed_for("FalsePositiveRateIsWithinTheory"));
  auto f = TypeParam::create(1 << 18, heap_allocator(), rng.next());
  const std::size_t target = f->capacity() * 95 / 100;
  for (std::size_t i = 0; i < target; ++i) ASSERT_EQ(f->insert(rng.next()), InsertResult::kOk);
  const int probes = 1 << 20;
  int fp = 0;
  for (int i = 0; i < probes; ++i) fp += f->contains(rng.next()) ? 1 : 0;
  const double rate = static_cast<double>(fp) / probes;
  // Upper bound 2 * 4 / 2^f (Fan et al.); at 95% load about 0.95 of it.
  const double theory = 8.0 / static_cast<double>(1u << TypeParam::fingerprint_bits());
  std::printf("fingerprint bits %u: measured FPR %.5f, bound %.5f\n", TypeParam::fingerprint_bits(), rate, theory);
  EXPECT_LE(rate, theory * 1.1);
  EXPECT_GE(rate, theory * 0.7);
  const FilterStats st = f->stats();
  EXPECT_NEAR(st.bits_per_item, 64.0 / 4 / 0.95, 0.1);
}

TYPED_TEST(CuckooFilterTest, BulkLookupAgreesWithSingleLookupForAnyCount) {
  test::Rng rng(test::seed_for("BulkLookupAgreesWithSingleLookup"));
  auto f = TypeParam::create(1 << 12);
  std::vector<std::uint64_t> keys(400);
  for (auto& k : keys) {
    k = rng.next();
    if (rng.below(2)) {
      ASSERT_EQ(f->insert(k), InsertResult::kOk);
    }
  }
  for (std::size_t n : {0u, 1u, 7u, 63u, 64u, 65u, 128u, 200u, 400u}) {
    std::vector<std::uint64_t> mask((n + 63) / 64 + 1, ~std::uint64_t{0});
    LookupStats st;
    f->contains_bulk(keys.data(), n, mask.data(), &st);
    EXPECT_EQ(st.lookups, n);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(((mask[i / 64] >> (i % 64)) & 1) != 0, f->contains(keys[i])) << "n " << n << " i " << i;
    }
    for (std::size_t i = n; i < (n + 63) / 64 * 64; ++i) ASSERT_EQ((mask[i / 64] >> (i % 64)) & 1, 0u);
    EXPECT_EQ(mask.back(), ~std::uint64_t{0}) << "wrote past the mask";
  }
}

// Lookups must store nothing: run them on a table whose pages are read-only.
TYPED_TEST(CuckooFilterTest, LookupsWorkOnReadOnlyMemory) {
  static std::size_t mapped = 0;
  FilterAllocator mm{[](void*, std::size_t bytes, std::size_t) -> void* {
                       mapped = (bytes + 4095) / 4096 * 4096;
                       void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                       return p == MAP_FAILED ? nullptr : p;
                     },
                     [](void*, void* p) { munmap(p, mapped); }, nullptr};
  auto f = TypeParam::create(1 << 12, mm);
  ASSERT_TRUE(f);
  test::Rng rng(7);
  std::vector<std::uint64_t> keys(3800);
  for (auto& k : keys) ASSERT_EQ(f->insert(k = rng.next()), InsertResult::kOk);
  ASSERT_GT(mapped, 0u);
  std::vector<std::uint64_t> mask((keys.size() + 63) / 64);
  auto protect = [&](int prot) {
    return mprotect(Access::table_address(*f), mapped, prot);
  };
  ASSERT_EQ(protect(PROT_READ), 0);
  for (std::uint64_t k : keys) ASSERT_TRUE(f->contains(k));
  f->contains_bulk(keys.data(), keys.size(), mask.data());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE((mask[i / 64] >> (i % 64)) & 1);
  }
  ASSERT_EQ(protect(PROT_READ | PROT_WRITE), 0);
}

TYPED_TEST(CuckooFilterTest, StatsCountKicksAndPathLengths) {
  test::Rng rng(test::seed_for("StatsCountKicksAndPathLengths"));
  auto f = TypeParam::create(1 << 14, heap_allocator(), rng.next());
  std::size_t n = 0;
  while (f->insert(rng.next()) == InsertResult::kOk) ++n;
  const FilterStats st = f->stats();
  EXPECT_EQ(st.inserts, n);
  EXPECT_EQ(st.insert_failures, 1u);
  EXPECT_GT(st.kicks, 0u);
  EXPECT_GT(st.path_searches, 0u);
  std::uint64_t sum = 0, moved = 0;
  for (unsigned i = 0; i <= kMaxPathMoves; ++i) {
    sum += st.path_len_hist[i];
    moved += i * st.path_len_hist[i];
  }
  EXPECT_EQ(sum, n);
  EXPECT_LE(moved, st.kicks);
  EXPECT_EQ(st.fingerprint_bits, TypeParam::fingerprint_bits());
  EXPECT_EQ(st.capacity_slots, f->capacity());
}

}  // namespace
}  // namespace cg
