#include "cuckoogate/store/rule_store.hpp"

#include <algorithm>
#include <chrono>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "cuckoogate/store/key_order.hpp"  // BulkAllocator

namespace cg::store {

std::int64_t RuleStore::system_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

RuleStore::RuleStore(Options opt)
    : opt_(std::move(opt)),
      clock_(opt_.clock ? opt_.clock : Clock(&RuleStore::system_clock_ms)),
      rules_(opt_.seed, &domain_),
      side_(opt_.seed ^ 0xd1b54a32d192ed03ULL, &domain_),
      ttl_(opt_.seed ^ 0x9e3779b97f4a7c15ULL, &domain_) {}

namespace {
constexpr std::int64_t kAddedMin = -(std::int64_t{1} << (PackedMeta::kAddedBits - 1));
constexpr std::int64_t kAddedMax = (std::int64_t{1} << (PackedMeta::kAddedBits - 1)) - 1;
constexpr std::uint64_t kAddedMask = (std::uint64_t{1} << PackedMeta::kAddedBits) - 1;
constexpr std::uint64_t kSideBit = std::uint64_t{1} << 63;
}  // namespace

bool PackedMeta::fits(std::int64_t added_unix_ms, std::string_view text, std::uint32_t set_id,
                      std::uint8_t action) noexcept {
  return text.empty() && action == 0 && added_unix_ms >= kAddedMin && added_unix_ms <= kAddedMax &&
         set_id < (1U << kSetBits);
}

PackedMeta::PackedMeta(std::uint64_t id_, std::int64_t added_unix_ms, std::int64_t expiry, std::string_view text,
                       std::uint32_t set_id, std::uint8_t action) noexcept
    : id(id_), expiry_unix_ms(expiry) {
  if (!fits(added_unix_ms, text, set_id, action)) {
    word_ = kSideBit;
    return;
  }
  word_ = (static_cast<std::uint64_t>(added_unix_ms) & kAddedMask) |
          (static_cast<std::uint64_t>(set_id) << kAddedBits);
}

PackedMeta::PackedMeta(const RuleMeta& m) noexcept
    : PackedMeta(m.id, m.added_unix_ms, m.expiry_unix_ms, m.text.view(), m.set_id, m.action) {}

bool RuleStore::unpack(std::string_view key, const PackedMeta& p, RuleMeta* out) const {
  out->id = p.id;
  out->expiry_unix_ms = p.expiry_unix_ms;
  if (!p.has_side()) {
    out->added_unix_ms = p.added_unix_ms();
    out->set_id = p.set_id();
    out->action = 0;
    if (!out->text.empty()) out->text = StoredText();
    return true;
  }
  std::optional<SideMeta> s = side_.find(key);
  if (!s || s->id != p.id) return false;
  out->added_unix_ms = s->added_unix_ms;
  out->set_id = s->set_id;
  out->action = s->action;
  out->text = std::move(s->text);
  return true;
}

std::optional<RuleMeta> RuleStore::get(std::string_view key) const {
  for (;;) {
    const std::optional<PackedMeta> p = rules_.find(key);
    if (!p) return std::nullopt;
    RuleMeta m;
    // A failure means the rule was deleted or replaced after p was read (a
    // writer progressed): look again.
    if (unpack(key, *p, &m)) return m;
  }
}

bool RuleStore::Cursor::next() {
  ready_ = false;
  while (c_.next()) {
    if (!c_.value().has_side()) return true;  // unpacked when value() asks
    // A rule whose side entry is gone was deleted during the scan: it may be
    // left out (SkipListMap::Cursor's contract).
    if (st_->unpack(c_.key(), c_.value(), &cur_)) {
      ready_ = true;
      return true;
    }
  }
  return false;
}

const RuleMeta& RuleStore::Cursor::value() const {
  if (!ready_) {
    st_->unpack(c_.key(), c_.value(), &cur_);  // no side entry: always succeeds
    ready_ = true;
  }
  return cur_;
}

const RuleMeta* RuleStore::Finder::find(std::string_view key) {
  const PackedMeta* p = f_.find(key);
  if (p == nullptr) return nullptr;
  if (st_->unpack(key, *p, &cur_)) return &cur_;
  std::optional<RuleMeta> m = st_->get(key);  // replaced meanwhile: its present state
  if (!m) return nullptr;
  cur_ = std::move(*m);
  return &cur_;
}

void RuleStore::insert_side(std::string_view key, const RuleMeta& m) {
  if (PackedMeta::fits(m.added_unix_ms, m.text.view(), m.set_id, m.action)) return;
  // erase_rule() took any earlier rule's entry of this key out with its node.
  // One can be left only by an insert whose entry went in and whose node did
  // not (bad_alloc); it is replaced, so that no node meets an entry of another
  // id for good (get() would retry forever).
  if (side_.insert(key, SideMeta{m.id, m.added_unix_ms, m.text, m.set_id, m.action}) == InsertResult::exists) {
    side_.erase(key);
    side_.insert(key, SideMeta{m.id, m.added_unix_ms, m.text, m.set_id, m.action});
  }
}

void RuleStore::insert_rule(std::string_view key, const RuleMeta& m) {
  insert_side(key, m);
  if (rules_.insert(key, PackedMeta(m)) == InsertResult::inserted) count_set(m.set_id, true);
}

bool RuleStore::erase_rule(std::string_view key, RuleMeta* removed) {
  PackedMeta p;
  if (rules_.erase(key, &p) != EraseResult::erased) return false;
  if (!p.has_side()) {
    count_set(p.set_id(), false);
    if (removed != nullptr) unpack(key, p, removed);
    return true;
  }
  SideMeta s;
  side_.erase(key, &s);
  count_set(s.set_id, false);
  if (removed != nullptr) {
    removed->id = p.id;
    removed->expiry_unix_ms = p.expiry_unix_ms;
    removed->added_unix_ms = s.added_unix_ms;
    removed->set_id = s.set_id;
    removed->action = s.action;
    removed->text = std::move(s.text);
  }
  return true;
}

RuleStore::~RuleStore() = default;

Status RuleStore::open(Options opt, std::unique_ptr<RuleStore>* out, RecoveryReport* report) {
  std::unique_ptr<RuleStore> st(new RuleStore(std::move(opt)));
  if (!st->opt_.state_dir.empty()) {
    Status replay_error;
    auto apply = [&](std::uint64_t, std::string_view payload) {
      if (replay_error.ok()) st->apply_replay(payload, &replay_error);
    };
    DurableLog::Options lo;
    lo.dir = st->opt_.state_dir;
    lo.salvage = st->opt_.salvage;
    const Status opened = DurableLog::open(lo, apply, apply, &st->log_, report);
    st->replay_inserter_.reset();  // replay is over (or failed): its pin goes
    if (!opened.ok()) return opened;
    if (!replay_error.ok()) return replay_error;
    st->note_synced();
    if (st->txn_left_ > 0 || !st->txn_records_.empty()) {
      // A crash cut an atomic group short: none of it was applied. Close it
      // in the journal, or the records appended from now on would be read
      // as its missing part at the next start.
      const std::size_t cut = st->txn_records_.size();
      st->txn_records_.clear();
      st->txn_left_ = 0;
      StoreRecord abort;
      abort.op = RecordOp::txn_abort;
      if (Status s = st->append_and_sync({abort}); !s.ok()) return s;
      if (report != nullptr)
        report->notes.push_back("discarded an atomic change cut short by a crash (" + std::to_string(cut) +
                                " of its records were on disk; none applied)");
    }
  }
  // Drop what expired while we were down; index the rest by deadline.
  const std::int64_t now = st->clock_();
  std::vector<std::string> expired;
  for (auto c = st->rules_.scan(); c.next();) {
    const PackedMeta& m = c.value();
    if (m.expiry_unix_ms == 0) continue;
    if (m.expiry_unix_ms <= now) {
      expired.emplace_back(c.key());
    } else {
      st->ttl_.schedule(m.expiry_unix_ms, c.key());
    }
  }
  for (const auto& k : expired) st->erase_rule(k, nullptr);
  if (report != nullptr && !expired.empty()) {
    report->notes.push_back("dropped " + std::to_string(expired.size()) +
                            " rule(s) that expired while the store was closed");
  }
  st->domain_.drain();
  *out = std::move(st);
  return Status::Ok();
}

void RuleStore::apply_replay(std::string_view payload, Status* error) {
  StoreRecord r;
  if (!decode_record(payload, &r)) {
    *error = {Errc::corrupt, "a journal or snapshot record passed its checksum but does not decode"
                             " (written by an incompatible version?)"};
    return;
  }
  if ((r.op == RecordOp::add || r.op == RecordOp::del) && r.key.empty()) {
    // The write API refuses an empty key (add_is_valid): this record was not
    // written by a store, and as a rule it would be no rule at all.
    *error = {Errc::corrupt, "a journal or snapshot record passed its checksum but holds a rule with an empty key"};
    return;
  }
  if (r.op == RecordOp::txn) {
    txn_records_.clear();  // an unfinished earlier one: always closed by txn_abort, dropped if not
    txn_left_ = r.id;
    return;
  }
  if (r.op == RecordOp::txn_abort) {
    txn_records_.clear();
    txn_left_ = 0;
    return;
  }
  if (txn_left_ > 0) {
    txn_records_.push_back(std::move(r));
    if (--txn_left_ == 0) {
      for (StoreRecord& t : txn_records_) replay_record(std::move(t));
      txn_records_.clear();
    }
    return;
  }
  replay_record(std::move(r));
}

void RuleStore::replay_record(StoreRecord&& r) {
  switch (r.op) {
    case RecordOp::add: {
      const RuleMeta m{r.id, r.added_unix_ms, r.expiry_unix_ms, std::move(r.text), intern_set(r.set), r.action};
      // The node first, its side entry after: open() has no concurrent
      // readers (insert_rule's order is for them), and a present rule's side
      // entry must still be its own when erase_rule reads it below (its set
      // is counted down from it).
      if (!replay_inserter_) replay_inserter_.emplace(rules_.ordered_inserter());
      if (replay_inserter_->insert(r.key, PackedMeta(m)) == InsertResult::inserted) {
        insert_side(r.key, m);
        count_set(m.set_id, true);
      } else {
        // Replay is idempotent (an add replaces): a snapshot is taken while
        // writers run, so it may already contain effects of later records.
        replay_inserter_.reset();
        erase_rule(r.key, nullptr);  // the old node, and its side entry if it had one
        insert_rule(r.key, m);
      }
      break;
    }
    case RecordOp::txn:
    case RecordOp::txn_abort:
      return;  // handled by apply_replay
    case RecordOp::del:
      replay_inserter_.reset();
      erase_rule(r.key, nullptr);
      break;
    case RecordOp::flush:
      replay_inserter_.reset();
      clear_memory(nullptr);
      break;
    case RecordOp::mark: {
      std::lock_guard m(marks_mu_);
      marks_[r.key] = std::move(r.text);
      return;  // carries no id
    }
  }
  if (r.id > mem_seq_) mem_seq_ = r.id;
}

void RuleStore::clear_memory(std::vector<Removed>* removed) {
  std::vector<std::string> keys;
  for (auto c = rules_.scan(); c.next();) keys.emplace_back(c.key());
  for (auto& k : keys) {
    RuleMeta m;
    if (!erase_rule(k, &m)) continue;
    if (m.expiry_unix_ms != 0) ttl_.cancel(m.expiry_unix_ms, k);
    if (removed != nullptr) removed->push_back({std::move(k), std::move(m)});
  }
}

Status RuleStore::check_writable() const {
  if (failed_) {
    return {Errc::io_error, "rule store is read-only after an earlier I/O error"};
  }
  return Status::Ok();
}

void RuleStore::note_synced() {
  if (log_) since_snapshot_.store(log_->records_since_snapshot(), std::memory_order_relaxed);
}

std::uint64_t RuleStore::records_since_snapshot() const {
  return since_snapshot_.load(std::memory_order_relaxed);
}

Status RuleStore::append_and_sync(const std::vector<StoreRecord>& recs) {
  if (!log_ || recs.empty()) return Status::Ok();
  std::string payload;
  for (const auto& r : recs) {
    payload.clear();
    encode_record(r, &payload);
    if (Status s = log_->append(payload); !s.ok()) {
      failed_ = true;
      return s;
    }
  }
  if (Status s = log_->sync(); !s.ok()) {
    failed_ = true;
    return s;
  }
  note_synced();
  return Status::Ok();
}

namespace {
// add_many's requests from an array of them.
RuleStore::AddRequest span_request(const void* ctx, std::size_t i) {
  return static_cast<const RuleStore::AddRequest*>(ctx)[i];
}
}  // namespace

Status RuleStore::add(std::string_view key, std::string_view text, std::int64_t ttl_ms,
                      RuleMeta* added, std::uint8_t action) {
  const AddRequest req{key, text, ttl_ms, {}, action};
  std::vector<Errc> res;
  if (Status s = add_many({1, &span_request, &req}, &res, added); !s.ok()) return s;
  switch (res[0]) {
    case Errc::ok:
      return Status::Ok();
    case Errc::exists: return {Errc::exists, "rule already present"};
    case Errc::updated: return {Errc::updated, "rule present, expiry or action replaced"};
    default:
      return {Errc::invalid_argument,
              key.empty() ? "empty key" : (ttl_ms < 0 ? "negative ttl" : "rule too large")};
  }
}

Status RuleStore::add_batch(std::span<const AddRequest> reqs, std::vector<Errc>* results) {
  return add_many({reqs.size(), &span_request, reqs.data()}, results, nullptr);
}

Status RuleStore::add_batch(std::size_t n, RequestAt at, const void* ctx, std::vector<Errc>* results) {
  return add_many({n, at, ctx}, results, nullptr);
}

namespace {

bool add_is_valid(std::string_view key, std::string_view text, std::int64_t ttl_ms) {
  return !key.empty() && ttl_ms >= 0 && key.size() + text.size() + kStoreRecordFixed <= kMaxPayload;
}

// The record of an add. `present`: the rule exists and only its lifetime and
// action are replaced (same id, text and added time; replay of an add replaces).
StoreRecord add_record(std::string_view key, std::string_view text, std::int64_t ttl_ms, std::uint8_t action,
                       std::int64_t now, const RuleMeta* present, std::string set, std::uint64_t* next_id) {
  StoreRecord r;
  r.op = RecordOp::add;
  r.set = std::move(set);
  r.action = action != kKeepAction ? action : present != nullptr ? present->action : 0;
  if (present != nullptr) {
    r.id = present->id;
    r.added_unix_ms = present->added_unix_ms;
    r.text = present->text;
  } else {
    r.id = (*next_id)++;
    r.added_unix_ms = now;
    r.text.assign(text);
  }
  r.expiry_unix_ms = ttl_ms > 0 ? now + ttl_ms : 0;
  r.key.assign(key);
  return r;
}

// What an add of a rule with lifetime ttl_ms and this action does to a
// present rule `m` (expiry 0: never).
Errc add_onto_present(const RuleMeta& m, std::int64_t ttl_ms, std::uint8_t action) {
  const bool same_action = action == kKeepAction || m.action == action;
  return m.expiry_unix_ms == 0 && ttl_ms == 0 && same_action ? Errc::exists : Errc::updated;
}

// The action of a new rule added with this request's action.
std::uint8_t fresh_action(std::uint8_t action) { return action == kKeepAction ? 0 : action; }

}  // namespace

void RuleStore::apply_in_memory(StoreRecord&& r) {
  if (r.op == RecordOp::txn || r.op == RecordOp::txn_abort) return;  // journal framing only
  if (r.op == RecordOp::mark) {
    std::lock_guard m(marks_mu_);
    marks_[r.key] = std::move(r.text);
    return;
  }
  if (r.op == RecordOp::del) {
    RuleMeta m;
    if (erase_rule(r.key, &m) && m.expiry_unix_ms != 0) ttl_.cancel(m.expiry_unix_ms, r.key);
    return;
  }
  // An add onto a present key replaces it (a lifetime change). Readers of the
  // store run on the control thread or in tests; between the erase and the
  // insert a concurrent reader may see the key absent for a moment.
  RuleMeta old;
  if (erase_rule(r.key, &old) && old.expiry_unix_ms != 0) ttl_.cancel(old.expiry_unix_ms, r.key);
  if (r.expiry_unix_ms != 0) ttl_.schedule(r.expiry_unix_ms, r.key);
  insert_rule(r.key, RuleMeta{r.id, r.added_unix_ms, r.expiry_unix_ms, std::move(r.text), intern_set(r.set), r.action});
}

std::uint32_t RuleStore::intern_set(std::string_view name) {
  std::lock_guard m(sets_mu_);
  const auto [it, fresh] = set_ids_.try_emplace(std::string(name), static_cast<std::uint32_t>(set_names_.size()));
  if (fresh) set_names_.emplace_back(name);
  return it->second;
}

std::string RuleStore::set_name(std::uint32_t id) const {
  std::lock_guard m(sets_mu_);
  return id < set_names_.size() ? set_names_[id] : std::string();
}

std::optional<std::uint32_t> RuleStore::find_set(std::string_view name) const {
  std::lock_guard m(sets_mu_);
  const auto it = set_ids_.find(std::string(name));
  if (it == set_ids_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::pair<std::string, std::size_t>> RuleStore::set_counts() const {
  std::vector<std::size_t> n;
  std::vector<std::string> names;
  {
    std::lock_guard m(sets_mu_);
    names = set_names_;
  }
  if (names.size() <= kCountedSets) {
    std::vector<std::pair<std::string, std::size_t>> out;
    for (std::size_t i = 0; i < names.size(); ++i) {
      const std::size_t c = set_count_[i].load(std::memory_order_relaxed);
      if (c != 0) out.emplace_back(std::move(names[i]), c);
    }
    return out;
  }
  for (auto c = list(); c.next();) {
    const std::uint32_t id = c.value().set_id;
    if (n.size() <= id) n.resize(id + 1, 0);
    ++n[id];
  }
  std::vector<std::pair<std::string, std::size_t>> out;
  for (std::size_t i = 0; i < n.size(); ++i)
    if (n[i] != 0) out.emplace_back(set_name(static_cast<std::uint32_t>(i)), n[i]);
  return out;
}

Status RuleStore::add_many(const Requests& reqs, std::vector<Errc>* results, RuleMeta* first_added) {
  std::lock_guard lock(write_mu_);
  results->assign(reqs.size(), Errc::ok);
  if (Status s = check_writable(); !s.ok()) return s;
  const std::int64_t now = clock_();
  // Work in key order: consecutive skip-list searches then share their path
  // (a large random-order bulk load is otherwise bound by cache misses), and
  // duplicates inside the batch become neighbours (stable: the first wins).
  // The pass below takes the requests as they come and stops at the first
  // key below its predecessor; only then are they sorted (an order array) and
  // the pass made again. A batch that arrives sorted (Blocklist::add_batch
  // sorts its own) costs one comparison per key, which also finds repeats.
  std::vector<std::uint32_t> order;  // empty: the requests are in key order
  const auto req_of = [&](std::size_t k) { return order.empty() ? static_cast<std::uint32_t>(k) : order[k]; };
  // The requests to write a record for, in key order: 4 bytes each (a bulk
  // load's transient arrays are faulted in page by page; this one was 16
  // bytes a rule). A new rule's record is encoded straight from its request,
  // its id is the next one in this order; a present rule whose lifetime
  // changes (rare) keeps its id and a StoreRecord, and its index in `entries`
  // is in `updates` (increasing).
  std::vector<std::uint32_t> entries;
  std::vector<std::uint32_t> updates;
  std::vector<StoreRecord> recs;  // recs[u]: the record of entries[updates[u]]
  entries.reserve(reqs.size());
  // The presence check and the insert share one ordered walk: per entry,
  // where the check's level-0 walk left its key (SkipListMap::Hint; empty
  // for an update), so that the insert after the sync starts there and, for
  // a node without a tower (3 in 4), searches no index. The domain stays
  // pinned from the check to the insert, so no hinted node is freed. Nothing
  // else moves meanwhile: every writer of the map holds write_mu_. 8 bytes
  // an entry, on huge pages from 2 MiB up (BulkAllocator).
  using Hint = decltype(rules_)::Hint;
  std::vector<Hint, BulkAllocator<Hint>> hints;
  hints.reserve(reqs.size());
  EpochDomain::Guard hinted = rules_.domain().pin();
  const std::uint64_t first_id = log_ ? log_->next_seq() : mem_seq_ + 1;
  std::uint64_t next_id = first_id;
  // One pass in the order req_of gives; false (nothing kept) when a key is
  // below the one before it.
  const auto look_up = [&]() -> bool {
    entries.clear();
    hints.clear();
    updates.clear();
    recs.clear();
    next_id = first_id;
    std::string_view prev;  // the key of the last request looked up
    bool have_prev = false;
    bool past_end = false;  // every key from here on is absent: no search
    Hint at;                // past the end: where the last search ended, before every key
    // Each search starts where the previous one ended. Once a search finds no
    // rule at or after its key, the larger keys that follow are absent too
    // (every writer holds write_mu_), so a load into an empty store, or past
    // its last key, searches once.
    auto finder = rules_.ordered_finder();
    for (std::size_t k = 0; k < reqs.size(); ++k) {
      const std::uint32_t i = req_of(k);
      const AddRequest q = reqs[i];
      if (!add_is_valid(q.key, q.text, q.ttl_ms)) {
        (*results)[i] = Errc::invalid_argument;
        continue;
      }
      if (have_prev) {
        const int c = q.key.compare(prev);
        if (c < 0) return false;  // not in key order (never once sorted)
        if (c == 0) {
          (*results)[i] = Errc::exists;
          continue;
        }
      }
      prev = q.key;
      have_prev = true;
      const PackedMeta* p = past_end ? nullptr : finder.find(q.key, &at);  // valid until the next find
      past_end = past_end || finder.past_end();
      if (p == nullptr) {
        entries.push_back(i);
        hints.push_back(at);
        ++next_id;
        continue;
      }
      RuleMeta present;
      unpack(q.key, *p, &present);  // writers are serialised: its side entry is there
      if (add_onto_present(present, q.ttl_ms, q.action) == Errc::exists) {
        (*results)[i] = Errc::exists;
        continue;
      }
      (*results)[i] = Errc::updated;
      std::uint64_t unused = 0;     // a present rule keeps its id
      recs.push_back(add_record(q.key, q.text, q.ttl_ms, q.action, now, &present, set_name(present.set_id), &unused));
      updates.push_back(static_cast<std::uint32_t>(entries.size()));
      entries.push_back(i);
      hints.push_back(Hint());
    }
    return true;
  };  // the finder's own pin ends with each pass; `hinted` stays
  if (!look_up()) {
    order.resize(reqs.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::uint32_t>(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return reqs[a].key < reqs[b].key; });
    std::fill(results->begin(), results->end(), Errc::ok);
    (void)look_up();  // sorted: completes
  }
  // Walks `entries` in order: for each, its update record (or null) and the
  // id a new rule gets.
  struct Walk {
    const std::vector<std::uint32_t>& updates;
    std::vector<StoreRecord>& recs;
    std::size_t u = 0;
    std::uint64_t id;
    StoreRecord* update(std::size_t e) {
      if (u < updates.size() && updates[u] == e) return &recs[u++];
      return nullptr;
    }
  };
  Status st = Status::Ok();
  if (log_ && !entries.empty()) {
    std::string payload;
    Walk w{updates, recs, 0, first_id};
    for (std::size_t e = 0; e < entries.size(); ++e) {
      payload.clear();
      if (const StoreRecord* r = w.update(e)) {
        encode_record(*r, &payload);
      } else {
        const AddRequest q = reqs[entries[e]];
        encode_add_record(w.id++, now, q.ttl_ms > 0 ? now + q.ttl_ms : 0, q.key, q.set, q.text, fresh_action(q.action), &payload);
      }
      if (st = log_->append(payload); !st.ok()) break;
    }
    // The new nodes' memory is faulted in while the journal is made durable:
    // the records are written and their write-back started (start_sync), then
    // a thread of its own waits in fdatasync while this one maps and touches
    // the arena blocks the inserts below will fill. On the reference VM a
    // first touch costs ~1.5 ms per MB and a load's fdatasync 50-70 ms
    // whatever its size (mostly the disk's cache flush), so they overlap
    // instead of adding up. Nothing is linked before the sync returns ok:
    // durability and what readers see are as before. The journal is touched
    // by one thread at a time: the sync thread starts after start_sync (the
    // thread's start synchronises with its constructor) and this one reads
    // `synced` after join() (the thread's end synchronises with join()).
    if (st.ok()) st = log_->start_sync();
    if (st.ok()) {
      // Every entry gets a node (a present rule whose lifetime changes, rare,
      // a new one of its size).
      const std::size_t node_bytes = decltype(rules_)::expected_arena_bytes(
          entries.size(), [&](std::size_t e) { return reqs[entries[e]].key.size(); });
      std::thread syncer;
      Status synced;
      if (node_bytes >= NodeArena::kBlockBytes) {  // worth a thread: a block or more to fault in
        try {
          syncer = std::thread([&] {
            // Nothing may escape a thread (std::terminate): an error
            // building the status (out of memory) is a failed sync.
            try {
              synced = log_->sync();
            } catch (...) {
              synced = Status(Errc::io_error, "journal sync: out of memory");
            }
          });
        } catch (...) {
          // No thread to be had (std::system_error, or std::bad_alloc for
          // its state): sync first, then fault in (below). The records are
          // written either way, so nothing may leave this function unsynced.
        }
      }
      if (syncer.joinable()) {
        rules_.prefault(node_bytes);
        syncer.join();
        st = std::move(synced);
      } else {
        st = log_->sync();
        if (st.ok()) rules_.prefault(node_bytes);
      }
    }
    if (!st.ok()) {
      failed_ = true;
      for (const std::uint32_t i : entries) (*results)[i] = Errc::io_error;
      return st;
    }
    note_synced();
  }
  if (!log_) mem_seq_ = next_id - 1;
  // An update erases its rule's old node (apply_in_memory): with nodes
  // retired, a pin held through the inserts would hold back their
  // reclamation, and past 16 384 waiting every retire yields the CPU
  // (EpochDomain). Then no hints (searches from the fingers, as before).
  const bool use_hints = updates.empty();
  if (!use_hints) hinted.release();
  std::string_view last_set;
  std::uint32_t last_set_id = intern_set(last_set);
  // Entries are in strictly increasing key order: one ordered pass through
  // the skip list, each search from where the previous insert ended.
  // With hints the inserter keeps its fingers and last node under `hinted`
  // (keys past the map's end share one hint: the last node makes each one step).
  auto inserter = use_hints ? rules_.ordered_inserter(hinted) : rules_.ordered_inserter();
  Walk w{updates, recs, 0, first_id};
  for (std::size_t e = 0; e < entries.size(); ++e) {
    if (StoreRecord* r = w.update(e)) {
      apply_in_memory(std::move(*r));
      continue;
    }
    // The key was absent when looked up above, and every mutation holds
    // write_mu_, so it still is: no erase (a skip-list search) before the insert.
    const AddRequest q = reqs[entries[e]];
    const std::uint64_t id = w.id++;
    if (q.set != last_set) {
      last_set = q.set;
      last_set_id = intern_set(q.set);
    }
    const std::int64_t expiry = q.ttl_ms > 0 ? now + q.ttl_ms : 0;
    const std::uint8_t action = fresh_action(q.action);
    if (first_added != nullptr) {
      *first_added = RuleMeta{id, now, expiry, q.text, last_set_id, action};
      first_added = nullptr;
    }
    if (expiry != 0) ttl_.schedule(expiry, q.key);
    if (!PackedMeta::fits(now, q.text, last_set_id, action))
      insert_side(q.key, RuleMeta{id, now, expiry, q.text, last_set_id, action});
    if (inserter.insert(q.key, PackedMeta(id, now, expiry, q.text, last_set_id, action),
                        use_hints ? hints[e] : Hint()) ==
        InsertResult::inserted)
      count_set(last_set_id, true);
  }
  return Status::Ok();
}

namespace {
StoreRecord mark_record(const RuleStore::Mark& mark) {
  StoreRecord r;
  r.op = RecordOp::mark;
  r.key.assign(mark.name);
  r.text.assign(mark.value);
  return r;
}
}  // namespace

Status RuleStore::set_mark(const Mark& mark) {
  std::vector<Errc> none;
  return apply({}, &none, &mark);
}

std::optional<std::string> RuleStore::mark(std::string_view name) const {
  std::lock_guard m(marks_mu_);
  const auto it = marks_.find(std::string(name));
  if (it == marks_.end()) return std::nullopt;
  return it->second;
}

Status RuleStore::apply(std::span<const Change> changes, std::vector<Errc>* results, const Mark* mark,
                        bool atomic) {
  std::lock_guard lock(write_mu_);
  if (mark != nullptr && mark->name.empty()) return {Errc::invalid_argument, "a mark needs a name"};
  results->assign(changes.size(), Errc::ok);
  if (Status s = check_writable(); !s.ok()) return s;
  // The ordered path only for strictly increasing keys (apply_group's net
  // effects): with a key repeated, its in-memory pass would mix the ordered
  // inserter with erases and updates of the same key (an add ttl=60 then an
  // add without ttl left the rule expiring, and the next add answered
  // "updated" instead of "exists"; control_test QueuedChanges...).
  if (std::adjacent_find(changes.begin(), changes.end(),
                         [](const Change& a, const Change& b) { return !(a.key < b.key); }) == changes.end())
    return apply_sorted(changes, results, mark, atomic);
  const std::int64_t now = clock_();
  std::uint64_t next_id = log_ ? log_->next_seq() : mem_seq_ + 1;
  // The state of the keys this group touched so far (nullopt: deleted).
  std::unordered_map<std::string_view, std::optional<RuleMeta>> touched;
  std::vector<StoreRecord> recs;
  std::vector<std::size_t> which;
  for (std::size_t i = 0; i < changes.size(); ++i) {
    const Change& c = changes[i];
    if (c.key.empty() || (c.op == Change::Op::add && !add_is_valid(c.key, c.text, c.ttl_ms))) {
      (*results)[i] = Errc::invalid_argument;
      continue;
    }
    auto it = touched.find(c.key);
    if (it == touched.end()) it = touched.emplace(c.key, get(c.key)).first;
    std::optional<RuleMeta>& cur = it->second;
    if (c.op == Change::Op::del) {
      if (!cur) {
        (*results)[i] = Errc::absent;
        continue;
      }
      StoreRecord r;
      r.op = RecordOp::del;
      r.key.assign(c.key);
      recs.push_back(std::move(r));
      cur.reset();
    } else {
      if (cur) {
        (*results)[i] = add_onto_present(*cur, c.ttl_ms, c.action);
        if ((*results)[i] == Errc::exists) continue;
      }
      StoreRecord r = add_record(c.key, c.text, c.ttl_ms, c.action, now, cur ? &*cur : nullptr,
                                 cur ? set_name(cur->set_id) : std::string(c.set), &next_id);
      cur = RuleMeta{r.id, r.added_unix_ms, r.expiry_unix_ms, r.text, intern_set(r.set), r.action};
      recs.push_back(std::move(r));
    }
    which.push_back(i);
  }
  if (mark != nullptr) recs.push_back(mark_record(*mark));
  if (atomic && log_ && recs.size() > 1) {
    StoreRecord txn;
    txn.op = RecordOp::txn;
    txn.id = recs.size();  // the records that follow, all or none at replay
    recs.insert(recs.begin(), std::move(txn));
  }
  if (Status s = append_and_sync(recs); !s.ok()) {
    for (std::size_t i : which) (*results)[i] = Errc::io_error;
    return s;
  }
  if (!log_) mem_seq_ = next_id - 1;
  for (auto& r : recs) apply_in_memory(std::move(r));
  return Status::Ok();
}

Status RuleStore::apply_sorted(std::span<const Change> changes, std::vector<Errc>* results, const Mark* mark,
                               bool atomic) {
  const std::int64_t now = clock_();
  std::uint64_t next_id = log_ ? log_->next_seq() : mem_seq_ + 1;
  // What each effective change does, in the order of `changes` (= key order).
  enum class Kind : std::uint8_t { fresh, update, del };
  struct Step {
    std::uint32_t change;
    Kind kind;
    std::uint32_t set_id;  // fresh: the new rule's set
    std::uint64_t id;      // fresh: the new rule's id
  };
  std::vector<Step> steps;
  std::vector<StoreRecord> updates;  // a present rule's new lifetime (rare), one per update step
  steps.reserve(changes.size());
  std::string_view last_set;
  std::uint32_t last_set_id = intern_set(last_set);
  {
    // The changes of one key are neighbours: the finder looks each key up
    // once (from where the previous search ended), and `cur` follows its
    // state through the key's changes, as apply()'s map of touched keys does.
    auto finder = rules_.ordered_finder();
    std::optional<RuleMeta> cur;
    std::string_view cur_key;
    bool have_key = false;
    for (std::size_t i = 0; i < changes.size(); ++i) {
      const Change& c = changes[i];
      if (c.key.empty() || (c.op == Change::Op::add && !add_is_valid(c.key, c.text, c.ttl_ms))) {
        (*results)[i] = Errc::invalid_argument;
        continue;
      }
      if (!have_key || c.key != cur_key) {
        const PackedMeta* p = finder.find(c.key);  // valid until the next find
        RuleMeta m;
        if (p != nullptr) unpack(c.key, *p, &m);  // writers are serialised: its side entry is there
        cur = p != nullptr ? std::optional<RuleMeta>(std::move(m)) : std::nullopt;
        cur_key = c.key;
        have_key = true;
      }
      const auto at = static_cast<std::uint32_t>(i);
      if (c.op == Change::Op::del) {
        if (!cur) {
          (*results)[i] = Errc::absent;
          continue;
        }
        steps.push_back({at, Kind::del, 0, 0});
        cur.reset();
        continue;
      }
      if (cur) {
        (*results)[i] = add_onto_present(*cur, c.ttl_ms, c.action);
        if ((*results)[i] == Errc::exists) continue;
        updates.push_back(add_record(c.key, c.text, c.ttl_ms, c.action, now, &*cur, set_name(cur->set_id), &next_id));
        cur->expiry_unix_ms = updates.back().expiry_unix_ms;
        cur->action = updates.back().action;
        steps.push_back({at, Kind::update, 0, 0});
        continue;
      }
      if (c.set != last_set) {
        last_set = c.set;
        last_set_id = intern_set(c.set);
      }
      const std::uint64_t id = next_id++;
      cur = RuleMeta{id, now, c.ttl_ms > 0 ? now + c.ttl_ms : 0, c.text, last_set_id, fresh_action(c.action)};
      steps.push_back({at, Kind::fresh, last_set_id, id});
    }
  }  // the finder's pin ends before the journal's I/O
  const std::size_t records = steps.size() + (mark != nullptr ? 1 : 0);
  if (log_ && records > 0) {
    std::string payload;
    Status st = Status::Ok();
    auto put = [&](const StoreRecord& r) {
      payload.clear();
      encode_record(r, &payload);
      if (st.ok()) st = log_->append(payload);
    };
    if (atomic && records > 1) {
      StoreRecord txn;
      txn.op = RecordOp::txn;
      txn.id = records;  // the records that follow, all or none at replay
      put(txn);
    }
    StoreRecord del;
    del.op = RecordOp::del;
    std::size_t u = 0;
    for (const Step& s : steps) {
      const Change& c = changes[s.change];
      if (!st.ok()) break;
      switch (s.kind) {
        case Kind::fresh:
          payload.clear();
          encode_add_record(s.id, now, c.ttl_ms > 0 ? now + c.ttl_ms : 0, c.key, c.set, c.text, fresh_action(c.action), &payload);
          st = log_->append(payload);
          break;
        case Kind::update: put(updates[u++]); break;
        case Kind::del:
          del.key.assign(c.key);
          put(del);
          break;
      }
    }
    if (mark != nullptr) put(mark_record(*mark));
    if (st.ok()) st = log_->sync();
    if (!st.ok()) {
      failed_ = true;
      for (const Step& s : steps) (*results)[s.change] = Errc::io_error;
      return st;
    }
    note_synced();
  }
  if (!log_) mem_seq_ = next_id - 1;
  // In key order again: new rules through the ordered inserter (the key was
  // absent when looked up, or deleted by an earlier step of this group).
  auto inserter = rules_.ordered_inserter();
  std::size_t u = 0;
  for (const Step& s : steps) {
    const Change& c = changes[s.change];
    switch (s.kind) {
      case Kind::fresh: {
        const std::int64_t expiry = c.ttl_ms > 0 ? now + c.ttl_ms : 0;
        if (expiry != 0) ttl_.schedule(expiry, c.key);
        const std::uint8_t action = fresh_action(c.action);
        if (!PackedMeta::fits(now, c.text, s.set_id, action))
          insert_side(c.key, RuleMeta{s.id, now, expiry, c.text, s.set_id, action});
        if (inserter.insert(c.key, PackedMeta(s.id, now, expiry, c.text, s.set_id, action)) == InsertResult::inserted)
          count_set(s.set_id, true);
        break;
      }
      case Kind::update: apply_in_memory(std::move(updates[u++])); break;
      case Kind::del: {
        RuleMeta m;
        if (erase_rule(c.key, &m) && m.expiry_unix_ms != 0) ttl_.cancel(m.expiry_unix_ms, c.key);
        break;
      }
    }
  }
  if (mark != nullptr) apply_in_memory(mark_record(*mark));
  return Status::Ok();
}

Status RuleStore::del(std::string_view key, RuleMeta* removed) {
  std::lock_guard lock(write_mu_);
  if (Status s = check_writable(); !s.ok()) return s;
  std::optional<RuleMeta> m = get(key);
  if (!m) return {Errc::absent, "rule not present"};
  StoreRecord r;
  r.op = RecordOp::del;
  r.key.assign(key);
  if (Status s = append_and_sync({r}); !s.ok()) return s;
  erase_rule(key, nullptr);
  if (m->expiry_unix_ms != 0) ttl_.cancel(m->expiry_unix_ms, key);
  if (removed != nullptr) *removed = std::move(*m);
  return Status::Ok();
}

Status RuleStore::move(std::span<const Move> moves, std::vector<Errc>* results) {
  std::lock_guard lock(write_mu_);
  results->assign(moves.size(), Errc::ok);
  if (Status s = check_writable(); !s.ok()) return s;
  // The state of the keys touched so far (nullopt: deleted), as in apply().
  std::unordered_map<std::string_view, std::optional<RuleMeta>> touched;
  auto state = [&](std::string_view k) -> std::optional<RuleMeta>& {
    auto it = touched.find(k);
    if (it == touched.end()) it = touched.emplace(k, get(k)).first;
    return it->second;
  };
  std::vector<StoreRecord> recs;
  std::vector<std::size_t> which;
  for (std::size_t i = 0; i < moves.size(); ++i) {
    const Move& mv = moves[i];
    if (mv.from.empty() || mv.to.empty() || mv.from == mv.to) {
      (*results)[i] = Errc::invalid_argument;
      continue;
    }
    std::optional<RuleMeta>& from = state(mv.from);
    if (!from) {
      (*results)[i] = Errc::absent;
      continue;
    }
    std::optional<RuleMeta>& to = state(mv.to);
    // The rule as it is to be at `to`: the present one there (the same rule
    // stored in both forms), living as long as the longer of the two, or the
    // rule from `from` as it is.
    RuleMeta moved = to ? *to : *from;
    if (!to) moved.text = mv.text;
    if (to) {
      const std::int64_t a = to->expiry_unix_ms, b = from->expiry_unix_ms;
      moved.expiry_unix_ms = a == 0 || b == 0 ? 0 : std::max(a, b);
    }
    const bool write_add = !to || moved.expiry_unix_ms != to->expiry_unix_ms;
    if (write_add && !add_is_valid(mv.to, moved.text, 0)) {
      (*results)[i] = Errc::invalid_argument;
      continue;
    }
    StoreRecord del;
    del.op = RecordOp::del;
    del.key.assign(mv.from);
    recs.push_back(std::move(del));
    if (write_add) {
      StoreRecord add;
      add.op = RecordOp::add;
      add.id = moved.id;
      add.added_unix_ms = moved.added_unix_ms;
      add.expiry_unix_ms = moved.expiry_unix_ms;
      add.key.assign(mv.to);
      add.text.assign(moved.text);
      add.set = set_name(moved.set_id);
      add.action = moved.action;
      recs.push_back(std::move(add));
    }
    (*results)[i] = to ? Errc::exists : Errc::ok;
    to = std::move(moved);
    from.reset();
    which.push_back(i);
  }
  if (log_ && recs.size() > 1) {
    StoreRecord txn;
    txn.op = RecordOp::txn;
    txn.id = recs.size();  // all or none at replay
    recs.insert(recs.begin(), std::move(txn));
  }
  if (Status s = append_and_sync(recs); !s.ok()) {
    for (std::size_t i : which) (*results)[i] = Errc::io_error;
    return s;
  }
  for (auto& r : recs) apply_in_memory(std::move(r));
  return Status::Ok();
}

Status RuleStore::flush(std::vector<Removed>* removed) {
  std::lock_guard lock(write_mu_);
  if (Status s = check_writable(); !s.ok()) return s;
  StoreRecord r;
  r.op = RecordOp::flush;
  if (Status s = append_and_sync({r}); !s.ok()) return s;
  clear_memory(removed);
  return Status::Ok();
}

Status RuleStore::expire_due(std::int64_t now_ms, std::vector<Removed>* expired,
                             std::size_t max) {
  std::lock_guard lock(write_mu_);
  if (Status s = check_writable(); !s.ok()) return s;
  auto due = ttl_.pop_due(now_ms, max);
  std::vector<StoreRecord> recs;
  std::vector<Removed> victims;
  for (auto& [deadline, key] : due) {
    std::optional<RuleMeta> m = get(key);
    if (!m || m->expiry_unix_ms != deadline) continue;  // stale entry
    StoreRecord r;
    r.op = RecordOp::del;
    r.key = key;
    recs.push_back(std::move(r));
    victims.push_back({std::move(key), std::move(*m)});
  }
  if (Status s = append_and_sync(recs); !s.ok()) {
    for (auto& v : victims) ttl_.schedule(v.meta.expiry_unix_ms, v.key);  // keep state whole
    return s;
  }
  for (auto& v : victims) {
    erase_rule(v.key, nullptr);
    if (expired != nullptr) expired->push_back(std::move(v));
  }
  return Status::Ok();
}

Status RuleStore::snapshot() {
  if (!log_) return Status::Ok();
  std::lock_guard snap(snapshot_mu_);
  std::uint64_t seq = 0;
  std::vector<StoreRecord> marks;  // as of seq: taken with the rotation
  {
    std::lock_guard lock(write_mu_);
    {
      std::lock_guard m(marks_mu_);
      for (const auto& [name, value] : marks_) marks.push_back(mark_record({name, value}));
    }
    if (Status s = check_writable(); !s.ok()) return s;
    if (Status s = log_->rotate(&seq); !s.ok()) {
      failed_ = true;
      return s;
    }
  }
  // Every record <= seq is applied in memory; writes after it may or may not
  // show in this weakly consistent scan, and replay of records > seq fixes
  // them up (replay is idempotent per key, docs/store.md).
  Cursor c = list();
  StoreRecord r;
  std::size_t next_mark = 0;
  Status s = log_->write_snapshot(seq, [&](std::string* payload) {
    if (next_mark < marks.size()) {
      payload->clear();
      encode_record(marks[next_mark++], payload);
      return true;
    }
    if (!c.next()) return false;
    const RuleMeta& m = c.value();
    r.op = RecordOp::add;
    r.id = m.id;
    r.added_unix_ms = m.added_unix_ms;
    r.expiry_unix_ms = m.expiry_unix_ms;
    r.key.assign(c.key());
    r.text.assign(m.text);
    r.set = set_name(m.set_id);
    r.action = m.action;
    payload->clear();
    encode_record(r, payload);
    return true;
  });
  if (s.ok()) {
    std::lock_guard lock(write_mu_);
    note_synced();
  }
  return s;
}

}  // namespace cg::store
