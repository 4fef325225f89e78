// CIDR prefix rules (src/dst/ip a.b.c.d/len, v6/len) on the data path.
//
// A prefix rule is stored like every other rule: its key encoding
// (encode_prefix_key: kind, family | 0x80, length, the network bytes) goes
// into the cuckoo filter and the exact set, with a hit-counter slot, so the
// Blocklist's bookkeeping (slots, hits, journal, listing) is the same for all
// rules. What workers look up is kept here, per kind (src, dst, ip):
//   * IPv4 /1-/31: one prefix::Dir24 (DIR-24-8, app/prefix) table per
//     kind, created on the kind's first such prefix, value = the rule's
//     hit-counter slot, its retired groups reclaimed through the workers'
//     QSBR variable. One lookup per address whatever the lengths in use;
//     adds and removes in O(1) plus the entries a prefix covers. (rte_lpm
//     was used before: its adds scan the rules of a length, so loads were
//     quadratic, and its tables could not grow; docs/PERFORMANCE.md.)
//   * IPv6 and IPv4 /0: the set of prefix LENGTHS in use per (kind, family);
//     the packet's address cut to each length in use is encoded, hashed and
//     looked up in the filter (in bulk), hits confirmed in the exact set.
//     rte_lpm6 has no RCU integration in DPDK 22.11 (its delete rebuilds the
//     tables in place) and takes 64 MiB+ per table; IPv6 feeds use few
//     lengths. Measured in docs/PERFORMANCE.md ("CIDR rules").
// Per packet: the smallest kind wins (as for exact keys); within a kind the
// first address key (the source's), and for one address the longest prefix.
//
// Thread safety: add()/remove() from ONE writer (the control lcore);
// lookup() from any number of workers concurrently, lock-free: Dir24's
// entries are single 32-bit atomic stores, the length words single 64-bit
// stores, and the filter/exact set are lock-free already. What add() changes
// is published to workers by the blocklist generation bump that follows it
// (release; workers read it with acquire before lookup()); a worker that
// sees a newer word early only finds the rule sooner. docs/concurrency.md,
// "Prefix rules", has the argument and the reclamation.
#pragma once

#include <rte_rcu_qsbr.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "cuckoogate/keys/classify.hpp"
#include "cuckoogate/prefix/dir24.hpp"
#include "dataplane/lookup.hpp"

namespace cg {

// One packet's prefix verdict: the smallest kind whose prefix rule matched
// (0: none), the address key it matched (index in the packet's keys), the
// prefix's length, and the rule's hit-counter slot.
struct PrefixHit {
  uint8_t kind = 0;
  uint8_t len = 0;
  uint16_t key = 0;
  uint32_t slot = 0;
};

class PrefixTables {
 public:
  struct Options {
    rte_rcu_qsbr* qsv = nullptr;  // the workers' QSBR variable (null: no concurrent readers)
    // Bytes the IPv4 tables' growing parts (groups for prefixes longer than
    // /24, the rule indexes) may take, all kinds together: the blocklist's
    // max_memory. 0: no limit.
    std::size_t max_bytes = 0;
  };
  // tables: the blocklist's current filter + exact set (Blocklist::tables();
  // replaced when it grows), probed for the lengths in use.
  PrefixTables(const std::atomic<const LookupTables*>* tables, Options o) noexcept
      : tables_(tables), opts_(std::move(o)) {
    budget_.max = opts_.max_bytes;
  }
  ~PrefixTables();
  PrefixTables(const PrefixTables&) = delete;
  PrefixTables& operator=(const PrefixTables&) = delete;

  // Control thread: a prefix rule (r.prefix_len set) whose key is already in
  // the filter and exact set with hit-counter slot `slot` becomes visible to
  // lookup(). false (nothing changed, last_error() says why): its IPv4 table
  // cannot be mapped or has reached max_bytes, or the slot is past Dir24's
  // 25-bit value.
  bool add(const Rule& r, uint32_t slot) noexcept;
  // The reverse, before the rule's key leaves the exact set.
  void remove(const Rule& r) noexcept;
  // Prefix rules present (control thread).
  std::size_t size() const noexcept { return total_; }
  const std::string& last_error() const noexcept { return error_; }
  // Bytes of the IPv4 tables (resident tbl24 pages, groups, rule indexes);
  // any thread.
  std::size_t memory_bytes() const noexcept;

  // Data path (workers). For i < n with classify[i]: out[i] gets the
  // packet's prefix verdict from its src/dst/ip address keys (keys[i]);
  // out[i] of other packets is zeroed. verify=false: probe hits in the
  // filter are taken as matches (pure-filter mode), slot 0. Bounded work:
  // one LPM lookup per IPv4 address key of a kind with a table, plus
  // (address keys) x (lengths in use) probes; no allocation, no locks.
  // t: the tables the caller's burst loaded (a worker passes its own
  // snapshot, so exact and prefix keys are judged against the same pair);
  // nullptr: load the current ones.
  void lookup(const PacketKeys* keys, const bool* classify, uint16_t n, bool verify,
              PrefixHit* out, const LookupTables* t = nullptr) const noexcept;

  // Lengths in use: bit (len % 64) of word (len / 64); table = (kind, family).
  static constexpr unsigned kWords = 3;  // 129 lengths (IPv6 /0../128; /128 never used)
  static constexpr unsigned kTables = 6;  // {src, dst, ip} x {IPv4, IPv6}
  static int table_of(RuleKind kind, uint8_t family) noexcept;

 private:
  static bool in_dir24(const Rule& r) noexcept { return r.addr.family == 4 && *r.prefix_len != 0; }
  void count(const Rule& r, int delta) noexcept;  // the probed lengths
  void drop_if_empty(std::size_t k) noexcept;  // frees kind k's IPv4 table if it holds nothing
  void lookup_v4(const PacketKeys* keys, const bool* classify, uint16_t n, PrefixHit* out) const noexcept;
  const std::atomic<const LookupTables*>* tables_;
  Options opts_;
  // One max_bytes for the three kinds' tables (declared before them: it
  // outlives them).
  prefix::Budget budget_;
  // Per kind (src, dst, ip): its IPv4 table, created by the control thread
  // on the kind's first IPv4 /1-/31 prefix and freed when its last one is
  // removed, or with this object (owned by v4_own_, published to workers
  // through v4_).
  std::array<std::unique_ptr<prefix::Dir24>, 3> v4_own_;
  std::array<std::atomic<const prefix::Dir24*>, 3> v4_{};
  mutable std::mutex memory_mu_;  // a table's free (control) against memory_bytes() (any thread)
  std::string error_;
  // Written by the control thread only; read by workers (see above).
  std::array<std::array<std::atomic<uint64_t>, kWords>, kTables> used_{};
  // Control thread only: rules per table and length.
  std::array<std::array<uint32_t, 129>, kTables> count_{};
  std::size_t total_ = 0;
};

}  // namespace cg
