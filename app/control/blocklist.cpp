#include "control/blocklist.hpp"

#include <fcntl.h>
#include <rte_eal.h>
#include <rte_malloc.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <unordered_map>
#include <unordered_set>

#include "cuckoogate/mem/huge_pages.hpp"
#include "gateway/log.hpp"
#include "cuckoogate/store/key_order.hpp"

namespace cg {
namespace {

// Journal compaction threshold: records since the last snapshot.
constexpr uint64_t kSnapshotEvery = 1u << 20;

// The store names the default set "" (what records before sets mean).
std::string_view store_set_name(std::string_view set) { return set == "default" ? std::string_view{} : set; }
std::string_view shown_set_name(std::string_view set) { return set.empty() ? std::string_view("default") : set; }

// Growth: the filter is sized for 90% load (4-slot buckets reach ~95%).
std::size_t filter_slots_for(std::size_t rules) { return rules + rules / 9 + 64; }
// A lower bound of lookup-table bytes per rule (filter ~2, the exact set's
// entries 64/3 when full, ~27 at its 80 % sizing): max_memory / this is the
// most rules the tables can ever hold (and at most ExactSet::kMaxSlots),
// so the slot arrays are reserved for that many.
constexpr std::size_t kMinTableBytesPerRule = 26;

// Name rules (url, host) stored under the key of an older canonical form
// (url rules before ea0d011): {stored key, key of the canonical form now}.
// The address kinds need no look: their keys are binary, and
// rule_from_order_key refuses every form but the canonical one. A stored
// rule that no longer parses stays as it is (noted).
std::vector<std::pair<std::string, std::string>> stale_name_keys(const store::RuleStore& st,
                                                                 std::vector<std::string>* notes) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const RuleKind kind : {RuleKind::kUrl, RuleKind::kHost}) {
    for (auto c = st.list_prefix(std::string(1, static_cast<char>(kind))); c.next();) {
      const std::optional<Rule> r = rule_from_order_key(c.key());
      if (!r) continue;  // the restore refuses it
      const std::string text = format_rule(*r);
      const RuleParse p = parse_rule(text);
      if (!p.rule) {
        notes->push_back("rule '" + text + "' stored by an older version does not parse now (" +
                         p.error.message() + "): kept as it is");
      } else if (*p.rule != *r) {
        out.emplace_back(std::string(c.key()), rule_order_key(*p.rule));
      }
    }
  }
  return out;
}

// Rules inserted into the lookup tables by the current request and not yet
// in the store: growth copies them too (Blocklist::grow_tables).
class PendingScope {
 public:
  explicit PendingScope(std::vector<const Rule*>& p) : p_(p) { p_.clear(); }
  ~PendingScope() { p_.clear(); }
  PendingScope(const PendingScope&) = delete;
  PendingScope& operator=(const PendingScope&) = delete;

 private:
  std::vector<const Rule*>& p_;
};

// Many rules' order keys in one buffer (no string per rule), and the rules'
// positions sorted once by key, ties by position: equal keys become
// neighbours in input order, and the store gets its keys in order.
class SortedKeys {
 public:
  template <class RuleAt>
  SortedKeys(std::size_t n, RuleAt rule_at) : at_(n + 1) {
    for (std::size_t i = 0; i < n; ++i) {
      at_[i] = keys_.size();
      append_rule_order_key(rule_at(i), &keys_);
    }
    at_[n] = keys_.size();
    sort(n);
  }
  // The keys of a batch that outlives this (not copied).
  explicit SortedKeys(const Blocklist::KeyBatch& b) : batch_(&b) { sort(b.size()); }
  std::string_view key(std::size_t i) const {
    return batch_ != nullptr ? batch_->key(i) : std::string_view(keys_).substr(at_[i], at_[i + 1] - at_[i]);
  }
  const store::KeyOrder& order() const noexcept { return *order_; }  // positions in key order

 private:
  // Compares 8 key bytes at a time held beside the position, never the keys
  // themselves (store/key_order.hpp): host and url keys share their first 8
  // bytes, and a memcmp per comparison was ~6 % of a load.
  void sort(std::size_t n) { order_.emplace(n, [this](std::size_t i) { return key(i); }); }
  const Blocklist::KeyBatch* batch_ = nullptr;  // else keys_ and at_
  std::string keys_;
  std::vector<std::size_t> at_;  // key i is keys_[at_[i], at_[i + 1])
  std::optional<store::KeyOrder> order_;
};

// The store's requests of a KeyBatch load, in key order, as batch positions,
// and the new rules among them (their request indices). Neither list is
// written while it is the identity — request q the q-th key in order, new
// rule j request j: a load of distinct rules into a blocklist that holds
// none of them, the usual case, where the lists took 8 bytes a rule written
// to fresh pages — and each is listed from its first exception on.
class BatchRequests {
 public:
  BatchRequests(const Blocklist::KeyBatch& b, const store::KeyOrder& o) : batch_(&b), order_(&o) {}
  // The j-th key in order (batch position pos) is the next request; fresh:
  // a new rule (else a present rule whose lifetime the store replaces).
  void add(std::size_t j, uint32_t pos, bool fresh) {
    if (pos_follow_ && j != n_) {  // a key in order was no request: list them
      pos_follow_ = false;
      pos_.reserve(order_->size() - (j - n_));
      for (std::size_t q = 0; q < n_; ++q) pos_.push_back((*order_)[q]);
    }
    if (!pos_follow_) pos_.push_back(pos);
    if (fresh) {
      if (!fresh_follow_) fresh_.push_back(static_cast<uint32_t>(n_));
      ++n_fresh_;
    } else if (fresh_follow_) {  // every request before this one was new
      fresh_follow_ = false;
      for (std::size_t q = 0; q < n_; ++q) fresh_.push_back(static_cast<uint32_t>(q));
    }
    ++n_;
  }
  std::size_t size() const noexcept { return n_; }
  std::size_t fresh_count() const noexcept { return n_fresh_; }
  std::size_t fresh(std::size_t j) const noexcept { return fresh_follow_ ? j : fresh_[j]; }  // j < fresh_count()
  std::string_view key(std::size_t q) const {  // q < size()
    return batch_->key(pos_follow_ ? (*order_)[q] : pos_[q]);
  }
  std::string_view fresh_key(std::size_t j) const { return key(fresh(j)); }
  static std::string_view fresh_key_of(const void* self, std::size_t j) {
    return static_cast<const BatchRequests*>(self)->fresh_key(j);
  }

 private:
  const Blocklist::KeyBatch* batch_;
  const store::KeyOrder* order_;
  std::vector<uint32_t> pos_;    // batch positions, when !pos_follow_
  std::vector<uint32_t> fresh_;  // request indices of the new rules, when !fresh_follow_
  std::size_t n_ = 0, n_fresh_ = 0;
  bool pos_follow_ = true, fresh_follow_ = true;
};

}  // namespace

// The filter's table: NUMA-local EAL memory when EAL has hugepages; with
// --no-huge, huge-page-advised anonymous memory instead (EAL's is 4 KiB
// pages, a TLB miss per bucket read; see cuckoogate/mem/huge_pages.hpp).
void* Blocklist::filter_alloc(void* ctx, std::size_t bytes, std::size_t align) {
  auto& fm = *static_cast<FilterMemory*>(ctx);
  if (fm.eal) return rte_zmalloc_socket("cg_filter", bytes, static_cast<unsigned>(align), fm.socket);
  fm.bytes = bytes;  // one table per filter
  return align <= 4096 ? mem::map_pages(bytes) : nullptr;
}

void Blocklist::filter_release(void* ctx, void* p) {
  auto& fm = *static_cast<FilterMemory*>(ctx);
  if (fm.eal) {
    rte_free(p);
  } else {
    mem::unmap_pages(p, fm.bytes);
  }
}

std::unique_ptr<Blocklist> Blocklist::create(const Options& o, std::string* err,
                                             std::vector<std::string>* notes) {
  std::unique_ptr<Blocklist> b(new Blocklist());
  b->capacity_ = b->initial_capacity_ = o.capacity;
  b->socket_ = o.socket;
  b->qsv_ = o.qsv;
  b->name_ = o.name;
  b->max_memory_ = o.max_memory != 0 ? o.max_memory : kDefaultMaxMemory;
  b->kind_keyed_addresses_ = o.kind_keyed_addresses;
  b->snapshot_every_ = o.snapshot_every != 0 ? o.snapshot_every : kSnapshotEvery;
  b->max_slots_ = std::min<std::size_t>(std::max(o.capacity, b->max_memory_ / kMinTableBytesPerRule),
                                        ExactSet::kMaxSlots);
  if (!b->grow_tables(o.capacity, /*copy=*/false)) {
    *err = b->last_error_;
    return nullptr;
  }
  PrefixTables::Options po;
  po.qsv = o.qsv;
  // An IPv4 prefix table (created on its kind's first /1-/31) grows its
  // groups and rule index up to max_memory, as the filter and exact set do.
  po.max_bytes = b->max_memory_;
  b->prefixes_ = std::make_unique<PrefixTables>(&b->tables_, po);
  b->removed_at_ = reserve_slot_array(b->max_slots_);
  b->base_ = reserve_slot_array(b->max_slots_);
  b->actions_ = reserve_slot_array<uint8_t>(b->max_slots_);
  if (b->removed_at_ == nullptr || b->base_ == nullptr || b->actions_ == nullptr) {
    *err = "cannot reserve the rule slot generations for " + std::to_string(b->max_slots_) +
           " rules (lower gateway.max_memory)";
    return nullptr;
  }

  if (!o.state_dir.empty()) {
    // One gateway per state directory: two writers would interleave journals.
    // Its parents as create_directories makes them, the directory itself
    // owner-only from the start (the store tightens an existing one), and a
    // failure to make it is the error, not the lock file's ENOENT after it.
    std::error_code ec;
    const std::filesystem::path dir(o.state_dir);
    if (dir.has_parent_path()) std::filesystem::create_directories(dir.parent_path(), ec);
    if (::mkdir(o.state_dir.c_str(), 0700) != 0 && errno != EEXIST) {
      *err = "cannot create the state directory '" + o.state_dir + "': " + std::strerror(errno);
      return nullptr;
    }
    const std::string lock = o.state_dir + "/lock";
    b->lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (b->lock_fd_ < 0) {
      *err = "cannot open " + lock + ": " + std::strerror(errno);
      return nullptr;
    }
    if (::flock(b->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      *err = "state directory '" + o.state_dir + "' is in use by another gateway";
      return nullptr;
    }
  }
  store::RuleStore::Options so;
  so.state_dir = o.state_dir;
  so.salvage = o.salvage;
  so.clock = o.clock;
  store::RecoveryReport report;
  const store::Status st = store::RuleStore::open(so, &b->store_, &report);
  if (!st.ok()) {
    *err = "rule state in '" + o.state_dir + "': " + st.to_string() +
           (st.code() == store::Errc::corrupt ? " (start with --salvage to keep the valid part)" : "");
    return nullptr;
  }
  if (notes != nullptr) *notes = report.notes;
  b->snapshot_records_ = report.snapshot_records;  // replayed at the next restart with the journal
  if (report.salvaged) {
    // What was kept is the state now: a snapshot of it replaces a damaged
    // one (and supersedes journals set aside), so the next start reads a
    // whole state directory instead of needing --salvage again, which
    // would also salvage any new damage without a word.
    if (const store::Status ss = b->store_->snapshot(); !ss.ok()) {
      *err = "rule state in '" + o.state_dir + "': salvaged, but no snapshot of it could be written: " +
             ss.to_string();
      return nullptr;
    }
    b->snapshot_records_ = b->store_->size();
    if (notes != nullptr) notes->push_back("wrote a snapshot of the salvaged state");
  }
  // Rules stored in an older canonical form move to the key of their form
  // now, in one transaction, before the lookup structures are filled: looked
  // up in the old form they would never match (canonicalised) traffic, nor
  // `del` of their text (docs/store.md, "Keys and texts").
  std::vector<std::string> name_notes;
  const std::vector<std::pair<std::string, std::string>> stale = stale_name_keys(*b->store_, &name_notes);
  if (!stale.empty()) {
    std::vector<store::RuleStore::Move> moves;
    moves.reserve(stale.size());
    for (const auto& [from, to] : stale) moves.push_back({from, to, {}});  // no text: the key is the rule
    std::vector<store::Errc> res;
    if (const store::Status ms = b->store_->move(moves, &res); !ms.ok()) {
      *err = "rule state in '" + o.state_dir + "': cannot move rules to their canonical form: " + ms.to_string();
      return nullptr;
    }
    const auto merged = std::count(res.begin(), res.end(), store::Errc::exists);
    const auto moved = std::count(res.begin(), res.end(), store::Errc::ok) + merged;
    name_notes.push_back("moved " + std::to_string(moved) +
                         " rule(s) stored in an older canonical form to their canonical form (" +
                         std::to_string(merged) + " of them present in both forms: merged)");
    if (static_cast<std::size_t>(moved) != stale.size())  // a record too large: kept where it is
      name_notes.push_back(std::to_string(stale.size() - static_cast<std::size_t>(moved)) +
                           " rule(s) in an older canonical form could not be moved: kept as stored");
  }
  if (notes != nullptr) notes->insert(notes->end(), name_notes.begin(), name_notes.end());
  // Restore: every acknowledged rule back into the lookup structures, sized
  // for them first (nothing is in them yet, so nothing to copy).
  std::size_t need = b->capacity_;
  while (need < b->store_->size()) need *= 2;
  if (need != b->capacity_ && !b->grow_tables(need, /*copy=*/false)) {
    *err = "rule state in '" + o.state_dir + "': " + b->last_error_;
    return nullptr;
  }
  b->restoring_ = true;
  // In groups, as add_batch: each rule's keys first and its buckets
  // prefetched, then the inserts find them cached (one at a time, each
  // insert waited for its own misses in tables of hundreds of MB).
  constexpr std::size_t kGroup = 32;
  static_assert(kGroup <= ExactSet::kPrefetchMax);
  std::array<Rule, kGroup> rules;
  std::array<Keys, kGroup> keys;
  std::array<const Key128*, kGroup> key128;
  std::array<RuleAction, kGroup> actions;
  auto c = b->store_->list();
  for (bool more = c.next(); more;) {
    std::size_t m = 0;
    for (; m < kGroup && more; ++m, more = c.next()) {
      // The rule is its order key (rule_from_order_key); a text stored with
      // it by an older version is the same rule and is not read.
      std::optional<Rule> r = rule_from_order_key(c.key());
      if (!r) {
        *err = "rule state in '" + o.state_dir + "' holds a rule key that is no rule (" +
               std::to_string(c.key().size()) + " bytes, kind " + std::to_string(static_cast<uint8_t>(c.key()[0])) + ")";
        return nullptr;
      }
      rules[m] = std::move(*r);
      // A byte this version has no action for (a later version's) is the default.
      const uint8_t a = c.value().action;
      actions[m] = a <= static_cast<uint8_t>(RuleAction::kReject) ? static_cast<RuleAction>(a) : RuleAction::kDefault;
      keys[m] = b->keys_of(rules[m]);
      key128[m] = &keys[m].key;
      b->filter_->prefetch_insert(keys[m].hash);
    }
    b->exact_->prefetch(key128.data(), static_cast<uint32_t>(m));
    for (std::size_t t = 0; t < m; ++t) {
      const Rule& r = rules[t];
      if (!b->insert_keys(keys[t], r.kind, r.prefix_len ? &r : nullptr, actions[t])) {
        *err = "rule state in '" + o.state_dir + "': cannot restore '" + format_rule(r) + "': " + b->last_error_;
        return nullptr;
      }
    }
  }
  b->restoring_ = false;
  return b;
}

Blocklist::~Blocklist() {
  store_.reset();  // closes the journal before the lock is released
  if (lock_fd_ >= 0) ::close(lock_fd_);
  release_slot_array(removed_at_, max_slots_);
  release_slot_array(base_, max_slots_);
  release_slot_array(actions_, max_slots_);
}

void Blocklist::bump_generation(bool added) noexcept {
  // release: a worker whose acquire load sees the new generation also sees
  // the filter, exact-set, kind-mask and removed_at stores made before it.
  // One writer (the control thread), so a plain load + store suffices.
  generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  if (added)
    pass_generation_.store(pass_generation_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

void Blocklist::release_slot(uint32_t slot) {
  free_slots_.push_back(slot);
  releases_.store(releases_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // one writer
  // release, and before the generation bump that follows: a worker that sees
  // the new generation sees that this slot's rule is gone.
  removed_at_[slot].store(generation_.load(std::memory_order_relaxed), std::memory_order_release);
}

Blocklist::Keys Blocklist::keys_of(const Rule& r) const { return keys_of_key(rule_key(r)); }

Blocklist::Keys Blocklist::keys_of_key(std::string_view key) const {
  uint64_t h = key_hash(key.data(), key.size());
  if (kind_keyed_addresses_ && is_shared_address_key(key.data(), key.size()))
    h = kind_keyed_hash(h, static_cast<RuleKind>(key[0]));
  return {h, key_hash128(key.data(), key.size())};
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

uint32_t Blocklist::take_slot(RuleAction action) {
  uint32_t s;
  const bool reused = !free_slots_.empty();
  if (reused) {
    s = free_slots_.back();
    free_slots_.pop_back();
  } else {
    s = next_slot_.load(std::memory_order_relaxed);  // one writer
    next_slot_.store(s + 1, std::memory_order_relaxed);
  }
  // The counters keep what the slot's earlier rules were counted (and a burst
  // that confirmed a hit just before their delete): hits() subtracts it. A
  // slot never used before is neither read nor written: its counters are 0
  // (no worker counts in a slot no rule held) and so is its base, so the
  // pages of base_ and of every worker's counters stay uncommitted until a
  // rule's hit or delete needs them (a 10 M-rule load touched 80 MB of
  // counters only to read zeros: 1.5 % of its control thread).
  // Relaxed: base_ is the control thread's alone.
  if (reused) base_[s].store(hit_reader_ ? hit_reader_(s) : 0, std::memory_order_relaxed);
  // The rule's action, before the exact-set insert publishes the slot
  // (slot_actions()); a fresh slot's byte is 0 (kDefault) and is left
  // untouched for a default rule, as the counters are.
  // release: orders it before the exact set's publication of the slot as
  // well (that is a release store too), for the prefix tables' readers.
  if (reused || action != RuleAction::kDefault)
    actions_[s].store(static_cast<uint8_t>(action), std::memory_order_release);
  return s;
}

void Blocklist::set_action(const Rule& r, RuleAction action) {
  const int64_t s = exact_->slot_of(keys_of(r).key);
  // relaxed: a byte the workers read at their next drop; nothing else is
  // published through it (the rule itself did not change).
  if (s >= 0) actions_[s].store(static_cast<uint8_t>(action), std::memory_order_relaxed);
}

RuleAction Blocklist::action(const Rule& r) const {
  const std::optional<store::RuleMeta> m = store_->get(rule_order_key(r));
  return m ? static_cast<RuleAction>(m->action) : RuleAction::kDefault;
}

uint64_t Blocklist::hits(const Rule& r) const {
  if (!hit_reader_) return 0;
  const int64_t s = exact_->slot_of(keys_of(r).key);
  if (s < 0) return 0;
  const auto slot = static_cast<uint32_t>(s);
  return hit_reader_(slot) - base_[slot].load(std::memory_order_relaxed);
}

bool Blocklist::insert_lookup(const Rule& r, bool pend, RuleAction action) {
  if (!insert_keys(keys_of(r), r.kind, r.prefix_len ? &r : nullptr, action)) return false;
  if (!restoring_ && pend) pending_.push_back(&r);  // in the tables, not in the store yet
  return true;
}

bool Blocklist::insert_keys(const Keys& k, RuleKind kind, const Rule* prefix, RuleAction action) {
  if (next_slot_.load(std::memory_order_relaxed) >= max_slots_ && free_slots_.empty()) {
    last_error_ = "max_memory reached: all " + std::to_string(max_slots_) + " rule slots in use";
    return false;
  }
  if (!ensure_room(1)) return false;  // grows the tables at the load target
  const bool exact_rule = prefix == nullptr;  // prefix rules are counted by prefixes_, not the kind mask
  if (exact_rule) count_kind(kind, +1);
  // Filter first: a worker that sees the fingerprint but not yet the exact
  // key simply does not drop (the rule is not acknowledged yet either).
  // No cuckoo path below the load target: grow (copies every present rule,
  // not this one) and insert into the bigger filter.
  if (filter_->insert(k.hash) != InsertResult::kOk) {
    last_error_ = "the filter found no cuckoo path";  // or grow_tables' reason
    if (restoring_ || !grow_tables(std::max<std::size_t>(capacity_, 64) * 2) ||
        filter_->insert(k.hash) != InsertResult::kOk) {
      if (exact_rule) count_kind(kind, -1);
      return false;
    }
  }
  const uint32_t slot = take_slot(action);
  const bool in_exact = exact_->add(k.key, kind, slot) == 0;
  // A prefix rule enters the workers' prefix lookup last (its LPM entry
  // names the slot taken above); the generation bump below publishes it.
  if (!in_exact || (!exact_rule && !prefixes_->add(*prefix, slot))) {
    if (in_exact) {
      last_error_ = prefixes_->last_error();
      exact_->del(k.key);
    } else {
      last_error_ = "the exact set found no room";
    }
    release_slot(slot);
    filter_->erase(k.hash);  // undo: the filter is exactly as before
    if (exact_rule) count_kind(kind, -1);
    // Pure-filter flows blocked by the short-lived fingerprint are judged
    // again; nothing was added, so cached passes stand.
    bump_generation(/*added=*/false);
    return false;
  }
  bump_generation(/*added=*/true);
  return true;
}

void Blocklist::remove_lookup(const Rule& r) {
  const Keys k = keys_of(r);
  // A prefix rule leaves the workers' prefix lookup first, before its slot
  // is released: no burst that starts after this finds the slot there.
  if (r.prefix_len) prefixes_->remove(r);
  // Exact set first, so no worker confirms a hit for a rule whose
  // fingerprint is already gone (harmless either way: both say "not blocked").
  const int64_t slot = exact_->slot_of(k.key);
  exact_->del(k.key);
  if (slot >= 0) release_slot(static_cast<uint32_t>(slot));
  filter_->erase(k.hash);
  if (!r.prefix_len) count_kind(r.kind, -1);
  bump_generation(/*added=*/false);  // a removal never turns a pass into a drop
}

void Blocklist::remove_stored(std::string_view order_key) {
  // Stored keys were made by rule_order_key and decoded at restore: valid.
  if (const std::optional<Rule> r = rule_from_order_key(order_key)) remove_lookup(*r);
}

Blocklist::Result Blocklist::add(const Rule& r, int64_t ttl_ms, RuleAction action) {
  switch (apply({Change{Change::Op::kAdd, r, ttl_ms, {}, action}}, false)[0]) {
    case Outcome::kAdded: return Result::kOk;
    case Outcome::kExists: return Result::kExists;
    case Outcome::kUpdated:
    case Outcome::kActionUpdated: return Result::kUpdated;
    case Outcome::kFull: return Result::kFull;
    default: return Result::kIoError;
  }
}

Blocklist::Result Blocklist::del(const Rule& r) {
  switch (apply({Change{Change::Op::kDel, r, 0, {}}}, false)[0]) {
    case Outcome::kDeleted: return Result::kOk;
    case Outcome::kAbsent: return Result::kAbsent;
    default: return Result::kIoError;
  }
}

Blocklist::Result Blocklist::set_mark(const store::RuleStore::Mark& mark) {
  const store::Status st = store_->set_mark(mark);
  if (st.ok()) return Result::kOk;
  last_error_ = st.to_string();
  return Result::kIoError;
}

std::vector<Blocklist::Outcome> Blocklist::apply(const std::vector<Change>& changes, bool atomic,
                                                 const store::RuleStore::Mark* mark) {
  const std::size_t n = changes.size();
  std::vector<Outcome> out(n, Outcome::kNotApplied);
  // Per rule touched by this group: is it logically present after the changes
  // so far, did this group put it into the lookup structures (undone on
  // failure), and is its removal from them due once the journal is synced.
  struct Touch {
    bool present = false;
    bool inserted_here = false;
    bool remove_after_sync = false;
    bool expiring = false;  // present with an expiry (after the changes so far)
    RuleAction action = RuleAction::kDefault;  // and its action
    const Rule* rule = nullptr;
  };
  std::unordered_map<std::string, Touch> touched;
  const PendingScope pending(pending_);
  std::vector<std::string> orders(n);
  std::vector<bool> action_only(n);
  std::vector<bool> action_after(n);  // an add whose action reaches the slot after the sync (below)
  std::vector<store::RuleStore::Change> sc;
  std::vector<std::size_t> sc_of;  // change index of each store change
  sc.reserve(n);
  sc_of.reserve(n);
  auto undo = [&] {
    for (auto& [order, t] : touched)
      if (t.inserted_here) remove_lookup(*t.rule);
  };
  for (std::size_t i = 0; i < n; ++i) {
    const Change& c = changes[i];
    orders[i] = rule_order_key(c.rule);
    auto [it, fresh] = touched.try_emplace(orders[i]);
    Touch& t = it->second;
    if (fresh) {
      const std::optional<store::RuleMeta> m = store_->get(orders[i]);
      t.present = m.has_value();
      t.expiring = m && m->expiry_unix_ms != 0;
      t.action = m ? static_cast<RuleAction>(m->action) : RuleAction::kDefault;
      t.rule = &c.rule;
    }
    // An add onto a present rule that changes only its action (what the
    // store answers `updated` for is told apart for the reply).
    action_only[i] = c.op == Change::Op::kAdd && t.present && !t.expiring && c.ttl_ms == 0 && c.action != t.action;
    // An add onto a present rule changes its slot's action after the sync;
    // a new rule's insert_lookup stores it with the slot.
    action_after[i] = c.op == Change::Op::kAdd && t.present;
    if (c.op == Change::Op::kAdd) {
      t.expiring = c.ttl_ms > 0;
      t.action = c.action;
    }
    Outcome fail = Outcome::kNotApplied;
    if (c.op != Change::Op::kAdd) {
      if (!t.present && c.op == Change::Op::kForget) {
        out[i] = Outcome::kAbsent;  // nothing to do, and nothing failed
        continue;
      }
      if (!t.present) {
        fail = Outcome::kAbsent;
      } else {
        t.present = false;
        t.remove_after_sync = true;
      }
    } else if (!t.present) {
      if (t.remove_after_sync) {
        t.remove_after_sync = false;  // deleted earlier in this group: its lookup entry stays
        action_after[i] = true;       // with the old rule's action in its slot
      } else if (!insert_lookup(c.rule, /*pend=*/true, c.action)) {  // also refuses past the capacity (no free slot)
        fail = Outcome::kFull;
      } else {
        t.inserted_here = true;
      }
      if (fail == Outcome::kNotApplied) t.present = true;
    }
    if (fail != Outcome::kNotApplied) {
      if (atomic) {
        undo();
        out[i] = fail;
        if (mark != nullptr && set_mark(*mark) != Result::kOk) out.assign(n, Outcome::kIoError);
        return out;
      }
      out[i] = fail;
      continue;
    }
    sc.push_back({c.op == Change::Op::kAdd ? store::RuleStore::Change::Op::add
                                           : store::RuleStore::Change::Op::del,
                  orders[i], {}, c.ttl_ms, store_set_name(c.set), static_cast<uint8_t>(c.action)});  // no text: the key is the rule
    sc_of.push_back(i);
  }
  std::vector<store::Errc> res;
  const store::Status st = store_->apply(sc, &res, mark, atomic);
  if (!st.ok()) {
    // Not durable, so not acknowledged: undone. (Workers may have dropped
    // matching packets during the failed sync; the answer is still "not added".)
    undo();
    last_error_ = st.to_string();
    for (std::size_t j : sc_of) out[j] = Outcome::kIoError;
    if (mark != nullptr) out.assign(n, Outcome::kIoError);  // the mark did not make it either
    return out;
  }
  for (std::size_t k = 0; k < sc_of.size(); ++k) {
    const std::size_t i = sc_of[k];
    const bool add = changes[i].op == Change::Op::kAdd;
    switch (res[k]) {
      case store::Errc::ok: out[i] = add ? Outcome::kAdded : Outcome::kDeleted; break;
      case store::Errc::exists: out[i] = Outcome::kExists; break;
      case store::Errc::updated: out[i] = action_only[i] ? Outcome::kActionUpdated : Outcome::kUpdated; break;
      case store::Errc::absent: out[i] = Outcome::kAbsent; break;
      default: out[i] = Outcome::kFull; break;  // invalid_argument: a record too large to journal
    }
  }
  // The actions, in order: a rule's last add in the group sets it last. (A
  // rule inserted here has it already; one added onto itself, or deleted and
  // added again in the group, which kept its lookup entry, has the slot's
  // old action until now.)
  for (std::size_t i = 0; i < n; ++i)
    if (action_after[i] && (out[i] == Outcome::kAdded || out[i] == Outcome::kUpdated || out[i] == Outcome::kActionUpdated))
      set_action(changes[i].rule, changes[i].action);
  // A change the store refused (an oversized record) must not stay in the
  // lookup structures; rules deleted by the group leave them now, after the sync.
  for (auto& [order, t] : touched) {
    if (t.inserted_here && !store_->contains(order)) {
      remove_lookup(*t.rule);
    } else if (t.remove_after_sync) {
      remove_lookup(*t.rule);
    }
  }
  return out;
}

std::vector<Blocklist::Outcome> Blocklist::apply_group(const std::vector<Change>& changes,
                                                       const store::RuleStore::Mark* mark) {
  const std::size_t n = changes.size();
  std::vector<Outcome> out(n, Outcome::kNotApplied);
  const SortedKeys sorted(n, [&](std::size_t i) -> const Rule& { return changes[i].rule; });
  const store::KeyOrder& order = sorted.order();
  // Per key, its changes in input order (order[b, e)) give each one's outcome
  // as apply() would, and the key's net effect: what the store and the
  // lookup tables must do so that they end as after applying them in order.
  std::vector<store::RuleStore::Change> sc;
  std::vector<std::pair<uint32_t, uint32_t>> sc_run;  // the [b, e) of each store change's key
  // Changes whose rule enters the lookup tables, with the action it ends with.
  std::vector<std::pair<uint32_t, RuleAction>> inserts;
  std::vector<std::pair<uint32_t, RuleAction>> renewed;  // present rules that stay: their action after the sync
  std::vector<uint32_t> removes;                      // changes whose rule leaves them after the sync
  sc.reserve(n);
  sc_run.reserve(n);
  {
    store::RuleStore::Finder finder = store_->finder();  // keys increase: each search starts at the last
    for (std::size_t b = 0; b < n;) {
      const std::string_view k = sorted.key(order[b]);
      std::size_t e = b + 1;
      while (e < n && sorted.key(order[e]) == k) ++e;
      const store::RuleMeta* m = finder.find(k);
      const bool was = m != nullptr;
      bool present = was, expiring = was && m->expiry_unix_ms != 0, deleted = false, updated = false;
      uint32_t creator = 0, any = order[b];  // the add that made it present last; any change of the key
      int64_t ttl = 0;                       // the lifetime the last effective add gave it
      auto action = was ? static_cast<RuleAction>(m->action) : RuleAction::kDefault;  // the same for its action
      for (std::size_t j = b; j < e; ++j) {
        const uint32_t i = order[j];
        const Change& c = changes[i];
        if (c.op != Change::Op::kAdd) {  // kDel, kForget: alike outside an atomic apply
          out[i] = present ? Outcome::kDeleted : Outcome::kAbsent;
          deleted = deleted || present;
          present = false;
        } else if (!present) {
          out[i] = Outcome::kAdded;
          present = true;
          creator = i;
          ttl = c.ttl_ms;
          expiring = c.ttl_ms > 0;
          action = c.action;
        } else if (!expiring && c.ttl_ms == 0 && c.action == action) {
          out[i] = Outcome::kExists;  // the latest add defines lifetime and action: unchanged
        } else {
          // Not expiring and no ttl given: only the action changed.
          out[i] = !expiring && c.ttl_ms == 0 ? Outcome::kActionUpdated : Outcome::kUpdated;
          updated = true;
          ttl = c.ttl_ms;
          expiring = c.ttl_ms > 0;
          action = c.action;
        }
      }
      const auto run = std::make_pair(static_cast<uint32_t>(b), static_cast<uint32_t>(e));
      using SOp = store::RuleStore::Change::Op;
      if (was && (deleted || !present)) {  // gone, or gone and added again (a new rule: new id)
        sc.push_back({SOp::del, k, {}, 0, {}});
        sc_run.push_back(run);
        if (!present) removes.push_back(any);  // else its lookup entry stays, as in apply()
      }
      const auto stored_action = static_cast<uint8_t>(action);
      if (present && (!was || deleted)) {
        if (!was) inserts.push_back({creator, action});
        if (was) renewed.push_back({any, action});  // its lookup entry stays: only its action may change
        sc.push_back({SOp::add, k, {}, ttl, store_set_name(changes[creator].set), stored_action});  // no text: the key is the rule
        sc_run.push_back(run);
      } else if (present && updated) {
        // A lifetime or action change (the store may find it unchanged).
        sc.push_back({SOp::add, k, {}, ttl, {}, stored_action});
        sc_run.push_back(run);
        renewed.push_back({any, action});
      }
      b = e;
    }
  }  // the finder's pin ends here, before the inserts
  {
    // Room for every new rule at once (one growth); a rule the tables refuse
    // even so is left to apply(), which reports kFull change by change.
    const PendingScope pending(pending_);
    bool room = ensure_room(inserts.size());
    std::size_t done = 0;
    while (room && done < inserts.size() &&
           insert_lookup(changes[inserts[done].first].rule, /*pend=*/true, inserts[done].second))
      ++done;
    room = room && done == inserts.size();
    if (room) {
      std::vector<store::Errc> res;
      const store::Status st = store_->apply(sc, &res, mark);
      if (!st.ok()) {
        // Not durable, so not acknowledged: undone, as in apply().
        for (std::size_t j = 0; j < inserts.size(); ++j) remove_lookup(changes[inserts[j].first].rule);
        last_error_ = st.to_string();
        if (mark != nullptr) return std::vector<Outcome>(n, Outcome::kIoError);
        for (const auto& [b, e] : sc_run)
          for (uint32_t j = b; j < e; ++j) out[order[j]] = Outcome::kIoError;
        return out;
      }
      // A new rule the store refused (a record too large to journal) must not
      // stay in the lookup tables; its adds report kFull, as in apply().
      for (std::size_t q = 0; q < sc.size(); ++q) {
        if (res[q] != store::Errc::invalid_argument) continue;
        const auto [b, e] = sc_run[q];
        if (!store_->contains(sc[q].key)) remove_lookup(changes[order[b]].rule);
        for (uint32_t j = b; j < e; ++j)
          if (changes[order[j]].op == Change::Op::kAdd) out[order[j]] = Outcome::kFull;
      }
      for (const uint32_t i : removes) remove_lookup(changes[i].rule);
      for (const auto& [i, a] : renewed) set_action(changes[i].rule, a);
      return out;
    }
    for (std::size_t j = 0; j < done; ++j) remove_lookup(changes[inserts[j].first].rule);
  }
  return apply(changes, /*atomic=*/false, mark);
}

bool Blocklist::contains(const Rule& r) const { return store_->contains(rule_order_key(r)); }

Blocklist::Result Blocklist::flush(std::size_t* n) {
  std::vector<store::RuleStore::Removed> removed;
  const store::Status st = store_->flush(&removed);
  if (!st.ok()) {
    last_error_ = st.to_string();
    return Result::kIoError;
  }
  for (const auto& rm : removed) remove_stored(rm.key);
  *n = removed.size();
  return Result::kOk;
}

Blocklist::Result Blocklist::flush_kind(RuleKind kind, std::size_t* n) {
  // The kind's rules come from the store in key order, all present (this
  // thread is the store's only writer): one ordered pass deletes them, as
  // one journal transaction (a crash leaves all of them or none), and they
  // leave the lookup tables once that is synced, as in apply(). apply()'s
  // per-rule bookkeeping (a hash map of keys, a decoded rule per change)
  // made flushing a million rules take 5-7 s.
  std::vector<std::string> keys;
  for (auto c = store_->list_prefix(std::string(1, static_cast<char>(kind))); c.next();) keys.emplace_back(c.key());
  std::vector<store::RuleStore::Change> sc;
  sc.reserve(keys.size());
  for (const std::string& k : keys) sc.push_back({store::RuleStore::Change::Op::del, k, {}, 0, {}});
  std::vector<store::Errc> res;
  *n = 0;
  const store::Status st = store_->apply(sc, &res, nullptr, /*atomic=*/true);
  if (!st.ok()) {
    last_error_ = st.to_string();
    return Result::kIoError;
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (res[i] != store::Errc::ok) continue;
    remove_stored(keys[i]);
    ++*n;
  }
  return Result::kOk;
}

std::vector<Rule> Blocklist::KeyBatch::rules() const {
  std::vector<Rule> out;
  out.reserve(size());
  for (std::size_t i = 0; i < size(); ++i) out.push_back(*rule_from_order_key(key(i)));  // add() made it: decodes
  return out;
}

Blocklist::BatchResult Blocklist::add_batch(const std::vector<Rule>& rules, std::string_view set) {
  KeyBatch keys;
  for (const Rule& r : rules) keys.add(r);
  return add_batch(keys, set);
}

Blocklist::BatchResult Blocklist::add_batch(const KeyBatch& batch, std::string_view set) {
  BatchResult res;
  // The rules in key order: duplicates become neighbours (the first in the
  // input wins: ties by position), the store's searches share their path, and
  // the store gets the batch already sorted (it does not sort again).
  const SortedKeys sorted(batch);
  // In key order: the store's requests, which also hold present rules that
  // have an expiry: this add makes them permanent (the latest add defines
  // the lifetime; their lookup entries stay as they are), and the new rules
  // (BatchRequests: nothing stored while each list is the identity; a list
  // of AddRequest took 56 bytes a rule before, then batch positions 4 and
  // the new rules' indices 4).
  const store::KeyOrder& order = sorted.order();
  BatchRequests reqs(batch, order);
  const std::string_view store_set = store_set_name(set);
  std::string_view prev;
  bool have_prev = false;
  bool past_end = false;  // no stored rule at or after the current key: no more searches
  {
    // Keys increase: each search starts at the last. Nothing writes to the
    // store during this pass (the Blocklist is its only writer, on this
    // thread), so once a search meets no rule at or after its key, every
    // later key is absent too: a load into an empty blocklist, or past its
    // last rule, searches once.
    store::RuleStore::Finder finder = store_->finder();
    for (std::size_t j = 0; j < order.size(); ++j) {
      const uint32_t i = order[j];
      const std::string_view k = sorted.key(i);
      if (have_prev && k == prev) {  // a repeat inside the batch
        ++res.existed;
        continue;
      }
      prev = k;
      have_prev = true;
      const store::RuleMeta* m = past_end ? nullptr : finder.find(k);  // one search, present or not
      past_end = past_end || finder.past_end();
      if (m == nullptr) {
        reqs.add(j, i, /*fresh=*/true);
      } else if (m->expiry_unix_ms != 0) {  // the store keeps a present rule's set
        reqs.add(j, i, /*fresh=*/false);
      } else {
        ++res.existed;
      }
    }
  }  // the finder's pin ends here, before the inserts
  // Each new rule goes into the lookup tables by its lookup key, made from
  // its order key without a Rule (rule_key_of_order_key; prefix rules also
  // decode to a Rule for the prefix tables). A growth meanwhile decodes the rules inserted so far from pending_keys_; a
  // rollback decodes them again.
  const std::size_t n_fresh = reqs.fresh_count();
  const auto key_at = [&](std::size_t j) { return reqs.fresh_key(j); };
  const auto rule_at = [&](std::size_t j) { return *rule_from_order_key(key_at(j)); };  // KeyBatch::add's keys decode
  auto rollback = [&](std::size_t upto) {
    for (std::size_t j = 0; j < upto; ++j) remove_lookup(rule_at(j));
  };
  const PendingScope pending(pending_);
  struct KeysScope {
    PendingKeys& k;
    ~KeysScope() { k = {}; }
  } pending_keys{pending_keys_};
  pending_keys_ = {&reqs, &BatchRequests::fresh_key_of, 0};
  if (!ensure_room(n_fresh)) return {0, 0, 0, Result::kFull};  // grows once for the batch
  // In groups: every rule's lookup key and hashes first, its filter bucket
  // prefetched and the exact set's buckets loaded by one bulk lookup, then
  // the inserts find them cached (random buckets of tables of many MB: a
  // cache and TLB miss each otherwise).
  constexpr std::size_t kGroup = 32;
  static_assert(kGroup <= ExactSet::kPrefetchMax);
  std::array<Keys, kGroup> keys;
  std::array<const Key128*, kGroup> key128;
  std::string lookup;  // one buffer for every rule's lookup key
  for (std::size_t g = 0; g < n_fresh; g += kGroup) {
    const std::size_t m = std::min(kGroup, n_fresh - g);
    for (std::size_t t = 0; t < m; ++t) {
      (void)rule_key_of_order_key(key_at(g + t), &lookup);  // KeyBatch::add's keys decode
      keys[t] = keys_of_key(lookup);
      key128[t] = &keys[t].key;
      filter_->prefetch_insert(keys[t].hash);
    }
    exact_->prefetch(key128.data(), static_cast<uint32_t>(m));
    for (std::size_t t = 0; t < m; ++t) {
      const std::size_t j = g + t;
      const std::string_view key = key_at(j);
      const auto kind = static_cast<RuleKind>(key[0]);
      std::optional<Rule> prefix;
      // Only a prefix's order key has a byte after [kind][family][address]
      // (append_rule_order_key): the address rules, 3 of 7 in a mixed feed,
      // are not decoded into a Rule just to find that out.
      if ((kind == RuleKind::kSrc || kind == RuleKind::kDst || kind == RuleKind::kIp) &&
          key.size() > 2 + (key[1] == 4 ? 4u : 16u)) {
        prefix = rule_from_order_key(key);  // an address: no name to build
        if (prefix && !prefix->prefix_len) prefix.reset();
      }
      if (!insert_keys(keys[t], kind, prefix ? &*prefix : nullptr)) {
        rollback(j);
        return {0, 0, 0, Result::kFull};
      }
      pending_keys_.n = j + 1;
    }
  }
  // The store's requests made as it asks for them. No text: the order key
  // is the rule (rule_from_order_key).
  struct Requests {
    const BatchRequests* reqs;
    std::string_view set;
  } const rq{&reqs, store_set};
  const auto request_at = [](const void* ctx, std::size_t q) -> store::RuleStore::AddRequest {
    const auto& r = *static_cast<const Requests*>(ctx);
    return {r.reqs->key(q), {}, 0, r.set, store::kKeepAction};  // a present rule keeps its action
  };
  std::vector<store::Errc> results;
  const store::Status st = store_->add_batch(reqs.size(), request_at, &rq, &results);
  if (!st.ok()) {
    rollback(n_fresh);
    last_error_ = st.to_string();
    return {0, 0, 0, Result::kIoError};
  }
  // The store may refuse single entries (e.g. an oversized record): those must
  // not stay in the lookup structures either.
  std::size_t j = 0;
  for (std::size_t q = 0; q < reqs.size(); ++q) {
    if (j < n_fresh && reqs.fresh(j) == q) {
      if (results[q] == store::Errc::ok) {
        ++res.added;
      } else {
        remove_lookup(rule_at(j));
        ++res.existed;
      }
      ++j;
    } else {
      ++(results[q] == store::Errc::updated ? res.updated : res.existed);
    }
  }
  return res;
}

std::size_t Blocklist::expire_due() {
  std::vector<store::RuleStore::Removed> expired;
  const store::Status st = store_->expire_due(&expired);
  if (!st.ok()) last_error_ = st.to_string();
  for (const auto& rm : expired) remove_stored(rm.key);
  return expired.size();
}

std::optional<int64_t> Blocklist::ms_to_next_expiry() const {
  const auto next = store_->next_expiry();
  if (!next) return std::nullopt;
  const int64_t left = *next - store_->now();
  return left > 0 ? left : 0;
}

void Blocklist::maybe_snapshot() {
  maybe_shrink();
  // The journal is compacted once the state directory holds as many dead
  // records as the store holds rules (and at least snapshot_every_). A
  // restart replays the snapshot's records and the journal's; those that do
  // not end as a live rule's one record (deletes, the adds they undid,
  // updates, expiries, marks) are dead, and only they are removed by
  // compacting. A journal of adds alone is as short as its snapshot would be,
  // so growing a blocklist by loads never rewrites it (counting journal
  // records instead rewrote the whole store after every few loads: snapshots
  // of 2 and 6 M rules for 10 M rules loaded in 2 M parts). Bounds kept: a
  // restart replays fewer than 2 x rules + snapshot_every_ records, and each
  // compaction writes no more records than it removes (docs/store.md, "When").
  if (store_->durable()) {
    const uint64_t live = store_->size();
    const uint64_t replayed = snapshot_records_ + store_->records_since_snapshot();
    const uint64_t dead = replayed > live ? replayed - live : 0;
    const auto now = std::chrono::steady_clock::now();
    if (dead >= std::max<uint64_t>(snapshot_every_, live) && now >= next_compaction_ && !store_->read_only()) {
      const store::Status st = store_->snapshot();
      if (!st.ok()) {
        last_error_ = st.to_string();
        compaction_error_ = last_error_;
        ++compaction_failures_;
        compaction_backoff_ = std::clamp(compaction_backoff_ * 2, std::chrono::milliseconds(1000),
                                         std::chrono::milliseconds(600000));
        next_compaction_ = now + compaction_backoff_;
        CG_LOG(WARNING, control, "compacting the state directory failed (%s); next try in %lld s",
               compaction_error_.c_str(), static_cast<long long>(compaction_backoff_.count() / 1000));
      } else {
        compaction_error_.clear();
        compaction_backoff_ = std::chrono::milliseconds(0);
        // The scan is weakly consistent, but writers are on this thread:
        // the snapshot holds exactly `live` rules (and the marks, a few).
        snapshot_records_ = live;
      }
    }
  }
  store_->reclaim();
}

void Blocklist::for_each(std::optional<RuleKind> kind, std::string_view prefix,
                         const std::function<void(std::string_view, int64_t)>& f) const {
  for_each_in_set(kind, prefix, std::nullopt,
                  [&](std::string_view text, int64_t ttl, std::string_view, RuleAction) { f(text, ttl); });
}

void Blocklist::for_each_in_set(std::optional<RuleKind> kind, std::string_view prefix,
                                std::optional<std::string_view> set, const SetVisitor& f) const {
  std::optional<uint32_t> set_id;
  if (set) {
    set_id = store_->find_set(store_set_name(*set));
    if (!set_id) return;  // no rule ever joined it
  }
  std::vector<std::string> names;  // set id -> shown name, looked up once each
  const int64_t now = store_->now();
  auto c = kind ? store_->list_prefix(std::string(1, static_cast<char>(*kind))) : store_->list();
  while (c.next()) {
    if (set_id && c.value().set_id != *set_id) continue;
    // The store keeps no text: the canonical one is rebuilt from the key.
    const std::optional<Rule> r = rule_from_order_key(c.key());
    if (!r) continue;  // stored keys always decode
    const std::string text = format_rule(*r);
    if (!prefix.empty()) {
      const std::size_t sp = text.find(' ');
      // A view into `text` itself (text.substr would make a temporary string).
      const std::string_view arg =
          sp == std::string_view::npos ? std::string_view{} : std::string_view(text).substr(sp + 1);
      if (arg.substr(0, prefix.size()) != prefix) continue;
    }
    const uint32_t id = c.value().set_id;
    while (names.size() <= id) names.emplace_back(shown_set_name(store_->set_name(static_cast<uint32_t>(names.size()))));
    const int64_t exp = c.value().expiry_unix_ms;
    f(text, exp == 0 ? 0 : (exp > now ? exp - now : 1), names[id], static_cast<RuleAction>(c.value().action));
  }
}

std::vector<std::pair<std::string, std::size_t>> Blocklist::set_counts() const {
  auto counts = store_->set_counts();
  for (auto& [name, n] : counts)
    if (name.empty()) name = "default";
  return counts;
}

void Blocklist::set_count_lines(std::string& out) const {
  for (const auto& [name, n] : set_counts()) out += "sets." + name + " " + std::to_string(n) + "\n";
}

Blocklist::ReplaceResult Blocklist::replace_set(std::string_view set, const std::vector<Rule>& rules) {
  KeyBatch keys;
  for (const Rule& r : rules) keys.add(r);
  return replace_set(set, keys);
}

Blocklist::ReplaceResult Blocklist::replace_set(std::string_view set, const KeyBatch& batch) {
  ReplaceResult res;
  const std::string_view name = store_set_name(set);
  const std::optional<uint32_t> id = store_->find_set(name);
  // One merge of the listed keys (sorted) with the store's rules (listed in
  // key order, the same byte order): a listed key the store lacks is added,
  // one it holds is kept (this set) or left where it is (another set), and
  // a stored rule of this set that is not listed is deleted. (Per rule: a
  // search from the skip list's head, a std::string in a hash set and a
  // decoded Rule made a 1.1 M-prefix refresh take 13-17 s.)
  const SortedKeys sorted(batch);
  const store::KeyOrder& order = sorted.order();
  std::vector<std::string_view> adds;    // views into batch
  std::vector<std::string_view> renews;  // kept rules with a ttl: the stream's have none (as load)
  std::string dels;                    // the deleted keys, end to end (cursor views die with it)
  std::vector<std::size_t> del_end;
  {
    auto c = store_->list();
    bool more = c.next();
    auto drop_if_ours = [&] {
      if (id && c.value().set_id == *id) {
        dels.append(c.key());
        del_end.push_back(dels.size());
      }
      more = c.next();
    };
    std::string_view prev;
    for (std::size_t j = 0; j < order.size(); ++j) {
      const std::string_view k = sorted.key(order[j]);
      if (j != 0 && k == prev) continue;  // a repeat inside the file
      prev = k;
      while (more && c.key() < k) drop_if_ours();
      if (more && c.key() == k) {
        const bool ours = id && c.value().set_id == *id;
        ++(ours ? res.kept : res.elsewhere);
        if (ours && c.value().expiry_unix_ms != 0) renews.push_back(k);
        more = c.next();
      } else {
        adds.push_back(k);
      }
    }
    while (more) drop_if_ours();
  }
  auto del_key = [&](std::size_t d) {
    const std::size_t b = d == 0 ? 0 : del_end[d - 1];
    return std::string_view(dels).substr(b, del_end[d] - b);
  };
  // The store's changes in key order (one ordered pass), one transaction;
  // made before any rule enters the lookup tables, so that an allocation
  // failure here leaves nothing to undo.
  // A kept rule that had a ttl is added again without one, which makes it
  // permanent (Errc::updated): the set is then exactly the stream's, as a
  // plain load would leave those rules.
  std::vector<store::RuleStore::Change> sc;
  sc.reserve(adds.size() + del_end.size() + renews.size());
  std::vector<bool> fresh;  // sc[q] adds a rule new to the lookup structures (one of `adds`)
  fresh.reserve(sc.capacity());
  using SOp = store::RuleStore::Change::Op;
  for (std::size_t a = 0, d = 0, r = 0; a < adds.size() || d < del_end.size() || r < renews.size();) {
    // The smallest of the three heads (keys are distinct across the three).
    const std::string_view* best = nullptr;
    int which = -1;
    if (a < adds.size()) best = &adds[a], which = 0;
    const std::string_view dk = d < del_end.size() ? del_key(d) : std::string_view{};
    if (d < del_end.size() && (best == nullptr || dk < *best)) best = &dk, which = 1;
    if (r < renews.size() && (best == nullptr || renews[r] < *best)) best = &renews[r], which = 2;
    if (which == 1) {
      sc.push_back({SOp::del, del_key(d++), {}, 0, {}});
    } else {
      // No text: the key is the rule. A kept rule keeps its action.
      sc.push_back({SOp::add, which == 0 ? adds[a++] : renews[r++], {}, 0, name, store::kKeepAction});
    }
    fresh.push_back(which == 0);
  }
  std::vector<store::Errc> out;
  out.reserve(sc.size());
  // New rules reach the lookup structures before the journal sync; the
  // rules stay in `added` (reserved: pending_ holds pointers) for a growth
  // or a rollback.
  std::vector<Rule> added;
  added.reserve(adds.size());
  auto rollback = [&] {
    for (const Rule& r : added) remove_lookup(r);
    return ReplaceResult{0, 0, 0, 0, Result::kFull};
  };
  {
    const PendingScope pending(pending_);
    if (!ensure_room(adds.size())) return rollback();
    for (const std::string_view k : adds) {
      added.push_back(*rule_from_order_key(k));  // KeyBatch::add's keys decode
      if (!insert_lookup(added.back())) {
        added.pop_back();
        return rollback();
      }
    }
  }
  const store::Status st = store_->apply(sc, &out, nullptr, /*atomic=*/true);
  if (!st.ok()) {
    last_error_ = st.to_string();
    rollback();
    return {0, 0, 0, 0, Result::kIoError};
  }
  // Deleted rules leave the lookup structures now, after the sync; an add
  // the store refused (a record too large to journal) must not stay in them.
  std::size_t a = 0;
  for (std::size_t q = 0; q < sc.size(); ++q) {
    if (sc[q].op == SOp::del) {
      if (out[q] == store::Errc::ok) {
        remove_stored(sc[q].key);
        ++res.deleted;
      }
    } else if (fresh[q]) {
      if (out[q] == store::Errc::ok) {
        ++res.added;
      } else {
        remove_lookup(added[a]);
        res.result = Result::kFull;
      }
      ++a;
    }
  }
  if (res.result != Result::kOk) return {0, 0, 0, 0, res.result};
  return res;
}

}  // namespace cg

// ---- Growth (docs/concurrency.md, "Growth") --------------------------------
namespace cg {

std::size_t Blocklist::table_bytes() const noexcept {
  return filter_->memory_bytes() + exact_->memory_bytes();
}

Blocklist::MemoryUse Blocklist::memory_use() const noexcept {
  MemoryUse m;
  m.filter = filter_->memory_bytes();
  m.exact = exact_->memory_bytes();
  m.store = store_->rules_memory_bytes();
  m.ttl = store_->ttl_memory_bytes();
  m.prefixes = prefixes_->memory_bytes();
  // removed_at_ and base_ are written only for slots released (and reused)
  // at least once: pages are committed for at most that many (a fresh slot's
  // base is never written; see take_slot()).
  m.hits = std::min<std::size_t>(releases_.load(std::memory_order_relaxed), next_slot_.load(std::memory_order_relaxed)) *
           2 * sizeof(std::atomic<uint64_t>);
  return m;
}

bool Blocklist::make_tables(std::size_t capacity, std::unique_ptr<FilterMemory>* mem,
                            std::unique_ptr<GatewayFilter>* f, std::unique_ptr<ExactSet>* e) {
  const std::string rules = std::to_string(capacity) + " rules";
  if (capacity > UINT32_MAX / 2) {
    last_error_ = "max_memory reached: the exact set cannot hold " + rules;
    return false;
  }
  *mem = std::make_unique<FilterMemory>(FilterMemory{socket_, rte_eal_has_hugepages() != 0, 0});
  *f = GatewayFilter::create(filter_slots_for(capacity), FilterAllocator{&filter_alloc, &filter_release, mem->get()});
  if (!*f) {
    last_error_ = "cannot allocate the cuckoo filter for " + rules + " (raise EAL memory with -m)";
    return false;
  }
  std::string err;
  const bool first = table_seq_ == 0;  // the tables the gateway starts with
  *e = ExactSet::create(name_ + "_exact" + (table_seq_ == 0 ? "" : std::to_string(table_seq_)),
                        static_cast<uint32_t>(capacity), qsv_, socket_, &err);
  ++table_seq_;
  const std::size_t bytes = (*f)->memory_bytes() + (*e ? (*e)->memory_bytes() : 0);
  if (!*e || bytes > max_memory_) {
    last_error_ = !*e ? err + " (raise EAL memory with -m)"
                      : "max_memory reached: lookup tables for " + rules + " need " + std::to_string(bytes) +
                            " bytes, max_memory is " + std::to_string(max_memory_) +
                            (first ? " (lower gateway.capacity, the size they start at, or raise max_memory)" : "");
    e->reset();
    f->reset();
    return false;
  }
  return true;
}

bool Blocklist::grow_tables(std::size_t capacity, bool copy) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<FilterMemory> mem;
  std::unique_ptr<GatewayFilter> f;
  std::unique_ptr<ExactSet> e;
  for (;;) {
    if (!make_tables(capacity, &mem, &f, &e)) return false;
    if (!copy) break;
    // Every rule the current tables hold: the store's plus pending_. Each
    // keeps its kind and slot, so hit counters, slot_removed_at and the
    // prefix LPM entries (which name slots) stay valid as they are.
    std::size_t n = 0;
    bool filter_full = false;
    auto put = [&](const Rule& r) {
      const Keys k = keys_of(r);
      RuleKind kind;
      uint32_t slot;
      if (!exact_->contains(k.key, &kind, &slot)) {
        last_error_ = "growth aborted: rule '" + format_rule(r) + "' is not in the lookup tables";
        return false;
      }
      if (f->insert(k.hash) != InsertResult::kOk) {
        filter_full = true;
        return false;
      }
      if (e->add(k.key, kind, slot) != 0) {
        last_error_ = "growth aborted: the new exact set refused a rule";
        return false;
      }
      ++n;
      return true;
    };
    bool ok = true;
    for (auto c = store_->list(); ok && c.next();) {
      const std::optional<Rule> r = rule_from_order_key(c.key());  // stored keys always decode
      ok = r && put(*r);
    }
    for (std::size_t i = 0; ok && i < pending_.size(); ++i) ok = put(*pending_[i]);
    for (std::size_t i = 0; ok && i < pending_keys_.n; ++i) {
      const std::optional<Rule> r = rule_from_order_key(pending_keys_.key(i));  // from KeyBatch::add: decodes
      ok = r && put(*r);
    }
    if (ok && n != exact_->size()) {
      // The tables hold a key the store and pending_ do not: copying would
      // lose it. Never expected; refuse rather than drop a rule.
      last_error_ = "growth aborted: the lookup tables hold " + std::to_string(exact_->size()) +
                    " rules, the store and the request " + std::to_string(n);
      ok = false;
    }
    if (ok) break;
    e.reset();
    f.reset();
    if (!filter_full) return false;
    capacity *= 2;  // no cuckoo path at this size: try the next one
  }
  auto view = std::make_unique<LookupTables>(LookupTables{f.get(), e.get()});
  const std::lock_guard<std::mutex> readers(tables_mu_);  // lock_tables() users: not the workers
  std::swap(filter_mem_, mem);
  std::swap(filter_, f);
  std::swap(exact_, e);
  std::swap(view_, view);
  // release: a worker that loads this pointer (acquire) sees the new tables
  // fully built. From here on the control thread changes only the new pair.
  tables_.store(view_.get(), std::memory_order_release);
  if (f) {
    // The old pair may be in use by a burst that loaded the pointer before
    // the store above; a worker reports a quiescent state only between
    // bursts, so once each has, none holds it any more.
    if (qsv_ != nullptr) rte_rcu_qsbr_synchronize(qsv_, RTE_QSBR_THRID_INVALID);
    ++growths_;
    last_growth_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  view.reset();
  e.reset();
  f.reset();  // before the memory descriptor its allocator uses
  mem.reset();
  capacity_ = capacity;
  return true;
}

void Blocklist::maybe_shrink() {
  const std::size_t n = store_->size();
  if (!pending_.empty() || restoring_ || capacity_ <= initial_capacity_ || n * 8 >= capacity_) return;
  std::size_t cap = capacity_;
  while (cap / 2 >= initial_capacity_ && cap / 2 >= n * 4) cap /= 2;
  // On failure (EAL memory) the bigger tables simply stay; nothing is lost.
  if (cap < capacity_) (void)grow_tables(cap);
}

bool Blocklist::ensure_room(std::size_t more) {
  const std::size_t need = store_->size() + pending_.size() + more;
  if (need <= capacity_ || restoring_) return true;
  std::size_t cap = std::max<std::size_t>(capacity_, 64);
  while (cap < need) cap *= 2;
  return grow_tables(cap);
}

}  // namespace cg
