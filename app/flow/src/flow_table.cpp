// The flow table. Layout: power-of-two many buckets of kWays slots, in
// three arrays: the buckets' 64-byte header lines, then every slot's 64-byte
// entry, then every slot's 48 bytes of cold state (slot i of bucket k is
// entry k * kWays + i in both):
//
//   header: sig[8] (16-bit hash signatures, 0 = empty slot)  16 bytes
//           stamp[8] (32-bit last-seen, in stamp units)       32 bytes
//           state[8] (FlowState)                               8 bytes
//           bits[8]  (initiator side, replied, FIN per
//                     direction, pinned)                       8 bytes
//   entry:  FlowEntry, 64 bytes; its last 8 bytes copy the slot's stamp,
//           state and bits (SlotState)
//   cold:   FlowCold, 48 bytes
//
// A lookup reads the header line, compares the signatures with one SIMD
// compare, and reads only the entries whose signature matches (almost always
// just the right one): two cache lines per packet. The steady lane
// (track_steady) first tries the home slot's entry alone: one line. A lookup
// that finds no entry (a new flow, a bare SYN) reads the header alone, a
// line of the dense header array (1/10 of the table: 1 MiB for 131 072
// entries), not one line in every 640 bytes of it. Expiry and eviction look
// at the headers only. The bucket is chosen by the hash's low bits and the
// signature is its top 16 bits, so the two are independent.
//
// Invariant: every write of a slot's header stamp, state or bits goes
// through set() or touch(), which write the entry's copy too, so the
// entry's slot copy equals the header's slot i (but for kPinned), and its
// state is kNone exactly when sig[i] is 0.
#include "cuckoogate/flow/flow_table.hpp"

#include <array>
#include <bit>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

#include "cuckoogate/mem/huge_pages.hpp"

// The per-packet helpers are inlined into track_hashed(): one call per packet.
#define CG_FLOW_INLINE [[gnu::always_inline]] inline

// The atomic behind a FlowStats field.
#define CG_FLOW_COUNTER(field) counters_[offsetof(FlowStats, field) / sizeof(uint64_t)]

namespace cg::flow {

using namespace detail;

static_assert(std::has_unique_object_representations_v<FlowStats>,
              "FlowStats is a plain list of uint64_t counters");

namespace {

FlowState initial_state(uint8_t proto, uint8_t tcp_flags, uint8_t& bits) noexcept {
  if (proto == kProtoUdp) return FlowState::kUdp;
  if (proto != kProtoTcp) return FlowState::kOther;
  if (tcp_flags & kTcpRst) return FlowState::kTcpClosed;
  if (tcp_flags & kTcpFin) {
    bits |= kFinFwd;
    return FlowState::kTcpClosing;
  }
  return FlowState::kTcpNew;
}

// The next TCP state for a packet in direction `d` of a live entry. Returns
// kNone when the packet opens a new connection on the same 5-tuple (a SYN
// without ACK while closing or closed): the caller recreates the entry.
FlowState tcp_next(FlowState s, uint8_t& bits, Dir d, uint8_t tcp_flags) noexcept {
  if (tcp_flags & kTcpRst) return FlowState::kTcpClosed;
  if ((tcp_flags & (kTcpSyn | kTcpAck)) == kTcpSyn &&
      (s == FlowState::kTcpClosing || s == FlowState::kTcpClosed))
    return FlowState::kNone;
  if (tcp_flags & kTcpFin) {
    bits |= d == Dir::kForward ? kFinFwd : kFinRev;
    return (bits & (kFinFwd | kFinRev)) == (kFinFwd | kFinRev) ? FlowState::kTcpClosed
                                                               : FlowState::kTcpClosing;
  }
  if (s == FlowState::kTcpNew && d == Dir::kReverse) return FlowState::kTcpEstablished;
  return s;
}

void* default_allocate(std::size_t size, std::size_t, void*) {
  return mem::map_pages(size);  // page-aligned, so any `align` up to 4 KiB
}
void default_release(void* p, std::size_t size, void*) {
  mem::unmap_pages(p, size);
}

inline void add(std::atomic<uint64_t>& c, uint64_t d = 1) noexcept {
  // Single writer: a plain load and store, no locked instruction.
  c.store(c.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
}

}  // namespace


FlowTable::Ptr FlowTable::create(const FlowTableConfig& cfg, const FlowAllocator& alloc,
                                 const char** error) noexcept {
  static_assert(sizeof(Bucket) == 64 && sizeof(FlowEntry) == 64 && sizeof(FlowCold) * kWays % 64 == 0,
                "a header line, a line per entry, whole lines of cold state per bucket");
  auto fail = [error](const char* why) {
    if (error != nullptr) *error = why;
    return Ptr();
  };
  if (cfg.capacity == 0 || cfg.capacity > (uint64_t{1} << 31))
    return fail("flow table capacity must be between 1 and 2^31 entries");
  if (cfg.ticks_per_second == 0) return fail("flow table ticks_per_second must be positive");
  if ((alloc.allocate == nullptr) != (alloc.release == nullptr))
    return fail("flow table allocator needs both allocate and release");

  // The largest power-of-two unit of at most 1 ms (one tick if ticks are coarser).
  unsigned shift = 0;
  while ((cfg.ticks_per_second / 1000) >> (shift + 1) != 0) ++shift;
  const FlowTimeouts& to = cfg.timeouts;
  const uint32_t by_state[7] = {
      0, to.tcp_new, to.tcp_established, to.tcp_closing, to.tcp_closed, to.udp, to.other};
  uint32_t units[kTimeoutSlots] = {};
  for (unsigned s = 1; s < 7; ++s) {
    for (unsigned replied = 0; replied < 2; ++replied) {
      const uint32_t sec =
          s == static_cast<unsigned>(FlowState::kUdp) && replied ? to.udp_replied : by_state[s];
      if (sec == 0 || sec > 12u * 86400u) return fail("flow timeouts must be 1 s .. 12 days");
      // ceil(sec * hz / unit); must stay below 2^30 units so that age() is unambiguous.
      const unsigned __int128 ticks = static_cast<unsigned __int128>(sec) * cfg.ticks_per_second;
      const unsigned __int128 u = (ticks + ((uint64_t{1} << shift) - 1)) >> shift;
      if (u >= (uint64_t{1} << 30)) return fail("flow timeout too long for the tick rate");
      units[s | (replied << 3)] = static_cast<uint32_t>(u);
    }
  }

  uint64_t buckets = 1;
  while (buckets * kWays < cfg.capacity) buckets <<= 1;
  const std::size_t head = (sizeof(FlowTable) + 63) / 64 * 64;
  constexpr std::size_t kBucketBytes = sizeof(Bucket) + kWays * (sizeof(FlowEntry) + sizeof(FlowCold));
  const std::size_t bytes = head + static_cast<std::size_t>(buckets) * kBucketBytes;

  FlowAllocator a = alloc;
  if (a.allocate == nullptr) {
    a.allocate = default_allocate;
    a.release = default_release;
  }
  void* mem = a.allocate(bytes, 64, a.ctx);
  if (mem == nullptr) return fail("flow table allocation failed");
  // Zero it all (rte_zmalloc has already, malloc has not): every slot empty.
  // This also touches every page now rather than on the data path.
  std::memset(mem, 0, bytes);

  FlowTable* t = new (mem) FlowTable();
  unsigned char* const base = static_cast<unsigned char*>(mem) + head;
  t->buckets_ = reinterpret_cast<Bucket*>(base);
  t->entries_ = reinterpret_cast<FlowEntry*>(base + buckets * sizeof(Bucket));
  t->colds_ = reinterpret_cast<FlowCold*>(base + buckets * (sizeof(Bucket) + kWays * sizeof(FlowEntry)));
  t->mask_ = buckets - 1;
  t->keys_ = detail::hash_keys(cfg.seed);
  t->shift_ = shift;
  t->track_bare_syn_ = cfg.track_bare_syn;
  t->bytes_ = bytes;
  t->alloc_ = a;
  std::memcpy(t->timeout_, units, sizeof units);
  return Ptr(t);
}

void FlowTable::Deleter::operator()(FlowTable* t) const noexcept {
  if (t == nullptr) return;
  const FlowAllocator a = t->alloc_;
  const std::size_t bytes = t->bytes_;
  t->~FlowTable();
  a.release(t, bytes, a.ctx);
}

CG_FLOW_INLINE bool FlowTable::expired(const Bucket& b, unsigned i, uint32_t t) const noexcept {
  return age(b.stamp[i], t) > timeout_[timeout_index(b.state[i], b.bits[i])];
}

// Also writes the entry's line (its copy's state: free), so that
// track_steady() never takes a freed slot's stale key for a live flow.
void FlowTable::clear_slot(Bucket& b, unsigned i) noexcept {
  b.sig[i] = 0;
  set(b, i, 0, 0, 0);
}

// A slot for a new entry in a bucket without a free one: reclaims every
// expired, unpinned entry (returning the first), else evicts the unpinned
// entry with the highest (not replied, age) — the least recently seen of
// the unreplied ones if any. -1 if every slot is pinned.
int FlowTable::make_room(Bucket& b, uint32_t t) noexcept {
  int reclaimed = -1, victim = -1;
  uint64_t worst = 0;
  for (unsigned i = 0; i < kWays; ++i) {
    if (b.bits[i] & kPinned) continue;
    const uint32_t a = age(b.stamp[i], t);
    if (a > timeout_[timeout_index(b.state[i], b.bits[i])]) {
      clear_slot(b, i);
      add(CG_FLOW_COUNTER(expired));
      add(CG_FLOW_COUNTER(active), static_cast<uint64_t>(-1));
      if (reclaimed < 0) reclaimed = static_cast<int>(i);
      continue;
    }
    const uint64_t score = (uint64_t{(b.bits[i] & kReplied) == 0} << 32) | a;
    if (victim < 0 || score > worst) {
      victim = static_cast<int>(i);
      worst = score;
    }
  }
  if (reclaimed >= 0) return reclaimed;
  if (victim >= 0) {
    add(CG_FLOW_COUNTER(evicted));
    if (b.bits[victim] & kReplied) add(CG_FLOW_COUNTER(evicted_replied));
    add(CG_FLOW_COUNTER(active), static_cast<uint64_t>(-1));
    clear_slot(b, static_cast<unsigned>(victim));
  }
  return victim;
}

// Writes a fresh entry for `key` into the empty slot i.
void FlowTable::fill(Bucket& b, unsigned i, const FlowKey& key, uint16_t sig, Side side,
                     uint8_t tcp_flags, uint32_t t, uint8_t pin, FlowResult& r) noexcept {
  FlowEntry& e = entry(b, i);
  e = FlowEntry{};
  e.key = key;
  cold_of(b, i) = FlowCold{};
  uint8_t bits = static_cast<uint8_t>((side == Side::kB ? kInitB : 0) | pin);
  const FlowState s = initial_state(key.proto, tcp_flags, bits);
  b.sig[i] = sig;
  set(b, i, t, static_cast<uint8_t>(s), bits);
  add(CG_FLOW_COUNTER(created));
  add(CG_FLOW_COUNTER(active));
  r = {&e, Dir::kForward, s, true, false};
}

// The result is written in place: a FlowResult returned by value through
// an inlined call was assembled on the stack byte by byte and copied out
// with overlapping 8-byte loads, a store-forwarding stall that was a
// quarter of track_burst's time.
CG_FLOW_INLINE void FlowTable::track_hashed(const FlowKey& key, uint64_t h, Side side,
                                            uint8_t tcp_flags, uint32_t t, uint8_t pin,
                                            FlowResult& r) noexcept {
  Bucket& b = buckets_[h & mask_];
  const uint16_t sig = signature(h);
  int found = find_slot(b, key, h);
  if (found >= 0 && expired(b, static_cast<unsigned>(found), t)) {
    // A stale entry of the same flow: freed, and the packet is then what it
    // would be without it (below), so that a bare SYN waits for its answer
    // and a SYN-ACK's receiver is the initiator here too. (Filled in place,
    // the SYN anchored the client stream at its sequence number: a TCP Fast
    // Open server's SYN-ACK, acknowledging the SYN's data, then contradicted
    // it and the client's data was dropped.)
    add(CG_FLOW_COUNTER(expired));
    add(CG_FLOW_COUNTER(active), static_cast<uint64_t>(-1));
    clear_slot(b, static_cast<unsigned>(found));
    found = -1;
  }
  if (found >= 0) {
    const auto i = static_cast<unsigned>(found);
    uint8_t bits = b.bits[i];
    const auto d = static_cast<Dir>(static_cast<uint8_t>(side) ^ (bits & kInitB));
    if (d == Dir::kReverse) bits |= kReplied;
    auto s = static_cast<FlowState>(b.state[i]);
    if (key.proto == kProtoTcp) {
      s = tcp_next(s, bits, d, tcp_flags);
      if (s == FlowState::kNone && entry(b, i).blocked()) {
        // A blocked flow stays blocked until it times out or its rule goes
        // (the caller clears the block then): a SYN on its 5-tuple — a new
        // connection, or a forged RST or FIN and then a SYN that would move
        // the client stream's start past a retransmitted ClientHello — is
        // one more of its packets, not a fresh flow.
        s = static_cast<FlowState>(b.state[i]);
      }
      if (s == FlowState::kNone && (bits & kPinned) == 0) {  // SYN on a closing/closed flow: a new connection
        add(CG_FLOW_COUNTER(active), static_cast<uint64_t>(-1));
        clear_slot(b, i);
        if (track_bare_syn_) {
          add(CG_FLOW_COUNTER(hits));
          fill(b, i, key, sig, side, tcp_flags, t, pin, r);
          return;
        }
        // Without bare SYNs tracked, it waits for its answer as the SYN of
        // any new flow does (below): the SYN-ACK, or the next packet, opens
        // the entry. Reopening here would anchor the client stream at the
        // SYN's sequence number, which a forged RST and SYN (ignored by the
        // server, RFC 5961) could place past the real ClientHello.
        found = -1;
      } else if (s == FlowState::kNone) {
        // The same, but an earlier packet of this burst holds the old
        // connection's entry (a ClientHello, a RST, a new SYN back to
        // back) and is judged with it: rewriting the entry under it would
        // lose its verdict and its stream. The old entry stays as it is
        // until the burst's lookups are done, unreachable (a signature no
        // key has) and pinned; unpin() frees it. The new connection starts
        // as a new flow does, in another slot.
        b.sig[i] = kRetiredSig;
        add(CG_FLOW_COUNTER(reopened_in_burst));
        found = -1;
      }
    }
    if (found >= 0) {
      set(b, i, t, static_cast<uint8_t>(s), static_cast<uint8_t>(bits | pin));
      add(CG_FLOW_COUNTER(hits));
      r = {&entry(b, i), d, s, false, (bits & kReplied) != 0};
      return;
    }
  }
  add(CG_FLOW_COUNTER(misses));
  Side init = side;
  if (key.proto == kProtoTcp && !track_bare_syn_) {
    const uint8_t syn_ack = tcp_flags & (kTcpSyn | kTcpAck);
    if (syn_ack == kTcpSyn) {
      add(CG_FLOW_COUNTER(syn_deferred));
      r = {};
      r.deferred = true;
      return;
    }
    // The answer to a SYN that was not tracked: its receiver initiated.
    if (syn_ack == (kTcpSyn | kTcpAck)) init = side == Side::kA ? Side::kB : Side::kA;
  }
  // Its home slot if free (prefetch() loads that entry line without reading
  // the header first), else the first free one, else make room.
  const uint32_t free_mask = match(b.sig, 0);
  const unsigned home = home_slot(h);
  int slot = (free_mask >> (2 * home) & 1u) != 0 ? static_cast<int>(home)
             : free_mask != 0                   ? static_cast<int>(first_slot(free_mask))
                                                : make_room(b, t);
  if (slot < 0) {
    add(CG_FLOW_COUNTER(insert_failed));
    r = {};
    return;
  }
  fill(b, static_cast<unsigned>(slot), key, sig, init, tcp_flags, t, pin, r);
  if (init != side) {  // created by the responder's SYN-ACK: the handshake is answered
    set(b, static_cast<unsigned>(slot), t, static_cast<uint8_t>(FlowState::kTcpEstablished),
          static_cast<uint8_t>(b.bits[slot] | kReplied));
    r.dir = Dir::kReverse;
    r.state = FlowState::kTcpEstablished;
    r.replied = true;
  }
}

FlowResult FlowTable::track(const FlowKey& key, Side side, uint8_t tcp_flags,
                            uint64_t now) noexcept {
  FlowResult r;
  track_hashed(key, key_hash(key, keys_), side, tcp_flags, units(now), 0, r);
  return r;
}

// Stages 2 and 3 of a burst whose bucket headers are on their way: prefetch
// the entry whose signature matches (the hit's line, or nothing for a new
// flow), then resolve in packet order (so the results equal n track() calls).
void FlowTable::resolve(const FlowPacket* pkts, const uint64_t* h, uint32_t n, uint32_t t,
                        FlowResult* out) noexcept {
  for (uint32_t j = 0; j < n; ++j) prefetch_entry(h[j]);
  for (uint32_t j = 0; j < n; ++j) {
    const FlowPacket& p = pkts[j];
    if (p.no_state) [[unlikely]] {
      probe_hashed(p.key, h[j], p.side, t, out[j]);
      continue;
    }
    track_hashed(p.key, h[j], p.side, p.tcp_flags, t, kPinned, out[j]);
  }
}

// FlowPacket::no_state: the live entry, pinned for the burst as the others
// are (a later packet of the burst must not evict it under the caller).
void FlowTable::probe_hashed(const FlowKey& key, uint64_t h, Side side, uint32_t t, FlowResult& r) noexcept {
  Bucket& b = buckets_[h & mask_];
  const int found = find_slot(b, key, h);
  if (found < 0 || expired(b, static_cast<unsigned>(found), t)) {
    r = {};
    return;
  }
  const auto i = static_cast<unsigned>(found);
  const uint8_t bits = b.bits[i];
  b.bits[i] = static_cast<uint8_t>(bits | kPinned);
  const auto d = static_cast<Dir>(static_cast<uint8_t>(side) ^ (bits & kInitB));
  r = {&entry(b, i), d, static_cast<FlowState>(b.state[i]), false, (bits & kReplied) != 0};
}

// Unpins the entries of a burst (kPinned is in the header only), and frees
// those a SYN retired (track_hashed): the caller may still read and write
// them until its next call, which is the first that may reuse their slots.
void FlowTable::unpin(const FlowResult* out, uint32_t n) noexcept {
  for (uint32_t j = 0; j < n; ++j) {
    if (out[j].entry == nullptr) continue;
    unsigned slot;
    Bucket& b = bucket_of(*out[j].entry, &slot);
    if (b.sig[slot] == kRetiredSig) {
      clear_slot(b, slot);  // unpins it too
      add(CG_FLOW_COUNTER(active), static_cast<uint64_t>(-1));
      continue;
    }
    b.bits[slot] = static_cast<uint8_t>(b.bits[slot] & ~kPinned);
  }
}

void FlowTable::track_burst(const FlowPacket* pkts, uint32_t n, uint64_t now,
                            FlowResult* out) noexcept {
  constexpr uint32_t kChunk = 32;
  const uint32_t t = units(now);
  uint64_t h[kChunk];
  for (uint32_t base = 0; base < n; base += kChunk) {
    const uint32_t c = n - base < kChunk ? n - base : kChunk;
    // Stage 1: hash everything, prefetch the bucket headers (which
    // resolve() reads first) and the home entries.
    for (uint32_t j = 0; j < c; ++j) {
      h[j] = key_hash(pkts[base + j].key, keys_);
      prefetch_header(h[j]);
      prefetch(h[j]);
    }
    resolve(pkts + base, h, c, t, out + base);
  }
  unpin(out, n);
}

void FlowTable::track_burst(const FlowPacket* pkts, const uint64_t* hashes, uint32_t n, uint64_t now,
                            FlowResult* out) noexcept {
  resolve(pkts, hashes, n, units(now), out);
  unpin(out, n);
}

FlowResult FlowTable::find(const FlowKey& key, Side side, uint64_t now) noexcept {
  const uint64_t h = key_hash(key, keys_);
  Bucket& b = buckets_[h & mask_];
  const int found = find_slot(b, key, h);
  if (found < 0 || expired(b, static_cast<unsigned>(found), units(now))) return {};
  const uint8_t bits = b.bits[found];
  const auto d = static_cast<Dir>(static_cast<uint8_t>(side) ^ (bits & kInitB));
  return {&entry(b, static_cast<unsigned>(found)), d, static_cast<FlowState>(b.state[found]), false,
          (bits & kReplied) != 0};
}

bool FlowTable::erase(const FlowKey& key) noexcept {
  const uint64_t h = key_hash(key, keys_);
  Bucket& b = buckets_[h & mask_];
  const int found = find_slot(b, key, h);
  if (found < 0) return false;
  clear_slot(b, static_cast<unsigned>(found));
  add(CG_FLOW_COUNTER(active), static_cast<uint64_t>(-1));
  return true;
}

uint32_t FlowTable::expire(uint64_t now, uint32_t max_buckets) noexcept {
  const uint32_t t = units(now);
  uint32_t n = 0;
  const uint64_t todo = max_buckets < mask_ + 1 ? max_buckets : mask_ + 1;
  for (uint64_t k = 0; k < todo; ++k) {
    Bucket& b = buckets_[cursor_];
    cursor_ = (cursor_ + 1) & mask_;
    for (unsigned i = 0; i < kWays; ++i) {
      if (b.sig[i] == 0 || (b.bits[i] & kPinned) || !expired(b, i, t)) continue;
      clear_slot(b, i);
      ++n;
    }
  }
  if (n != 0) {
    add(CG_FLOW_COUNTER(expired), n);
    add(CG_FLOW_COUNTER(active), static_cast<uint64_t>(0) - n);
  }
  return n;
}

FlowStats FlowTable::stats() const noexcept {
  std::array<uint64_t, kCounters> v;
  for (std::size_t i = 0; i < kCounters; ++i) v[i] = counters_[i].load(std::memory_order_relaxed);
  return std::bit_cast<FlowStats>(v);
}

}  // namespace cg::flow
