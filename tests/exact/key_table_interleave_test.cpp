// exact::KeyTable: exact interleavings of a reader's probe with writer steps,
// run at the probe's hook points (built with CG_KEY_TABLE_TEST_HOOK; see
// key_table.hpp). A lookup returns a key's own value or reports it absent;
// never another key's value, whatever the writer does between the reader's
// loads. Both cases below returned another key's value before each bucket
// had its version (found in review).
#include "cuckoogate/exact/key_table.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>

namespace cg::exact {
namespace {

struct Table {
  explicit Table(std::size_t capacity) : mem(std::aligned_alloc(KeyTable::kBucketBytes, KeyTable::bytes_for(capacity))) {
    std::memset(mem, 0, KeyTable::bytes_for(capacity));
    t = new KeyTable(mem, capacity);
  }
  ~Table() {
    delete t;
    std::free(mem);
  }
  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;
  void* mem;
  KeyTable* t;
};

// A key whose two buckets are b1 and b2 in a table of 512 buckets (the
// bucket of a key half is its top nine bits).
Key128 key(uint64_t b1, uint64_t b2, uint64_t n) { return {b1 << 55 | n, b2 << 55 | n}; }

// Writer steps to run at the reader's hook points 1 and 2, once each.
std::function<void()> g_at1, g_at2;
void run_steps(int point) {
  std::function<void()> f;
  std::swap(f, point == 1 ? g_at1 : g_at2);
  if (f) f();
}

struct KeyTableInterleavings : ::testing::Test {
  void SetUp() override { test::probe_hook = run_steps; }
  void TearDown() override {
    test::probe_hook = nullptr;
    g_at1 = g_at2 = nullptr;
  }
};

// The blocklist's values are hit-counter slot << 3 | kind, and a freed slot
// is reused first: A deleted, B added into A's entry with A's slot, B
// deleted, A added back -- the entry's value is A's again. A reader that read
// A's value, then B's key words, then A's value must not return A's value
// for B.
TEST_F(KeyTableInterleavings, AValueRestoredByTwoReusesIsNotReturnedForTheKeyBetween) {
  Table tb(0);
  KeyTable& t = *tb.t;
  ASSERT_EQ(t.buckets(), 512u);
  const Key128 a = key(1, 2, 1), b = key(1, 3, 2);
  const uint32_t va = 1 << 3 | 1, vb = 1 << 3 | 2;
  ASSERT_EQ(t.insert(a, va), 0);
  g_at1 = [&] {  // the reader has loaded A's value
    ASSERT_TRUE(t.erase(a));
    ASSERT_EQ(t.insert(b, vb), 0);  // into A's entry, the first free one of bucket 1
  };
  g_at2 = [&] {  // the reader has matched B's key words
    ASSERT_TRUE(t.erase(b));
    ASSERT_EQ(t.insert(a, va), 0);  // back into the same entry, with the same value
  };
  uint32_t v = 0;
  const bool found = t.find(b, &v);
  if (found) {
    EXPECT_EQ(v, vb) << "find(B) returned A's value";
  }
  EXPECT_FALSE(g_at1 || g_at2) << "the reader did not pass both points";
}

// The same with keys that never leave the table, by two cuckoo paths: A
// moves out of bucket X and B moves into A's entry; then B moves out and A
// back in. B is present throughout, so the lookup must find it, with B's value.
TEST_F(KeyTableInterleavings, TwoCuckooPathsThroughOneEntryDoNotTearAKeyPresentThroughout) {
  Table tb(100);
  KeyTable& t = *tb.t;
  ASSERT_EQ(t.buckets(), 512u);
  enum : uint64_t { X = 1, Y = 2, Z = 3, S1 = 4, S2 = 5 };
  const Key128 a = key(X, Y, 1), b = key(X, Z, 2), k1 = key(Z, S1, 3), k2 = key(Y, S1, 4);
  const uint32_t va = 1 << 3 | 1, vb = 2 << 3 | 2;
  uint64_t n = 100;
  ASSERT_EQ(t.insert(a, va), 0);  // X: A, P1, P2
  ASSERT_EQ(t.insert(key(X, S1, n++), 17), 0);
  ASSERT_EQ(t.insert(key(X, S1, n++), 25), 0);
  ASSERT_EQ(t.insert(b, vb), 0);  // X is full: B in Z
  ASSERT_EQ(t.insert(key(Z, S2, n++), 33), 0);  // Z: B, Q1, Q2
  ASSERT_EQ(t.insert(key(Z, S2, n++), 41), 0);
  ASSERT_EQ(t.insert(key(Y, S2, n++), 49), 0);  // Y: R1, R2, one free entry
  ASSERT_EQ(t.insert(key(Y, S2, n++), 57), 0);
  for (uint32_t i = 0; i < 6; ++i) ASSERT_EQ(t.insert(key(S1, S2, n++), 65 + 8 * i), 0);  // S1, S2 full
  g_at1 = [&] { ASSERT_EQ(t.insert(k1, 99), 0); };  // A: X -> Y, then B: Z -> X into A's entry
  g_at2 = [&] {
    ASSERT_TRUE(t.erase(k1));
    ASSERT_EQ(t.insert(k2, 98), 0);  // B: X -> Z, then A: Y -> X back into that entry
  };
  uint32_t v = 0;
  ASSERT_TRUE(t.find(b, &v));
  EXPECT_EQ(v, vb) << "find(B) returned A's value";
  EXPECT_FALSE(g_at1 || g_at2) << "the reader did not pass both points";
  uint32_t w = 0;
  ASSERT_TRUE(t.find(a, &w));
  EXPECT_EQ(w, va);
}

}  // namespace
}  // namespace cg::exact
