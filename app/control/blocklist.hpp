// The blocklist as the control lcore sees it: the lock-free cuckoo filter
// (what the workers look up), the exact set (what confirms a filter hit) and
// the authoritative rule store (ordered, durable, with expiry), which `list`,
// `check`, TTL expiry and restarts read.
//
// Thread safety: every member function is for the ONE control thread. Worker
// lcores only use filter(), exact(), kind_mask() and prefixes(), whose
// lookups are safe concurrently with the control thread's updates.
//
// Invariant kept by every operation: a rule is in the store iff its key is in
// the exact set iff exactly one copy of its fingerprint was inserted into the
// filter for it. So a delete only ever erases a fingerprint this rule put
// there, and a filter false negative cannot be created by a delete.
// CIDR prefix rules (src/dst/ip a.b.c.d/len) are rules like the others: their
// key is the prefix encoding (encode_prefix_key), in the filter and the exact
// set with a hit-counter slot; in addition each one is in prefixes() (an
// IPv4 LPM entry naming its slot, or its length among the probed ones) from
// after its exact-set insert until before its exact-set erase, so workers
// find exactly the present prefixes (dataplane/prefix.hpp).
//
// Durability: with a state directory, a change is reported successful only
// after the store has its journal record on disk (see docs/store.md).
#pragma once

#include <rte_rcu_qsbr.h>
#include <sys/mman.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cuckoogate/keys/rule.hpp"
#include "cuckoogate/mem/grow_buffer.hpp"
#include "cuckoogate/store/rule_store.hpp"
#include "dataplane/lookup.hpp"
#include "dataplane/prefix.hpp"

namespace cg {

class Blocklist {
 public:
  struct Options {
    std::size_t capacity = 1u << 20;  // initial rules; the tables grow past it (see grow_tables)
    // The only limit on growth: bytes of the lookup tables (filter + exact
    // set) after a growth; 0 = kDefaultMaxMemory. Hit-counter slots are
    // reserved (virtual, untouched until used) for max_slots() rules.
    std::size_t max_memory = 0;
    int socket = 0;                   // NUMA socket for filter and exact-set memory
    rte_rcu_qsbr* qsv = nullptr;      // the workers' QSBR variable
    std::string name = "cg";          // prefix for DPDK object names
    std::string state_dir;            // durable state; empty = in memory only
    bool salvage = false;             // start despite damaged state (keep the valid part)
    store::RuleStore::Clock clock;    // ms since the epoch; empty = system clock
    // Pure-filter mode (the workers do not verify hits): each address kind
    // gets its own filter entry (kind_keyed_hash). With verify, the src, dst
    // and ip rules of one address share a filter hash and the exact set
    // tells them apart (docs/rules.md, "Key encoding").
    bool kind_keyed_addresses = false;
    // Fewest dead records (replayed at a restart but not a live rule's
    // only record) before maybe_snapshot() compacts (0 = 2^20); past that,
    // as many as the store holds rules. Small in tests.
    std::uint64_t snapshot_every = 0;
  };
  // Opens (and with a state directory, restores) the blocklist. nullptr and
  // *err on failure; *notes gets one line per recovery event worth logging.
  static std::unique_ptr<Blocklist> create(const Options& o, std::string* err,
                                           std::vector<std::string>* notes = nullptr);
  ~Blocklist();
  Blocklist(const Blocklist&) = delete;
  Blocklist& operator=(const Blocklist&) = delete;

  enum class Result { kOk, kExists, kUpdated, kAbsent, kFull, kIoError };
  // ttl_ms > 0: the rule expires by itself (expire_due removes it). The latest
  // add defines the lifetime and the action: on a present rule, kUpdated when
  // the expiry was replaced (a ttl given, or the rule had one) or the action
  // changed, kExists otherwise.
  Result add(const Rule& r, int64_t ttl_ms = 0, RuleAction action = RuleAction::kDefault);
  Result del(const Rule& r);  // kAbsent: not in the blocklist, nothing touched
  bool contains(const Rule& r) const;
  std::size_t size() const noexcept { return store_->size(); }
  // Removes every rule; *n gets how many.
  Result flush(std::size_t* n);

  // All or nothing: either every rule not already present is added (one
  // journal sync), or none is (kFull: the filter or the exact set is full;
  // kIoError: the journal could not be written).
  // A present rule that had an expiry becomes permanent (counted as updated).
  // New rules have the default action; a present rule keeps its own.
  struct BatchResult { std::size_t added = 0, existed = 0, updated = 0; Result result = Result::kOk; };
  // `set`: the named set the new rules join ("" or "default": the default set).
  BatchResult add_batch(const std::vector<Rule>& rules, std::string_view set = {});
  // Many rules as their order keys (rule_order_key) in one buffer: what a
  // `load` holds while it reads (the key and kIndexBytes a rule, not a
  // 104-byte Rule), and what the Blocklist sorts and stores anyway.
  class KeyBatch {
   public:
    static constexpr std::size_t kIndexBytes = sizeof(uint32_t);  // per rule besides its key
    // Throws std::bad_alloc when no memory is left, or the keys would pass
    // 4 GiB (ends are 32-bit: 4 bytes a rule faulted in, not 8; a load holds
    // at most 512 MiB): nothing added then.
    void add(const Rule& r) {
      key_.clear();
      append_rule_order_key(r, &key_);
      const std::size_t end64 = bytes_.size() + key_.size();
      if (end64 > UINT32_MAX) throw std::bad_alloc();
      const auto end = static_cast<uint32_t>(end64);
      if (!bytes_.reserve(key_.size()) || !ends_.reserve(sizeof end)) throw std::bad_alloc();
      (void)bytes_.append(key_.data(), key_.size());  // reserved: cannot fail
      (void)ends_.append(&end, sizeof end);
    }
    std::size_t size() const noexcept { return ends_.size() / sizeof(uint32_t); }
    std::size_t bytes() const noexcept { return bytes_.size(); }
    std::string_view key(std::size_t i) const noexcept {
      const std::size_t b = i == 0 ? 0 : end(i - 1);
      return std::string_view(bytes_.data() + b, end(i) - b);
    }
    std::vector<Rule> rules() const;  // decoded, in order
    void clear() {
      bytes_.release();
      ends_.release();
      std::string().swap(key_);
    }

   private:
    std::size_t end(std::size_t i) const noexcept {
      uint32_t e;
      std::memcpy(&e, ends_.data() + i * sizeof e, sizeof e);
      return e;
    }
    // Grown without copying (mem::GrowBuffer: mremap), not by doubling a
    // std::string and a vector (which copied and re-touched every byte ~twice).
    mem::GrowBuffer bytes_;
    mem::GrowBuffer ends_;  // key i ends at end(i): uint32_t each
    std::string key_;       // the key being added
  };
  // add_batch of the rules the keys are (every key from KeyBatch::add).
  BatchResult add_batch(const KeyBatch& keys, std::string_view set = {});

  // Named sets (docs/rules.md, "Named sets"). A rule belongs to one set, the
  // one its first add named; an add into another set leaves it where it is.
  // replace_set makes the set's rules exactly `rules`, all or nothing, as one
  // journal transaction: listed rules not present are added to it, its rules
  // not listed are deleted, its listed rules are kept (hit counters kept; a
  // ttl dropped, as a load drops it: the stream's rules have none), listed
  // rules of other sets stay theirs (`elsewhere`). New
  // rules reach the lookup structures before the sync, removed ones leave
  // after it: workers never see the set without a rule that both have.
  struct ReplaceResult {
    std::size_t added = 0, deleted = 0, kept = 0, elsewhere = 0;
    Result result = Result::kOk;  // kFull, kIoError: nothing changed
  };
  ReplaceResult replace_set(std::string_view set, const KeyBatch& keys);
  ReplaceResult replace_set(std::string_view set, const std::vector<Rule>& rules);
  // Rules per named set ("default" for the default set), sets in first-use order.
  // Safe from any thread; O(sets) (the store counts them as rules come and go).
  std::vector<std::pair<std::string, std::size_t>> set_counts() const;
  // The same as `info` lines: "sets.NAME N\n" per set.
  void set_count_lines(std::string& out) const;

  // Changes applied together with one journal sync (group commit of
  // pipelined requests, and atomic multi-rule requests). Each change sees the
  // effect of the ones before it.
  struct Change {
    // kForget: remove the rule if it is there; its absence fails nothing
    // (an add whose expiry passed before it was applied: the Redis sync).
    enum class Op : uint8_t { kAdd, kDel, kForget };
    Op op = Op::kAdd;
    Rule rule;
    int64_t ttl_ms = 0;  // add only; 0 = no expiry
    std::string set = {};  // add only: the named set of a new rule ("" or "default": default)
    RuleAction action = RuleAction::kDefault;  // add only: the rule's action from now on
  };
  enum class Outcome : uint8_t {
    kAdded, kExists, kUpdated,  // add (kUpdated: the lifetime replaced, and maybe the action)
    kActionUpdated,             // add: only the action replaced
    kDeleted, kAbsent,          // del
    kFull,                      // add: no room (filter path or capacity)
    kIoError,                   // the journal could not be written: nothing applied
    kNotApplied,                // atomic: another change failed, so this one was not made
  };
  // atomic=false: each change succeeds or fails alone (kFull, kAbsent).
  // atomic=true: all or nothing; if a change would be kFull or kAbsent, it
  // reports that and every other change kNotApplied. Returns the outcomes in
  // the order of `changes`.
  //
  // mark: a named value journalled in the same sync as the changes, also when
  // they all fail or change nothing (the Redis sync's last applied stream ID,
  // docs/sync.md). If it cannot be written, every outcome is kIoError.
  std::vector<Outcome> apply(const std::vector<Change>& changes, bool atomic,
                             const store::RuleStore::Mark* mark = nullptr);
  // apply(changes, /*atomic=*/false, mark) for the Redis sync's runs of
  // add/del entries (catch-up batches of up to 50 000): the same outcomes and
  // the same final state, reached in rule-key order. The changes are sorted once by key (a rule's changes stay
  // in their order), each key's changes reduce to its net effect (an add
  // followed by a del of a rule that was absent touches nothing), new rules
  // enter the lookup tables after one growth, and the store gets its records
  // in key order (one ordered pass, one journal sync with the mark). After a
  // crash during the sync, any subset of the group's net effects may be in
  // the journal, without the mark: applying the group again from the
  // previous mark gives the same final state (every op sets a rule's state).
  // If the tables refuse a new rule even after growing, the group is applied
  // by apply() instead (kFull change by change).
  std::vector<Outcome> apply_group(const std::vector<Change>& changes, const store::RuleStore::Mark* mark = nullptr);
  // A mark alone (one journal sync), and a mark's value (nullopt: never set).
  Result set_mark(const store::RuleStore::Mark& mark);
  std::optional<std::string> mark(std::string_view name) const { return store_->mark(name); }
  // The store's clock (ms since the Unix epoch): what rule expiry is measured by.
  int64_t now_ms() const { return store_->now(); }

  // Removes every rule of one kind (one journal sync); *n gets how many.
  Result flush_kind(RuleKind kind, std::size_t* n);

  // Removes the rules whose expiry has passed; returns how many.
  std::size_t expire_due();
  // Milliseconds until the next expiry (nullopt: none pending).
  std::optional<int64_t> ms_to_next_expiry() const;
  // Compacts the journal into a snapshot when it has grown large.
  void maybe_snapshot();

  // Rules in listing order (kind, then rule_order_key), optionally one kind
  // and only those whose canonical text after the kind starts with `prefix`.
  // f gets the rule's canonical text (as stored) and its remaining lifetime
  // in ms (0 = no expiry).
  void for_each(std::optional<RuleKind> kind, std::string_view prefix,
                const std::function<void(std::string_view text, int64_t ttl_left_ms)>& f) const;
  // The same, only the rules of the named set `set` when given, and f also
  // gets each rule's set name ("default" for the default set) and action.
  using SetVisitor = std::function<void(std::string_view text, int64_t ttl_left_ms, std::string_view set,
                                        RuleAction action)>;
  void for_each_in_set(std::optional<RuleKind> kind, std::string_view prefix,
                       std::optional<std::string_view> set, const SetVisitor& f) const;

  const GatewayFilter& filter() const noexcept { return *filter_; }
  const ExactSet& exact() const noexcept { return *exact_; }
  // The prefix lengths in use per kind and family, and the probe workers run
  // for prefix rules (dataplane/prefix.hpp).
  const PrefixTables& prefixes() const noexcept { return *prefixes_; }
  // Bit k set iff at least one exact (non-prefix) rule of kind k is
  // present. Workers skip the
  // keys of absent kinds. The bit is stored before the rule's fingerprint is
  // inserted and before the generation bump that follows; a worker reads the
  // generation (acquire) first and the mask after it, so a burst that sees
  // the rule's generation sees its bit (the release on the mask alone would
  // not order the later filter stores on ARM; the generation does).
  const std::atomic<uint32_t>& kind_mask() const noexcept { return kind_mask_; }
  std::size_t capacity() const noexcept { return capacity_; }

  // Growth (docs/concurrency.md, "Growth"). The current lookup tables, for
  // workers: load once per burst with acquire, AFTER the generation. The
  // control thread replaces them by a pair built at twice the size when an
  // insert finds them full, and frees the old pair only after every worker
  // reported a quiescent state (rte_rcu_qsbr_synchronize on Options::qsv).
  static constexpr std::size_t kDefaultMaxMemory = std::size_t{4} << 30;
  const std::atomic<const LookupTables*>& tables() const noexcept { return tables_; }
  std::size_t max_memory() const noexcept { return max_memory_; }
  // Hit-counter slots that exist (slot_removed_at() and the engine's
  // counters have this many entries): enough for max_memory.
  std::size_t max_slots() const noexcept { return max_slots_; }
  std::size_t table_bytes() const noexcept;  // filter + exact set now
  // Resident bytes per structure, for `info` (memory.*): the filter's and
  // exact set's tables, the rule store's ordered set and expiry index
  // (estimated from allocation sizes, store::SkipListMap::memory_bytes), and
  // the hit-counter slots committed so far (removed_at and the per-slot base;
  // the engine adds its per-worker counters: slots_used() each).
  struct MemoryUse {
    std::size_t filter = 0, exact = 0, store = 0, ttl = 0, hits = 0;
    std::size_t prefixes = 0;  // IPv4 prefix tables (PrefixTables::memory_bytes)
  };
  MemoryUse memory_use() const noexcept;
  // Hit-counter slots handed out so far (the high-water mark of rules present).
  std::size_t slots_used() const noexcept { return next_slot_.load(std::memory_order_relaxed); }
  uint64_t growths() const noexcept { return growths_; }
  // For a thread other than the control thread that reads filter(),
  // exact() or table_bytes() (the telemetry thread's `info`): held, no
  // growth frees the tables under it. The control thread never needs it.
  std::unique_lock<std::mutex> lock_tables() const { return std::unique_lock<std::mutex>(tables_mu_); }
  double last_growth_ms() const noexcept { return last_growth_ms_; }
  // Zeroed per-slot atomics (64-bit counters, action bytes) for max_slots()
  // slots: reserved address space (MAP_NORESERVE), pages committed only when
  // a slot is first used.
  template <class T = uint64_t>
  static std::atomic<T>* reserve_slot_array(std::size_t slots) noexcept;
  template <class T>
  static void release_slot_array(std::atomic<T>* a, std::size_t slots) noexcept;

  // The blocklist generation: bumped (release) after every change of the
  // lookup structures (add, del, expiry, flush, load, undo). A worker reads it
  // (acquire) at the start of a burst; a flow verdict cached at an older
  // generation is re-evaluated, so a change reaches every flow within a burst.
  const std::atomic<uint64_t>& generation() const noexcept { return generation_; }
  // Bumped (release, after generation) only by changes that add a lookup
  // entry (add, load): a cached "pass" is re-evaluated when this moves. A
  // removal (del, expiry, flush) cannot turn a pass into a drop, so it
  // leaves passing flows cached; blocked flows check slot_removed_at.
  const std::atomic<uint64_t>& pass_generation() const noexcept { return pass_generation_; }
  // Per hit-counter slot: the generation at which the rule holding it was
  // last removed (stored with release before the generation bump). A flow
  // blocked at generation G by the rule in slot s is still blocked by that
  // same rule iff removed_at[s] < G: the rule was present at G, and a removal
  // since then would have stored a value >= G.
  const std::atomic<uint64_t>* slot_removed_at() const noexcept { return removed_at_; }
  // Per hit-counter slot: the action of the rule holding it (RuleAction as a
  // byte). Stored (release) before the exact-set insert that publishes the
  // slot, so a worker that read the slot from the exact set (acquire) reads
  // the rule's action, not the slot's previous rule's; an action change of a
  // present rule is stored after its journal sync and read by the workers'
  // next drop (relaxed: a byte that orders nothing else).
  const std::atomic<uint8_t>* slot_actions() const noexcept { return actions_; }
  // A present rule's action (kDefault if absent).
  RuleAction action(const Rule& r) const;
  // Whether workers can apply per-rule actions: they need the exact set's
  // slots, which a pure-filter gateway (kind_keyed_addresses) does not read.
  bool per_rule_actions() const noexcept { return !kind_keyed_addresses_; }
  bool durable() const noexcept { return store_->durable(); }
  const std::string& last_error() const noexcept { return last_error_; }
  // The state directory's health for `info`: the journal refuses changes
  // after an I/O error; compactions that failed (a full disk, say) and why
  // the last one did ("" once one succeeds).
  bool store_read_only() const noexcept { return store_->read_only(); }
  uint64_t compaction_failures() const noexcept { return compaction_failures_; }
  const std::string& compaction_error() const noexcept { return compaction_error_; }

  // Per-rule hit counters (confirmed drops; counted only with verify on). The
  // counters live per worker; `reader(slot)` sums them. Slots are < max_slots()
  // (not capacity(): after growth and shrink a rule may keep a higher slot).
  void set_hit_reader(std::function<uint64_t(uint32_t slot)> reader) { hit_reader_ = std::move(reader); }
  // Confirmed hits of a present rule since it was added (0 if absent).
  uint64_t hits(const Rule& r) const;

 private:
  struct Keys { uint64_t hash; Key128 key; };
  Keys keys_of(const Rule& r) const;
  Keys keys_of_key(std::string_view lookup_key) const;  // of a rule_key
  Blocklist() = default;
  // filter + exact set (+ kind mask); false: full. pend: r stays valid until
  // the store has it (pending_); else the caller tracks it in pending_keys_.
  bool insert_lookup(const Rule& r, bool pend = true, RuleAction action = RuleAction::kDefault);
  // insert_lookup of a rule by its keys and kind; prefix: the rule if it is
  // a prefix rule (for the prefix tables), else nullptr. Nothing pended.
  bool insert_keys(const Keys& k, RuleKind kind, const Rule* prefix, RuleAction action = RuleAction::kDefault);
  // A present rule's action changed (after its journal sync).
  void set_action(const Rule& r, RuleAction action);
  void remove_lookup(const Rule& r);        // the reverse
  void remove_stored(std::string_view order_key);  // remove_lookup of a stored rule
  void count_kind(RuleKind k, int delta);
  // Growth. grow_tables builds a filter and exact set for `capacity` rules
  // from the store plus pending_ (rules in the lookup tables that the store
  // does not hold yet), with the same slots, publishes them and reclaims the
  // old pair. false (nothing changed, last_error_ says why): max_memory, EAL
  // memory, or an inconsistency. ensure_room grows (doubling) until `more`
  // further rules fit below the load target.
  bool grow_tables(std::size_t capacity, bool copy = true);
  bool ensure_room(std::size_t more);
  // After mass deletes (called by maybe_snapshot, between requests): tables
  // that grew past the initial capacity and are under 1/8 full are rebuilt
  // at the smallest doubling of it that keeps them at most 1/4 full.
  void maybe_shrink();
  uint32_t take_slot(RuleAction action);
  void release_slot(uint32_t slot);

  // Where the filter's table lives (see filter_alloc); declared before
  // filter_, so that it outlives the filter, whose destructor releases it.
  struct FilterMemory {
    int socket = 0;
    bool eal = true;        // rte_zmalloc_socket; false: mem::map_pages
    std::size_t bytes = 0;  // what map_pages was asked for
  };
  static void* filter_alloc(void* ctx, std::size_t bytes, std::size_t align);
  static void filter_release(void* ctx, void* p);
  bool make_tables(std::size_t capacity, std::unique_ptr<FilterMemory>* mem,
                   std::unique_ptr<GatewayFilter>* f, std::unique_ptr<ExactSet>* e);
  std::unique_ptr<FilterMemory> filter_mem_;  // the current filter's (outlives it)
  std::unique_ptr<GatewayFilter> filter_;
  std::unique_ptr<ExactSet> exact_;
  std::unique_ptr<LookupTables> view_;             // what tables_ points to
  std::atomic<const LookupTables*> tables_{nullptr};
  rte_rcu_qsbr* qsv_ = nullptr;
  int socket_ = 0;
  std::string name_;
  std::size_t max_memory_ = 0, max_slots_ = 0, initial_capacity_ = 0;
  bool kind_keyed_addresses_ = false;  // Options::kind_keyed_addresses
  uint64_t snapshot_every_ = 0;        // Options::snapshot_every
  uint64_t snapshot_records_ = 0;      // records of the last snapshot written (or restored)
  // A compaction that failed is tried again after a pause that doubles
  // (1 s .. 10 min), not after every change: each try rotates the journal and
  // scans the whole store.
  uint64_t compaction_failures_ = 0;
  std::string compaction_error_;
  std::chrono::steady_clock::time_point next_compaction_{};
  std::chrono::milliseconds compaction_backoff_{0};
  uint64_t growths_ = 0;
  mutable std::mutex tables_mu_;  // see lock_tables(); taken by grow_tables around the swap and the frees
  unsigned table_seq_ = 0;  // distinct names for the exact sets' EAL allocations
  double last_growth_ms_ = 0;
  bool restoring_ = false;                 // create(): the store is ahead of the tables
  std::vector<const Rule*> pending_;       // inserted here, not in the store yet (apply, add_batch)
  // The same for add_batch of a KeyBatch: its first n new rules, as their
  // order keys in the batch (no copy of the keys).
  struct PendingKeys {
    const void* ctx = nullptr;  // add_batch's requests (blocklist.cpp)
    std::string_view (*key_at)(const void* ctx, std::size_t i) = nullptr;  // new rule i's order key
    std::size_t n = 0;
    std::string_view key(std::size_t i) const { return key_at(ctx, i); }
  };
  PendingKeys pending_keys_;
  std::unique_ptr<PrefixTables> prefixes_;
  std::unique_ptr<store::RuleStore> store_;
  std::size_t capacity_ = 0;
  std::array<std::size_t, kRuleKindCount + 1> per_kind_{};
  std::atomic<uint32_t> kind_mask_{0};
  std::string last_error_;
  int lock_fd_ = -1;  // flock on the state directory: one gateway per directory
  // Hit-counter slots: one per present rule. A freed slot may still be bumped by
  // a burst that confirmed a hit just before the delete, so a reused slot can
  // inherit at most that burst's count; base_ subtracts what it held before
  // (max_slots_ entries, reserved pages, written only when a slot is reused).
  std::vector<uint32_t> free_slots_;
  // Written by the control thread only; atomic (relaxed: counts, no data
  // published through them) because `info` reads them from the telemetry
  // thread too.
  std::atomic<uint32_t> next_slot_{0};
  std::atomic<uint64_t>* base_ = nullptr;
  std::atomic<std::size_t> releases_{0};  // slots released so far (for memory_use)
  std::function<uint64_t(uint32_t)> hit_reader_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> pass_generation_{0};
  std::atomic<uint64_t>* removed_at_ = nullptr;  // max_slots_ entries, reserved pages
  std::atomic<uint8_t>* actions_ = nullptr;       // max_slots_ entries, reserved pages
  void bump_generation(bool added) noexcept;
};

template <class T>
std::atomic<T>* Blocklist::reserve_slot_array(std::size_t slots) noexcept {
  // Anonymous pages read as zero, which is a std::atomic<T> holding 0
  // (lock-free, same representation); untouched pages cost no memory.
  static_assert(std::atomic<T>::is_always_lock_free && sizeof(std::atomic<T>) == sizeof(T));
  void* p = ::mmap(nullptr, slots * sizeof(std::atomic<T>), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<std::atomic<T>*>(p);
}

template <class T>
void Blocklist::release_slot_array(std::atomic<T>* a, std::size_t slots) noexcept {
  if (a != nullptr) ::munmap(a, slots * sizeof(std::atomic<T>));
}

}  // namespace cg
