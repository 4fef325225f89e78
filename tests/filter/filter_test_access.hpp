// Test access to the filter's internals (a friend class, not #define private).
#pragma once

#include <cstdint>
#include <map>
#include <utility>

#include "cuckoogate/cuckoo_filter.hpp"

namespace cg {

class CuckooFilterTestAccess {
 public:
  // A fingerprint's identity independent of which of its two buckets holds it.
  using Canon = std::pair<std::uint32_t, std::uint64_t>;  // (min bucket of the pair, fp)

  template <unsigned F>
  static Canon canon(const CuckooFilter<F>& f, std::uint64_t hash) {
    using L = BucketLayout<F>;
    const std::uint64_t fp = L::fingerprint(hash);
    const std::uint32_t i1 = L::index1(hash, f.mask_);
    const std::uint32_t i2 = L::alt(i1, fp, f.mask_);
    return {i1 < i2 ? i1 : i2, fp};
  }

  // The table as a multiset of canonical fingerprints (quiescent table only).
  template <unsigned F>
  static std::map<Canon, int> content(const CuckooFilter<F>& f) {
    using L = BucketLayout<F>;
    std::map<Canon, int> m;
    for (std::uint32_t b = 0; b < f.buckets_; ++b) {
      const std::uint64_t w = kcas::read(f.table_[b]);
      for (unsigned s = 0; s < L::kSlots; ++s) {
        const std::uint64_t fp = L::slot(w, s);
        if (fp == 0) continue;
        const std::uint32_t a = L::alt(b, fp, f.mask_);
        ++m[{b < a ? b : a, fp}];
      }
    }
    return m;
  }

  template <unsigned F>
  static std::uint64_t word(const CuckooFilter<F>& f, std::uint32_t b) {
    return kcas::read(f.table_[b]);
  }
  template <unsigned F>
  static void* table_address(const CuckooFilter<F>& f) {
    return f.table_;
  }
  template <unsigned F>
  static std::uint32_t mask(const CuckooFilter<F>& f) {
    return f.mask_;
  }
  template <unsigned F>
  static std::uint64_t wraps(const CuckooFilter<F>& f) {
    return kcas::read(f.wraps_);
  }
  // One move of the filter's own kind (the K-CAS of a cuckoo-path hop).
  template <unsigned F>
  static bool move(CuckooFilter<F>& f, std::uint32_t src, unsigned slot, std::uint32_t dst) {
    const std::uint64_t fp = BucketLayout<F>::slot(kcas::read(f.table_[src]), slot);
    return fp != 0 && f.move_one(src, slot, fp, dst);
  }

#ifdef CG_FILTER_TEST_HOOKS
  // Runs fn(ctx, point) inside every later lookup of f at the hook points, until
  // cleared with fn = nullptr. Single-threaded use: the callback plays the writer.
  template <unsigned F>
  static void set_lookup_hook(const CuckooFilter<F>& f, void (*fn)(void*, typename CuckooFilter<F>::HookPoint),
                              void* ctx) {
    f.hook_ = fn;
    f.hook_ctx_ = ctx;
  }
#endif
};

}  // namespace cg
