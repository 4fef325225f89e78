// One bucket = one 64-bit word: 4 fingerprints, a per-bucket counter, and bit 63
// reserved for K-CAS references (kcas.hpp). Plus the hashing that maps a 64-bit
// key hash to (bucket, fingerprint) and the alternate-bucket involution.
//
//   bit 63      : 0 in every bucket value (1 = K-CAS/RDCSS reference)
//   bits 4F..62 : counter (63 - 4F bits; 15 bits for F = 12, 31 for F = 8)
//   bits 0..4F-1: slot s in bits [s*F, s*F + F); fingerprint 0 = empty slot
//
// The counter is bumped (mod 2^kCounterBits) by every insert into the bucket and
// by every move into or out of it (a move bumps both buckets). Erase does not
// bump it. A bump that wraps it to 0 also increments the filter's wrap word in
// the same K-CAS. docs/concurrency.md explains why that is enough for lookups.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cg {

template <unsigned F>
struct BucketLayout {
  static_assert(F >= 4 && F <= 13, "fingerprint bits: 4..13 (the counter needs >= 11 bits)");
  static constexpr unsigned kSlots = 4;
  static constexpr unsigned kFpBits = F;
  static constexpr std::uint64_t kFpMax = (std::uint64_t{1} << F) - 1;
  static constexpr unsigned kSlotBits = kSlots * F;
  static constexpr std::uint64_t kSlotsMask = (std::uint64_t{1} << kSlotBits) - 1;
  static constexpr unsigned kCounterShift = kSlotBits;
  static constexpr unsigned kCounterBits = 63 - kSlotBits;
  static constexpr std::uint64_t kCounterMask = ((std::uint64_t{1} << kCounterBits) - 1) << kCounterShift;
  // SWAR constants: the lowest and highest bit of every slot.
  static constexpr std::uint64_t kLaneLo = [] {
    std::uint64_t v = 0;
    for (unsigned s = 0; s < kSlots; ++s) v |= std::uint64_t{1} << (s * F);
    return v;
  }();
  static constexpr std::uint64_t kLaneHi = kLaneLo << (F - 1);
  static_assert(kCounterBits >= 11);
  static_assert((kCounterMask & kSlotsMask) == 0 && (kCounterMask >> 63) == 0);

  static constexpr std::uint64_t slot(std::uint64_t w, unsigned s) noexcept {
    return (w >> (s * F)) & kFpMax;
  }
  static constexpr std::uint64_t counter(std::uint64_t w) noexcept {
    return (w & kCounterMask) >> kCounterShift;
  }
  // Nonzero iff some slot of w holds fp (fp = 0 tests for an empty slot).
  // Classic "has zero lane" on w XOR broadcast(fp); exact as a yes/no answer.
  static constexpr bool has(std::uint64_t w, std::uint64_t fp) noexcept {
    const std::uint64_t x = (w & kSlotsMask) ^ (fp * kLaneLo);
    return ((x - kLaneLo) & ~x & kLaneHi) != 0;
  }
  static constexpr bool has_empty(std::uint64_t w) noexcept { return has(w, 0); }
  // First slot index holding fp, or kSlots.
  static constexpr unsigned find(std::uint64_t w, std::uint64_t fp) noexcept {
    for (unsigned s = 0; s < kSlots; ++s)
      if (slot(w, s) == fp) return s;
    return kSlots;
  }
  static constexpr unsigned count(std::uint64_t w) noexcept {
    unsigned n = 0;
    for (unsigned s = 0; s < kSlots; ++s) n += slot(w, s) != 0 ? 1 : 0;
    return n;
  }
  static constexpr std::uint64_t bump(std::uint64_t w) noexcept {
    return (w & ~kCounterMask) | ((w + (std::uint64_t{1} << kCounterShift)) & kCounterMask);
  }
  // True iff bump(w) wraps the counter around to 0.
  static constexpr bool bump_wraps(std::uint64_t w) noexcept { return (w & kCounterMask) == kCounterMask; }
  static constexpr std::uint64_t set_slot(std::uint64_t w, unsigned s, std::uint64_t fp) noexcept {
    return (w & ~(kFpMax << (s * F))) | (fp << (s * F));
  }

  // Hashing. The key hash is already uniform (XXH3), so its bits are used
  // directly: the top F bits give the fingerprint (0 remapped to 1), the low bits
  // the primary bucket. Buckets are a power of two, at most 2^32.
  static constexpr std::uint64_t fingerprint(std::uint64_t hash) noexcept {
    const std::uint64_t fp = hash >> (64 - F);
    return fp == 0 ? 1 : fp;
  }
  static constexpr std::uint32_t index1(std::uint64_t hash, std::uint32_t mask) noexcept {
    return static_cast<std::uint32_t>(hash) & mask;
  }
  // i XOR d(fp) with d(fp) != 0: an involution with alt(i) != i (needs mask >= 1).
  static constexpr std::uint32_t alt(std::uint32_t i, std::uint64_t fp, std::uint32_t mask) noexcept {
    std::uint32_t d = static_cast<std::uint32_t>((fp * 0x5bd1e995u) >> 7) & mask;
    d |= d == 0 ? 1u : 0u;
    return i ^ d;
  }
};

}  // namespace cg
