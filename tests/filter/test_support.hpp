// Shared helpers for the filter tests: replayable seeds and run lengths that
// adapt to ThreadSanitizer and to the soak suite.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CG_TEST_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define CG_TEST_TSAN 1
#endif

namespace cg::test {

inline constexpr bool kUnderTsan =
#if defined(CG_TEST_TSAN)
    true;
#else
    false;
#endif

// CG_SOAK=1 (the 'soak' suite) makes the stress tests run much longer.
inline bool soak() {
  const char* s = std::getenv("CG_SOAK");
  return s != nullptr && std::string(s) == "1";
}

// Wall time for one stress phase.
inline std::chrono::milliseconds stress_duration() {
  if (soak()) return std::chrono::milliseconds(30000);
  return std::chrono::milliseconds(kUnderTsan ? 1500 : 1000);
}

// The run's base seed: CG_SEED if set, else from the clock. Printed by every
// test that uses it, so a failure can be replayed with CG_SEED=<n>.
inline std::uint64_t base_seed() {
  static const std::uint64_t seed = [] {
    if (const char* s = std::getenv("CG_SEED")) return static_cast<std::uint64_t>(std::strtoull(s, nullptr, 0));
    return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }();
  return seed;
}

inline std::uint64_t seed_for(const char* test) {
  std::printf("[ seed     ] %s: CG_SEED=%llu\n", test, static_cast<unsigned long long>(base_seed()));
  std::uint64_t h = base_seed();
  for (const char* p = test; *p; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 0x100000001b3ull;
  return h;
}

// splitmix64: a small, seedable generator for keys and choices.
struct Rng {
  std::uint64_t s;
  explicit Rng(std::uint64_t seed) : s(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::uint64_t below(std::uint64_t n) { return next() % n; }
};

}  // namespace cg::test
