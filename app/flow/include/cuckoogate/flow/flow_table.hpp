// A per-worker flow table: fixed memory, set-associative 64-byte-line buckets,
// lazy timeouts driven by the caller's clock, bounded eviction under floods.
// Layout, policy and measurements: docs/dataplane.md, "Flow table".
//
// Thread-safety: ONE thread owns a table (the worker lcore whose queues see
// both directions of its flows, thanks to symmetric RSS). Every member except
// stats() must be called from that thread only; there are no locks and no
// atomic read-modify-writes. stats() may be called from any thread: the
// counters are single-writer atomics read with relaxed loads, as WorkerStats.
//
// Data-path contract: after create(), nothing allocates, makes a syscall,
// throws or loops more than a fixed number of times (kWays slots per bucket,
// one bucket per packet). Time is the caller's `now`, a tick count (TSC) that
// must not decrease by more than a few milliseconds between calls.
//
// The burst loop (one table per worker, created on the worker's NUMA socket):
//
//   FlowPacket fp[kBurst];  FlowResult fr[kBurst];
//   for i in burst:                       // the caller parses L3/L4
//     fp[i].side = make_flow_key({src, dst, sport, dport, vlan, proto, family}, fp[i].key);
//     fp[i].tcp_flags = tcp ? th->tcp_flags : 0;
//   table.track_burst(fp, n, rte_rdtsc(), fr);   // lookup-or-insert, state, LRU
//   for i in burst:
//     FlowEntry* e = fr[i].entry;
//     if (e == nullptr)                      judge the packet alone (a counted insert failure)
//     else if (e->blocked())                 drop (generation changed: is the rule still there?)
//     else if (e->verdict_current(gen) && nothing to inspect)   use e->verdict
//     else                                   classify + filter lookup, then e->set_verdict(...)
//   if the rx burst was empty: table.expire(now, 64);   // optional background sweep
//
// Every FlowEntry* a call returns stays valid (the same flow) until the next
// call of track/track_burst/erase/expire; within one track_burst call, an
// entry returned for an earlier packet is never evicted for a later one.
#pragma once

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "cuckoogate/flow/flow_key.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace cg::flow {

// Direction of a packet relative to its flow: kForward from the initiator (the
// end whose packet created the entry) to the responder, kReverse back.
enum class Dir : uint8_t { kForward = 0, kReverse = 1 };

// Simplified states; the timeout of an entry is chosen by its state.
enum class FlowState : uint8_t {
  kNone = 0,        // no entry
  kTcpNew,          // one direction seen (SYN, or a mid-stream segment)
  kTcpEstablished,  // both directions seen, no FIN or RST
  kTcpClosing,      // a FIN from one end
  kTcpClosed,       // a RST, or FINs from both ends
  kUdp,             // UDP (the reply flag picks udp or udp_replied)
  kOther,           // any other protocol (ICMP, SCTP, GRE, ...)
};

// What the caller decided for the flow (verdict cache). kUnknown: not decided.
enum class Verdict : uint8_t { kUnknown = 0, kPass, kDrop, kReject };

// Per-flow application-layer inspection progress (for reassembly/parsers).

// TCP header flag bits, as in the TCP header's flags byte.
inline constexpr uint8_t kTcpFin = 0x01;
inline constexpr uint8_t kTcpSyn = 0x02;
inline constexpr uint8_t kTcpRst = 0x04;
inline constexpr uint8_t kTcpAck = 0x10;
inline constexpr uint8_t kTcpUrg = 0x20;

// FlowEntry::flags.
inline constexpr uint8_t kFlowBlocked = 0x01;  // sticky block (item 3 of issue 10)
// Bits 0x02..0x80 are spare.

// The table's own state of a slot (signature aside): last-seen stamp, TCP
// state, initiator/reply/FIN bits. The bucket's header line holds it for
// expiry and eviction, which then never read entries; each entry holds a
// copy, so that the packets of a passing flow read its entry's line alone
// (FlowTable::track_steady). The two are written together.
struct SlotState {
  uint32_t stamp;  // last seen, in stamp units
  uint8_t state;   // FlowState; kNone: the slot is free
  uint8_t bits;    // the header's bits (detail::kInitB ...) without kPinned
};
static_assert(sizeof(SlotState) == 8);

// One flow: the key and the caller's per-flow state, one cache line. The
// table owns `key` and `slot` (do not write them) and zeroes everything else
// when it creates the entry; the rest is the caller's to read and write.
// State the caller needs only for some packets (inspection) is in FlowCold,
// beside the entries (FlowTable::cold).
struct alignas(64) FlowEntry {
  FlowKey key;           //  0: 40 bytes
  uint64_t generation;   // 40: blocklist generation `verdict` was computed at
  uint32_t rule_slot;    // 48: slot of the rule that decided a drop/reject (hit counters)
  Verdict verdict;       // 52
  uint8_t rule_kind;     // 53: cg::RuleKind of that rule (1..7), 0 = none
  uint8_t inspect;       // 54: the caller's inspection state bits
  uint8_t flags;         // 55: kFlowBlocked; other bits spare
  SlotState slot;        // 56: the table's copy of its header state

  bool blocked() const noexcept { return (flags & kFlowBlocked) != 0; }
  // The cached verdict was computed at generation `gen` (the current one).
  bool verdict_current(uint64_t gen) const noexcept {
    return verdict != Verdict::kUnknown && generation == gen;
  }
  // Caches a verdict; `block` makes it sticky (kDrop/kReject by a rule).
  void set_verdict(Verdict v, uint64_t gen, uint8_t kind = 0, uint32_t slot_index = 0,
                   bool block = false) noexcept {
    verdict = v;
    generation = gen;
    rule_kind = kind;
    rule_slot = slot_index;
    flags = static_cast<uint8_t>(block ? (flags | kFlowBlocked) : (flags & ~kFlowBlocked));
  }
};
static_assert(sizeof(FlowEntry) == 64, "one flow, one cache line");
static_assert(alignof(FlowEntry) == 64);

// The caller's per-flow state that only some packets read (the gateway: the
// reassembly slot and sequence number of a flow whose first flight is
// inspected, how its first client segment read arrived and its timestamp
// floor, and the first and the latest name its inspection read, or before
// the first, its server's first sequence number), zeroed
// with its entry. A bucket's eight take six lines beside its entries, so a
// passing flow's packets never load them.
struct FlowCold {
  uint32_t stream[2];
  uint64_t name[2][2];
  uint8_t arrival[8];
};
static_assert(sizeof(FlowCold) == 48);

// Idle timeouts in seconds (1 s .. 12 days). Defaults, and nftables'
// conntrack defaults for comparison, in docs/dataplane.md.
struct FlowTimeouts {
  uint32_t tcp_new = 30;
  uint32_t tcp_established = 300;
  uint32_t tcp_closing = 60;
  uint32_t tcp_closed = 10;
  uint32_t udp = 30;           // one direction seen
  uint32_t udp_replied = 120;  // both directions seen
  uint32_t other = 30;
};

struct FlowTableConfig {
  // Entries; rounded up so that the bucket count (capacity / kWays) is a
  // power of two. At most 2^31.
  uint64_t capacity = uint64_t{1} << 18;
  // Rate of the caller's `now` (rte_get_tsc_hz() in the gateway); required.
  uint64_t ticks_per_second = 0;
  // Hash seed: pass a random one so that senders cannot aim at one bucket.
  uint64_t seed = 0;
  FlowTimeouts timeouts;
  // false: a bare TCP SYN (SYN without ACK) that finds no entry creates none
  // (FlowResult::deferred, counted in syn_deferred); the responder's SYN-ACK
  // creates it, with the SYN-ACK's receiver as the initiator. A SYN flood
  // from random sources then never touches the table, so it cannot evict
  // established flows, and the handshake's answer proves the flow is real.
  // Other packets that find no entry (UDP, mid-stream TCP) still create one.
  bool track_bare_syn = true;
};

// Where the table's single block of memory comes from. allocate() returns
// `size` bytes aligned to `align` (64) or nullptr; the memory need not be
// zeroed; release() gets the same size back. Both null: private anonymous
// memory (mmap) that asks the kernel for transparent huge pages, since the
// table is read at random and 4 KiB pages cost a TLB miss on almost every
// packet. The gateway passes rte_zmalloc_socket / rte_free on the worker's
// socket when EAL has hugepages.
struct FlowAllocator {
  void* (*allocate)(std::size_t size, std::size_t align, void* ctx) = nullptr;
  void (*release)(void* p, std::size_t size, void* ctx) = nullptr;
  void* ctx = nullptr;
};

// One packet of a burst, as the caller fills it.
struct FlowPacket {
  FlowKey key;        // make_flow_key()
  Side side;          // its return value
  uint8_t tcp_flags;  // the TCP flags byte; ignored for other protocols
  // A packet its receiver drops (the caller found its checksum bad): only
  // looked up in track_burst(). Its live entry is returned (pinned, never
  // `created`) and nothing is created or changed: no state, no stamp.
  bool no_state = false;
};

// What track() did with a packet.
struct FlowResult {
  FlowEntry* entry = nullptr;          // nullptr only when no slot could be taken (see track_burst)
  Dir dir = Dir::kForward;             // the packet's direction
  FlowState state = FlowState::kNone;  // after this packet
  bool created = false;  // a fresh entry (verdict fields zero): new flow, expired one, or a
                         // TCP SYN reopening a closing/closed flow
  bool replied = false;  // packets have been seen in both directions
  bool deferred = false;  // entry == nullptr: a bare SYN with track_bare_syn off (not a failure)
};

// A snapshot of the counters. This is the one list of them: the table keeps
// one single-writer atomic per field, in this order.
struct FlowStats {
  uint64_t active = 0;           // occupied slots (incl. expired ones not reclaimed yet)
  uint64_t created = 0;          // entries created (incl. SYN reopenings)
  uint64_t evicted = 0;          // live entries evicted to make room
  uint64_t evicted_replied = 0;  // of which had seen both directions
  uint64_t expired = 0;          // entries reclaimed after their timeout
  uint64_t hits = 0;             // track(): live entry found
  uint64_t misses = 0;           // track(): no live entry (created or insert_failed)
  uint64_t insert_failed = 0;    // track_burst(): every slot of the bucket pinned
  uint64_t syn_deferred = 0;     // bare SYNs that created no entry (track_bare_syn off)
  uint64_t reopened_in_burst = 0;  // SYNs reopening a flow an earlier packet of their
                                   // track_burst() call holds (its entry retired, not rewritten)
};

// The table's per-slot encoding and key helpers, inline for the fast path
// below (track_steady()); not part of the interface.
namespace detail {

// Header bits per slot.
constexpr uint8_t kInitB = 0x01;    // the initiator is side B of the key
constexpr uint8_t kReplied = 0x02;  // a packet from the responder has been seen
constexpr uint8_t kFinFwd = 0x04;   // FIN from the initiator
constexpr uint8_t kFinRev = 0x08;   // FIN from the responder
constexpr uint8_t kPinned = 0x10;   // returned by the running track_burst: not evictable

constexpr unsigned kTimeoutSlots = 16;  // state (3 bits) | replied << 3

inline unsigned timeout_index(uint8_t state, uint8_t bits) noexcept {
  return state | ((bits & kReplied) != 0 ? 8u : 0u);
}

// 0 marks an empty slot, kRetiredSig an entry retired for the rest of a
// track_burst() call: no key has either.
constexpr uint16_t kRetiredSig = 1;
inline uint16_t signature(uint64_t h) noexcept {
  const auto s = static_cast<uint16_t>(h >> 48);
  return static_cast<uint16_t>(s < 2 ? s + 2 : s);
}

// Bit 2*i is set for every slot i whose signature equals `sig`.
inline uint32_t match(const uint16_t* sigs, uint16_t sig) noexcept {
#if defined(__SSE2__)
  const __m128i s = _mm_load_si128(reinterpret_cast<const __m128i*>(sigs));
  const __m128i eq = _mm_cmpeq_epi16(s, _mm_set1_epi16(static_cast<short>(sig)));
  return static_cast<uint32_t>(_mm_movemask_epi8(eq)) & 0x5555u;
#else
  uint32_t m = 0;
  for (unsigned i = 0; i < 8; ++i) m |= static_cast<uint32_t>(sigs[i] == sig) << (2 * i);
  return m;
#endif
}

// Where a new entry goes if that slot is free: hash bits that neither the
// bucket index (the low bits, at most 28 of them) nor the signature (the top
// 16) use, so that one can prefetch a flow's entry line before its bucket's
// header says which slot it is in.
inline unsigned home_slot(uint64_t h) noexcept { return static_cast<unsigned>(h >> 40) & 7u; }

inline unsigned first_slot(uint32_t m) noexcept {
  return static_cast<unsigned>(__builtin_ctz(m)) >> 1;
}

// The table's hash keys, all derived from FlowTableConfig::seed once, at
// create: XXH3's seed for IPv6 keys and hash_v4()'s two 64-bit keys.
struct HashKeys {
  uint64_t seed = 0;
  uint64_t lo = 0, hi = 0;
};

// SplitMix64's output function (Steele, Lea and Flood): a bijection that
// spreads any seed, 0 included, over all 64 bits.
inline uint64_t mix64(uint64_t x) noexcept {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline HashKeys hash_keys(uint64_t seed) noexcept {
  constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
  return {seed, mix64(seed + kGolden), mix64(seed + 2 * kGolden)};
}

// An IPv4 key has 24 zero bytes (the rest of its address fields), so its 16
// meaningful bytes (FlowKeyV4: addresses, then ports, zone, protocol,
// family) are hashed alone, as two words: their keyed 64x64 -> 128-bit
// product folded to 64 bits (each bit of the high half depends on every
// input bit), then one xorshift-multiply round, so that the bucket index
// (low bits), home slot and signature (high bits) all depend on every byte.
// Keyed like a folded-multiply hash table hash (foldhash, aHash): without
// the table's keys a sender cannot aim at one bucket. ~12 instructions
// against XXH3's ~22 for the same 16 bytes: the steady lane hashes every
// packet, and XXH3 cost it ~3 % (docs/PERFORMANCE.md, "Session 28").
inline uint64_t hash_v4(const FlowKeyV4& k, const HashKeys& s) noexcept {
  uint64_t addrs;
  std::memcpy(&addrs, &k, 8);  // a and b, as one word
  const unsigned __int128 p = static_cast<unsigned __int128>(addrs ^ s.lo) * (k.tail ^ s.hi);
  // Plus the key itself (as XXH3's short path adds its input): where a
  // factor is zero (a word equal to its key), the product is too, and the
  // flows would otherwise share one bucket and signature.
  uint64_t h = (static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64)) + (addrs ^ k.tail);
  h ^= h >> 32;
  h *= 0xd6e8feb86659fd93ULL;
  return h ^ (h >> 32);
}

inline uint64_t key_hash(const FlowKey& key, const HashKeys& s) noexcept {
  if (key.family != 4) return XXH3_64bits_withSeed(&key, sizeof key, s.seed);
  return hash_v4(compact(key), s);
}

// Word by word from the keys themselves: copying them into local arrays
// first made GCC spill one key to the stack on every compare.
inline uint64_t key_word(const FlowKey& k, unsigned i) noexcept {
  uint64_t v;
  std::memcpy(&v, reinterpret_cast<const unsigned char*>(&k) + 8 * i, 8);
  return v;
}
static_assert(sizeof(FlowKey) == 40);

inline bool key_equal(const FlowKey& a, const FlowKey& b) noexcept {
  return ((key_word(a, 0) ^ key_word(b, 0)) | (key_word(a, 1) ^ key_word(b, 1)) |
          (key_word(a, 2) ^ key_word(b, 2)) | (key_word(a, 3) ^ key_word(b, 3)) |
          (key_word(a, 4) ^ key_word(b, 4))) == 0;
}

// key_equal(a, expand(k)) without writing the expanded key out.
inline bool key_equal(const FlowKey& a, const FlowKeyV4& k) noexcept {
  uint64_t w0 = 0, w2 = 0;  // an address's 4 bytes first in memory order, then zeros
  std::memcpy(&w0, &k.a, 4);
  std::memcpy(&w2, &k.b, 4);
  return ((key_word(a, 0) ^ w0) | key_word(a, 1) | (key_word(a, 2) ^ w2) | key_word(a, 3) |
          (key_word(a, 4) ^ k.tail)) == 0;
}

// Age in stamp units; a stamp ahead of `t` (a clock that stepped back a
// little) counts as age 0, so stamps may wrap after 2^31 units.
inline uint32_t age(uint32_t stamp, uint32_t t) noexcept {
  const uint32_t d = t - stamp;
  return static_cast<int32_t>(d) < 0 ? 0 : d;
}

}  // namespace detail

struct FlowTableTestAccess;  // tests only

class alignas(64) FlowTable {
  struct Bucket;  // (below)

 public:
  static constexpr unsigned kWays = 8;  // slots per bucket: a header line, 8 entry lines, a cold line

  struct Deleter {
    void operator()(FlowTable* t) const noexcept;
  };
  using Ptr = std::unique_ptr<FlowTable, Deleter>;

  // The only allocation: one block of memory_bytes() from `alloc`. Returns
  // nullptr on invalid config or allocation failure, with a static message
  // in *error (if non-null).
  static Ptr create(const FlowTableConfig& cfg, const FlowAllocator& alloc = {},
                    const char** error = nullptr) noexcept;

  // Finds the live entry of `key` or creates one, advances its state for a
  // packet from `side` with `tcp_flags`, and refreshes its last-seen time.
  // A full bucket first reclaims its expired entries; if none, it evicts the
  // least recently seen entry that has not seen a reply, else the least
  // recently seen one (counted in evicted). Never fails: entry != nullptr.
  FlowResult track(const FlowKey& key, Side side, uint8_t tcp_flags, uint64_t now) noexcept;

  // track() for n packets in order, hashing and prefetching ahead. Every
  // entry returned is pinned until the call returns: a later packet of the
  // same call never evicts or rewrites it, so the results differ from n
  // track() calls only when such a call would have evicted an entry returned
  // earlier, or when a SYN reopens a flow whose entry an earlier packet of
  // the call holds (that entry is retired, freed when the call returns, and
  // the SYN starts the new connection elsewhere: reopened_in_burst). A
  // packet whose bucket has all kWays slots pinned gets entry == nullptr
  // (insert_failed); judge it without flow state.
  void track_burst(const FlowPacket* pkts, uint32_t n, uint64_t now, FlowResult* out) noexcept;

  // The live entry of `key` without refreshing it, changing its state or
  // counting (tests, diagnostics). entry == nullptr if absent or expired.
  FlowResult find(const FlowKey& key, Side side, uint64_t now) noexcept;

  // Removes the entry of `key`; false if there is none.
  bool erase(const FlowKey& key) noexcept;

  // Reclaims the expired entries of the next `max_buckets` buckets (a cursor
  // wraps around the table) and returns how many. Optional: expiry is lazy
  // anyway; this only keeps `active` close to the live count when idle.
  uint32_t expire(uint64_t now, uint32_t max_buckets) noexcept;

  uint64_t hash(const FlowKey& key) const noexcept { return detail::key_hash(key, keys_); }
  // Prefetches the home slot's entry of a hash (for callers that pipeline):
  // the one line track_steady() reads for a flow that sits at home. A lookup
  // that needs the bucket header (a new flow, one not at home, track_burst)
  // loads it then.
  inline void prefetch(uint64_t hash) const noexcept;
  // Only the bucket header: for a packet that seldom has an entry (a bare
  // SYN), whose lookup ends at the signatures.
  inline void prefetch_header(uint64_t hash) const noexcept;
  // Once that header is in: prefetches the entry whose signature matches
  // (the line track_steady() and track() compare the key with), if any,
  // wherever it sits.
  inline void prefetch_entry(uint64_t hash) const noexcept;

  // hash_v4(), prefetch() and prefetch_header() from a copy of what they
  // read, taken once per burst: a caller's stores into its own arrays may
  // alias the table's members as far as the compiler knows, which reloads
  // them for every packet otherwise. Valid as long as the table.
  class Probe {
   public:
    uint64_t hash_v4(const FlowKeyV4& k) const noexcept { return detail::hash_v4(k, keys_); }
    void prefetch(uint64_t hash) const noexcept {
      __builtin_prefetch(&entries_[((hash & mask_) * kWays) | detail::home_slot(hash)], 1, 3);
    }
    inline void prefetch_header(uint64_t hash) const noexcept;

   private:
    friend class FlowTable;
    detail::HashKeys keys_;
    const Bucket* buckets_;
    const FlowEntry* entries_;
    uint64_t mask_;
  };
  Probe probe() const noexcept {
    Probe p;
    p.keys_ = keys_;
    p.buckets_ = buckets_;
    p.entries_ = entries_;
    p.mask_ = mask_;
    return p;
  }

  // track_burst() with the hashes already computed (hash() of each key). It
  // reads every bucket header first: prefetch_header() them if you can.
  void track_burst(const FlowPacket* pkts, const uint64_t* hashes, uint32_t n, uint64_t now,
                   FlowResult* out) noexcept;

  // The common case of track(), inline, for callers that pipeline a burst
  // themselves (hash(), prefetch(), then this in packet order): if `key`
  // (hash `h`) has a live entry and this packet would change nothing of it
  // but its last-seen time, its reply bit and kTcpNew -> kTcpEstablished — a
  // TCP segment without SYN, FIN or RST, or any packet of another protocol —
  // does to the entry what track() would do for the packet, but for the
  // count, and returns it with the packet's direction in *dir. Otherwise
  // returns nullptr and changes nothing: give the packet to track() or
  // track_burst() (which may also take a packet this took: the table then
  // ends as after one track()). count_hits(k) counts k packets taken as hits
  // (one counter update per burst, not one per packet: that load and store
  // chained every packet to the one before). The entry is not pinned
  // (track_burst).
  inline FlowEntry* track_steady(const FlowKey& key, uint64_t h, Side side, uint8_t tcp_flags, uint64_t now,
                                 Dir* dir) noexcept;
  // The same for an IPv4 key in its compact form (hash_v4(k) ==
  // hash(expand(k))): nothing 40 bytes long is written or read but the entry.
  inline FlowEntry* track_steady_v4(const FlowKeyV4& k, uint64_t h, Side side, uint8_t tcp_flags, uint64_t now,
                                    Dir* dir) noexcept;
  uint64_t hash_v4(const FlowKeyV4& k) const noexcept { return detail::hash_v4(k, keys_); }
  inline void count_hits(uint32_t n) noexcept;

  // The cold state of an entry this table returned.
  inline FlowCold& cold(const FlowEntry& e) const noexcept;

  uint64_t capacity() const noexcept { return uint64_t{mask_ + 1} * kWays; }
  std::size_t memory_bytes() const noexcept { return bytes_; }
  // Ticks per unit of the stored last-seen stamps (a power of two ≤ 1 ms):
  // an entry expires between timeout and timeout + 2 units after its last
  // packet (exactly after timeout + 1 tick when the unit is one tick).
  uint64_t stamp_unit_ticks() const noexcept { return uint64_t{1} << shift_; }
  FlowStats stats() const noexcept;

  FlowTable(const FlowTable&) = delete;
  FlowTable& operator=(const FlowTable&) = delete;

 private:
  static constexpr std::size_t kCounters = sizeof(FlowStats) / sizeof(uint64_t);
  friend struct FlowTableTestAccess;

  FlowTable() = default;
  ~FlowTable() = default;
  uint32_t units(uint64_t now) const noexcept { return static_cast<uint32_t>(now >> shift_); }
  bool expired(const Bucket& b, unsigned i, uint32_t t) const noexcept;
  void clear_slot(Bucket& b, unsigned i) noexcept;
  int make_room(Bucket& b, uint32_t t) noexcept;
  void fill(Bucket& b, unsigned i, const FlowKey& key, uint16_t sig, Side side, uint8_t tcp_flags,
            uint32_t t, uint8_t pin, FlowResult& r) noexcept;
  void track_hashed(const FlowKey& key, uint64_t h, Side side, uint8_t tcp_flags, uint32_t t,
                    uint8_t pin, FlowResult& r) noexcept;
  void probe_hashed(const FlowKey& key, uint64_t h, Side side, uint32_t t, FlowResult& r) noexcept;
  // The slot of `key` (hash h) through the bucket header's signatures, -1 if none.
  template <class K>
  [[gnu::always_inline]] inline int find_slot(const Bucket& b, const K& key, uint64_t h) const noexcept;
  // The bucket of an entry of this table, and its slot in *slot.
  inline Bucket& bucket_of(const FlowEntry& e, unsigned* slot) const noexcept;
  // Slot i of bucket b: its entry and cold state (found from b's index).
  inline FlowEntry& entry(const Bucket& b, unsigned i) const noexcept;
  inline FlowCold& cold_of(const Bucket& b, unsigned i) const noexcept;
  // Slot i's stamp, state and bits, in the header and in its entry's copy.
  inline void set(Bucket& b, unsigned i, uint32_t t, uint8_t s, uint8_t bits) const noexcept;
  // Only slot i's stamp, in both places.
  inline void touch(Bucket& b, unsigned i, uint32_t t) const noexcept;
  void resolve(const FlowPacket* pkts, const uint64_t* h, uint32_t n, uint32_t t, FlowResult* out) noexcept;
  void unpin(const FlowResult* out, uint32_t n) noexcept;
  template <class K>
  [[gnu::always_inline]] inline FlowEntry* steady(const K& key, uint8_t proto, uint64_t h, Side side,
                                                  uint8_t tcp_flags, uint64_t now, Dir* dir) noexcept;

  Bucket* buckets_ = nullptr;     // mask_ + 1 header lines
  FlowEntry* entries_ = nullptr;  // kWays per bucket, in bucket order
  FlowCold* colds_ = nullptr;     // as entries_
  uint64_t mask_ = 0;  // buckets - 1
  detail::HashKeys keys_{};
  unsigned shift_ = 0;   // stamp = now >> shift_
  uint64_t cursor_ = 0;  // expire()
  bool track_bare_syn_ = true;
  std::size_t bytes_ = 0;
  FlowAllocator alloc_;
  uint32_t timeout_[16] = {};  // in stamp units, by state | reply flag << 3
  // FlowStats' fields in order, on their own line (the control lcore reads them).
  alignas(64) std::atomic<uint64_t> counters_[kCounters] = {};
};

// A bucket's header line. Its slots' entries and cold state are in arrays of
// their own (entry(b, i), cold_of(b, i)), so that the headers are one dense
// array: a lookup that ends at the header (a bare SYN, a new flow) reads a
// line of an array 1/10 of the table's size (docs/dataplane.md, "Layout").
struct alignas(64) FlowTable::Bucket {
  uint16_t sig[kWays];
  uint32_t stamp[kWays];
  uint8_t state[kWays];
  uint8_t bits[kWays];
};

FlowEntry& FlowTable::entry(const Bucket& b, unsigned i) const noexcept {
  return entries_[(static_cast<std::size_t>(&b - buckets_) * kWays) | i];
}

FlowCold& FlowTable::cold_of(const Bucket& b, unsigned i) const noexcept {
  return colds_[(static_cast<std::size_t>(&b - buckets_) * kWays) | i];
}

void FlowTable::set(Bucket& b, unsigned i, uint32_t t, uint8_t s, uint8_t bits) const noexcept {
  b.stamp[i] = t;
  b.state[i] = s;
  b.bits[i] = bits;
  entry(b, i).slot = {t, s, static_cast<uint8_t>(bits & ~detail::kPinned)};
}

void FlowTable::touch(Bucket& b, unsigned i, uint32_t t) const noexcept {
  b.stamp[i] = t;
  entry(b, i).slot.stamp = t;
}
static_assert(FlowTable::kWays == 8, "match() compares 8 signatures in one 128-bit register");

void FlowTable::prefetch(uint64_t hash) const noexcept { probe().prefetch(hash); }

void FlowTable::prefetch_header(uint64_t hash) const noexcept { probe().prefetch_header(hash); }

void FlowTable::Probe::prefetch_header(uint64_t hash) const noexcept {
  __builtin_prefetch(&buckets_[hash & mask_], 1, 3);
}

void FlowTable::prefetch_entry(uint64_t hash) const noexcept {
  const Bucket& b = buckets_[hash & mask_];
  const uint32_t m = detail::match(b.sig, detail::signature(hash));
  if (m != 0) __builtin_prefetch(&entry(b, detail::first_slot(m)), 1, 3);
}

FlowTable::Bucket& FlowTable::bucket_of(const FlowEntry& e, unsigned* slot) const noexcept {
  const auto k = static_cast<std::size_t>(&e - entries_);
  *slot = static_cast<unsigned>(k % kWays);
  return buckets_[k / kWays];
}

FlowCold& FlowTable::cold(const FlowEntry& e) const noexcept {
  unsigned i;
  Bucket& b = bucket_of(e, &i);
  return cold_of(b, i);
}

template <class K>
int FlowTable::find_slot(const Bucket& b, const K& key, uint64_t h) const noexcept {
  using namespace detail;
  for (uint32_t m = match(b.sig, signature(h)); m != 0; m &= m - 1) {
    const unsigned i = first_slot(m);
    if (key_equal(entry(b, i).key, key)) return static_cast<int>(i);  // else another flow with that signature: rare
  }
  return -1;
}

template <class K>
FlowEntry* FlowTable::steady(const K& key, uint8_t proto, uint64_t h, Side side, uint8_t tcp_flags, uint64_t now,
                             Dir* dir) noexcept {
  using namespace detail;
  if (proto == kProtoTcp && (tcp_flags & (kTcpSyn | kTcpFin | kTcpRst)) != 0) return nullptr;
  Bucket& b = buckets_[h & mask_];
  unsigned i = home_slot(h);
  // A flow at home (nearly every one in a table that is not crowded) is
  // found in its entry's line alone, which prefetch() loaded: the header
  // is read only for a flow elsewhere in the bucket. A free slot's entry has
  // state kNone, whatever key it last held.
  FlowEntry* const home = &entry(b, i);  // computed from the index: the header is not read
  if (home->slot.state == 0 || !key_equal(home->key, key)) {
    const int found = find_slot(b, key, h);
    if (found < 0) return nullptr;
    i = static_cast<unsigned>(found);
  }
  FlowEntry& e = entry(b, i);
  const SlotState cur = e.slot;
  const uint32_t t = units(now);
  // Checked and written once per stamp unit (up to 1 ms) of each flow: its
  // other packets in that unit find it alive and leave the header alone.
  if (cur.stamp != t) {
    if (age(cur.stamp, t) > timeout_[timeout_index(cur.state, cur.bits)]) return nullptr;  // expired: track() renews it
    touch(b, i, t);
  }
  const auto d = static_cast<Dir>(static_cast<uint8_t>(side) ^ (cur.bits & kInitB));
  if (d == Dir::kReverse && ((cur.bits & kReplied) == 0 || cur.state == static_cast<uint8_t>(FlowState::kTcpNew))) {
    const uint8_t s = cur.state == static_cast<uint8_t>(FlowState::kTcpNew)
                          ? static_cast<uint8_t>(FlowState::kTcpEstablished) : cur.state;
    assert((b.bits[i] & kPinned) == 0);  // no pins outside track_burst: set() would drop one
    set(b, i, t, s, static_cast<uint8_t>(cur.bits | kReplied));
  }
  *dir = d;
  return &e;
}

FlowEntry* FlowTable::track_steady(const FlowKey& key, uint64_t h, Side side, uint8_t tcp_flags, uint64_t now,
                                   Dir* dir) noexcept {
  return steady(key, key.proto, h, side, tcp_flags, now, dir);
}

FlowEntry* FlowTable::track_steady_v4(const FlowKeyV4& k, uint64_t h, Side side, uint8_t tcp_flags, uint64_t now,
                                      Dir* dir) noexcept {
  return steady(k, proto_of(k), h, side, tcp_flags, now, dir);
}

void FlowTable::count_hits(uint32_t n) noexcept {
  std::atomic<uint64_t>& hits = counters_[offsetof(FlowStats, hits) / sizeof(uint64_t)];
  hits.store(hits.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);  // single writer
}

}  // namespace cg::flow
