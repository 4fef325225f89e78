#include "control/blocklist.hpp"

#include <rte_malloc.h>

namespace cg {
namespace {

struct RteAlloc {
  static void* alloc(void* ctx, std::size_t bytes, std::size_t align) {
    const int socket = static_cast<int>(reinterpret_cast<intptr_t>(ctx));
    return rte_zmalloc_socket("cg_filter", bytes, static_cast<unsigned>(align), socket);
  }
  static void release(void*, void* p) { rte_free(p); }
};

}  // namespace

std::unique_ptr<Blocklist> Blocklist::create(const Options& o, std::string* err) {
  std::unique_ptr<Blocklist> b(new Blocklist());
  b->capacity_ = o.capacity;
  FilterAllocator a{&RteAlloc::alloc, &RteAlloc::release,
                    reinterpret_cast<void*>(static_cast<intptr_t>(o.socket))};
  // Cuckoo filters with 4-slot buckets reach ~95% load; size for 90%.
  b->filter_ = GatewayFilter::create(o.capacity + o.capacity / 9 + 64, a);
  if (!b->filter_) {
    *err = "cannot allocate the cuckoo filter for " + std::to_string(o.capacity) +
           " rules (raise EAL memory with -m)";
    return nullptr;
  }
  b->exact_ = ExactSet::create(o.name + "_exact", static_cast<uint32_t>(o.capacity), o.qsv,
                               o.socket, err);
  if (!b->exact_) return nullptr;
  return b;
}

void Blocklist::count_kind(RuleKind k, int delta) {
  std::size_t& n = per_kind_[static_cast<std::size_t>(k)];
  n = delta > 0 ? n + 1 : n - 1;
  const uint32_t bit = 1u << static_cast<unsigned>(k);
  const uint32_t m = kind_mask_.load(std::memory_order_relaxed);
  const uint32_t want = n != 0 ? (m | bit) : (m & ~bit);
  // release: pairs with the workers' acquire load at the start of a burst;
  // a set bit is published before the filter insert that follows it.
  if (want != m) kind_mask_.store(want, std::memory_order_release);
}

Blocklist::AddStatus Blocklist::add_entry(Entry e, const std::string& order_key) {
  if (index_.size() >= capacity_) return AddStatus::kFull;
  count_kind(e.rule.kind, +1);
  // Filter first: a worker that sees the fingerprint but not yet the exact
  // key simply does not drop (the rule is not acknowledged yet either).
  if (filter_->insert(e.hash) != InsertResult::kOk) {
    count_kind(e.rule.kind, -1);
    return AddStatus::kFull;
  }
  if (exact_->add(e.key, e.rule.kind) != 0) {
    filter_->erase(e.hash);  // undo: the filter is exactly as before
    count_kind(e.rule.kind, -1);
    return AddStatus::kFull;
  }
  index_.emplace(order_key, std::move(e));
  return AddStatus::kAdded;
}

void Blocklist::remove_entry(const Entry& e) {
  // Exact set first, so no worker confirms a hit for a rule whose
  // fingerprint is already gone (harmless either way: both say "not blocked").
  exact_->del(e.key);
  filter_->erase(e.hash);
  count_kind(e.rule.kind, -1);
}

Blocklist::AddStatus Blocklist::add(const Rule& r) {
  std::string order = rule_order_key(r);
  if (index_.count(order) != 0) return AddStatus::kExists;
  const std::string key = rule_key(r);
  Entry e{r, key_hash(key.data(), key.size()), key_hash128(key.data(), key.size())};
  return add_entry(std::move(e), order);
}

bool Blocklist::del(const Rule& r) {
  auto it = index_.find(rule_order_key(r));
  if (it == index_.end()) return false;
  remove_entry(it->second);
  index_.erase(it);
  return true;
}

bool Blocklist::contains(const Rule& r) const { return index_.count(rule_order_key(r)) != 0; }

std::size_t Blocklist::flush() {
  const std::size_t n = index_.size();
  for (const auto& [k, e] : index_) remove_entry(e);
  index_.clear();
  return n;
}

Blocklist::BatchResult Blocklist::add_batch(const std::vector<Rule>& rules) {
  BatchResult res;
  std::vector<std::string> added;
  added.reserve(rules.size());
  for (const Rule& r : rules) {
    std::string order = rule_order_key(r);
    if (index_.count(order) != 0) {
      ++res.existed;
      continue;
    }
    const std::string key = rule_key(r);
    Entry e{r, key_hash(key.data(), key.size()), key_hash128(key.data(), key.size())};
    if (add_entry(std::move(e), order) != AddStatus::kAdded) {
      for (const std::string& k : added) {  // roll the batch back
        auto it = index_.find(k);
        remove_entry(it->second);
        index_.erase(it);
      }
      return BatchResult{0, 0, true};
    }
    added.push_back(std::move(order));
  }
  res.added = added.size();
  return res;
}

void Blocklist::for_each(std::optional<RuleKind> kind, std::string_view prefix,
                         const std::function<void(const Rule&)>& f) const {
  auto it = index_.begin();
  if (kind) it = index_.lower_bound(std::string(1, static_cast<char>(*kind)));
  for (; it != index_.end(); ++it) {
    const Rule& r = it->second.rule;
    if (kind && r.kind != *kind) break;
    if (!prefix.empty()) {
      const std::string text = format_rule(r);
      const std::string_view arg = std::string_view(text).substr(kind_name(r.kind).size() + 1);
      if (arg.substr(0, prefix.size()) != prefix) continue;
    }
    f(r);
  }
}

}  // namespace cg
