// Reassembly slots: contiguous prefix + a few out-of-order ranges stored in
// place, first copy wins. See pool.hpp for the contract, docs/reassembly.md
// for the policy.
#include "cuckoogate/reasm/pool.hpp"

#include <algorithm>
#include <cstring>
#include <new>

namespace cg::reasm {

namespace {

// Serial-number difference a - b (RFC 1982 for 32 bits): negative when a is
// before b. The conversion is modular since C++20.
int32_t serial_diff(uint32_t a, uint32_t b) noexcept { return static_cast<int32_t>(a - b); }

std::size_t round64(std::size_t n) noexcept { return (n + 63) & ~std::size_t{63}; }

enum Counter : std::size_t {
  kSegments,
  kOooHeld,
  kOverlaps,
  kConflicts,
  kSlotOverflow,
  kWindowFull,
  kPoolExhausted,
  kReclaimed,
  kInUse,
};

// handle = generation << kIndexBits | index; generations run 1 .. 4095, so
// no handle is 0.
constexpr uint32_t kIndexBits = 20;
constexpr uint32_t kIndexMask = (uint32_t{1} << kIndexBits) - 1;
constexpr uint16_t kMaxGeneration = 0xfff;

}  // namespace

// One slot's header. Offsets are from the byte at sequence number `base`.
// Invariants: bytes [0, len) are held; pending[0..npending) are held too,
// sorted, disjoint and not touching each other or the prefix
// (len < pending[0].begin, pending[i].end < pending[i + 1].begin), all below
// the byte budget.
struct Pool::Slot {
  struct Range {
    uint32_t begin;
    uint32_t end;
  };
  uint32_t base;  // sequence number of byte 0
  uint32_t len;   // contiguous bytes from byte 0
  uint32_t skip;  // [skip, base): bytes consume() skipped without holding them
  uint8_t npending;
  uint8_t in_use;
  uint16_t generation;  // 1 .. kMaxGeneration, the handle's top 12 bits
  uint64_t stamp;       // caller's clock at the last begin/append
  Range pending[kMaxPending];
  uint8_t tag[kSlotTagBytes];  // the caller's (Pool::tag)
};
Pool::Ptr Pool::create(const PoolConfig& cfg, const PoolAllocator& alloc,
                       const char** error) noexcept {
  static_assert(sizeof(Slot) == 24 + 8 * kMaxPending + kSlotTagBytes, "slot header: 120 bytes");
  static_assert(sizeof(PoolStats) == kCounters * sizeof(uint64_t));
  auto fail = [error](const char* msg) {
    if (error != nullptr) *error = msg;
    return Ptr{};
  };
  if (cfg.slots == 0 || cfg.slots > (uint32_t{1} << kIndexBits))
    return fail("slots must be 1 .. 2^20");
  if (cfg.slot_bytes < 64 || cfg.slot_bytes > (uint32_t{1} << 20))
    return fail("slot_bytes must be 64 .. 2^20");
  if (cfg.max_pending == 0 || cfg.max_pending > kMaxPending)
    return fail("max_pending must be 1 .. 8");
  if ((alloc.allocate == nullptr) != (alloc.release == nullptr))
    return fail("allocator needs both allocate and release");

  const std::size_t headers = round64(sizeof(Slot) * cfg.slots);
  const std::size_t stack = round64(sizeof(uint32_t) * cfg.slots);
  const std::size_t stride = round64(cfg.slot_bytes);
  const std::size_t total = headers + stack + stride * cfg.slots;

  Pool* pool = new (std::nothrow) Pool();
  if (pool == nullptr) return fail("out of memory");
  Ptr ptr(pool);
  pool->alloc_ = alloc;
  void* mem = alloc.allocate != nullptr
                  ? alloc.allocate(total, 64, alloc.ctx)
                  : ::operator new(total, std::align_val_t{64}, std::nothrow);
  if (mem == nullptr) return fail("out of memory");
  pool->mem_ = static_cast<uint8_t*>(mem);
  pool->bytes_ = total;
  pool->free_ = reinterpret_cast<uint32_t*>(pool->mem_ + headers);
  pool->data_ = pool->mem_ + headers + stack;
  pool->slot_stride_ = stride;
  pool->slots_ = cfg.slots;
  pool->slot_bytes_ = cfg.slot_bytes;
  pool->max_pending_ = cfg.max_pending;
  pool->idle_ticks_ = cfg.idle_ticks;

  Slot* slots = reinterpret_cast<Slot*>(pool->mem_);
  for (uint32_t i = 0; i < cfg.slots; ++i) {
    new (&slots[i]) Slot{};
    slots[i].generation = 1;
    // Lowest index on top: slot 0 (handle 1) is taken first.
    pool->free_[i] = cfg.slots - 1 - i;
  }
  pool->free_top_ = cfg.slots;
  return ptr;
}

void Pool::Deleter::operator()(Pool* p) const noexcept {
  if (p == nullptr) return;
  if (p->mem_ != nullptr) {
    if (p->alloc_.release != nullptr)
      p->alloc_.release(p->mem_, p->bytes_, p->alloc_.ctx);
    else
      ::operator delete(p->mem_, std::align_val_t{64});
  }
  delete p;
}

Pool::Slot* Pool::slot(uint32_t handle) const noexcept {
  const uint32_t index = handle & kIndexMask;
  if (index >= slots_) return nullptr;
  Slot* s = reinterpret_cast<Slot*>(mem_) + index;
  return s->in_use != 0 && s->generation == handle >> kIndexBits ? s : nullptr;
}

bool Pool::idle(const Slot* s, uint64_t now) const noexcept {
  return idle_ticks_ != 0 && now > s->stamp && now - s->stamp > idle_ticks_;
}

// Invalidates every handle of the slot and puts it on the free stack.
void Pool::free_slot(Slot* s) noexcept {
  s->in_use = 0;
  s->generation = static_cast<uint16_t>(s->generation == kMaxGeneration ? 1 : s->generation + 1);
  free_[free_top_++] = static_cast<uint32_t>(s - reinterpret_cast<Slot*>(mem_));
  counters_[kInUse].store(counters_[kInUse].load(std::memory_order_relaxed) - 1,
                          std::memory_order_relaxed);
}

uint32_t Pool::reclaim(uint64_t now, uint32_t max_slots) noexcept {
  uint32_t freed = 0;
  Slot* slots = reinterpret_cast<Slot*>(mem_);
  for (uint32_t i = 0; i < max_slots && i < slots_; ++i) {
    Slot* s = &slots[cursor_];
    cursor_ = cursor_ + 1 == slots_ ? 0 : cursor_ + 1;
    if (s->in_use != 0 && idle(s, now)) {
      free_slot(s);
      ++freed;
    }
  }
  if (freed != 0) bump(kReclaimed, freed);
  return freed;
}

uint8_t* Pool::bytes(const Slot* s) const noexcept {
  const auto index = static_cast<std::size_t>(s - reinterpret_cast<const Slot*>(mem_));
  return data_ + index * slot_stride_;
}

void Pool::bump(std::size_t counter, uint64_t by) noexcept {
  // Single writer: a relaxed load and store, no read-modify-write.
  counters_[counter].store(counters_[counter].load(std::memory_order_relaxed) + by,
                           std::memory_order_relaxed);
}

uint32_t Pool::begin(uint32_t seq, uint64_t now) noexcept {
  if (free_top_ == 0 && (idle_ticks_ == 0 || reclaim(now, kReclaimScan) == 0)) {
    bump(kPoolExhausted);
    return 0;
  }
  const uint32_t index = free_[--free_top_];
  Slot* s = reinterpret_cast<Slot*>(mem_) + index;
  const uint16_t generation = s->generation;
  *s = Slot{};
  s->base = seq;
  s->skip = seq;
  s->in_use = 1;
  s->generation = generation;
  s->stamp = now;
  bump(kInUse);
  return uint32_t{generation} << kIndexBits | index;
}

bool Pool::release(uint32_t handle) noexcept {
  Slot* s = slot(handle);
  if (s == nullptr) return false;
  free_slot(s);
  return true;
}

Append Pool::append(uint32_t handle, uint32_t seq, const uint8_t* p, uint32_t len,
                    uint64_t now) noexcept {
  Slot* s = slot(handle);
  if (s == nullptr) return Append::kBadHandle;
  if (now > s->stamp) s->stamp = now;
  if (len == 0) return Append::kNothing;
  bump(kSegments);

  // The segment as offsets from byte 0: [a, b); its byte at offset x is p[x - a].
  const int64_t a = serial_diff(seq, s->base);
  const int64_t b = a + len;
  bool old = false;
  if (a < 0) {
    // Bytes before the slot: held and consumed (before `skip`), or part of
    // the stretch the caller skipped last (consume() past the held bytes).
    if (serial_diff(seq, s->skip) < 0) old = true;
    if (b <= 0) {
      if (old) bump(kOverlaps);
      return Append::kNothing;
    }
  }
  const int64_t budget = slot_bytes_;
  const bool over = b > budget;
  const int64_t lo = std::max<int64_t>(a, 0);
  const int64_t y64 = std::min(b, budget);
  if (lo >= y64) {  // entirely beyond the budget
    if (old) bump(kOverlaps);
    bump(kSlotOverflow);
    return Append::kOverflow;
  }
  const auto x = static_cast<uint32_t>(std::max<int64_t>(lo, s->len));
  const auto y = static_cast<uint32_t>(y64);
  uint8_t* buf = bytes(s);
  bool conflict = false;
  if (lo < s->len) {  // first copy wins over the prefix, compared
    old = true;
    const auto pe = static_cast<uint32_t>(std::min<int64_t>(y64, s->len));
    const auto pb = static_cast<uint32_t>(lo);
    conflict = std::memcmp(buf + pb, p + (static_cast<int64_t>(pb) - a), pe - pb) != 0;
  }

  // The pending ranges that overlap or touch [x, y) merge with it.
  uint32_t first = 0;
  uint32_t count = 0;
  uint32_t nb = x;
  uint32_t ne = y;
  for (uint32_t i = 0; i < s->npending; ++i) {
    const Slot::Range r = s->pending[i];
    if (r.end < x) {
      first = i + 1;
      continue;
    }
    if (r.begin > y) break;
    if (r.begin < y && r.end > x) old = true;
    nb = std::min(nb, r.begin);
    ne = std::max(ne, r.end);
    ++count;
  }
  const bool joins_prefix = x < y && x == s->len;
  if (x < y && !joins_prefix && count == 0 && s->npending >= max_pending_) {
    // Would be one range too many: refuse it whole (Linux prunes its
    // out-of-order queue instead; a bounded slot cannot).
    if (old) bump(kOverlaps);
    bump(kWindowFull);
    return Append::kOverflow;
  }

  // Copy only into the holes of [x, y): what is held stays (first copy wins).
  uint32_t copied = 0;
  uint32_t cur = x;
  auto copy = [&](uint32_t from, uint32_t to) {
    std::memcpy(buf + from, p + (static_cast<int64_t>(from) - a), to - from);
    copied += to - from;
  };
  for (uint32_t i = first; i < first + count; ++i) {
    const Slot::Range r = s->pending[i];
    if (r.begin > cur) copy(cur, std::min(r.begin, y));
    // Held out-of-order bytes under the segment: kept, but compared.
    const uint32_t ob = std::max(r.begin, x);
    const uint32_t oe = std::min(r.end, y);
    if (ob < oe && std::memcmp(buf + ob, p + (static_cast<int64_t>(ob) - a), oe - ob) != 0)
      conflict = true;
    cur = std::max(cur, r.end);
  }
  if (cur < y) copy(cur, y);

  if (old) bump(kOverlaps);
  if (conflict) bump(kConflicts);
  if (over) bump(kSlotOverflow);
  if (copied == 0) {
    if (over) return Append::kOverflow;
    return conflict ? Append::kConflict : Append::kNothing;
  }

  // Replace the merged ranges by [nb, ne), or grow the prefix with it.
  const uint32_t after = first + count;
  const uint32_t tail = s->npending - after;
  if (joins_prefix) {
    s->len = ne;
    std::memmove(&s->pending[first], &s->pending[after], tail * sizeof(Slot::Range));
    s->npending = static_cast<uint8_t>(first + tail);
  } else {
    std::memmove(&s->pending[first + 1], &s->pending[after], tail * sizeof(Slot::Range));
    s->pending[first] = {nb, ne};
    s->npending = static_cast<uint8_t>(first + 1 + tail);
    bump(kOooHeld);
  }
  if (over) return Append::kOverflow;
  if (conflict) return Append::kConflict;
  return joins_prefix ? Append::kAdvanced : Append::kHeld;
}

uint8_t* Pool::tag(uint32_t handle) noexcept {
  Slot* s = slot(handle);
  return s != nullptr ? s->tag : nullptr;
}

std::span<const uint8_t> Pool::data(uint32_t handle) const noexcept {
  const Slot* s = slot(handle);
  if (s == nullptr) return {};
  return {bytes(s), s->len};
}

uint32_t Pool::held_out_of_order(uint32_t handle) const noexcept {
  const Slot* s = slot(handle);
  return s != nullptr ? s->npending : 0;
}

uint32_t Pool::first_seq(uint32_t handle) const noexcept {
  const Slot* s = slot(handle);
  return s != nullptr ? s->base : 0;
}

uint32_t Pool::next_seq(uint32_t handle) const noexcept {
  const Slot* s = slot(handle);
  return s != nullptr ? s->base + s->len : 0;
}

bool Pool::consume(uint32_t handle, uint32_t n) noexcept {
  Slot* s = slot(handle);
  if (s == nullptr || n >= (uint32_t{1} << 30)) return false;
  if (n == 0) return true;
  uint8_t* buf = bytes(s);
  const uint32_t used = s->npending != 0 ? s->pending[s->npending - 1].end : s->len;
  if (used > n) std::memmove(buf, buf + n, used - n);
  uint32_t len = s->len > n ? s->len - n : 0;
  uint32_t kept = 0;
  for (uint32_t i = 0; i < s->npending; ++i) {
    const Slot::Range r = s->pending[i];
    if (r.end <= n) continue;  // wholly consumed
    const uint32_t rb = std::max(r.begin, n) - n;
    const uint32_t re = r.end - n;
    if (rb == len) {  // only possible when the prefix was consumed whole: rb == 0
      len = re;
      continue;
    }
    s->pending[kept++] = {rb, re};
  }
  s->npending = static_cast<uint8_t>(kept);
  // Bytes up to the held prefix's end were received; the rest up to the new
  // start were skipped (a late segment there is not a retransmission).
  s->skip = n > s->len ? s->base + s->len : s->base + n;
  s->len = len;
  s->base += n;
  return true;
}

PoolStats Pool::stats() const noexcept {
  uint64_t v[kCounters];
  for (std::size_t i = 0; i < kCounters; ++i) v[i] = counters_[i].load(std::memory_order_relaxed);
  PoolStats out;
  std::memcpy(&out, v, sizeof(out));
  return out;
}

}  // namespace cg::reasm
