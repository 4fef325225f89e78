// cg::store::RuleStore — the authoritative, durable, ordered rule set.
//
// A thin facade over SkipListMap (ordered lookups and scans), TtlIndex
// (expiry order) and DurableLog (journal + snapshots). It knows nothing about
// rule syntax: a rule is an opaque `key` (its canonical, order-preserving
// encoding: scans and prefixes are by the bytes of this key) and an opaque
// `text` (e.g. the canonical rule text shown by `list` and replayed on start).
//
// Durability contract: a mutation returns ok only after its journal record is
// on disk (fdatasync); the in-memory set changes after that, so a reader never
// sees a rule that could be lost. add_batch() writes all records and then
// syncs once. On open(), the acknowledged set is restored (snapshot + journal)
// and rules whose expiry has passed are dropped.
//
// Thread-safety:
//   * open(): not concurrent with anything on the same state directory (one
//     process per directory; nothing here takes a lock file).
//   * add, add_batch, del, flush, expire_due, snapshot: safe from any thread;
//     they are serialised by an internal mutex and block on disk I/O, so call
//     them from the control thread, never from a data-path lcore. snapshot()
//     holds the mutex only to rotate the journal; writes proceed while the
//     snapshot file is written.
//   * contains, get, list, list_prefix, size, next_expiry: lock-free, safe
//     from any number of threads concurrently with everything above (they
//     pin the epoch domain; a Cursor pins it for its whole life).
//   * After an I/O error the store is failed: every later mutation returns
//     Errc::io_error (what reached the disk is uncertain), readers still work.
//   * The destructor needs exclusive access.
#pragma once

#include <array>
#include <atomic>
#include <cstring>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cuckoogate/store/durable_log.hpp"
#include "cuckoogate/store/epoch.hpp"
#include "cuckoogate/store/record.hpp"
#include "cuckoogate/store/skiplist_map.hpp"
#include "cuckoogate/store/status.hpp"
#include "cuckoogate/store/ttl_index.hpp"

namespace cg::store {

// A rule's opaque text as the store keeps it in memory: one pointer, null
// for the empty text (the gateway stores none: it rebuilds a rule's text
// from its key), else one heap block [u32 length][bytes]. Immutable once
// built; copies duplicate the block.
class StoredText {
 public:
  StoredText() noexcept = default;
  StoredText(std::string_view t) : p_(make(t)) {}  // NOLINT: implicit, as std::string's
  StoredText(const std::string& t) : StoredText(std::string_view(t)) {}  // NOLINT
  StoredText(const char* t) : StoredText(std::string_view(t)) {}  // NOLINT
  StoredText(const StoredText& o) : p_(make(o.view())) {}
  StoredText(StoredText&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  StoredText& operator=(StoredText o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~StoredText() { delete[] p_; }
  std::string_view view() const noexcept {
    if (p_ == nullptr) return {};
    std::uint32_t n;
    std::memcpy(&n, p_, sizeof n);
    return {p_ + sizeof n, n};
  }
  operator std::string_view() const noexcept { return view(); }  // NOLINT
  std::string str() const { return std::string(view()); }
  bool empty() const noexcept { return p_ == nullptr; }
  std::size_t size() const noexcept { return view().size(); }
  // Bytes of the heap block (0 when empty).
  std::size_t heap_bytes() const noexcept { return p_ == nullptr ? 0 : sizeof(std::uint32_t) + size(); }
  friend bool operator==(const StoredText& a, const StoredText& b) noexcept { return a.view() == b.view(); }
  friend bool operator==(const StoredText& a, std::string_view b) noexcept { return a.view() == b; }
  friend bool operator==(const StoredText& a, const char* b) noexcept { return a.view() == b; }
  friend bool operator==(const StoredText& a, const std::string& b) noexcept { return a.view() == b; }

 private:
  static char* make(std::string_view t) {
    if (t.empty()) return nullptr;
    const auto n = static_cast<std::uint32_t>(t.size());  // records cap texts far below 4 GiB
    char* p = new char[sizeof n + t.size()];
    std::memcpy(p, &n, sizeof n);
    std::memcpy(p + sizeof n, t.data(), t.size());
    return p;
  }
  char* p_ = nullptr;
};

struct RuleMeta {
  std::uint64_t id = 0;              // unique per add; the journal number of the add
  std::int64_t added_unix_ms = 0;
  std::int64_t expiry_unix_ms = 0;   // 0 = never expires
  StoredText text;                   // as given to add ("" in the gateway: see docs/store.md)
  std::uint32_t set_id = 0;          // its named set (RuleStore::set_name); 0 = "default"
  std::uint8_t action = 0;           // the caller's per-rule byte, as the latest add gave it (0 = none)
  bool operator==(const RuleMeta&) const = default;
};

// The text's heap block (none for the empty text).
inline std::size_t value_heap_bytes(const RuleMeta& m) noexcept { return m.text.heap_bytes(); }

// A rule's metadata as the ordered map holds it: 24 bytes, not RuleMeta's 40
// (docs/store.md, "Rule metadata in memory"). The id and the expiry as they
// are; the added time (48-bit signed milliseconds, years -2489..6429) and the
// set id (15 bits) share one word whose top bit marks a rule with a side
// entry instead: one with a text (older state, or a caller that gives one),
// an action (the gateway's per-rule reject: few rules), or an added time or
// set id outside those ranges. Such a rule's added time, set id, action and
// text are in the store's side table (SideMeta, by key).
class PackedMeta {
 public:
  static constexpr int kAddedBits = 48;
  static constexpr int kSetBits = 15;
  PackedMeta() noexcept = default;
  // m without its side part (has_side() when m does not fit).
  explicit PackedMeta(const RuleMeta& m) noexcept;
  PackedMeta(std::uint64_t id, std::int64_t added_unix_ms, std::int64_t expiry_unix_ms, std::string_view text,
             std::uint32_t set_id, std::uint8_t action = 0) noexcept;
  // Whether a rule with these values packs without a side entry.
  static bool fits(std::int64_t added_unix_ms, std::string_view text, std::uint32_t set_id,
                   std::uint8_t action = 0) noexcept;

  std::uint64_t id = 0;
  std::int64_t expiry_unix_ms = 0;  // 0 = never expires
  bool has_side() const noexcept { return (word_ >> 63) != 0; }
  // Meaningful only without a side entry.
  std::int64_t added_unix_ms() const noexcept {
    return static_cast<std::int64_t>(word_ << (64 - kAddedBits)) >> (64 - kAddedBits);  // sign-extends
  }
  std::uint32_t set_id() const noexcept {
    return static_cast<std::uint32_t>((word_ >> kAddedBits) & ((1U << kSetBits) - 1));
  }
  bool operator==(const PackedMeta&) const = default;

 private:
  std::uint64_t word_ = 0;  // [side: 1][set id: 15][added: 48]
};
static_assert(sizeof(PackedMeta) == 24);

// The part of a rule that does not fit a PackedMeta (see there). `id` says
// which rule it belongs to: a reader that meets a rule's node and then its
// key's side entry with another id (or none) met a rule deleted meanwhile.
struct SideMeta {
  std::uint64_t id = 0;
  std::int64_t added_unix_ms = 0;
  StoredText text;
  std::uint32_t set_id = 0;
  std::uint8_t action = 0;
};
inline std::size_t value_heap_bytes(const SideMeta& m) noexcept { return m.text.heap_bytes(); }

// AddRequest::action / Change::action: leave a present rule's action as it is.
inline constexpr std::uint8_t kKeepAction = 0xff;

class RuleStore {
 public:
  using Clock = std::function<std::int64_t()>;  // milliseconds since the Unix epoch
  static std::int64_t system_clock_ms();

  struct Options {
    std::string state_dir;  // empty: in memory only (nothing survives)
    bool salvage = false;   // see DurableLog: keep the valid prefix of damaged state
    Clock clock;            // empty: system_clock_ms
    std::uint64_t seed = 0x2545f4914f6cdd1dULL;  // skip-list tower heights
  };
  struct AddRequest {
    std::string_view key;
    std::string_view text;
    std::int64_t ttl_ms = 0;  // 0 = no expiry
    std::string_view set = {};  // named set of a new rule ("" = default); a present rule keeps its own
    // The rule's action byte (0 = none); the latest add's replaces a present
    // one's, except kKeepAction: a present rule keeps its own, a new one gets 0.
    std::uint8_t action = 0;
  };
  struct Removed {
    std::string key;
    RuleMeta meta;
  };
  // A weakly consistent ordered scan (SkipListMap::Cursor's guarantees):
  // value() is the rule's RuleMeta, rebuilt from its PackedMeta (and side
  // entry) when asked for, valid until the next call to next().
  class Cursor {
   public:
    Cursor(Cursor&&) noexcept = default;
    bool next();
    std::string_view key() const noexcept { return c_.key(); }
    const RuleMeta& value() const;

   private:
    friend class RuleStore;
    Cursor(const RuleStore* st, SkipListMap<PackedMeta>::Cursor c) : st_(st), c_(std::move(c)) {}
    const RuleStore* st_;
    SkipListMap<PackedMeta>::Cursor c_;
    mutable RuleMeta cur_;
    mutable bool ready_ = false;  // cur_ holds the current entry's RuleMeta
  };
  // Lookups of keys in increasing order, each search starting where the
  // previous one ended (SkipListMap::OrderedFinder): a bulk load's presence
  // checks. find()'s result is valid until the next find. Lock-free like
  // get(); one thread, short-lived.
  class Finder {
   public:
    Finder(Finder&&) noexcept = default;
    const RuleMeta* find(std::string_view key);
    // The last find() met no rule at or after its key: with no write to the
    // store since (the caller is its only writer), every larger key is
    // absent too (SkipListMap::OrderedFinder::past_end).
    bool past_end() const noexcept { return f_.past_end(); }

   private:
    friend class RuleStore;
    explicit Finder(const RuleStore* st) : st_(st), f_(st->rules_.ordered_finder()) {}
    const RuleStore* st_;
    SkipListMap<PackedMeta>::OrderedFinder f_;
    RuleMeta cur_;
  };

  // Restores the state directory (see the durability contract). Errors:
  // corrupt (damage before the journal tail, without salvage), io_error.
  static Status open(Options opt, std::unique_ptr<RuleStore>* out,
                     RecoveryReport* report = nullptr);
  ~RuleStore();

  // The latest add defines a rule's lifetime (as `ipset add -exist` refreshes
  // a timeout) and its action: an add of a present key with ttl_ms > 0, of a
  // present key that has an expiry, or with another action than the present
  // rule's, replaces its expiry and action (its id, text, set and added time
  // stay).
  //
  // ok (rule stored, *added filled), exists (present, both without expiry,
  // the same action: nothing written), updated (present: expiry and action
  // replaced), invalid_argument (empty key, negative ttl, too large), io_error.
  Status add(std::string_view key, std::string_view text, std::int64_t ttl_ms = 0,
             RuleMeta* added = nullptr, std::uint8_t action = 0);
  // Like add() for many rules with one fsync. results[i] is ok / exists /
  // updated / invalid_argument for reqs[i] (duplicates inside the batch: the
  // first wins, later ones report exists). The return value is ok or the I/O
  // error (then none of the batch is applied in memory).
  Status add_batch(std::span<const AddRequest> reqs, std::vector<Errc>* results);
  // The same for n requests made on demand: at(ctx, i) is request i, asked
  // for several times; the views in it stay valid until this returns. For a
  // caller that holds its batch otherwise (a bulk load: its keys in one
  // buffer) and need not build an array of AddRequest, 56 bytes a rule.
  using RequestAt = AddRequest (*)(const void* ctx, std::size_t i);
  Status add_batch(std::size_t n, RequestAt at, const void* ctx, std::vector<Errc>* results);

  // One change of a group commit.
  struct Change {
    enum class Op : std::uint8_t { add, del };
    Op op = Op::add;
    std::string_view key;
    std::string_view text;    // add only
    std::int64_t ttl_ms = 0;  // add only; 0 = no expiry
    std::string_view set = {};  // add only: as AddRequest::set
    std::uint8_t action = 0;    // add only: as AddRequest::action
  };
  // Applies the changes in order, each seeing the effect of those before it
  // (add: ok / exists / updated / invalid_argument as for add(); del: ok /
  // absent), with one fsync for the whole group. The return value is ok or the
  // I/O error; then nothing of the group is applied in memory.
  //
  // A mark (name, value), when given, is journalled with the group in the
  // same fsync, whatever the changes' outcomes: the Redis sync records the
  // last stream ID it applied with the changes of that ID (docs/sync.md).
  struct Mark {
    std::string_view name;
    std::string_view value;
  };
  //
  // atomic: the group's records are journalled as one transaction (a txn
  // record first, docs/store.md): after a crash at any point, a restart
  // restores all of the group or none of it.
  //
  // Changes whose keys never decrease (Blocklist::apply_group sorts them) are
  // looked up and new rules inserted in one ordered pass each (the skip
  // list's fingers), not with a search from the head per change.
  Status apply(std::span<const Change> changes, std::vector<Errc>* results, const Mark* mark = nullptr,
               bool atomic = false);
  // Journals a mark alone (one fsync). ok, invalid_argument (empty name), io_error.
  Status set_mark(const Mark& mark);
  // The latest value of a mark (restored on open, kept by snapshots); nullopt
  // if never set. Safe from any thread.
  std::optional<std::string> mark(std::string_view name) const;
  // ok (*removed filled), absent (nothing written), io_error.
  Status del(std::string_view key, RuleMeta* removed = nullptr);
  // A rule to move from one key to another: the gateway's restore moves a
  // rule stored under the key of an older canonical form (docs/store.md,
  // "Keys and texts") to its key now.
  struct Move {
    std::string_view from, to;
    std::string_view text;  // the moved rule's text from now on
  };
  // Moves rules to new keys in one atomic journal transaction (one fsync):
  // the rule at `from` is deleted and added at `to` with its id, added time,
  // expiry and set, and `text`. When `to` is present already (the same rule
  // stored in both forms), `from` is deleted and the rule at `to` keeps its
  // id, added time, set, text and action (an add under the newer key came
  // after the old one's: docs/store.md) and takes the longer of the two
  // lifetimes (no expiry outlives any). results[i]: ok (moved), exists (merged into `to`), absent
  // (no rule at `from`), invalid_argument (an empty key, from == to, a
  // record too large). The return value is ok or the I/O error; then
  // nothing is applied in memory.
  Status move(std::span<const Move> moves, std::vector<Errc>* results);
  // Removes every rule (one journal record).
  Status flush(std::vector<Removed>* removed = nullptr);
  // Removes up to `max` rules whose expiry is <= now_ms (journalled, one
  // fsync) and appends them to *expired, earliest first.
  Status expire_due(std::int64_t now_ms, std::vector<Removed>* expired,
                    std::size_t max = SIZE_MAX);
  Status expire_due(std::vector<Removed>* expired) { return expire_due(now(), expired); }
  // Writes a compacted snapshot and drops the journals it covers.
  Status snapshot();

  bool contains(std::string_view key) const { return rules_.contains(key); }
  Finder finder() const { return Finder(this); }
  std::optional<RuleMeta> get(std::string_view key) const;
  // Weakly consistent ordered scans (see SkipListMap::Cursor).
  Cursor list(std::string_view lo = {}, std::optional<std::string_view> hi = std::nullopt) const {
    return Cursor(this, rules_.scan(lo, hi));
  }
  Cursor list_prefix(std::string_view prefix) const { return Cursor(this, rules_.scan_prefix(prefix)); }
  std::size_t size() const noexcept { return rules_.size(); }
  // Named sets: a rule belongs to the set its first add named (RuleMeta::set_id).
  // The name of a set id ("" for 0, the set "default"). Safe from any thread.
  std::string set_name(std::uint32_t id) const;
  // The id of a set name that some rule has used (nullopt: none ever did).
  std::optional<std::uint32_t> find_set(std::string_view name) const;
  // Rules per set, by name ("" = default), sets without rules left out.
  // Counted as rules come and go (O(sets), any thread; counts read while a
  // writer works may be a few changes apart); a scan of every rule only
  // once more than kCountedSets set names were ever used.
  std::vector<std::pair<std::string, std::size_t>> set_counts() const;
  std::optional<std::int64_t> next_expiry() const { return ttl_.next_deadline(); }
  // Estimated heap bytes of the ordered rule set (with the side table) and of
  // the expiry index (SkipListMap::memory_bytes). Safe from any thread.
  std::size_t rules_memory_bytes() const noexcept { return rules_.memory_bytes() + side_.memory_bytes(); }
  // Rules with a side entry (SideMeta): a text, or values a PackedMeta cannot hold.
  std::size_t side_entries() const noexcept { return side_.size(); }
  std::size_t ttl_memory_bytes() const noexcept { return ttl_.memory_bytes(); }
  std::int64_t now() const { return clock_(); }
  bool durable() const noexcept { return log_ != nullptr; }
  // After an I/O error the journal refuses every change until a restart
  // (docs/store.md, "fsyncgate"): what `info` shows as store.read_only.
  bool read_only() const noexcept { return failed_; }
  // Journal records written since the last snapshot (0 when in memory): the
  // control thread may call snapshot() when this grows large.
  std::uint64_t records_since_snapshot() const;
  // Frees retired nodes (the control thread may call this between commands).
  void reclaim() noexcept { domain_.collect(); }

 private:
  explicit RuleStore(Options opt);
  Status check_writable() const;
  struct Requests {  // add_many's requests: reqs[i] is at(ctx, i)
    std::size_t n;
    RequestAt at;
    const void* ctx;
    std::size_t size() const noexcept { return n; }
    AddRequest operator[](std::size_t i) const { return at(ctx, i); }
  };
  Status add_many(const Requests& reqs, std::vector<Errc>* results, RuleMeta* first_added);
  // apply() for changes whose keys never decrease (write_mu_ held, results
  // sized, writable checked): one ordered pass to look the keys up and one to
  // insert new rules, no map of touched keys, no record built per new rule.
  Status apply_sorted(std::span<const Change> changes, std::vector<Errc>* results, const Mark* mark,
                      bool atomic);
  Status append_and_sync(const std::vector<StoreRecord>& recs);
  void note_synced();
  // After the record is durable (an add replaces a present rule).
  void apply_in_memory(StoreRecord&& r);
  void apply_replay(std::string_view payload, Status* error);
  void replay_record(StoreRecord&& r);
  std::uint32_t intern_set(std::string_view name);
  void clear_memory(std::vector<Removed>* removed);
  // p (the node of `key`) as a RuleMeta, with its side entry if it has one;
  // false when that entry is gone or another rule's (the rule was deleted
  // or replaced after p was read). Lock-free.
  bool unpack(std::string_view key, const PackedMeta& p, RuleMeta* out) const;
  // The map side of a mutation (write_mu_ held, or open()): the side entry
  // goes in before the node is published and out after the node is erased,
  // so a reader that reaches a node with has_side() finds its entry unless
  // the rule is being deleted.
  void insert_rule(std::string_view key, const RuleMeta& m);
  // The rules_ membership counts per set id (writers: every insert into and
  // erase from rules_ calls it; one writer at a time, under write_mu_ or in
  // open()).
  void count_set(std::uint32_t set_id, bool add) noexcept {
    if (set_id >= kCountedSets) return;
    std::atomic<std::size_t>& n = set_count_[set_id];
    // relaxed: a count for reports, ordering nothing; one writer, so a load
    // and a store (no read-modify-write).
    n.store(add ? n.load(std::memory_order_relaxed) + 1 : n.load(std::memory_order_relaxed) - 1,
            std::memory_order_relaxed);
  }
  void insert_side(std::string_view key, const RuleMeta& m);
  bool erase_rule(std::string_view key, RuleMeta* removed);

  Options opt_;
  Clock clock_;
  EpochDomain domain_;  // shared by rules_ and ttl_; declared first, destroyed last
  SkipListMap<PackedMeta> rules_;
  SkipListMap<SideMeta> side_;  // by rule key: the rules whose PackedMeta has_side()
  TtlIndex ttl_;
  std::unique_ptr<DurableLog> log_;
  std::mutex write_mu_;     // serialises mutations
  std::mutex snapshot_mu_;  // one snapshot at a time
  mutable std::mutex marks_mu_;  // guards marks_ (written under write_mu_ too)
  std::unordered_map<std::string, std::string> marks_;
  std::uint64_t mem_seq_ = 0;  // id source when in memory only
  mutable std::mutex sets_mu_;  // guards set_names_ (appended by writers, read by anyone)
 public:
  static constexpr std::size_t kCountedSets = 1024;  // set ids with a count kept
 private:
  std::array<std::atomic<std::size_t>, kCountedSets> set_count_{};
  std::vector<std::string> set_names_{std::string()};  // set id -> name; 0 = default
  std::unordered_map<std::string, std::uint32_t> set_ids_{{std::string(), 0}};  // name -> set id
  // Replay of a transaction (RecordOp::txn): its records wait here until the
  // last one is read; a journal that ends first leaves them unapplied.
  std::uint64_t txn_left_ = 0;
  std::vector<StoreRecord> txn_records_;
  // Replay's adds (open() only) go through one ordered inserter: a journal
  // holds its bulk loads as sorted runs, and a key above the previous one is
  // linked from the previous key's fingers instead of an erase's search and
  // an insert's search from the head. Dropped before every erase (its pin
  // would hold back the erased node's reclamation) and when replay ends.
  std::optional<SkipListMap<PackedMeta>::OrderedInserter> replay_inserter_;
  std::atomic<std::uint64_t> since_snapshot_{0};
  bool failed_ = false;
};

}  // namespace cg::store
