// CIDR prefix rules (src/dst/ip a.b.c.d/len, v6/len) on the data path.
//
// A prefix rule is stored like every other rule: its key encoding
// (encode_prefix_key: kind, family | 0x80, length, the network bytes) goes
// into the cuckoo filter and the exact set, with a hit-counter slot. What
// this file adds is the set of prefix LENGTHS in use per (kind, family) and
// the probe: for each src/dst/ip address key of a classified packet and each
// length in use for its kind and family, the packet's address cut to that
// length is encoded, hashed and looked up in the filter (in bulk), and hits
// are confirmed against the exact set. Longest confirmed length per kind
// wins; smallest kind wins across kinds (as for exact keys). Why probing and
// not rte_lpm/rte_lpm6: docs/PERFORMANCE.md ("CIDR rules") and
// docs/concurrency.md ("Prefix rules").
//
// Thread safety: add()/remove() from ONE writer (the control lcore);
// lookup() from any number of workers concurrently. The writer publishes a
// length's bit (release) BEFORE inserting the first rule of that length and
// before the blocklist generation bump that follows; workers read the
// generation (acquire) before calling lookup(), so a burst that sees a
// rule's generation probes its length. Reclamation is the exact set's
// (rte_hash key slots freed after a QSBR grace period); the masks here are
// never freed while workers run (they live in the Blocklist).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "cuckoogate/keys/classify.hpp"
#include "dataplane/lookup.hpp"

namespace cg {

// One packet's prefix verdict: the smallest kind whose prefix rule matched
// (0: none), that kind's longest matching length, and the rule's slot.
struct PrefixHit {
  uint8_t kind = 0;
  uint8_t len = 0;
  uint32_t slot = 0;
};

class PrefixTables {
 public:
  PrefixTables(const GatewayFilter* filter, const ExactSet* exact) noexcept : filter_(filter), exact_(exact) {}
  PrefixTables(const PrefixTables&) = delete;
  PrefixTables& operator=(const PrefixTables&) = delete;

  // Control thread: one more / one fewer rule of this kind (src, dst or ip),
  // family (4 or 6) and length (< 32 or < 128). add() before the rule enters
  // the filter; remove() after it left.
  void add(RuleKind kind, uint8_t family, unsigned len) noexcept;
  void remove(RuleKind kind, uint8_t family, unsigned len) noexcept;
  // Prefix rules present (control thread).
  std::size_t size() const noexcept { return total_; }

  // Data path (workers). For i < n with classify[i]: out[i] gets the
  // packet's prefix verdict from its src/dst/ip address keys (keys[i]);
  // out[i] of other packets is zeroed. verify=false: filter hits are taken
  // as matches (pure-filter mode), slot 0. Bounded work: at most
  // (address keys) x (lengths in use) probes; no allocation, no locks.
  void lookup(const PacketKeys* keys, const bool* classify, uint16_t n, bool verify,
              PrefixHit* out) const noexcept;

  // Lengths in use: bit (len % 64) of word (len / 64); table = (kind, family).
  static constexpr unsigned kWords = 3;  // 129 lengths (IPv6 /0../128; /128 never used)
  static constexpr unsigned kTables = 6;  // {src, dst, ip} x {IPv4, IPv6}
  static int table_of(RuleKind kind, uint8_t family) noexcept;

 private:
  const GatewayFilter* filter_;
  const ExactSet* exact_;
  // Written by the control thread only; read by workers (see above).
  std::array<std::array<std::atomic<uint64_t>, kWords>, kTables> used_{};
  // Control thread only: rules per table and length.
  std::array<std::array<uint32_t, 129>, kTables> count_{};
  std::size_t total_ = 0;
};

}  // namespace cg
