// IP fragment bookkeeping for the worker's defragmentation stage (issue 11,
// item 4; docs/dataplane.md, "IP fragments"). DPDK-free: the stage in
// app/dataplane/frag.cpp holds the original mbufs and lets DPDK's rte_ip_frag
// build the reassembled datagram; what is decided here is which frames are
// fragments, which fragments belong together, when a datagram is complete,
// and when it must be dropped instead (overlap, too many fragments, timeout,
// no room).
//
// Thread-safety: one Tracker per worker, used by that worker only. Its
// counters are plain fields read by the owner (the stage copies them into
// WorkerStats).
//
// Data-path contract: the constructor is the only allocation. add(),
// expire() and release() do not allocate, lock, make syscalls or throw, and
// do work bounded by kMaxFragments and the length of one hash chain.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace cg::defrag {

// Fragments one datagram may have: DPDK's RTE_LIBRTE_IP_FRAG_MAX_FRAG, a
// build-time constant that is 8 in Debian's DPDK 22.11 (frag.cpp asserts
// they agree). A datagram with more is dropped.
inline constexpr unsigned kMaxFragments = 8;

// Which datagram a fragment belongs to (RFC 791 / RFC 8200): family,
// addresses, identification, protocol, plus the outer VLAN id so that two
// zones never share a datagram.
struct DatagramKey {
  uint8_t family = 0;  // 4 or 6
  uint8_t proto = 0;   // IPv4 protocol; IPv6: the fragment header's next header
  uint16_t vlan = 0;
  uint32_t id = 0;     // IPv4: 16 bits; IPv6: 32 bits
  uint8_t src[16] = {}, dst[16] = {};  // IPv4 in the first 4 bytes
  bool operator==(const DatagramKey&) const = default;
};

// One fragment as the frame describes it: its bytes of the datagram's
// fragmentable part are [offset, offset + len).
struct Fragment {
  DatagramKey key;
  uint32_t offset = 0;
  uint32_t len = 0;
  bool more = false;    // more fragments follow (IPv4 MF, IPv6 M)
  uint16_t l2_len = 0;  // Ethernet, VLAN, MPLS, PPPoE headers before the IP header
  uint16_t l3_len = 0;  // IPv4 header with options; IPv6 fixed header + fragment header
};

enum class FrameKind : uint8_t {
  kWhole,        // not a fragment (an atomic fragment too): judged as it is
  kFragment,     // a fragment this stage reassembles (Fragment filled in)
  kUnsupported,  // a fragment it does not reassemble: inside a tunnel, or an
                 // IPv6 fragment header behind other extension headers
  kInvalid,      // a fragment no receiver would accept: cut, a zero or (with
                 // more to come) non-multiple-of-8 length, ending past 65535
};

// Cheap test for every received frame: false only when the frame is surely
// not a fragment and carries no tunnel that could hold one (plain or
// VLAN-tagged IPv4 without MF/offset, IPv6 whose next header is a transport,
// non-IP). Anything else goes to classify_frame().
namespace detail {
bool maybe_fragment_walk(const uint8_t* frame, std::size_t len) noexcept;
}  // namespace detail
inline bool maybe_fragment(const uint8_t* frame, std::size_t len) noexcept {
  // Untagged IPv4 TCP without MF or an offset (nearly every frame) answered
  // inline: the stage asks this of every frame it receives.
  if (len >= 14 + 20 && frame[12] == 0x08 && frame[13] == 0x00 && (frame[20] & 0x3f) == 0 &&
      frame[21] == 0 && frame[23] == 6)
    return false;
  return detail::maybe_fragment_walk(frame, len);
}

// The full decision (uses the classifier's header walk).
FrameKind classify_frame(const uint8_t* frame, std::size_t len, Fragment* out) noexcept;

struct TrackerConfig {
  uint32_t datagrams = 1024;     // datagrams being collected at once, 1 .. 2^20
  uint32_t fragments = 4096;     // original fragments held at once, 1 .. 2^23
  uint64_t timeout_ticks = 0;    // a datagram not complete this long after its
                                 // first fragment is dropped (caller's clock)
  uint64_t seed = 0;             // hash seed (random in the gateway)
};

enum class Add : uint8_t {
  kHeld,       // held; the datagram waits for more
  kComplete,   // held, and the datagram is now complete: take(slot), release(slot)
  kDuplicate,  // the exact bytes range of a fragment already held: drop this one
  kOverlap,    // overlaps held fragments or contradicts the datagram's end:
               // the datagram is dropped (its held fragments returned by take())
  kTooMany,    // more than kMaxFragments: the datagram is dropped likewise
  kDead,       // its datagram was dropped earlier and has not timed out: drop it
  kFull,       // no room (datagrams or fragments): this fragment is dropped
};

struct TrackerStats {
  uint64_t held = 0;        // fragments taken in
  uint64_t completed = 0;   // datagrams complete
  uint64_t overlap = 0;     // datagrams dropped for overlapping or inconsistent fragments
  uint64_t too_many = 0;    // datagrams dropped for having more than kMaxFragments
  uint64_t timeout = 0;     // datagrams dropped incomplete at their timeout
  uint64_t duplicate = 0;   // exact duplicate fragments dropped
  uint64_t full = 0;        // fragments dropped because the table was full
};

class Tracker {
 public:
  explicit Tracker(const TrackerConfig& c);
  ~Tracker();
  Tracker(const Tracker&) = delete;
  Tracker& operator=(const Tracker&) = delete;

  // Takes one fragment and the caller's handle for it (`ref`, never null).
  // *slot names the datagram for kComplete, kOverlap and kTooMany; the
  // caller then takes its held refs with take(*slot) (for kOverlap and
  // kTooMany including this one) and calls release(*slot). A dropped
  // datagram keeps its slot, holding nothing, until its timeout, so that its
  // later fragments are dropped too (kDead). On kDuplicate, kDead and kFull
  // the fragment was not taken: the caller drops it.
  Add add(const Fragment& f, void* ref, uint64_t now, uint32_t* slot) noexcept;

  // The held refs of a datagram in arrival order (valid until release()).
  std::span<void* const> take(uint32_t slot) const noexcept;
  // Byte ranges of those fragments, in the same order.
  uint32_t offset(uint32_t slot, unsigned i) const noexcept;
  // Done with a datagram's refs: a complete one's slot is freed; a dropped
  // one's slot stays as a tombstone until its timeout.
  void release(uint32_t slot) noexcept;

  // Datagrams whose timeout has passed at `now`, oldest first: calls
  // drop(ref) for each held fragment of each, frees their slots, and stops
  // before a datagram whose fragments would exceed `max_refs` in total.
  // Returns the number of refs handed to drop.
  template <class F>
  uint32_t expire(uint64_t now, uint32_t max_refs, F&& drop) noexcept {
    uint32_t n = 0;
    while (head_ != kNil && expired(head_, now)) {
      const std::span<void* const> r = take(head_);
      if (n + r.size() > max_refs) break;
      for (void* p : r) drop(p);
      n += static_cast<uint32_t>(r.size());
      timed_out(head_);
    }
    return n;
  }

  uint32_t datagrams() const noexcept { return used_; }  // slots in use (tombstones too)
  uint32_t fragments() const noexcept { return held_; }  // refs held
  const TrackerStats& stats() const noexcept { return stats_; }
  // Bytes the tracker allocated (for the documentation of memory per worker).
  std::size_t memory_bytes() const noexcept;

 private:
  static constexpr uint32_t kNil = 0xffffffffu;
  struct Slot;
  bool expired(uint32_t s, uint64_t now) const noexcept;
  void timed_out(uint32_t s) noexcept;
  uint32_t bucket_of(const DatagramKey& k) const noexcept;
  uint32_t find(const DatagramKey& k, uint32_t b) const noexcept;
  void unlink(uint32_t s) noexcept;
  void kill(uint32_t s) noexcept;
  TrackerConfig cfg_;
  std::unique_ptr<Slot[]> slots_;
  std::unique_ptr<uint32_t[]> buckets_;  // chain heads
  uint32_t nbuckets_ = 0;
  uint32_t free_ = kNil;                 // free list through Slot::next
  uint32_t head_ = kNil, tail_ = kNil;   // slots in use, oldest first
  uint32_t used_ = 0, held_ = 0;
  TrackerStats stats_;
};

}  // namespace cg::defrag
