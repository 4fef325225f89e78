// Benchmark baseline: the same bucket layout and hashing as CuckooFilter, with no
// concurrency control at all (plain loads and stores). Single-threaded use only;
// it is the sequential ceiling the lock-free filter's lookups are measured against.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "cuckoogate/bucket_layout.hpp"
#include "cuckoogate/cuckoo_filter.hpp"
#include "cuckoogate/path_search.hpp"

namespace cg::baseline {

template <unsigned F = 12>
class SequentialFilter {
 public:
  using Layout = BucketLayout<F>;

  explicit SequentialFilter(std::size_t min_slots)
      : buckets_(std::max<std::size_t>(2, std::bit_ceil((min_slots + 3) / 4))),
        mask_(static_cast<std::uint32_t>(buckets_ - 1)),
        table_(new (std::align_val_t{64}) std::uint64_t[buckets_]()) {}

  bool contains(std::uint64_t hash) const noexcept {
    const std::uint64_t fp = Layout::fingerprint(hash);
    const std::uint32_t i1 = Layout::index1(hash, mask_);
    return Layout::has(table_[i1], fp) || Layout::has(table_[Layout::alt(i1, fp, mask_)], fp);
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
      for (std::size_t j = 0; j < std::min(kAhead, m); ++j) {
        __builtin_prefetch(&table_[i1[j]]);
        __builtin_prefetch(&table_[i2[j]]);
      }
      std::uint64_t bits = 0;
      for (std::size_t j = 0; j < m; ++j) {
        if (j + kAhead < m) {
          __builtin_prefetch(&table_[i1[j + kAhead]]);
          __builtin_prefetch(&table_[i2[j + kAhead]]);
        }
        const bool hit = Layout::has(table_[i1[j]], fp[j]) || Layout::has(table_[i2[j]], fp[j]);
        bits |= std::uint64_t{hit} << j;
      }
      hit_mask[base / 64] = bits;
    }
  }

  bool insert(std::uint64_t hash) noexcept {
    const std::uint64_t fp = Layout::fingerprint(hash);
    const std::uint32_t i1 = Layout::index1(hash, mask_);
    const std::uint32_t i2 = Layout::alt(i1, fp, mask_);
    auto read = [this](std::uint32_t b) { return table_[b]; };
    for (unsigned attempt = 0; attempt < 2; ++attempt) {
      if (add(i1, fp) || add(i2, fp)) return true;
      CuckooPath p;
      if (!find_cuckoo_path<F>(i1, i2, mask_, attempt, read, p)) return false;
      std::uint32_t b[kMaxPathMoves + 1];
      unsigned s[kMaxPathMoves];
      std::uint64_t f[kMaxPathMoves];
      decode_cuckoo_path<F>(p, i1, i2, mask_, read, b, s, f);
      for (unsigned j = p.moves; j-- > 0;) {
        table_[b[j]] = Layout::set_slot(table_[b[j]], s[j], 0);
        add(b[j + 1], f[j]);
      }
    }
    return false;
  }

  bool erase(std::uint64_t hash) noexcept {
    const std::uint64_t fp = Layout::fingerprint(hash);
    const std::uint32_t i1 = Layout::index1(hash, mask_);
    for (std::uint32_t b : {i1, Layout::alt(i1, fp, mask_)}) {
      const unsigned s = Layout::find(table_[b], fp);
      if (s != Layout::kSlots) {
        table_[b] = Layout::set_slot(table_[b], s, 0);
        return true;
      }
    }
    return false;
  }

  std::size_t capacity() const noexcept { return buckets_ * 4; }

 private:
  bool add(std::uint32_t b, std::uint64_t fp) noexcept {
    const unsigned s = Layout::find(table_[b], 0);
    if (s == Layout::kSlots) return false;
    table_[b] = Layout::set_slot(table_[b], s, fp);
    return true;
  }

  struct AlignedDelete {
    void operator()(std::uint64_t* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::size_t buckets_;
  std::uint32_t mask_;
  std::unique_ptr<std::uint64_t[], AlignedDelete> table_;
};

}  // namespace cg::baseline
