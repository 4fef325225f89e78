// K-CAS, single-threaded semantics (the concurrent tests are in kcas_stress_test.cpp).
#include "cuckoogate/kcas.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace cg {
namespace {

TEST(Kcas, SucceedsAndStoresEveryWordWhenAllMatch) {
  kcas::Word w[4] = {1, 2, 3, 4};
  // Deliberately not in address order.
  kcas::Entry e[4] = {{&w[3], 4, 40}, {&w[1], 2, 20}, {&w[0], 1, 10}, {&w[2], 3, 30}};
  ASSERT_EQ(kcas::cas(e, 4), kcas::Status::kSucceeded);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(kcas::read(w[i]), 10u * (i + 1));
}

TEST(Kcas, FailsAndChangesNothingWhenOneWordDiffers) {
  for (unsigned bad = 0; bad < 3; ++bad) {
    kcas::Word w[3] = {5, 6, 7};
    kcas::Entry e[3] = {{&w[0], 5, 50}, {&w[1], 6, 60}, {&w[2], 7, 70}};
    e[bad].expected += 100;
    ASSERT_EQ(kcas::cas(e, 3), kcas::Status::kFailed);
    EXPECT_EQ(kcas::read(w[0]), 5u);
    EXPECT_EQ(kcas::read(w[1]), 6u);
    EXPECT_EQ(kcas::read(w[2]), 7u);
  }
}

TEST(Kcas, SingleWordAndLargestValues) {
  kcas::Word w{kcas::kMaxValue};
  kcas::Entry e{&w, kcas::kMaxValue, 0};
  EXPECT_EQ(kcas::cas(&e, 1), kcas::Status::kSucceeded);
  EXPECT_EQ(kcas::read(w), 0u);
  EXPECT_EQ(kcas::read_help(w), 0u);
}

TEST(Kcas, RejectsBadWordCounts) {
  kcas::Word w{0};
  kcas::Entry e[5] = {{&w, 0, 1}};
  EXPECT_EQ(kcas::cas(e, 0), kcas::Status::kFailed);
  EXPECT_EQ(kcas::cas(e, 5), kcas::Status::kFailed);
  EXPECT_EQ(kcas::read(w), 0u);
}

TEST(Kcas, ThreadSlotsAreReleasedWhenThreadsExit) {
  ASSERT_TRUE(kcas::register_thread());
  const unsigned before = kcas::slots_in_use();
  for (unsigned round = 0; round < 2 * kcas::kMaxThreads / 8; ++round) {
    std::vector<std::thread> ts;
    for (int t = 0; t < 8; ++t)
      ts.emplace_back([] {
        kcas::Word a{1}, b{2};
        kcas::Entry e[2] = {{&a, 1, 2}, {&b, 2, 1}};
        EXPECT_EQ(kcas::cas(e, 2), kcas::Status::kSucceeded);
      });
    for (auto& t : ts) t.join();
  }
  EXPECT_EQ(kcas::slots_in_use(), before);
}

// A thread_local built before the thread took its slot is destroyed after the
// slot was released at thread exit. A K-CAS from its destructor must not run on
// that slot (another thread may own it by then): it gets kNoSlot and changes
// nothing, and the thread does not take a slot it would never give back.
TEST(Kcas, WriteFromALateThreadLocalDestructorGetsNoSlot) {
  struct Late {
    kcas::Word* a = nullptr;
    kcas::Word* b = nullptr;
    kcas::Status* result = nullptr;
    ~Late() {
      if (a == nullptr) return;
      kcas::Entry e[2] = {{a, 1, 10}, {b, 2, 20}};
      *result = kcas::cas(e, 2);
    }
  };
  ASSERT_TRUE(kcas::register_thread());
  const unsigned before = kcas::slots_in_use();
  kcas::Word a{1}, b{2};
  kcas::Status result = kcas::Status::kSucceeded;
  std::thread t([&] {
    thread_local Late late;  // constructed before the slot is taken
    late.a = &a;
    late.b = &b;
    late.result = &result;
    kcas::Word x{3}, y{4};
    kcas::Entry e[2] = {{&x, 3, 30}, {&y, 4, 40}};
    EXPECT_EQ(kcas::cas(e, 2), kcas::Status::kSucceeded);  // takes the slot
  });
  t.join();
  EXPECT_EQ(result, kcas::Status::kNoSlot);
  EXPECT_EQ(kcas::read(a), 1u);
  EXPECT_EQ(kcas::read(b), 2u);
  EXPECT_EQ(kcas::slots_in_use(), before);
}

}  // namespace
}  // namespace cg
