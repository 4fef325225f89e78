// A per-worker pool of TCP reassembly slots for the client-to-server first
// flight (issue 11, item 1). Policy, memory and the worker's use of it:
// docs/reassembly.md.
//
// Thread-safety: ONE thread owns a pool (the worker lcore that owns the
// flows). Every member except stats() must be called from that thread only;
// no locks, no atomic read-modify-writes. stats() may be called from any
// thread: the counters are single-writer atomics (relaxed load + store, as
// plain as a counter can be without a data race) read with relaxed loads.
//
// Data-path contract: create() is the only allocation. After it nothing
// allocates, makes a syscall or throws, and every call does work bounded by
// the slot's byte budget and its out-of-order window (kMaxPending ranges).
//
// A flow holds at most one slot, named by a 32-bit handle; 0 is "no slot",
// so a zeroed flow entry needs no initialisation. A handle carries the slot's
// index and a 12-bit generation that changes whenever the slot is released or
// reclaimed, so a stale handle (its flow was evicted from the flow table
// without releasing it, and the slot went to another flow) is refused with
// kBadHandle instead of reading another flow's bytes. The slot keeps the stream's
// sequence numbers itself (the sequence number of its first buffered byte and
// how many bytes follow contiguously), so the caller stores only the handle:
//
//   uint32_t& h = entry->next_seq[0];          // client-to-server handle
//   if (h == 0) h = pool.begin(seq, now);      // 0: pool exhausted (counted)
//   switch (pool.append(h, seq, payload, len, now)) { ... }   // kBadHandle: h = 0
//   auto bytes = pool.data(h);                 // run a first-flight detector
//   pool.consume(h, n);                        // a pipelined request judged
//   pool.release(h); h = 0;                    // inspection done, flow gone
//
// Sequence numbers compare with serial arithmetic (RFC 1982, 32 bits): a
// segment more than 2^31 - 1 ahead of the slot's first byte counts as behind
// it. Since a slot holds far fewer bytes than that, wraparound is harmless.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace cg::reasm {

// Out-of-order ranges one slot can hold besides its contiguous prefix.
inline constexpr uint32_t kMaxPending = 8;
// Bytes of a slot its caller may keep state in (Pool::tag).
inline constexpr uint32_t kSlotTagBytes = 32;

struct PoolConfig {
  // Slots, i.e. flows reassembling at once per worker. 1 .. 2^20.
  uint32_t slots = 1024;
  // Byte budget of one slot: the bytes from its first unconsumed sequence
  // number that it can hold (contiguous or not). 64 .. 2^20. The default holds
  // a 16 KiB ClientHello handshake, the 5-byte headers of its records (up to
  // 2 records here, more with small records) and some slack.
  uint32_t slot_bytes = 16384 + 512;
  // Out-of-order ranges per slot, 1 .. kMaxPending.
  uint32_t max_pending = 4;
  // A slot not touched by begin/append for more than this many ticks of the
  // caller's clock is idle: begin() may take it when no slot is free, and
  // reclaim() frees it (counted in reclaimed). The flow table evicts and
  // expires entries without telling anyone, so this is what returns their
  // slots. 0: never (slots come back only by release()).
  uint64_t idle_ticks = 0;
};

// Where the pool's single block of memory comes from (same shape as
// cg::flow::FlowAllocator): allocate() returns `size` bytes aligned to
// `align` (64) or nullptr; release() gets the same size back. Both null:
// ::operator new with 64-byte alignment.
struct PoolAllocator {
  void* (*allocate)(std::size_t size, std::size_t align, void* ctx) = nullptr;
  void (*release)(void* p, std::size_t size, void* ctx) = nullptr;
  void* ctx = nullptr;
};

// What append() did. Bytes of a segment that are already held (or were
// consumed) are never overwritten: the first copy wins, as in Linux's
// receive queue; its out-of-order queue differs in one case, see kConflict.
enum class Append : uint8_t {
  kAdvanced,  // the contiguous data grew: run the detector on data()
  kHeld,      // new bytes kept out of order, waiting for the gap to fill
  kNothing,   // no new bytes: empty, a retransmission, or all before the slot
  kOverflow,  // some new bytes did not fit (byte budget or out-of-order window);
              // what fits is kept, data() may have grown: run the detector,
              // and if it still needs more apply inspect_overflow
  kConflict,  // the segment overlaps held bytes (in order or out of order)
              // with different bytes. They are kept (first copy wins) and its
              // new bytes are stored, but the receiver may read the other copy:
              // the first may never have reached it (a low TTL, a bad
              // checksum), and Linux lets a later copy that starts at or before
              // out-of-order bytes replace them (docs/reassembly.md). An inline
              // caller drops this segment, so that only the held copy can
              // reach the receiver. Never returned for a plain retransmission.
  kBadHandle, // 0, a stale handle, or a released slot: nothing done
};

// A snapshot of the counters. This is the one list of them: the pool keeps
// one single-writer atomic per field, in this order.
struct PoolStats {
  uint64_t segments = 0;        // append() calls with a valid handle and len > 0
  uint64_t ooo_held = 0;        // segments (partly) kept out of order
  uint64_t overlaps = 0;        // segments with bytes already held or consumed (ignored)
  uint64_t conflicts = 0;       // of which differed from out-of-order bytes held (kConflict)
  uint64_t slot_overflow = 0;   // segments with bytes beyond the slot's byte budget
  uint64_t window_full = 0;     // segments refused: a new out-of-order range, window full
  uint64_t pool_exhausted = 0;  // begin() with no free slot and no idle one
  uint64_t reclaimed = 0;       // idle slots taken back (begin or reclaim)
  uint64_t in_use = 0;          // slots held now (written by begin/release)
};

struct PoolTestAccess;  // tests only

class Pool {
 public:
  struct Deleter {
    void operator()(Pool* p) const noexcept;
  };
  using Ptr = std::unique_ptr<Pool, Deleter>;

  // The only allocation: one block of memory_bytes(). nullptr on an invalid
  // config or allocation failure, with a static message in *error (if set).
  static Ptr create(const PoolConfig& cfg, const PoolAllocator& alloc = {},
                    const char** error = nullptr) noexcept;

  // Takes a free slot whose stream starts at `seq` (the sequence number of
  // the first byte to reassemble: the SYN's ISN + 1, or a mid-stream
  // segment's seq). `now` is the caller's clock (TSC ticks), which must not
  // go back. With no free slot, the next kReclaimScan slots (a cursor) are
  // looked at and the first idle one is taken over. Returns the handle
  // (never 0), or 0 when nothing was found (counted in pool_exhausted).
  uint32_t begin(uint32_t seq, uint64_t now = 0) noexcept;

  // Frees the idle slots among the next max_slots (the same cursor); returns
  // how many. For moments without traffic, like FlowTable::expire().
  uint32_t reclaim(uint64_t now, uint32_t max_slots) noexcept;

  static constexpr uint32_t kReclaimScan = 16;

  // Adds a segment's payload [seq, seq + len). len < 2^31. Bytes before the
  // slot's first sequence number are dropped (retransmitted or consumed);
  // bytes already held are kept and the new copy ignored; bytes beyond the
  // budget overflow. A segment that would need a new out-of-order range when
  // max_pending are held is refused whole (kOverflow, window_full).
  // `now` refreshes the slot's idle clock.
  Append append(uint32_t handle, uint32_t seq, const uint8_t* p, uint32_t len,
                uint64_t now = 0) noexcept;

  // The contiguous bytes from the slot's first sequence number; empty for a
  // bad handle. Valid until the next append/consume/release of this slot.
  std::span<const uint8_t> data(uint32_t handle) const noexcept;
  // kSlotTagBytes of the slot that are the caller's, zeroed by begin() (the
  // QUIC inspector keeps a flow's key connection ID and packet numbers
  // there). nullptr for a bad handle.
  uint8_t* tag(uint32_t handle) noexcept;
  // Sequence number of data()[0], and of the byte after data() (the next
  // byte the stream needs). 0 for a bad handle.
  // Out-of-order ranges held beyond data() (0 for a bad handle): with none,
  // a slot whose data() was all consumed holds nothing and can be released.
  uint32_t held_out_of_order(uint32_t handle) const noexcept;
  uint32_t first_seq(uint32_t handle) const noexcept;
  uint32_t next_seq(uint32_t handle) const noexcept;

  // Drops the first n bytes of the stream (a request already judged): the
  // slot then starts at first_seq() + n. n may exceed data().size() (a
  // Content-Length body to skip): held out-of-order bytes before the new
  // start are dropped, and later segments' bytes before it are ignored
  // without counting as overlaps. n < 2^30; false (nothing done) otherwise or
  // for a bad handle.
  bool consume(uint32_t handle, uint32_t n) noexcept;

  // Returns the slot to the pool. false for a bad handle (also a second
  // release of the same handle).
  bool release(uint32_t handle) noexcept;

  uint32_t slots() const noexcept { return slots_; }
  uint32_t slot_bytes() const noexcept { return slot_bytes_; }
  uint32_t free_slots() const noexcept { return free_top_; }
  std::size_t memory_bytes() const noexcept { return bytes_; }
  PoolStats stats() const noexcept;

  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

 private:
  struct Slot;
  static constexpr std::size_t kCounters = sizeof(PoolStats) / sizeof(uint64_t);
  friend struct PoolTestAccess;

  Pool() = default;
  ~Pool() = default;
  Slot* slot(uint32_t handle) const noexcept;
  uint8_t* bytes(const Slot* s) const noexcept;
  void bump(std::size_t counter, uint64_t by = 1) noexcept;
  void free_slot(Slot* s) noexcept;
  bool idle(const Slot* s, uint64_t now) const noexcept;

  uint8_t* mem_ = nullptr;       // slot headers, then the free stack, then the bytes
  uint32_t* free_ = nullptr;     // stack of free slot indices
  uint8_t* data_ = nullptr;      // slot i's bytes at data_ + i * slot_stride_
  std::size_t bytes_ = 0;
  std::size_t slot_stride_ = 0;
  uint32_t slots_ = 0;
  uint32_t slot_bytes_ = 0;
  uint32_t max_pending_ = 0;
  uint32_t free_top_ = 0;
  uint32_t cursor_ = 0;          // next slot reclaim looks at
  uint64_t idle_ticks_ = 0;
  PoolAllocator alloc_;
  std::atomic<uint64_t> counters_[kCounters] = {};
};

}  // namespace cg::reasm
