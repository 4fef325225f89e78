// The exact set's table (docs/concurrency.md, "The exact set's table"): 128-bit keys (a
// rule key's XXH3-128, already uniform) mapped to nonzero 32-bit values, in a
// bucketed cuckoo hash table with two candidate buckets per key and three
// entries per 64-byte bucket. One writer; any number of readers concurrently,
// which never block, never write and never allocate.
//
// Why not rte_hash (what the exact set was until issue 12, item 4): rte_hash
// keeps the keys in a separate key store (32 bytes a slot) beside its bucket
// array (sized to the power of two above 1.25x the entries), so a key costs
// ~48 bytes and two cache lines, and an insert dequeues a key slot from a ring
// and writes both places. Here a key and its value sit in the bucket (64/3
// bytes a slot, sized for 80 % load at capacity: ~27 bytes a key) and a lookup
// reads one line, two when the key is in its second bucket.
//
// Concurrency, with W the writer and R a reader (every shared word is a
// std::atomic, so the argument is the C++ model's, valid on ARM as on x86):
//   * An entry is published by its value: W writes the key words (relaxed),
//     then the value with release; R loads the value with acquire, so a
//     nonzero value comes with its key words (or later ones).
//   * An entry is freed by storing value 0. Before W writes key words into
//     an entry it bumps its bucket's version (release), then issues a
//     release fence. R loads the version (acquire) before a probe and, after
//     comparing the key words (relaxed), issues an acquire fence and loads
//     the value and the version again: if R read any key word of a later
//     write, the fence pair makes that write's bump visible, the version
//     differs, and R looks again; if not, the version it started from came
//     with everything before it, so the value and key words it read are one
//     write's. (Comparing the value alone was not enough: a free, a reuse by
//     another key and a reuse by the first key again bring the same value
//     back, and R returned it for the other key -- found in review, test
//     KeyTableInterleavings.AValueRestoredByTwoReusesIsNotReturnedForTheKeyBetween.)
//   * A key moves between its two buckets only during a cuckoo insert. W
//     writes the copy first, then bumps moves_ (release), then a release
//     fence, then frees the old entry. R loads moves_ (acquire) before its two
//     probes and again after an acquire fence when both missed; a key present
//     throughout that R missed was read at its old place after the free
//     (so the fence-fence pairing makes the bump visible: moves_ changed) or
//     at its new place before the copy (so R's first moves_ load came before
//     the bump, and the second, after the free, is past it). R retries then.
//     The retry loop ends unless W keeps moving keys: lock-free, as
//     rte_hash's lock-free mode (its tbl_chng_cnt) is.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cuckoogate/keys/rule.hpp"

// Tests only (tests/exact, built with CG_KEY_TABLE_TEST_HOOK): a function a
// reader's probe calls at two points -- 1: after loading an entry's nonzero
// value, before its key words; 2: after its key words matched, before the
// re-check -- so a test can run writer steps exactly there.
#ifdef CG_KEY_TABLE_TEST_HOOK
namespace cg::exact::test {
inline void (*probe_hook)(int point) = nullptr;
}
#define CG_KEY_TABLE_PROBE_HOOK(point)                                             \
  do {                                                                             \
    if (::cg::exact::test::probe_hook != nullptr) ::cg::exact::test::probe_hook(point); \
  } while (0)
#else
#define CG_KEY_TABLE_PROBE_HOOK(point) \
  do {                                 \
  } while (0)
#endif

namespace cg::exact {

class KeyTable {
 public:
  static constexpr std::size_t kSlots = 3;          // entries per bucket
  static constexpr std::size_t kBucketBytes = 64;   // one cache line
  static constexpr std::size_t kMinBuckets = 512;
  // Buckets for `capacity` keys at 80 % load (a two-choice table with
  // three-entry buckets fills to ~95 % before inserts fail), at least
  // kMinBuckets.
  static std::size_t buckets_for(std::size_t capacity) noexcept {
    const std::size_t b = (capacity * 5 + 11) / 12;
    return b < kMinBuckets ? kMinBuckets : b;
  }
  static std::size_t bytes_for(std::size_t capacity) noexcept { return buckets_for(capacity) * kBucketBytes; }

  // mem: bytes_for(capacity) zeroed bytes aligned to kBucketBytes, owned by
  // the caller, outliving the table and every reader. buckets_for(capacity)
  // must be below 2^32.
  KeyTable(void* mem, std::size_t capacity) noexcept;
  KeyTable(const KeyTable&) = delete;
  KeyTable& operator=(const KeyTable&) = delete;

  // Reader (any thread) or writer. True and *value set if k is present.
  bool find(const Key128& k, uint32_t* value) const noexcept {
    const Bucket& b1 = buckets_[first(k)];
    const Bucket& b2 = buckets_[second(k)];
    for (;;) {
      // acquire: pairs with the writer's release bump after a move's copy,
      // so a count that includes a move comes with the copied entry.
      const uint64_t moves = moves_.load(std::memory_order_acquire);
      const Probe p1 = probe(b1, k, value);
      if (p1 == Probe::kFound) return true;
      if (p1 == Probe::kChanged) continue;
      const Probe p2 = probe(b2, k, value);
      if (p2 == Probe::kFound) return true;
      if (p2 == Probe::kChanged) continue;
      // acquire fence: every value read above that a move's free wrote makes
      // that move's bump (before the writer's release fence) visible here.
      std::atomic_thread_fence(std::memory_order_acquire);
      if (moves_.load(std::memory_order_relaxed) == moves) return false;
    }
  }
  // Loads k's two buckets towards this core (an insert or lookup to come).
  // The empty asm names the addresses: GCC deletes a loop whose body only
  // prefetches (ExactSet::prefetch's loop compiled to a bare ret without it).
  void prefetch(const Key128& k) const noexcept {
    const Bucket* b1 = &buckets_[first(k)];
    const Bucket* b2 = &buckets_[second(k)];
    __builtin_prefetch(b1, 0, 3);
    __builtin_prefetch(b2, 0, 3);
    asm volatile("" : : "r"(b1), "r"(b2));
  }

  // Writer (one thread). value != 0. Inserts k, or replaces its value when
  // present: 0. -ENOSPC when no cuckoo path to a free entry was found
  // (nothing changed then; keys may have moved to their other bucket).
  int insert(const Key128& k, uint32_t value) noexcept;
  // Writer. True if k was present (it is not any more).
  bool erase(const Key128& k) noexcept;
  std::size_t size() const noexcept { return size_; }
  std::size_t buckets() const noexcept { return n_buckets_; }
  std::size_t memory_bytes() const noexcept { return n_buckets_ * kBucketBytes; }

 private:
  struct Entry {
    std::atomic<uint64_t> lo, hi;
  };
  struct alignas(kBucketBytes) Bucket {
    std::atomic<uint32_t> value[kSlots];  // 0: the entry is free
    std::atomic<uint32_t> version;        // bumped before any key words are written here
    Entry key[kSlots];
  };
  static_assert(sizeof(Bucket) == kBucketBytes, "a bucket is one cache line");
  static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
                "readers rely on lock-free atomics");

  // Two buckets from independent bits of the key (multiply-shift onto
  // [0, n): no power-of-two rounding of the table); distinct when n > 1.
  std::size_t first(const Key128& k) const noexcept {
    return static_cast<std::size_t>(((k.lo >> 32) * n_buckets_) >> 32);
  }
  std::size_t second(const Key128& k) const noexcept {
    const auto b = static_cast<std::size_t>(((k.hi >> 32) * n_buckets_) >> 32);
    if (b != first(k)) return b;
    return b + 1 == n_buckets_ ? 0 : b + 1;
  }
  std::size_t other(const Key128& k, std::size_t b) const noexcept { return b == first(k) ? second(k) : first(k); }

  enum class Probe { kMissing, kFound, kChanged };
  static Probe probe(const Bucket& b, const Key128& k, uint32_t* value) noexcept {
    // acquire: pairs with the writer's release bump; what the writer did
    // before it (an entry's free, earlier writes) is visible below.
    const uint32_t version = b.version.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < kSlots; ++i) {
      // acquire: pairs with the writer's release store of the value, which
      // follows the key words' stores.
      const uint32_t v = b.value[i].load(std::memory_order_acquire);
      if (v == 0) continue;
      CG_KEY_TABLE_PROBE_HOOK(1);
      if (b.key[i].lo.load(std::memory_order_relaxed) != k.lo || b.key[i].hi.load(std::memory_order_relaxed) != k.hi)
        continue;
      CG_KEY_TABLE_PROBE_HOOK(2);
      // acquire fence, then the value and the version again: both unchanged
      // means the key words read were this value's (see the header comment).
      std::atomic_thread_fence(std::memory_order_acquire);
      if (b.value[i].load(std::memory_order_relaxed) != v || b.version.load(std::memory_order_relaxed) != version)
        return Probe::kChanged;
      *value = v;
      return Probe::kFound;
    }
    return Probe::kMissing;
  }
  // Writer: the entry of k in b, or kSlots.
  static std::size_t slot_of(const Bucket& b, const Key128& k) noexcept;
  static std::size_t free_slot(const Bucket& b) noexcept;
  static Key128 key_at(const Bucket& b, std::size_t i) noexcept;
  static void write(Bucket& b, std::size_t i, const Key128& k, uint32_t value) noexcept;
  // Frees room in b1 or b2 by moving keys along a cuckoo path found by a
  // breadth-first search; the bucket (b1 or b2) and its free entry, or false.
  bool make_room(std::size_t b1, std::size_t b2, std::size_t* bucket, std::size_t* slot) noexcept;

  Bucket* const buckets_;
  const std::size_t n_buckets_;
  std::size_t size_ = 0;  // the writer's
  // Bumped by every move of a key to its other bucket. A line of its own:
  // the bumps do not evict the fields above from the readers' caches.
  alignas(kBucketBytes) std::atomic<uint64_t> moves_{0};
};

}  // namespace cg::exact
