// Lock-free concurrent cuckoo filter over 64-bit key hashes.
//
// Partial-key cuckoo hashing, 2 candidate buckets of 4 fingerprint slots; a
// bucket is one 64-bit word (bucket_layout.hpp). Fingerprints move between
// buckets only by a 2-word K-CAS (kcas.hpp) that also bumps both buckets'
// counters. Correctness argument and memory orders: docs/concurrency.md.
//
// Thread-safety summary
//   contains / contains_bulk : any number of threads, concurrently with anything
//                              except destruction. Read-only, lock-free, no
//                              allocation, no syscalls. Never a false negative for a
//                              key present for the whole call.
//   insert / erase           : any number of threads (multi-writer lock-free up to
//                              kcas::kMaxThreads writer threads). The first insert
//                              or erase on a thread that has to run or help a K-CAS
//                              acquires a K-CAS thread slot (a one-time registration
//                              that may allocate inside the C++ runtime); call
//                              cg::kcas::register_thread() at thread start to avoid it.
//   stats / capacity / ...   : any thread; counters are relaxed snapshots.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "cuckoogate/bucket_layout.hpp"
#include "cuckoogate/filter_allocator.hpp"
#include "cuckoogate/filter_stats.hpp"
#include "cuckoogate/kcas.hpp"
#include "cuckoogate/path_search.hpp"

namespace cg {

class CuckooFilterTestAccess;

// Keys per prefetch pipeline in contains_bulk (any n is accepted).
inline constexpr std::size_t kLookupBulkMax = 64;
// Keys whose buckets contains_bulk prefetches ahead of the one it tests
// (the baselines' too, so that filter_bench compares like with like): 16
// covers a last-level-cache or memory latency of ~100 ns at the gateway's
// pace per key (8 left new-flow bursts waiting on the Intel guest:
// docs/PERFORMANCE.md, "Session 28"; filter_bench's bulk lookups level).
inline constexpr std::size_t kLookupPrefetchAhead = 16;

template <unsigned FingerprintBits = 12>
class CuckooFilter {
 public:
  using Layout = BucketLayout<FingerprintBits>;

  // A filter of at least min_slots slots: the bucket count is the next power of
  // two >= min_slots / 4 (at least 2, at most 2^32). Memory comes from alloc,
  // 64-byte aligned. seed varies BFS tie-breaks. Returns nullptr if min_slots is
  // too large or an allocation fails.
  static std::unique_ptr<CuckooFilter> create(std::size_t min_slots, FilterAllocator alloc = heap_allocator(),
                                              std::uint64_t seed = 0) {
    std::size_t buckets = std::max<std::size_t>(2, std::bit_ceil((min_slots + 3) / 4));
    if (min_slots > (std::size_t{1} << 34) || buckets > (std::size_t{1} << 32)) return nullptr;
    void* mem = alloc.alloc(alloc.ctx, buckets * sizeof(kcas::Word), 64);
    if (mem == nullptr) return nullptr;
    std::unique_ptr<CuckooFilter> f(new (std::nothrow) CuckooFilter());
    if (!f) {
      alloc.free(alloc.ctx, mem);
      return nullptr;
    }
    f->table_ = static_cast<kcas::Word*>(mem);
    for (std::size_t i = 0; i < buckets; ++i) new (&f->table_[i]) kcas::Word(0);
    f->buckets_ = buckets;
    f->mask_ = static_cast<std::uint32_t>(buckets - 1);
    f->alloc_ = alloc;
    f->seed_ = seed;
    return f;
  }

  ~CuckooFilter() {
    if (table_ != nullptr) alloc_.free(alloc_.ctx, table_);
  }
  CuckooFilter(const CuckooFilter&) = delete;
  CuckooFilter& operator=(const CuckooFilter&) = delete;

  // True if hash may be in the set (false positives at about 8 / 2^F), false if it
  // is certainly not. st (optional, caller-owned) counts lookups and retries.
  bool contains(std::uint64_t hash, LookupStats* st = nullptr) const noexcept {
    const std::uint64_t fp = Layout::fingerprint(hash);
    const std::uint32_t i1 = Layout::index1(hash, mask_);
    const std::uint32_t i2 = Layout::alt(i1, fp, mask_);
    if (st != nullptr) ++st->lookups;
    return lookup_fast<true>(i1, i2, fp, st);
  }

  // hit_mask has (n + 63) / 64 words; bit (i % 64) of word (i / 64) is set iff
  // hashes[i] may be present, cleared otherwise. Both buckets of every key are
  // prefetched ahead. Same guarantees as contains().
  void contains_bulk(const std::uint64_t* hashes, std::size_t n, std::uint64_t* hit_mask,
                     LookupStats* st = nullptr) const noexcept {
    constexpr std::size_t kAhead = kLookupPrefetchAhead;
    std::uint32_t i1[kLookupBulkMax], i2[kLookupBulkMax];
    std::uint64_t fp[kLookupBulkMax];
    for (std::size_t base = 0; base < n; base += kLookupBulkMax) {
      const std::size_t m = std::min(kLookupBulkMax, n - base);
      for (std::size_t j = 0; j < m; ++j) {
        const std::uint64_t h = hashes[base + j];
        fp[j] = Layout::fingerprint(h);
        i1[j] = Layout::index1(h, mask_);
        i2[j] = Layout::alt(i1[j], fp[j], mask_);
      }
      for (std::size_t j = 0; j < std::min(kAhead, m); ++j) prefetch(i1[j], i2[j]);
      std::uint64_t bits = 0;
      // One wrap-word check for the whole group: loaded before the group's first
      // bucket load and after its last, it brackets every lookup in the group.
      const std::uint64_t g0 = wraps_.load(std::memory_order_seq_cst);
      for (std::size_t j = 0; j < m; ++j) {
        if (j + kAhead < m) prefetch(i1[j + kAhead], i2[j + kAhead]);
        const bool hit = lookup_fast<false>(i1[j], i2[j], fp[j], st);
        bits |= std::uint64_t{hit} << j;
      }
      const std::uint64_t g1 = wraps_.load(std::memory_order_seq_cst);
      if (wraps_moved(g0, g1) != 0) [[unlikely]] {
        // A counter wrapped during the group: the misses are decided again.
        for (std::size_t j = 0; j < m; ++j)
          if (((bits >> j) & 1) == 0) bits |= std::uint64_t{lookup(i1[j], i2[j], fp[j], st)} << j;
      }
      hit_mask[base / 64] = bits;
      if (st != nullptr) st->lookups += m;
    }
  }

  // Adds one copy of hash's fingerprint (duplicates allowed: a multiset).
  InsertResult insert(std::uint64_t hash) noexcept {
    const std::uint64_t fp = Layout::fingerprint(hash);
    const std::uint32_t i1 = Layout::index1(hash, mask_);
    const std::uint32_t i2 = Layout::alt(i1, fp, mask_);
    unsigned moves = 0;
    for (unsigned attempt = 0;; ++attempt) {
      if (try_add(i1, fp) || try_add(i2, fp)) {
        counters_.items.fetch_add(1, std::memory_order_relaxed);
        counters_.inserts.fetch_add(1, std::memory_order_relaxed);
        counters_.path_len_hist[moves].fetch_add(1, std::memory_order_relaxed);
        return InsertResult::kOk;
      }
      if (attempt == kMaxAttempts) break;
      counters_.path_searches.fetch_add(1, std::memory_order_relaxed);
      CuckooPath path;
      const unsigned rot = static_cast<unsigned>(mix(hash ^ seed_ ^ attempt) & 3);
      if (!find_cuckoo_path<FingerprintBits>(i1, i2, mask_, rot, reader(), path)) break;
      moves = path.moves;
      if (path.moves == 0) continue;  // a slot of i1 or i2 was freed meanwhile
      if (!execute_path(path, i1, i2)) {
        counters_.path_restarts.fetch_add(1, std::memory_order_relaxed);
        moves = 0;
      }
      // The path's head slot is free now (unless another writer took it): retry.
    }
    counters_.insert_failures.fetch_add(1, std::memory_order_relaxed);
    return InsertResult::kFull;
  }

  // A hint for bulk inserts: starts loading the bucket insert(hash) tries
  // first, a few keys before inserting it (a random bucket of a multi-MB
  // table is a cache miss). Reads nothing, changes nothing.
  void prefetch_insert(std::uint64_t hash) const noexcept {
    __builtin_prefetch(&table_[Layout::index1(hash, mask_)], 1, 3);
  }

  // Removes one copy of hash's fingerprint from bucket i1 or i2. False if neither
  // holds it. Only erase what was inserted: erasing an absent key can remove
  // another key's fingerprint (a false negative for that key).
  bool erase(std::uint64_t hash) noexcept {
    const std::uint64_t fp = Layout::fingerprint(hash);
    const std::uint32_t i1 = Layout::index1(hash, mask_);
    const std::uint32_t i2 = Layout::alt(i1, fp, mask_);
    for (;;) {
      const std::uint64_t g0 = kcas::read(wraps_);
      const std::uint64_t w1 = kcas::read_help(table_[i1]);
      int r = try_remove(i1, w1, fp);
      if (r < 0) continue;
      if (r == 0) {
        r = try_remove(i2, kcas::read_help(table_[i2]), fp);
        if (r < 0) continue;
      }
      if (r > 0) {
        counters_.items.fetch_sub(1, std::memory_order_relaxed);
        counters_.erases.fetch_add(1, std::memory_order_relaxed);
        return true;
      }
      // Miss in both: valid only if nothing was added to i1 since w1 (same rule as lookup).
      if (Layout::counter(kcas::read_help(table_[i1])) == Layout::counter(w1) && kcas::read(wraps_) == g0)
        return false;
    }
  }

  FilterStats stats() const noexcept {
    FilterStats s;
    const auto rd = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    s.items = rd(counters_.items);
    s.capacity_slots = capacity();
    s.buckets = buckets_;
    s.bytes = memory_bytes();
    s.load_factor = static_cast<double>(s.items) / static_cast<double>(s.capacity_slots);
    s.bits_per_item = s.items ? static_cast<double>(s.bytes) * 8.0 / static_cast<double>(s.items) : 0.0;
    s.fingerprint_bits = FingerprintBits;
    s.counter_bits = Layout::kCounterBits;
    s.inserts = rd(counters_.inserts);
    s.insert_failures = rd(counters_.insert_failures);
    s.erases = rd(counters_.erases);
    s.kicks = rd(counters_.kicks);
    s.kcas_retries = rd(counters_.kcas_retries);
    s.path_searches = rd(counters_.path_searches);
    s.path_restarts = rd(counters_.path_restarts);
    for (unsigned i = 0; i <= kMaxPathMoves; ++i) s.path_len_hist[i] = rd(counters_.path_len_hist[i]);
    return s;
  }

  std::size_t capacity() const noexcept { return buckets_ * Layout::kSlots; }
  std::size_t buckets() const noexcept { return buckets_; }
  std::size_t memory_bytes() const noexcept { return buckets_ * sizeof(kcas::Word) + sizeof(*this); }
  // Occupied slots by a full scan (control side; O(buckets)).
  std::size_t count_occupied() const noexcept {
    std::size_t n = 0;
    for (std::size_t i = 0; i < buckets_; ++i) n += Layout::count(kcas::read(table_[i]));
    return n;
  }
  static constexpr unsigned fingerprint_bits() { return FingerprintBits; }

  // Where a test build (CG_FILTER_TEST_HOOKS) may run a callback inside a lookup.
  enum class HookPoint : std::uint8_t {
    kAfterFirstLoad,   // i1 loaded (t1), i2 not yet
    kAfterSecondLoad,  // i2 loaded (t2), the re-check of i1 not yet
  };

 private:
  friend class CuckooFilterTestAccess;
  static constexpr unsigned kMaxAttempts = 64;  // path searches per insert

  CuckooFilter() = default;

  static constexpr std::uint64_t mix(std::uint64_t x) noexcept {  // splitmix64 finaliser
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }

  void prefetch(std::uint32_t a, std::uint32_t b) const noexcept {
    __builtin_prefetch(&table_[a], 0, 3);
    __builtin_prefetch(&table_[b], 0, 3);
  }

  auto reader() const noexcept {
    return [this](std::uint32_t b) { return kcas::read(table_[b]); };
  }

  // The common case of lookup() below, without branches on the hit test: both
  // buckets are loaded (they were prefetched together), then on a miss i1 again.
  // Any descriptor reference, or a moved counter, falls back to lookup().
  // kWithWraps: also load the wrap word before t1 and after t3 (contains);
  // contains_bulk checks it once around a whole group instead.
  template <bool kWithWraps>
  bool lookup_fast(std::uint32_t i1, std::uint32_t i2, std::uint64_t fp, LookupStats* st) const noexcept {
    // seq_cst loads, in this program order: i1 (t1) before i2 (t2) before the
    // re-check of i1 (t3); see kcas::read for why seq_cst costs nothing here.
    // The re-read of i1 is done on hits too (same cache line as t1, L1-hot), so
    // that hit and miss take the same path: one well-predicted branch decides
    // between "answer now" and the slow path, none on the (50/50) hit outcome.
    std::uint64_t g0 = 0, g1 = 0;
    if constexpr (kWithWraps) g0 = wraps_.load(std::memory_order_seq_cst);
    const std::uint64_t w1 = table_[i1].load(std::memory_order_seq_cst);
    test_hook(HookPoint::kAfterFirstLoad);
    const std::uint64_t w2 = table_[i2].load(std::memory_order_seq_cst);
    test_hook(HookPoint::kAfterSecondLoad);
    const std::uint64_t again = table_[i1].load(std::memory_order_seq_cst);
    if constexpr (kWithWraps) g1 = wraps_.load(std::memory_order_seq_cst);
    const bool hit = (int{Layout::has(w1, fp)} | int{Layout::has(w2, fp)}) != 0;
    const bool plain = ((w1 | w2) & kcas::kRefBit) == 0;  // no descriptor met
    const bool stable = (((again ^ w1) & (Layout::kCounterMask | kcas::kRefBit)) | wraps_moved(g0, g1)) == 0;
    // Answer now: a hit in two logical values, or a miss with i1 unchanged (and
    // no counter wrapped: g0 == g1 == 0 here for bulk, checked per group there).
    if ((int{plain} & (int{hit} | int{stable})) != 0) [[likely]] return hit;
    if (plain && st != nullptr) ++st->retries;
    return lookup(i1, i2, fp, st);
  }

  // The lookup rule with logical values (kcas::read): read wraps_, i1, i2; on a
  // miss re-read i1 and wraps_, and accept the miss iff i1's counter and wraps_
  // are unchanged, i.e. nothing was added to i1 in between and no counter
  // wrapped (docs/concurrency.md, "Lookup").
  // Out of line: rare, and inlined it would crowd the fast path's loop.
  [[gnu::noinline, gnu::cold]] bool lookup(std::uint32_t i1, std::uint32_t i2, std::uint64_t fp,
                                           LookupStats* st) const noexcept {
    for (;;) {
      const std::uint64_t g0 = kcas::read(wraps_);
      const std::uint64_t w1 = kcas::read(table_[i1]);
      test_hook(HookPoint::kAfterFirstLoad);
      if (Layout::has(w1, fp)) return true;
      if (Layout::has(kcas::read(table_[i2]), fp)) return true;
      test_hook(HookPoint::kAfterSecondLoad);
      const std::uint64_t again = kcas::read(table_[i1]);
      if (Layout::counter(again) == Layout::counter(w1) && kcas::read(wraps_) == g0) return false;
      if (st != nullptr) ++st->retries;
    }
  }

  // Raw wrap-word loads g0 (before) and g1 (after): zero iff no counter wrapped
  // in between, i.e. both are the same plain value (a descriptor reference means
  // a wrap is in progress; the slow path then reads logical values). Branch-free.
  static constexpr std::uint64_t wraps_moved(std::uint64_t g0, std::uint64_t g1) noexcept {
    return (g0 ^ g1) | (g0 & kcas::kRefBit);
  }

  // A bucket update whose counter bump wraps the counter to 0: the K-CAS of
  // e[0..n) plus wraps_ += 1 in the same atomic step. e has room for n + 1.
  kcas::Status cas_wrapping(kcas::Entry* e, unsigned n) noexcept {
    const std::uint64_t g = kcas::read_help(wraps_);
    e[n] = {&wraps_, g, g + 1};
    return kcas::cas(e, n + 1);
  }

  // CAS fp into a free slot of bucket b, bumping its counter.
  bool try_add(std::uint32_t b, std::uint64_t fp) noexcept {
    kcas::Word& word = table_[b];
    std::uint64_t v = kcas::read_help(word);
    for (;;) {
      const unsigned s = Layout::find(v, 0);
      if (s == Layout::kSlots) return false;
      const std::uint64_t nv = Layout::bump(Layout::set_slot(v, s, fp));
      if (Layout::bump_wraps(v)) [[unlikely]] {  // this bump wraps: publish it on wraps_
        kcas::Entry e[2] = {{&word, v, nv}, {}};
        const kcas::Status r = cas_wrapping(e, 1);
        if (r == kcas::Status::kSucceeded) return true;
        if (r == kcas::Status::kNoSlot) return false;
        v = kcas::read_help(word);
        continue;
      }
      // seq_cst: writer RMWs and lookup loads share the total order S.
      if (word.compare_exchange_weak(v, nv, std::memory_order_seq_cst, std::memory_order_seq_cst)) return true;
      if (kcas::is_ref(v)) v = kcas::read_help(word);
    }
  }

  // 1: removed one copy of fp from bucket b (whose value was v); 0: v holds no fp;
  // -1: the CAS lost a race (re-read and start again).
  int try_remove(std::uint32_t b, std::uint64_t v, std::uint64_t fp) noexcept {
    const unsigned s = Layout::find(v, fp);
    if (s == Layout::kSlots) return 0;
    // seq_cst: as in try_add. No counter bump: erasing adds nothing to a bucket.
    return table_[b].compare_exchange_strong(v, Layout::set_slot(v, s, 0), std::memory_order_seq_cst,
                                             std::memory_order_seq_cst)
               ? 1
               : -1;
  }

  // Moves the fingerprints of path from the far end backwards, each move one
  // K-CAS over source and destination. False if the path broke.
  bool execute_path(const CuckooPath& path, std::uint32_t i1, std::uint32_t i2) noexcept {
    std::uint32_t b[kMaxPathMoves + 1];
    unsigned s[kMaxPathMoves];
    std::uint64_t f[kMaxPathMoves];
    if (!decode_cuckoo_path<FingerprintBits>(path, i1, i2, mask_, reader(), b, s, f)) return false;
    for (unsigned j = path.moves; j-- > 0;)
      if (!move_one(b[j], s[j], f[j], b[j + 1])) return false;
    return true;
  }

  // One hop: fingerprint fp from slot s of bucket src to a free slot of dst, in
  // one K-CAS that bumps both counters. False if src's slot no longer holds fp,
  // dst is full, or no K-CAS slot.
  bool move_one(std::uint32_t src, unsigned s, std::uint64_t fp, std::uint32_t dst) noexcept {
    for (;;) {
      const std::uint64_t ws = kcas::read_help(table_[src]);
      if (Layout::slot(ws, s) != fp) return false;
      const std::uint64_t wd = kcas::read_help(table_[dst]);
      const unsigned e = Layout::find(wd, 0);
      if (e == Layout::kSlots) return false;
      kcas::Entry en[3] = {
          {&table_[src], ws, Layout::bump(Layout::set_slot(ws, s, 0))},
          {&table_[dst], wd, Layout::bump(Layout::set_slot(wd, e, fp))},
          {},
      };
      const bool wraps = Layout::bump_wraps(ws) || Layout::bump_wraps(wd);
      const kcas::Status r = wraps ? cas_wrapping(en, 2) : kcas::cas(en, 2);
      if (r == kcas::Status::kSucceeded) {
        counters_.kicks.fetch_add(1, std::memory_order_relaxed);
        return true;
      }
      if (r == kcas::Status::kNoSlot) return false;
      counters_.kcas_retries.fetch_add(1, std::memory_order_relaxed);
    }
  }

  void test_hook([[maybe_unused]] HookPoint p) const noexcept {
#ifdef CG_FILTER_TEST_HOOKS
    if (hook_ == nullptr) return;
    const Hook h = hook_;
    hook_ = nullptr;  // the callback may call into the filter: no re-entry
    h(hook_ctx_, p);
    hook_ = h;
#endif
  }

  // Read-mostly fields (set once in create), on their own cache line.
  alignas(64) kcas::Word* table_ = nullptr;
  std::size_t buckets_ = 0;
  std::uint32_t mask_ = 0;
  std::uint64_t seed_ = 0;
  FilterAllocator alloc_{};
#ifdef CG_FILTER_TEST_HOOKS
  using Hook = void (*)(void* ctx, HookPoint p);
  mutable Hook hook_ = nullptr;
  mutable void* hook_ctx_ = nullptr;
#endif

  // Number of bucket-counter wraps so far. A bump that wraps a bucket's counter
  // to 0 is made in one K-CAS with wraps_ += 1, so "i1's counter equal and wraps_
  // unchanged" proves that nothing was added to i1 between two loads, however
  // long the reader was stalled (docs/concurrency.md, "Counter wrap"). Written
  // once per 2^kCounterBits bumps of one bucket; own line, read-mostly.
  alignas(64) kcas::Word wraps_{0};

  // Writer-side counters (relaxed RMWs); readers never touch this line.
  struct alignas(64) Counters {
    std::atomic<std::uint64_t> items{0}, inserts{0}, insert_failures{0}, erases{0}, kicks{0}, kcas_retries{0},
        path_searches{0}, path_restarts{0};
    std::atomic<std::uint64_t> path_len_hist[kMaxPathMoves + 1]{};
  } counters_;
};

using DefaultFilter = CuckooFilter<12>;

}  // namespace cg
