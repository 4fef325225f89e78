// Shared helpers for the store tests: seeds, scaled durations, temp dirs.
#pragma once

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <fstream>
#include <random>
#include <string>

namespace cg::store::test {

// The VmFlags of the mapping that holds p (/proc/self/smaps), "" if none.
inline std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= a && a < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

// Whether madvise() reaches the kernel: a fresh mapping advised for huge
// pages shows "hg" in its VmFlags (whatever the system's THP mode). Under
// qemu-user (the AArch64 test run) madvise() is accepted and ignored, so
// tests of what the kernel makes of advice (huge-page flags, pages faulted
// in by MADV_POPULATE_WRITE) have nothing to observe and skip there.
inline bool madvise_reaches_kernel() {
  const std::size_t len = 2 * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  const bool seen = ::madvise(p, len, MADV_HUGEPAGE) == 0 && vm_flags_of(p).find(" hg") != std::string::npos;
  ::munmap(p, len);
  return seen;
}

#if defined(__SANITIZE_THREAD__)
inline constexpr bool kTsan = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kTsan = true;
#else
inline constexpr bool kTsan = false;
#endif
#else
inline constexpr bool kTsan = false;
#endif

// Sanitizer or unoptimised builds: randomised tests run fewer operations.
#if defined(__SANITIZE_ADDRESS__) || !defined(NDEBUG) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSlowBuild = true;
#else
inline constexpr bool kSlowBuild = kTsan;
#endif

// The seed of a randomised test: $CG_SEED if set, else fresh. Always printed
// so a failure can be replayed with CG_SEED=<n>.
inline std::uint64_t test_seed() {
  std::uint64_t seed;
  if (const char* env = std::getenv("CG_SEED"); env != nullptr && *env != '\0') {
    seed = std::strtoull(env, nullptr, 0);
  } else {
    seed = std::random_device{}() ^
           static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  std::printf("[ seed     ] CG_SEED=%llu\n", static_cast<unsigned long long>(seed));
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

// Duration of a stress loop: $CG_SOAK_SECONDS if set (soak suite), else the
// default, shortened under TSan.
inline std::chrono::milliseconds stress_duration(int default_ms) {
  if (const char* env = std::getenv("CG_SOAK_SECONDS"); env != nullptr && *env != '\0') {
    return std::chrono::milliseconds(std::atoll(env) * 1000);
  }
  return std::chrono::milliseconds(kTsan ? default_ms / 2 : default_ms);
}

// A fresh directory under the system temp dir, removed at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "cg-store-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace cg::store::test
