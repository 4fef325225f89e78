// The blocklist as the control lcore sees it: the lock-free cuckoo filter
// (what the workers look up), the exact set (what confirms a filter hit) and
// an ordered index of the rules themselves (what `list` and `check` read).
//
// Thread safety: every member function is for the ONE control thread. Worker
// lcores only use filter() and exact(), whose lookups are safe concurrently
// with the control thread's updates.
//
// Invariant kept by every operation: a rule is in the index iff its key is in
// the exact set iff exactly one copy of its fingerprint was inserted into the
// filter for it. So a delete only ever erases a fingerprint this rule put
// there, and a filter false negative cannot be created by a delete.
#pragma once

#include <rte_rcu_qsbr.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cuckoogate/keys/rule.hpp"
#include "dataplane/lookup.hpp"

namespace cg {

class Blocklist {
 public:
  struct Options {
    std::size_t capacity = 1u << 20;  // rules; the filter gets >= capacity / 0.9 slots
    int socket = 0;                   // NUMA socket for filter and exact-set memory
    rte_rcu_qsbr* qsv = nullptr;      // the workers' QSBR variable
    std::string name = "cg";          // prefix for DPDK object names
  };
  static std::unique_ptr<Blocklist> create(const Options& o, std::string* err);

  enum class AddStatus { kAdded, kExists, kFull };
  AddStatus add(const Rule& r);
  bool del(const Rule& r);  // false: the rule was not in the blocklist (nothing touched)
  bool contains(const Rule& r) const;
  std::size_t size() const noexcept { return index_.size(); }
  std::size_t flush();      // removes every rule; returns how many

  // All or nothing: either every rule not already present is added, or (the
  // filter or the exact set is full) none is and `full` is set.
  struct BatchResult { std::size_t added = 0, existed = 0; bool full = false; };
  BatchResult add_batch(const std::vector<Rule>& rules);

  // Rules in listing order (kind, then rule_order_key), optionally one kind
  // and only those whose canonical text after the kind starts with `prefix`.
  void for_each(std::optional<RuleKind> kind, std::string_view prefix,
                const std::function<void(const Rule&)>& f) const;

  const GatewayFilter& filter() const noexcept { return *filter_; }
  // Bit k set iff at least one rule of kind k is present. Workers skip the
  // keys of absent kinds; the bit is set (release) before a rule's first
  // fingerprint is inserted, so it is visible to any burst that starts after
  // the rule is acknowledged.
  const std::atomic<uint32_t>& kind_mask() const noexcept { return kind_mask_; }
  const ExactSet& exact() const noexcept { return *exact_; }
  std::size_t capacity() const noexcept { return capacity_; }

 private:
  struct Entry { Rule rule; uint64_t hash; Key128 key; };
  Blocklist() = default;
  AddStatus add_entry(Entry e, const std::string& order_key);
  void remove_entry(const Entry& e);

  std::unique_ptr<GatewayFilter> filter_;
  std::unique_ptr<ExactSet> exact_;
  std::map<std::string, Entry> index_;  // rule_order_key -> entry
  void count_kind(RuleKind k, int delta);

  std::size_t capacity_ = 0;
  std::array<std::size_t, kRuleKindCount + 1> per_kind_{};
  std::atomic<uint32_t> kind_mask_{0};
};

}  // namespace cg
