// The worker's IP defragmentation stage (issue 11, item 4; docs/dataplane.md,
// "IP fragments"). One per worker, used by that worker's lcore only.
//
// While a burst is parsed, take() takes every IPv4/IPv6 fragment out of it
// and holds the ORIGINAL mbufs (bounded: defrag::Tracker decides which
// fragments belong together, when a datagram is complete, and when it is
// dropped: overlap, more than 8 fragments, timeout, no room). When a
// datagram is complete its fragments are copied into this worker's own
// mbufs, DPDK's rte_ip_frag reassembles the copies, and the result is made
// one contiguous frame (Ethernet + IP without fragmentation + transport +
// payload): that frame is what the worker judges, once; settle() applies its
// verdict to every held original, which leave unchanged, in arrival order.
//
// Data-path contract: create() allocates (mempools, the rte_ip_frag table,
// the tracker); nothing else does, nor locks, nor makes syscalls.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <memory>

#include "cuckoogate/defrag/defrag.hpp"
#include "dataplane/stats.hpp"

struct rte_ip_frag_tbl;
struct rte_ip_frag_death_row;

namespace cg {

struct FragConfig {
  bool enabled = true;           // false: fragments are judged one by one (no reassembly)
  uint32_t datagrams = 1024;     // datagrams collected at once per worker
  uint32_t fragments = 4096;     // original fragments held at once per worker
  uint32_t timeout_ms = 5000;    // an incomplete datagram is dropped this long after its first fragment
};

// Largest reassembled frame (L2 header included): one mbuf with the largest
// buffer an mbuf can describe (16-bit buf_len, minus the headroom). A larger
// datagram is dropped and counted (frags.failed).
inline constexpr uint32_t kMaxReassembledFrame = 65535 - RTE_PKTMBUF_HEADROOM;

class FragStage {
 public:
  // Frames a burst can complete, and originals per frame.
  static constexpr uint16_t kMaxFrames = 32;
  static constexpr uint16_t kListCap = 1024;

  // nullptr when memory is short (EAL -m too small).
  static FragStage* create(const FragConfig& c, int socket, uint64_t tsc_hz, WorkerStats* stats);
  ~FragStage();
  FragStage(const FragStage&) = delete;
  FragStage& operator=(const FragStage&) = delete;

  // Takes packet m (its first segment: frame, len) if it is an IP fragment
  // and returns true: the fragment is then held, in the drop list, or (its
  // datagram complete) behind a reassembled frame. false: a whole packet,
  // the caller's to judge. A burst calls expire() first, then this for
  // every packet that may be a fragment (a frame parse_plain_ipv4 takes is
  // none: no MF, no offset).
  bool take(rte_mbuf* m, const uint8_t* frame, uint32_t len, uint64_t now);
  // Timed-out datagrams' originals to the drop list; returns how many.
  uint16_t expire(uint64_t now);

  uint16_t frames() const noexcept { return nframes_; }
  rte_mbuf* frame(uint16_t j) const noexcept { return frames_[j].m; }
  uint16_t originals(uint16_t j) const noexcept { return frames_[j].n; }
  // The verdict for frame j: its originals join the pass or the drop list,
  // and the frame (this stage's copy) is freed.
  void settle(uint16_t j, bool pass);

  rte_mbuf** pass_list() noexcept { return pass_; }
  uint16_t pass_count() const noexcept { return npass_; }
  rte_mbuf** drop_list() noexcept { return drop_; }
  uint16_t drop_count() const noexcept { return ndrop_; }
  // After the lists were sent or freed (and every frame settled).
  void clear() noexcept { npass_ = ndrop_ = nframes_ = 0; }

  // Fragments held now (for tests and stats).
  uint32_t held() const noexcept { return tracker_->fragments(); }

 private:
  FragStage() = default;
  void complete(uint32_t slot, uint64_t now);
  void drop_held(uint32_t slot);
  void to_drop(rte_mbuf* m) noexcept { drop_[ndrop_++] = m; }

  struct Frame {
    rte_mbuf* m = nullptr;
    uint16_t n = 0;
    rte_mbuf* orig[defrag::kMaxFragments] = {};
  };
  WorkerStats* st_ = nullptr;
  uint64_t timeout_ticks_ = 0;
  std::unique_ptr<defrag::Tracker> tracker_;
  rte_mempool* head_pool_ = nullptr;  // one buffer of kMaxReassembledFrame per frame
  rte_mempool* frag_pool_ = nullptr;  // copies of the other fragments
  rte_ip_frag_tbl* tbl_ = nullptr;
  rte_ip_frag_death_row* dr_ = nullptr;
  Frame frames_[kMaxFrames];
  uint16_t nframes_ = 0;
  rte_mbuf* pass_[kListCap];
  rte_mbuf* drop_[kListCap];
  uint16_t npass_ = 0, ndrop_ = 0;
};

}  // namespace cg
