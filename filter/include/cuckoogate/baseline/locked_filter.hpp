// Benchmark baseline: the same bucket layout and hashing as CuckooFilter, made
// concurrent with per-bucket lock striping (spinlocks), as in the lock-based
// filters the published lock-free filter compares itself with. A lookup locks
// the stripes of both candidate buckets; a move locks source and destination.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "cuckoogate/bucket_layout.hpp"
#include "cuckoogate/cuckoo_filter.hpp"
#include "cuckoogate/path_search.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace cg::baseline {

template <unsigned F = 12, unsigned StripeBits = 16>
class LockedFilter {
 public:
  using Layout = BucketLayout<F>;

  explicit LockedFilter(std::size_t min_slots)
      : buckets_(std::max<std::size_t>(2, std::bit_ceil((min_slots + 3) / 4))),
        mask_(static_cast<std::uint32_t>(buckets_ - 1)),
        table_(new std::atomic<std::uint64_t>[buckets_]),
        locks_(new Lock[std::size_t{1} << StripeBits]) {
    for (std::size_t i = 0; i < buckets_; ++i) table_[i].store(0, std::memory_order_relaxed);
  }

  bool contains(std::uint64_t hash) const noexcept {
    const std::uint64_t fp = Layout::fingerprint(hash);
    const std::uint32_t i1 = Layout::index1(hash, mask_);
    return lookup(i1, Layout::alt(i1, fp, mask_), fp);
  }

  void contains_bulk(const std::uint64_t* hashes, std::size_t n, std::uint64_t* hit_mask) const noexcept {
    constexpr std::size_t kAhead = kLookupPrefetchAhead;  // as CuckooFilter::contains_bulk
    std::uint32_t i1[kLookupBulkMax], i2[kLookupBulkMax];
    std::uint64_t fp[kLookupBulkMax];
    for (std::size_t base = 0; base < n; base += kLookupBulkMax) {
      const std::size_t m = std::min(kLookupBulkMax, n - base);
      for (std::size_t j = 0; j < m; ++j) {
        fp[j] = Layout::fingerprint(hashes[base + j]);
        i1[j] = Layout::index1(hashes[base + j], mask_);
        i2[j] = Layout::alt(i1[j], fp[j], mask_);
      }
      for (std::size_t j = 0; j < std::min(kAhead, m); ++j) prefetch(i1[j], i2[j]);
      std::uint64_t bits = 0;
      for (std::size_t j = 0; j < m; ++j) {
        if (j + kAhead < m) prefetch(i1[j + kAhead], i2[j + kAhead]);
        bits |= std::uint64_t{lookup(i1[j], i2[j], fp[j])} << j;
      }
      hit_mask[base / 64] = bits;
    }
  }

  bool insert(std::uint64_t hash) noexcept {
    const std::uint64_t fp = Layout::fingerprint(hash);
    const std::uint32_t i1 = Layout::index1(hash, mask_);
    const std::uint32_t i2 = Layout::alt(i1, fp, mask_);
    auto read = [this](std::uint32_t b) { return table_[b].load(std::memory_order_relaxed); };
    for (unsigned attempt = 0; attempt < 16; ++attempt) {
      {
        Guard g(*this, i1, i2);
        if (add(i1, fp) || add(i2, fp)) return true;
      }
      CuckooPath p;  // searched without locks, each move validated under locks
      if (!find_cuckoo_path<F>(i1, i2, mask_, attempt & 3, read, p)) return false;
      std::uint32_t b[kMaxPathMoves + 1];
      unsigned s[kMaxPathMoves];
      std::uint64_t f[kMaxPathMoves];
      if (!decode_cuckoo_path<F>(p, i1, i2, mask_, read, b, s, f)) continue;
      for (unsigned j = p.moves; j-- > 0;) {
        Guard g(*this, b[j], b[j + 1]);
        const std::uint64_t ws = table_[b[j]].load(std::memory_order_relaxed);
        if (Layout::slot(ws, s[j]) != f[j] || !add(b[j + 1], f[j])) break;
        table_[b[j]].store(Layout::set_slot(ws, s[j], 0), std::memory_order_relaxed);
      }
    }
    return false;
  }

  bool erase(std::uint64_t hash) noexcept {
    const std::uint64_t fp = Layout::fingerprint(hash);
    const std::uint32_t i1 = Layout::index1(hash, mask_);
    const std::uint32_t i2 = Layout::alt(i1, fp, mask_);
    Guard g(*this, i1, i2);
    for (std::uint32_t b : {i1, i2}) {
      const std::uint64_t w = table_[b].load(std::memory_order_relaxed);
      const unsigned s = Layout::find(w, fp);
      if (s != Layout::kSlots) {
        table_[b].store(Layout::set_slot(w, s, 0), std::memory_order_relaxed);
        return true;
      }
    }
    return false;
  }

  std::size_t capacity() const noexcept { return buckets_ * 4; }

 private:
  struct Lock {
    std::atomic<std::uint32_t> held{0};
  };
  static void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
  }
  std::uint32_t stripe(std::uint32_t b) const noexcept { return b & ((1u << StripeBits) - 1); }
  void lock(std::uint32_t s) const noexcept {
    // acquire: the critical section's loads see the previous holder's stores.
    while (locks_[s].held.exchange(1, std::memory_order_acquire) != 0)
      while (locks_[s].held.load(std::memory_order_relaxed) != 0) relax();
  }
  void unlock(std::uint32_t s) const noexcept {
    locks_[s].held.store(0, std::memory_order_release);  // release: publishes the critical section
  }
  // Locks the stripes of two buckets in stripe order (no deadlock), once if shared.
  struct Guard {
    const LockedFilter& f;
    std::uint32_t lo, hi;
    Guard(const LockedFilter& fl, std::uint32_t a, std::uint32_t b) : f(fl) {
      lo = std::min(f.stripe(a), f.stripe(b));
      hi = std::max(f.stripe(a), f.stripe(b));
      f.lock(lo);
      if (hi != lo) f.lock(hi);
    }
    ~Guard() {
      if (hi != lo) f.unlock(hi);
      f.unlock(lo);
    }
  };

  bool lookup(std::uint32_t i1, std::uint32_t i2, std::uint64_t fp) const noexcept {
    Guard g(*this, i1, i2);
    return Layout::has(table_[i1].load(std::memory_order_relaxed), fp) ||
           Layout::has(table_[i2].load(std::memory_order_relaxed), fp);
  }
  void prefetch(std::uint32_t a, std::uint32_t b) const noexcept {
    __builtin_prefetch(&table_[a]);
    __builtin_prefetch(&table_[b]);
    __builtin_prefetch(&locks_[stripe(a)]);
    __builtin_prefetch(&locks_[stripe(b)]);
  }
  bool add(std::uint32_t b, std::uint64_t fp) noexcept {  // caller holds b's stripe
    const std::uint64_t w = table_[b].load(std::memory_order_relaxed);
    const unsigned s = Layout::find(w, 0);
    if (s == Layout::kSlots) return false;
    table_[b].store(Layout::set_slot(w, s, fp), std::memory_order_relaxed);
    return true;
  }

  std::size_t buckets_;
  std::uint32_t mask_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> table_;
  std::unique_ptr<Lock[]> locks_;
};

}  // namespace cg::baseline
