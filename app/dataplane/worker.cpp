#include "dataplane/worker.hpp"

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_pause.h>
#include <rte_prefetch.h>

#include "cuckoogate/keys/classify.hpp"

namespace cg {

inline constexpr std::size_t kMaxBurstKeys = std::size_t{kBurst} * kMaxKeysPerPacket;

struct WorkerScratch {
  PacketKeys keys[kBurst];
  uint64_t hashes[kMaxBurstKeys];
  uint16_t owner[kMaxBurstKeys];  // packet index of each key
  uint16_t slot[kMaxBurstKeys];   // key index within its packet
  uint64_t hit_mask[(kMaxBurstKeys + 63) / 64];
};

// What a frame may add to the MTU: the Ethernet header and two VLAN tags
// (QinQ). The CRC is not in the mbuf.
inline constexpr uint32_t kL2Overhead = 14 + 2 * 4;

bool Worker::prepare(const WorkerConfig& cfg, int socket) {
  cfg_ = cfg;
  max_frame_.clear();
  for (const QueueLink& l : cfg.links) {
    uint16_t mtu = 1500;
    if (rte_eth_dev_get_mtu(l.rx_port, &mtu) != 0) mtu = 1500;
    max_frame_.push_back(uint32_t{mtu} + kL2Overhead);
  }
  s_ = static_cast<WorkerScratch*>(
      rte_zmalloc_socket("cg_worker_scratch", sizeof(WorkerScratch), RTE_CACHE_LINE_SIZE, socket));
  return s_ != nullptr;
}

Worker::~Worker() { rte_free(s_); }

int Worker::main(void* arg) {
  static_cast<Worker*>(arg)->loop();
  return 0;
}

// Classifies, looks up and decides a burst. Fills pass[] (returned count)
// and drop[] (*ndrop). Every packet ends up in exactly one of them.
// *nbad and *nbig count the malformed and oversized frames of the burst.
uint16_t Worker::process(rte_mbuf** pkts, uint16_t n, uint32_t max_frame, rte_mbuf** pass,
                         rte_mbuf** drop, uint16_t* ndrop, uint16_t* nbad, uint16_t* nbig) {
  WorkerScratch& s = *s_;
  WorkerStats& st = *cfg_.stats;
  if (!cfg_.filtering) {  // the same pipeline without classification or lookup
    for (uint16_t i = 0; i < n; ++i) pass[i] = pkts[i];
    *ndrop = *nbad = *nbig = 0;
    return n;
  }
  // acquire: pairs with the control lcore's release when a kind gains its
  // first rule; keys of kinds without rules are not looked up.
  const uint32_t kinds = cfg_.kind_mask->load(std::memory_order_acquire);
  std::size_t nk = 0;
  for (uint16_t i = 0; i < n; ++i) {
    if (i + 1 < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], const void*));
    const rte_mbuf* m = pkts[i];
    // Keys come from the first segment; a frame split across segments is
    // classified on what the first segment holds (headers are always there).
    classify(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m), s.keys[i]);
    const PacketKeys& pk = s.keys[i];
    for (unsigned k = 0; k < pk.n; ++k) {
      if (((kinds >> static_cast<unsigned>(pk.key[k].kind)) & 1u) == 0) continue;
      s.hashes[nk] = pk.key[k].hash;
      s.owner[nk] = i;
      s.slot[nk] = static_cast<uint16_t>(k);
      ++nk;
    }
  }
  LookupStats ls;
  cfg_.filter->contains_bulk(s.hashes, nk, s.hit_mask, &ls);

  // Verdict per packet: the smallest confirmed rule kind, 0 = none.
  uint8_t verdict[kBurst] = {};
  uint64_t hits = 0, confirmed = 0;
  const ExactSet& exact = *cfg_.exact;
  for (std::size_t w = 0; w < (nk + 63) / 64; ++w) {
    uint64_t bits = s.hit_mask[w];
    while (bits != 0) {
      const std::size_t j = w * 64 + static_cast<std::size_t>(__builtin_ctzll(bits));
      bits &= bits - 1;
      ++hits;
      const PacketKeys& pk = s.keys[s.owner[j]];
      const PacketKey& key = pk.key[s.slot[j]];
      RuleKind kind = key.kind;
      if (cfg_.verify) {
        const Key128 k128 = key_hash128(pk.key_bytes(s.slot[j]), key.len);
        uint32_t rule = 0;
        if (!exact.contains(k128, &kind, &rule)) continue;  // a filter false positive: no drop
        bump(cfg_.rule_hits[rule]);  // single writer: this worker's own array
      }
      ++confirmed;
      uint8_t& v = verdict[s.owner[j]];
      const auto kv = static_cast<uint8_t>(kind);
      if (v == 0 || kv < v) v = kv;
    }
  }

  uint16_t np = 0, nd = 0;
  uint16_t malformed = 0, malformed_dropped = 0, oversized = 0;
  for (uint16_t i = 0; i < n; ++i) {
    const bool bad = s.keys[i].malformed;
    malformed += bad;
    // Longer than the MTU allows: GRO/LRO merged segments (on af_packet
    // ports also cut to the ring's frame size, hence malformed too).
    oversized += rte_pktmbuf_pkt_len(pkts[i]) > max_frame;
    if (verdict[i] != 0) {                       // matched a rule: drop
      bump(st.dropped_by_kind[verdict[i]]);
      drop[nd++] = pkts[i];
    } else if (bad && cfg_.drop_malformed) {     // malformed, policy drop
      ++malformed_dropped;
      drop[nd++] = pkts[i];
    } else {                                     // pass by default
      pass[np++] = pkts[i];
    }
  }
  bump(st.keys, nk);
  bump(st.filter_hits, hits);
  bump(st.confirmed_hits, confirmed);
  bump(st.fp_avoided, hits - confirmed);
  bump(st.lookup_retries, ls.retries);
  if (malformed) bump(st.malformed, malformed);
  if (malformed_dropped) bump(st.malformed_dropped, malformed_dropped);
  if (oversized) bump(st.oversized, oversized);
  *ndrop = nd;
  *nbad = malformed;
  *nbig = oversized;
  return np;
}

void Worker::loop() {
  rte_mbuf* pkts[kBurst];
  rte_mbuf* pass[kBurst];
  rte_mbuf* drop[kBurst];
  WorkerStats& st = *cfg_.stats;
  const uint64_t hz = rte_get_tsc_hz();
  const uint64_t start = rte_rdtsc();
  uint64_t received = 0;

  rte_rcu_qsbr_thread_register(cfg_.qsv, cfg_.id);
  rte_rcu_qsbr_thread_online(cfg_.qsv, cfg_.id);
  // acquire: pairs with the control lcore's release store of `stop`.
  while (!cfg_.stop->load(std::memory_order_acquire)) {
    for (std::size_t li = 0; li < cfg_.links.size(); ++li) {
      const QueueLink& q = cfg_.links[li];
      uint16_t want = kBurst;
      if (cfg_.pps != 0) {  // replay pacing: stay at or below pps on average
        // 128-bit product: cycles * pps overflows 64 bits after minutes.
        const auto allowed = static_cast<uint64_t>(
            static_cast<unsigned __int128>(rte_rdtsc() - start) * cfg_.pps / hz);
        const uint64_t budget = allowed > received ? allowed - received : 0;
        if (budget == 0) {
          rte_pause();
          continue;
        }
        want = budget < kBurst ? static_cast<uint16_t>(budget) : kBurst;
      }
      const uint16_t n = rte_eth_rx_burst(q.rx_port, q.rx_queue, pkts, want);
      if (n == 0) continue;
      received += n;
      uint16_t nd = 0, nbad = 0, nbig = 0;
      const uint16_t np = process(pkts, n, max_frame_[li], pass, drop, &nd, &nbad, &nbig);
      if ((nbad | nbig) != 0 && cfg_.link_stats != nullptr) {  // rare: warned about per port
        LinkStats& lk = cfg_.link_stats[li];
        if (nbad) bump(lk.malformed, nbad);
        if (nbig) bump(lk.oversized, nbig);
      }

      uint16_t sent = np ? rte_eth_tx_burst(q.tx_port, q.tx_queue, pass, np) : 0;
      for (int retry = 0; sent < np && retry < 3; ++retry)
        sent += rte_eth_tx_burst(q.tx_port, q.tx_queue, pass + sent, np - sent);
      if (sent < np) {  // the device is full: free and count, never silently
        bump(st.tx_failed, np - sent);
        rte_pktmbuf_free_bulk(pass + sent, np - sent);
      }
      if (nd != 0) {
        uint16_t dsent = 0;
        if (cfg_.drop_port >= 0) {
          const auto dp = static_cast<uint16_t>(cfg_.drop_port);
          dsent = rte_eth_tx_burst(dp, cfg_.drop_queue, drop, nd);
          for (int retry = 0; dsent < nd && retry < 3; ++retry)
            dsent += rte_eth_tx_burst(dp, cfg_.drop_queue, drop + dsent, nd - dsent);
        }
        if (dsent < nd) rte_pktmbuf_free_bulk(drop + dsent, nd - dsent);
      }
      bump(st.passed, sent);
      bump(st.dropped, nd);
      bump(st.bursts);
      // rx last: "rx == packets in" means every packet has been handed to
      // tx (replay uses it to know when the input is fully processed).
      // release: orders the tx calls and counters above before it.
      st.rx.store(st.rx.load(std::memory_order_relaxed) + n, std::memory_order_release);
    }
    // Nothing this worker read from the blocklist is held past this point.
    rte_rcu_qsbr_quiescent(cfg_.qsv, cfg_.id);
  }
  rte_rcu_qsbr_thread_offline(cfg_.qsv, cfg_.id);
  rte_rcu_qsbr_thread_unregister(cfg_.qsv, cfg_.id);
}

}  // namespace cg
