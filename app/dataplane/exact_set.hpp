// The exact rule set used to confirm filter hits on the data path.
//
// Keyed by the 128-bit XXH3 hash of a key's canonical encoding (collision
// probability for n rules ~ n^2 / 2^129: for 10^7 rules below 10^-24), value =
// the rule's kind and its hit-counter slot (published with the key). Built on DPDK rte_hash in lock-free reader mode
// (RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF): lookups never block and never
// write; freed key slots are recycled only after every worker has reported a
// quiescent state on the shared rte_rcu_qsbr variable.
//
// Thread safety: contains() from any number of registered worker threads,
// concurrently with add()/del() from ONE writer thread (the control lcore).
#pragma once

#include <rte_hash.h>
#include <rte_rcu_qsbr.h>

#include <cstdint>
#include <memory>
#include <string>

#include "cuckoogate/keys/rule.hpp"

namespace cg {

class ExactSet {
 public:
  // capacity: rules the set must hold. qsv: the workers' QSBR variable (may be
  // null when no reader runs concurrently, e.g. in tools). nullptr + *err on failure.
  static std::unique_ptr<ExactSet> create(const std::string& name, uint32_t capacity,
                                          rte_rcu_qsbr* qsv, int socket, std::string* err);
  ~ExactSet();
  ExactSet(const ExactSet&) = delete;
  ExactSet& operator=(const ExactSet&) = delete;

  // Data path. True (and *kind, *slot set) if the key is in the set.
  bool contains(const Key128& k, RuleKind* kind, uint32_t* slot) const noexcept {
    void* data = nullptr;
    const int rc = rte_hash_lookup_with_hash_data(h_, &k, sig(k), &data);
    if (rc < 0) return false;
    const auto v = reinterpret_cast<uintptr_t>(data);
    *kind = static_cast<RuleKind>(v & 0xff);
    *slot = static_cast<uint32_t>(v >> 8);
    return true;
  }
  // A bulk add's hint: one bulk lookup of up to kPrefetchMax keys about to be
  // added, which loads both candidate buckets of each (rte_hash prefetches
  // them together) so that add() finds them cached. Changes nothing.
  static constexpr uint32_t kPrefetchMax = RTE_HASH_LOOKUP_BULK_MAX;
  void prefetch(const Key128* const* keys, uint32_t n) const noexcept;
  // Writer side. add: 0 on success (also when present), -ENOSPC when full.
  int add(const Key128& k, RuleKind kind, uint32_t slot) noexcept;
  // The hit-counter slot of a present key, or -1.
  int64_t slot_of(const Key128& k) const noexcept;
  // del: true if the key was present.
  bool del(const Key128& k) noexcept;
  uint32_t capacity() const noexcept { return capacity_; }
  // Keys present, by walking the table (writer side, O(capacity)):
  // rte_hash_count also counts deleted keys whose slots await reclamation.
  std::size_t size() const noexcept;
  std::size_t memory_bytes() const noexcept;

 private:
  ExactSet() = default;
  static hash_sig_t sig(const Key128& k) noexcept { return static_cast<hash_sig_t>(k.lo); }
  rte_hash* h_ = nullptr;
  uint32_t capacity_ = 0;
};

}  // namespace cg
