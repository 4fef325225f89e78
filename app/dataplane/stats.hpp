// Per-worker counters: one cache-aligned block per worker lcore, written only
// by that worker and read by the control lcore.
//
// The worker updates a counter with a relaxed load + relaxed store (no
// read-modify-write, so no locked instruction on the data path); that is
// correct because each block has exactly one writer. Readers see each counter
// as an atomic 64-bit value that is monotonically non-decreasing, and do not
// need cross-counter consistency.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "cuckoogate/keys/rule.hpp"

namespace cg {

inline void bump(std::atomic<uint64_t>& c, uint64_t d = 1) noexcept {
  c.store(c.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
}

struct alignas(64) WorkerStats {
  std::atomic<uint64_t> rx{0};             // packets received and fully handled
  std::atomic<uint64_t> passed{0};         // forwarded to the paired port
  std::atomic<uint64_t> dropped{0};        // matched a rule, or malformed with policy drop
  std::array<std::atomic<uint64_t>, kRuleKindCount + 1> dropped_by_kind{};  // index = RuleKind
  std::atomic<uint64_t> malformed{0};      // malformed packets (whatever their verdict)
  std::atomic<uint64_t> malformed_dropped{0};
  std::atomic<uint64_t> oversized{0};      // frames longer than the rx port's MTU allows (whatever their verdict)
  std::atomic<uint64_t> keys{0};           // keys looked up
  std::atomic<uint64_t> filter_hits{0};    // keys the filter reported as maybe present
  std::atomic<uint64_t> confirmed_hits{0}; // hits the exact set confirmed
  std::atomic<uint64_t> fp_avoided{0};     // hits the exact set rejected (filter false positives)
  std::atomic<uint64_t> tx_failed{0};      // passed packets the device would not take (freed, counted, not in passed)
  std::atomic<uint64_t> lookup_retries{0}; // filter lookups that re-read a bucket
  std::atomic<uint64_t> bursts{0};         // non-empty rx bursts
  // Flows (a worker with a flow table).
  std::atomic<uint64_t> cache_hits{0};     // packets decided by their flow's cached verdict
  std::atomic<uint64_t> cache_misses{0};   // packets of a tracked flow that were classified
  std::atomic<uint64_t> flow_drops{0};     // of the dropped: by a flow that a rule blocked earlier
  std::atomic<uint64_t> untracked{0};      // packets judged alone (no ports, fragments, no free slot)
  std::atomic<uint64_t> names_forgotten{0};  // kept names a later one replaced (the latest-name slot,
                                             // Worker::remember_name; a segment's, note_names)
  std::atomic<uint64_t> rejects_sent{0};   // reject replies handed to a port
  std::atomic<uint64_t> rejects_limited{0};  // blocked packets the rate limit left unanswered
  std::atomic<uint64_t> rejects_failed{0}; // replies lost: no mbuf, or the port would not take it
  // IP fragments (docs/dataplane.md, "IP fragments"): datagrams or fragments, as each says.
  std::atomic<uint64_t> frags_held{0};        // fragments taken in and held
  std::atomic<uint64_t> frags_reassembled{0}; // datagrams reassembled and judged whole
  std::atomic<uint64_t> frags_timeout{0};     // datagrams dropped incomplete at their timeout
  std::atomic<uint64_t> frags_overlap{0};     // datagrams dropped: overlapping or inconsistent fragments
  std::atomic<uint64_t> frags_too_many{0};    // datagrams dropped: more than 8 fragments
  std::atomic<uint64_t> frags_failed{0};      // datagrams dropped: no mbuf, too big, rte_ip_frag refused
  std::atomic<uint64_t> frags_duplicate{0};   // fragments dropped: the same bytes held already
  std::atomic<uint64_t> frags_dead{0};        // fragments dropped: their datagram was dropped before
  std::atomic<uint64_t> frags_table_full{0};  // fragments dropped: no room for them
  std::atomic<uint64_t> frags_unsupported{0}; // fragments dropped: in a tunnel, IPv6 extension headers
                                              // before the fragment header, invalid lengths
  // TCP first-flight reassembly (docs/reassembly.md).
  std::atomic<uint64_t> reasm_started{0};   // first flights that needed more than one segment
  std::atomic<uint64_t> reasm_completed{0}; // of which were completed and judged whole
  std::atomic<uint64_t> inspect_overflow{0};  // flows whose reassembly gave up (budget, pool, conflict)
  std::atomic<uint64_t> inspect_dropped{0};   // packets dropped by inspection: conflicts, inspect_overflow = "drop"
  std::atomic<uint64_t> reasm_conflicts{0};   // flows whose held bytes a segment rewrote (client data dropped)
  std::atomic<uint64_t> reasm_bad_checksum{0};  // segments/datagrams not read: a bad checksum (the receiver drops them)
  std::atomic<uint64_t> reasm_not_taken{0};     // client segments not read: no receiver takes their payload
                                                // (no ACK, or SYN or RST set; a QUIC Initial under 1200 bytes)
  std::atomic<uint64_t> reasm_fast_open_cut{0}; // SYNs whose data (TCP Fast Open) leaves a message unfinished
                                                // (no stream could read its rest) or holds a second: dropped
  std::atomic<uint64_t> reasm_refused{0};       // flows whose HTTP/2 header block decodes for no server
                                                // (client data dropped)
  std::atomic<uint64_t> quic_initials{0};     // client datagrams whose QUIC Initials were decrypted
  std::atomic<uint64_t> quic_completed{0};    // QUIC ClientHellos reassembled whole and judged
  std::atomic<uint64_t> quic_failed{0};       // QUIC long-header datagrams that could not be opened
  std::atomic<uint64_t> quic_blocked{0};      // QUIC flows dropped by quic = "block"
};

// Per rx queue a worker polls (one per QueueLink, in the same order): the bad
// frames each port delivers, so the control lcore can name the port when it
// warns (Engine::check_frame_health). Same single-writer rule as above; one
// array per worker, cache-aligned, so workers never share a line.
struct LinkStats {
  std::atomic<uint64_t> malformed{0};
  std::atomic<uint64_t> oversized{0};
};

// A plain snapshot, summed over workers by the control side.
struct StatsSnapshot {
  uint64_t rx = 0, passed = 0, dropped = 0, malformed = 0, malformed_dropped = 0, oversized = 0;
  std::array<uint64_t, kRuleKindCount + 1> dropped_by_kind{};
  uint64_t keys = 0, filter_hits = 0, confirmed_hits = 0, fp_avoided = 0, tx_failed = 0,
           lookup_retries = 0, bursts = 0;
  uint64_t cache_hits = 0, cache_misses = 0, flow_drops = 0, untracked = 0, rejects_sent = 0,
           rejects_limited = 0, rejects_failed = 0;
  uint64_t frags_held = 0, frags_reassembled = 0, frags_timeout = 0, frags_overlap = 0, frags_too_many = 0,
           frags_failed = 0, frags_duplicate = 0, frags_dead = 0, frags_table_full = 0, frags_unsupported = 0;
  uint64_t reasm_started = 0, reasm_completed = 0, inspect_overflow = 0, inspect_dropped = 0,
           reasm_conflicts = 0, reasm_bad_checksum = 0, reasm_not_taken = 0, reasm_fast_open_cut = 0, reasm_refused = 0, quic_initials = 0, quic_completed = 0, quic_failed = 0, quic_blocked = 0;
  // Flow tables (filled by the engine from each worker's table, not by add()).
  uint64_t flows_active = 0, flows_created = 0, flows_evicted = 0, flows_expired = 0,
           flows_syn_deferred = 0, flows_reopened_in_burst = 0;
  uint64_t names_forgotten = 0;

  void add(const WorkerStats& w) noexcept {
    auto ld = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    rx += ld(w.rx);
    passed += ld(w.passed);
    dropped += ld(w.dropped);
    malformed += ld(w.malformed);
    malformed_dropped += ld(w.malformed_dropped);
    oversized += ld(w.oversized);
    for (std::size_t k = 0; k < dropped_by_kind.size(); ++k) dropped_by_kind[k] += ld(w.dropped_by_kind[k]);
    keys += ld(w.keys);
    filter_hits += ld(w.filter_hits);
    confirmed_hits += ld(w.confirmed_hits);
    fp_avoided += ld(w.fp_avoided);
    tx_failed += ld(w.tx_failed);
    lookup_retries += ld(w.lookup_retries);
    bursts += ld(w.bursts);
    cache_hits += ld(w.cache_hits);
    cache_misses += ld(w.cache_misses);
    flow_drops += ld(w.flow_drops);
    untracked += ld(w.untracked);
    names_forgotten += ld(w.names_forgotten);
    rejects_sent += ld(w.rejects_sent);
    rejects_limited += ld(w.rejects_limited);
    rejects_failed += ld(w.rejects_failed);
    frags_held += ld(w.frags_held);
    frags_reassembled += ld(w.frags_reassembled);
    frags_timeout += ld(w.frags_timeout);
    frags_overlap += ld(w.frags_overlap);
    frags_too_many += ld(w.frags_too_many);
    frags_failed += ld(w.frags_failed);
    frags_duplicate += ld(w.frags_duplicate);
    frags_dead += ld(w.frags_dead);
    frags_table_full += ld(w.frags_table_full);
    frags_unsupported += ld(w.frags_unsupported);
    reasm_started += ld(w.reasm_started);
    reasm_completed += ld(w.reasm_completed);
    inspect_overflow += ld(w.inspect_overflow);
    inspect_dropped += ld(w.inspect_dropped);
    reasm_conflicts += ld(w.reasm_conflicts);
    reasm_bad_checksum += ld(w.reasm_bad_checksum);
    reasm_not_taken += ld(w.reasm_not_taken);
    reasm_fast_open_cut += ld(w.reasm_fast_open_cut);
    reasm_refused += ld(w.reasm_refused);
    quic_initials += ld(w.quic_initials);
    quic_completed += ld(w.quic_completed);
    quic_failed += ld(w.quic_failed);
    quic_blocked += ld(w.quic_blocked);
  }
};

}  // namespace cg
