#include "dataplane/frag.hpp"

#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_ip_frag.h>
#include <rte_log.h>
#include <rte_malloc.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "cuckoogate/keys/arrival.hpp"

namespace cg {

static_assert(defrag::kMaxFragments == RTE_LIBRTE_IP_FRAG_MAX_FRAG,
              "the tracker's per-datagram limit must be rte_ip_frag's");
static_assert(FragStage::kListCap >= 2 * FragStage::kMaxFrames * defrag::kMaxFragments + 256,
              "room for one burst's drops and settled frames after expire()");

namespace {
// rte_ip_frag's table only ever holds the datagram being fed (all of its
// fragments are fed in a row once the tracker saw it complete), so a small
// one suffices; the bound on datagrams in flight is the tracker's.
constexpr uint32_t kTblBuckets = 16, kTblEntries = 4;
// Expired originals handed to the drop list per call, leaving room for a
// burst's own drops and settled frames.
constexpr uint32_t kExpireReserve = 2 * FragStage::kMaxFrames * defrag::kMaxFragments;
}  // namespace

FragStage* FragStage::create(const FragConfig& c, int socket, uint64_t tsc_hz, WorkerStats* stats) {
  std::unique_ptr<FragStage> f(new FragStage());
  f->st_ = stats;
  f->timeout_ticks_ = tsc_hz / 1000 * c.timeout_ms;
  defrag::TrackerConfig tc;
  tc.datagrams = c.datagrams;
  tc.fragments = c.fragments;
  tc.timeout_ticks = f->timeout_ticks_;
  tc.seed = rte_rdtsc() * 0x9e3779b97f4a7c15ULL;  // chains not predictable from outside
  f->tracker_ = std::make_unique<defrag::Tracker>(tc);
  static std::atomic<unsigned> pools{0};  // unique names: several engines in one process (tests)
  const std::string id = std::to_string(pools.fetch_add(1, std::memory_order_relaxed));
  // Heads: one per frame a burst can complete (+1: mempool sizes of 2^n - 1).
  f->head_pool_ = rte_pktmbuf_pool_create(("cg_fh_" + id).c_str(), kMaxFrames + 1, 0, 0,
                                          static_cast<uint16_t>(RTE_PKTMBUF_HEADROOM + kMaxReassembledFrame),
                                          socket);
  // The other fragments' copies: up to 7 per frame, several mbufs for a jumbo one.
  f->frag_pool_ = rte_pktmbuf_pool_create(("cg_ff_" + id).c_str(), 1023, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, socket);
  // rte_ip_frag_table_create logs its allocation at INFO under the generic
  // USER1 type ("USER1: rte_ip_frag_table_create: allocated of ... bytes"),
  // on stderr at every start of every worker: not news to anyone running
  // the gateway. Held back unless USER1 is at DEBUG (--log-level=user1:debug).
  const int user1 = rte_log_get_level(RTE_LOGTYPE_USER1);
  if (user1 == RTE_LOG_INFO) rte_log_set_level(RTE_LOGTYPE_USER1, RTE_LOG_NOTICE);
  f->tbl_ = rte_ip_frag_table_create(kTblBuckets, kTblEntries, kTblBuckets * kTblEntries,
                                     f->timeout_ticks_ + 1, socket);
  if (user1 == RTE_LOG_INFO) rte_log_set_level(RTE_LOGTYPE_USER1, RTE_LOG_INFO);
  f->dr_ = static_cast<rte_ip_frag_death_row*>(
      rte_zmalloc_socket("cg_frag_dr", sizeof(rte_ip_frag_death_row), RTE_CACHE_LINE_SIZE, socket));
  if (f->head_pool_ == nullptr || f->frag_pool_ == nullptr || f->tbl_ == nullptr || f->dr_ == nullptr)
    return nullptr;  // the destructor frees what was made
  return f.release();
}

FragStage::~FragStage() {
  // Whatever is still held (the workers stopped mid-datagram) goes back to its pool.
  if (tracker_) tracker_->expire(UINT64_MAX, UINT32_MAX, [](void* p) { rte_pktmbuf_free(static_cast<rte_mbuf*>(p)); });
  for (uint16_t j = 0; j < nframes_; ++j) rte_pktmbuf_free(frames_[j].m);
  rte_pktmbuf_free_bulk(pass_, npass_);
  rte_pktmbuf_free_bulk(drop_, ndrop_);
  if (dr_ != nullptr) rte_ip_frag_free_death_row(dr_, 0);
  rte_free(dr_);
  if (tbl_ != nullptr) rte_ip_frag_table_destroy(tbl_);
  rte_mempool_free(head_pool_);
  rte_mempool_free(frag_pool_);
}

uint16_t FragStage::expire(uint64_t now) {
  const uint32_t free_slots = uint32_t{kListCap} - ndrop_;
  const uint32_t room = free_slots > kExpireReserve ? free_slots - kExpireReserve : 0;
  const uint64_t before = tracker_->stats().timeout;
  const uint32_t n = tracker_->expire(now, room, [this](void* p) { to_drop(static_cast<rte_mbuf*>(p)); });
  if (const uint64_t t = tracker_->stats().timeout - before) bump(st_->frags_timeout, t);
  return static_cast<uint16_t>(n);
}

// Every held original of a dropped datagram to the drop list (the caller
// drops the fragment that caused it).
void FragStage::drop_held(uint32_t slot) {
  for (void* p : tracker_->take(slot)) to_drop(static_cast<rte_mbuf*>(p));
  tracker_->release(slot);
}

bool FragStage::take(rte_mbuf* m, const uint8_t* frame, uint32_t len, uint64_t now) {
  defrag::Fragment f;
  const defrag::FrameKind k =
      defrag::maybe_fragment(frame, len) ? defrag::classify_frame(frame, len, &f) : defrag::FrameKind::kWhole;
  if (k == defrag::FrameKind::kWhole) return false;
  if (k != defrag::FrameKind::kFragment) {  // never judged on a partial transport header
    bump(st_->frags_unsupported);
    to_drop(m);
    return true;
  }
  uint32_t slot = 0;
  const defrag::Add a = tracker_->add(f, m, now, &slot);
  switch (a) {
    case defrag::Add::kHeld:
      bump(st_->frags_held);
      break;
    case defrag::Add::kComplete:
      bump(st_->frags_held);
      complete(slot, now);
      break;
    case defrag::Add::kOverlap:
    case defrag::Add::kTooMany:  // the whole datagram goes
      bump(a == defrag::Add::kOverlap ? st_->frags_overlap : st_->frags_too_many);
      drop_held(slot);
      to_drop(m);
      break;
    case defrag::Add::kDuplicate:
      bump(st_->frags_duplicate);
      to_drop(m);
      break;
    case defrag::Add::kDead:  // its datagram was dropped: so is the rest of it
      bump(st_->frags_dead);
      to_drop(m);
      break;
    case defrag::Add::kFull:
      bump(st_->frags_table_full);
      to_drop(m);
      break;
  }
  return true;
}

// A complete datagram: copies of its fragments through rte_ip_frag, the
// result linearised into the head copy's big buffer. Any failure (no mbuf,
// a frame above kMaxReassembledFrame, rte_ip_frag refusing the set) drops
// the originals, counted: never judged in pieces.
void FragStage::complete(uint32_t slot, uint64_t now) {
  const std::span<void* const> refs = tracker_->take(slot);
  Frame& fr = frames_[nframes_];
  fr.n = 0;
  // Copies first, so that a missing mbuf leaves nothing half-fed in the table.
  rte_mbuf* copy[defrag::kMaxFragments] = {};
  defrag::Fragment info[defrag::kMaxFragments];
  bool ok = true;
  bool bad_header = false;  // a fragment its receiver drops: the datagram never completes there
  // How its fragments arrived (docs/reassembly.md, "Copies that arrive
  // otherwise"): the rebuilt header keeps the first fragment's TTL and
  // Ethernet destination, so a fragment whose TTL runs out behind the
  // gateway, or sent to another next hop, would leave no trace in what is
  // judged. The judged frame gets the smallest TTL, and another destination
  // when they differ: a datagram the server may never complete then does
  // not arrive as the client's other segments do.
  uint8_t min_ttl = 255;
  bool other_mac = false;
  const uint8_t* const mac0 = rte_pktmbuf_mtod(static_cast<const rte_mbuf*>(refs[0]), const uint8_t*);
  for (std::size_t i = 0; i < refs.size(); ++i) {
    rte_mbuf* orig = static_cast<rte_mbuf*>(refs[i]);
    fr.orig[fr.n++] = orig;
    const bool head = tracker_->offset(slot, static_cast<unsigned>(i)) == 0;
    copy[i] = ok ? rte_pktmbuf_copy(orig, head ? head_pool_ : frag_pool_, 0, UINT32_MAX) : nullptr;
    ok = ok && copy[i] != nullptr;
    defrag::classify_frame(rte_pktmbuf_mtod(orig, const uint8_t*), rte_pktmbuf_data_len(orig), &info[i]);
    // (The tracker took it: its Ethernet and fixed IP headers are there.)
    const uint8_t* const f = rte_pktmbuf_mtod(orig, const uint8_t*);
    min_ttl = std::min(min_ttl, f[info[i].l2_len + ip_ttl_offset(info[i].key.family)]);
    other_mac = other_mac || std::memcmp(f, mac0, RTE_ETHER_ADDR_LEN) != 0;
    if (info[i].key.family == 4 && rte_pktmbuf_data_len(orig) >= info[i].l2_len + sizeof(rte_ipv4_hdr)) {
      const auto* ip = rte_pktmbuf_mtod_offset(orig, const rte_ipv4_hdr*, info[i].l2_len);
      bad_header = bad_header || (rte_pktmbuf_data_len(orig) >= info[i].l2_len + rte_ipv4_hdr_len(ip) &&
                                  rte_ipv4_cksum(ip) != 0);
    }
  }
  tracker_->release(slot);
  rte_mbuf* out = nullptr;
  for (std::size_t i = 0; ok && i < fr.n; ++i) {
    rte_mbuf* c = copy[i];
    copy[i] = nullptr;
    c->l2_len = info[i].l2_len;
    c->l3_len = info[i].l3_len;
    if (info[i].key.family == 4) {
      auto* ip = rte_pktmbuf_mtod_offset(c, rte_ipv4_hdr*, info[i].l2_len);
      out = rte_ipv4_frag_reassemble_packet(tbl_, dr_, c, now, ip);
    } else {
      auto* ip = rte_pktmbuf_mtod_offset(c, rte_ipv6_hdr*, info[i].l2_len);
      out = rte_ipv6_frag_reassemble_packet(tbl_, dr_, c, now, ip, reinterpret_cast<rte_ipv6_fragment_ext*>(ip + 1));
    }
    // Complete before its last fragment would not be the set the tracker
    // saw (it cannot happen: the tracker admits no overlap).
    if (out != nullptr && i + 1 != fr.n) ok = false;
  }
  for (rte_mbuf* c : copy) rte_pktmbuf_free(c);  // not fed (NULL is fine)
  // A frame above kMaxReassembledFrame cannot be made contiguous.
  if (ok && out != nullptr && rte_pktmbuf_linearize(out) != 0) ok = false;
  if (ok && out != nullptr) {
    uint8_t* const f = rte_pktmbuf_mtod(out, uint8_t*);
    f[out->l2_len + ip_ttl_offset(info[0].key.family)] = min_ttl;
    // No frame the server takes is sent to 00:00:00:00:00:00, so no real
    // copy is delivered as this one.
    if (other_mac) std::memset(f, 0, RTE_ETHER_ADDR_LEN);
  }
  if (ok && out != nullptr && info[0].key.family == 4) {
    // rte_ip_frag leaves the rewritten header's checksum 0 (for tx offload);
    // the judged frame must be a packet an end host would accept (the
    // reject builder checks it).
    auto* ip = rte_pktmbuf_mtod_offset(out, rte_ipv4_hdr*, out->l2_len);
    ip->hdr_checksum = 0;
    ip->hdr_checksum = rte_ipv4_cksum(ip);
  }
  // Copies rte_ip_frag let go of (only when it refused the set).
  if (dr_->cnt != 0) rte_ip_frag_free_death_row(dr_, 0);
  if (!ok || out == nullptr) {
    rte_pktmbuf_free(out);
    bump(st_->frags_failed);
    for (uint16_t k = 0; k < fr.n; ++k) to_drop(fr.orig[k]);
    return;
  }
  // The copy carries the first fragment's receive checksum flags, which say
  // nothing of the datagram: cleared, and "IP header bad" when a fragment's
  // was (the inspectors then do not read it: docs/reassembly.md, "Checksums").
  out->ol_flags &= ~(RTE_MBUF_F_RX_IP_CKSUM_MASK | RTE_MBUF_F_RX_L4_CKSUM_MASK);
  if (bad_header) out->ol_flags |= RTE_MBUF_F_RX_IP_CKSUM_BAD;
  fr.m = out;
  ++nframes_;
  bump(st_->frags_reassembled);
}

void FragStage::settle(uint16_t j, bool pass) {
  Frame& fr = frames_[j];
  for (uint16_t k = 0; k < fr.n; ++k) {
    if (pass) {
      pass_[npass_++] = fr.orig[k];
    } else {
      to_drop(fr.orig[k]);
    }
  }
  rte_pktmbuf_free(fr.m);
  fr.m = nullptr;
}

}  // namespace cg
