// KeyOrder (cuckoogate/store/key_order.hpp), the bulk load's sort: positions
// in the order std::stable_sort by key gives, for keys that share long
// prefixes, are prefixes of each other, hold zero bytes (a short key padded
// with zeros looks like a longer one), repeat, or are empty.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuckoogate/store/key_order.hpp"
#include "test_util.hpp"

namespace cg::store {
namespace {

using namespace std::string_literals;

std::vector<std::uint32_t> reference(const std::vector<std::string>& keys) {
  std::vector<std::uint32_t> want(keys.size());
  std::iota(want.begin(), want.end(), 0u);
  std::stable_sort(want.begin(), want.end(), [&](std::uint32_t a, std::uint32_t b) { return keys[a] < keys[b]; });
  return want;
}

std::vector<std::uint32_t> sorted(const std::vector<std::string>& keys) {
  const KeyOrder order(keys.size(), [&](std::size_t i) { return std::string_view(keys[i]); });
  std::vector<std::uint32_t> got(order.size());
  for (std::size_t j = 0; j < order.size(); ++j) got[j] = order[j];
  return got;
}

TEST(KeyOrder, ZeroPaddingAndPrefixesOrderLikeTheBytes) {
  const std::vector<std::string> keys = {
      "abcdefgh"s, "abcdefg"s, "abcdefgh\0"s, "abcdefgh\0\0"s, ""s,  "\0"s, "abcdefg\0"s,
      "abcdefghi"s, "abcdefgh"s, "abcdefgh\0"s, "\0\0\0\0\0\0\0\0\0"s, "\0\0\0\0\0\0\0\0"s, "b"s, "abcdefgh\x01"s,
      "abcdefghabcdefgh"s, "abcdefghabcdefg"s, "abcdefghabcdefgh\0"s, "abcdefghabcdefgh"s, ""s, "\xff\xff"s,
  };
  EXPECT_EQ(sorted(keys), reference(keys));
}

TEST(KeyOrder, EmptyAndSingle) {
  EXPECT_TRUE(sorted({}).empty());
  EXPECT_EQ(sorted({"x"}), std::vector<std::uint32_t>{0});
}

// Positions share a 32-bit word with the tail (12-byte items): more than
// kMaxKeys keys are refused before any key is read.
TEST(KeyOrder, RefusesMoreKeysThanPositionsHold) {
  bool read = false;
  EXPECT_THROW(KeyOrder(KeyOrder::kMaxKeys + 1,
                        [&](std::size_t) {
                          read = true;
                          return std::string_view("x");
                        }),
               std::length_error);
  EXPECT_FALSE(read);
}

// Keys like a feed's: long shared prefixes (host and url rules), binary
// address keys, many repeats; lengths across several 8-byte levels.
TEST(KeyOrder, MatchesAStableSortOfRandomKeys) {
  const std::uint64_t seed = test::test_seed();
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 40; ++round) {
    const std::size_t n = rng() % 3000;
    const std::vector<std::string> stems = {"", "H", "Hnet\0example\0"s, "Uexample.org/p/", std::string(17, '\0'),
                                            std::string(8, 'a')};
    std::vector<std::string> keys;
    for (std::size_t i = 0; i < n; ++i) {
      if (!keys.empty() && rng() % 5 == 0) {  // a repeat of an earlier key
        keys.push_back(keys[rng() % keys.size()]);
        continue;
      }
      std::string k = stems[rng() % stems.size()];
      const std::size_t extra = rng() % 20;
      const int alphabet = round % 2 == 0 ? 3 : 256;  // few symbols: many shared prefixes
      for (std::size_t b = 0; b < extra; ++b) k += static_cast<char>(rng() % alphabet);
      keys.push_back(std::move(k));
    }
    ASSERT_EQ(sorted(keys), reference(keys)) << "round " << round << " CG_SEED=" << seed;
  }
}

// Large batches (the radix sort's ranges above its small-range cutoff,
// every byte of the chunk and of the position deciding somewhere): a mix
// like a load's (address-like keys differing in their last bytes, names
// sharing their first 8 bytes and more, many repeats of one key: a range
// of equal chunks ordered by position alone), given shuffled, sorted and
// reversed.
TEST(KeyOrder, LargeBatchesShuffledSortedAndReversed) {
  const std::uint64_t seed = test::test_seed();
  std::mt19937_64 rng(seed);
  std::vector<std::string> keys;
  for (std::uint32_t i = 0; i < 150000; ++i) {
    switch (i % 5) {
      case 0: keys.push_back("S\x04\x0a"s + static_cast<char>(i >> 16) + static_cast<char>(i >> 8) + static_cast<char>(i)); break;
      case 1: keys.push_back("Hnet\0example\0h"s + std::to_string(i)); break;
      case 2: keys.push_back("Uexample.org/p/"s + std::to_string(rng() % 50000)); break;  // repeats
      case 3: keys.push_back("same key, many times"s); break;
      default: keys.push_back(std::string(rng() % 12, static_cast<char>(rng() % 3))); break;
    }
  }
  std::shuffle(keys.begin(), keys.end(), rng);
  ASSERT_EQ(sorted(keys), reference(keys)) << "shuffled, CG_SEED=" << seed;
  std::sort(keys.begin(), keys.end());
  ASSERT_EQ(sorted(keys), reference(keys)) << "sorted, CG_SEED=" << seed;
  std::reverse(keys.begin(), keys.end());
  ASSERT_EQ(sorted(keys), reference(keys)) << "reversed, CG_SEED=" << seed;
}


// A large batch's items live in memory of their own, aligned to 2 MiB and
// advised for huge pages ("hg" in VmFlags, whatever the system's THP mode),
// where malloc would give a fresh mapping of 4 KiB pages; small ones come
// from the heap. Both are whole and writable, and a sort that needs the
// large kind still orders right.
TEST(KeyOrder, ItemsOfALargeBatchLiveInHugePageAdvisedMemory) {
  BulkAllocator<std::uint64_t> alloc;
  const std::size_t big = mem::kHugePage / sizeof(std::uint64_t) + 1;
  std::uint64_t* p = alloc.allocate(big);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % mem::kHugePage, 0u);
  const std::string flags = test::vm_flags_of(p);
  // (Under qemu-user madvise() is accepted and never reaches the kernel: no
  // advice to see there; the rest of the test still runs.)
  if (test::madvise_reaches_kernel()) {
    EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  }
  for (std::size_t i = 0; i < big; ++i) p[i] = i;
  EXPECT_EQ(std::accumulate(p, p + big, std::uint64_t{0}), std::uint64_t{big} * (big - 1) / 2);
  alloc.deallocate(p, big);
  std::uint64_t* q = alloc.allocate(16);
  ASSERT_NE(q, nullptr);
  for (std::size_t i = 0; i < 16; ++i) q[i] = i;
  EXPECT_EQ(test::vm_flags_of(q).find(" hg"), std::string::npos);
  alloc.deallocate(q, 16);

  const std::uint64_t seed = test::test_seed();
  std::mt19937_64 rng(seed);
  std::vector<std::string> keys;  // 12-byte items: over 2 MiB of them
  for (std::uint32_t i = 0; i < 200000; ++i)
    keys.push_back("S\x04\x0a"s + static_cast<char>(rng() % 4) + static_cast<char>(i >> 8) + static_cast<char>(i));
  ASSERT_GT(keys.size() * 12, mem::kHugePage);
  ASSERT_EQ(sorted(keys), reference(keys)) << "CG_SEED=" << seed;
}

}  // namespace
}  // namespace cg::store
