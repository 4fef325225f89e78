// K-CAS under contention: atomicity seen by read-only readers, no lost updates,
// conservation of a sum over transfers.
#include "cuckoogate/kcas.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace cg {
namespace {

using Clock = std::chrono::steady_clock;

// Writers increment words A and B together (K-CAS), so A == B at every instant;
// a third word C is bumped by plain CASes in between. Readers read A then B (B
// then A) with the read-only kcas::read and must never see A > B (B > A).
TEST(KcasStress, ReadersNeverSeeAHalfAppliedOperation) {
  kcas::Word a{0}, b{0}, c{0};
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> successes{0}, c_bumps{0}, violations{0}, reads{0};
  std::vector<std::thread> ts;
  for (int w = 0; w < 2; ++w)
    ts.emplace_back([&] {
      std::uint64_t ok = 0, bumps = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        const std::uint64_t va = kcas::read(a), vb = kcas::read(b), vc = kcas::read_help(c);
        kcas::Entry e[3] = {{&a, va, va + 1}, {&b, vb, vb + 1}, {&c, vc, vc}};
        if (kcas::cas(e, (ok & 1) ? 3 : 2) == kcas::Status::kSucceeded) ++ok;
        std::uint64_t v = kcas::read_help(c);
        if (c.compare_exchange_strong(v, v + 1, std::memory_order_seq_cst)) ++bumps;
      }
      successes += ok;
      c_bumps += bumps;
    });
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      std::uint64_t n = 0, bad = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        if (r == 0) {
          const std::uint64_t x = kcas::read(a), y = kcas::read(b);
          bad += x > y;
        } else {
          const std::uint64_t y = kcas::read(b), x = kcas::read(a);
          bad += y > x;
        }
        ++n;
      }
      violations += bad;
      reads += n;
    });
  std::this_thread::sleep_for(test::stress_duration());
  stop = true;
  for (auto& t : ts) t.join();
  EXPECT_EQ(violations.load(), 0u);
  EXPECT_EQ(kcas::read(a), successes.load());
  EXPECT_EQ(kcas::read(b), successes.load());
  EXPECT_EQ(kcas::read(c), c_bumps.load());
  EXPECT_GT(successes.load(), 0u);
  std::printf("k-cas successes %llu, reader pairs %llu\n", static_cast<unsigned long long>(successes.load()),
              static_cast<unsigned long long>(reads.load()));
}

// Random 2..4-word transfers between 8 words keep the total constant; every
// value a reader sees is a plain value within bounds.
TEST(KcasStress, TransfersKeepTheSumConstant) {
  constexpr int kWords = 8;
  constexpr std::uint64_t kStart = 1000;
  const std::uint64_t seed = test::seed_for("TransfersKeepTheSumConstant");
  kcas::Word w[kWords];
  for (auto& x : w) x.store(kStart);
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> bad{0}, done{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 3; ++t)
    ts.emplace_back([&, t] {
      test::Rng rng(seed + t);
      std::uint64_t ok = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        const unsigned n = 2 + static_cast<unsigned>(rng.below(3));
        int idx[4];
        for (unsigned i = 0; i < n; ++i) {
        again:
          idx[i] = static_cast<int>(rng.below(kWords));
          for (unsigned j = 0; j < i; ++j)
            if (idx[j] == idx[i]) goto again;
        }
        kcas::Entry e[4];
        for (unsigned i = 0; i < n; ++i) {
          const std::uint64_t v = kcas::read(w[idx[i]]);
          e[i] = {&w[idx[i]], v, v};
        }
        const std::uint64_t amount = e[0].expected == 0 ? 0 : 1 + rng.below(e[0].expected);
        e[0].desired -= amount;
        e[1 + rng.below(n - 1)].desired += amount;
        if (kcas::cas(e, n) == kcas::Status::kSucceeded) ++ok;
      }
      done += ok;
    });
  ts.emplace_back([&] {
    std::uint64_t b = 0;
    while (!stop.load(std::memory_order_relaxed))
      for (auto& x : w) {
        const std::uint64_t v = kcas::read(x);
        b += kcas::is_ref(v) || v > kWords * kStart;
      }
    bad += b;
  });
  std::this_thread::sleep_for(test::stress_duration());
  stop = true;
  for (auto& t : ts) t.join();
  std::uint64_t sum = 0;
  for (auto& x : w) {
    const std::uint64_t v = x.load();
    EXPECT_FALSE(kcas::is_ref(v)) << "a descriptor reference was left behind";
    sum += v;
  }
  EXPECT_EQ(sum, kWords * kStart);
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GT(done.load(), 0u);
}

}  // namespace
}  // namespace cg
