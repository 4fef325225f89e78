// mem::GrowBuffer: appends keep every earlier byte where data() says across
// growths (mremap may move the mapping), reserve() makes the next appends
// infallible, capacity grows by doubling (few remaps for many appends), and
// release() gives the mapping back.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>

#include "cuckoogate/mem/grow_buffer.hpp"

namespace cg::mem {
namespace {

TEST(GrowBuffer, AppendsSurviveGrowthPastHugePageSizes) {
  GrowBuffer b;
  EXPECT_EQ(b.size(), 0u);
  std::string want;
  std::size_t growths = 0, cap = b.capacity();
  for (uint32_t i = 0; want.size() < (std::size_t{5} << 20); ++i) {  // past 2 and 4 MiB
    const std::string piece = std::to_string(i * 2654435761u) + (i % 3 == 0 ? std::string(i % 40, '\0') : "");
    ASSERT_TRUE(b.append(piece.data(), piece.size()));
    want += piece;
    if (b.capacity() != cap) {
      ++growths;
      EXPECT_GE(b.capacity(), 2 * cap);  // doubling (from a first mapping of some pages)
      cap = b.capacity();
    }
  }
  ASSERT_EQ(b.size(), want.size());
  EXPECT_EQ(std::string(b.data(), b.size()), want);
  EXPECT_LE(growths, 9u);  // 64 KiB doubled to 8 MiB
  ASSERT_TRUE(b.append(nullptr, 0));
  EXPECT_EQ(b.size(), want.size());
}

TEST(GrowBuffer, ReserveMakesRoomAndReleaseEmpties) {
  GrowBuffer b;
  ASSERT_TRUE(b.reserve(100000));
  EXPECT_GE(b.capacity(), 100000u);
  EXPECT_EQ(b.size(), 0u);
  const std::size_t cap = b.capacity();
  const std::string x(cap, 'x');
  ASSERT_TRUE(b.append(x.data(), x.size()));
  EXPECT_EQ(b.capacity(), cap);  // exactly filled, no growth
  GrowBuffer moved = std::move(b);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(moved.size(), cap);
  EXPECT_EQ(moved.data()[cap - 1], 'x');
  moved.release();
  EXPECT_EQ(moved.size(), 0u);
  EXPECT_EQ(moved.capacity(), 0u);
  EXPECT_EQ(moved.data(), nullptr);
  ASSERT_TRUE(moved.append("ab", 2));  // usable again
  EXPECT_EQ(std::string(moved.data(), moved.size()), "ab");
}

TEST(GrowBuffer, AnImpossibleSizeIsRefusedAndChangesNothing) {
  GrowBuffer b;
  ASSERT_TRUE(b.append("abc", 3));
  EXPECT_FALSE(b.reserve(SIZE_MAX - 1));
  EXPECT_EQ(std::string(b.data(), b.size()), "abc");
}

}  // namespace
}  // namespace cg::mem
