// The exact rule set used to confirm filter hits on the data path.
//
// Keyed by the 128-bit XXH3 hash of a key's canonical encoding (collision
// probability for n rules ~ n^2 / 2^129: for 10^7 rules below 10^-24), value =
// the rule's kind and its hit-counter slot (published with the key). The
// table is exact::KeyTable (cuckoogate/exact/key_table.hpp; it replaced
// rte_hash in issue 12, item 4): lookups never block and never write, a
// freed entry is reused at once (readers copy the value out and check it
// again, so no grace period is needed), and the memory is EAL's when EAL
// has hugepages, else huge-page-advised anonymous memory (as the filter's).
//
// Thread safety: contains() from any number of worker threads,
// concurrently with add()/del() from ONE writer thread (the control lcore).
#pragma once

#include <rte_rcu_qsbr.h>

#include <cstdint>
#include <memory>
#include <string>

#include "cuckoogate/exact/key_table.hpp"
#include "cuckoogate/keys/rule.hpp"

namespace cg {

class ExactSet {
 public:
  // A hit-counter slot is stored in 29 bits beside the kind's 3.
  static constexpr uint32_t kMaxSlots = uint32_t{1} << 29;
  // capacity: rules the set must hold. qsv: unused (the table needs no grace
  // period; kept for the callers). nullptr + *err on failure.
  static std::unique_ptr<ExactSet> create(const std::string& name, uint32_t capacity,
                                          rte_rcu_qsbr* qsv, int socket, std::string* err);
  ~ExactSet();
  ExactSet(const ExactSet&) = delete;
  ExactSet& operator=(const ExactSet&) = delete;

  // Data path. True (and *kind, *slot set) if the key is in the set.
  bool contains(const Key128& k, RuleKind* kind, uint32_t* slot) const noexcept {
    uint32_t v;
    if (!table_->find(k, &v)) return false;
    *kind = static_cast<RuleKind>(v & kKindMask);
    *slot = v >> kKindBits;
    return true;
  }
  // A bulk add's hint: both candidate buckets of each of up to kPrefetchMax
  // keys about to be added are prefetched, so that add() finds them cached.
  // Changes nothing.
  static constexpr uint32_t kPrefetchMax = 64;
  void prefetch(const Key128* const* keys, uint32_t n) const noexcept;
  // Writer side. add: 0 on success (also when present: the value is
  // replaced), -ENOSPC when full, -ERANGE for a slot >= kMaxSlots.
  int add(const Key128& k, RuleKind kind, uint32_t slot) noexcept;
  // The hit-counter slot of a present key, or -1.
  int64_t slot_of(const Key128& k) const noexcept;
  // del: true if the key was present.
  bool del(const Key128& k) noexcept;
  uint32_t capacity() const noexcept { return capacity_; }
  std::size_t size() const noexcept { return table_->size(); }  // keys present (writer side)
  std::size_t memory_bytes() const noexcept { return table_->memory_bytes(); }

 private:
  static constexpr unsigned kKindBits = 3;  // RuleKind 1..7: a value is never 0
  static constexpr uint32_t kKindMask = (1u << kKindBits) - 1;
  static_assert(kRuleKindCount <= kKindMask, "a rule kind fits the value's kind bits");
  ExactSet() = default;
  void* mem_ = nullptr;  // the table's buckets
  std::size_t bytes_ = 0;
  bool eal_ = false;     // mem_ from rte_zmalloc_socket, else mem::map_pages
  std::unique_ptr<exact::KeyTable> table_;
  uint32_t capacity_ = 0;
};

}  // namespace cg
