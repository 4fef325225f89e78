#include "sync/blocklist_sync.hpp"

#include <unistd.h>

#include <algorithm>

#include <rte_telemetry.h>

#include <cinttypes>
#include <cstdio>
#include <mutex>

#include "gateway/log.hpp"

namespace cg {
namespace {

bool io_failed(const std::vector<Blocklist::Outcome>& out) {
  for (const Blocklist::Outcome o : out)
    if (o == Blocklist::Outcome::kIoError) return true;
  return false;
}

sync::Entry entry_of(sync::EntryOp op) {
  sync::Entry e;
  e.op = op;
  return e;
}

// What /cuckoogate/sync serves. DPDK's telemetry thread reads it while the
// control thread owns the BlocklistSync, so the control thread copies the
// state here (under the mutex) once per poll round. Never freed: a telemetry
// callback may run at any time until exit, even after the sync is gone.
struct TelemetryCopy {
  std::mutex mu;
  bool live = false;
  sync::SyncStats stats;
  std::string redis, stream, gateway_id;
  bool queue_offline = false;
  uint64_t queued = 0, refused = 0;
};
TelemetryCopy& telemetry_copy() {
  static TelemetryCopy* t = new TelemetryCopy;
  return *t;
}

int telemetry_sync(const char*, const char*, rte_tel_data* d) {
  TelemetryCopy& t = telemetry_copy();
  std::lock_guard lock(t.mu);
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_u64(d, "enabled", t.live ? 1 : 0);
  if (!t.live) return 0;
  const sync::SyncStats& s = t.stats;
  rte_tel_data_add_dict_string(d, "redis", t.redis.c_str());
  rte_tel_data_add_dict_string(d, "stream", t.stream.c_str());
  rte_tel_data_add_dict_string(d, "gateway_id", t.gateway_id.c_str());
  rte_tel_data_add_dict_u64(d, "connected", s.connected ? 1 : 0);
  rte_tel_data_add_dict_string(d, "last_applied_id", s.last_applied.str().c_str());
  rte_tel_data_add_dict_string(d, "last_seen_id", s.last_seen.str().c_str());
  rte_tel_data_add_dict_u64(d, "lag_entries", s.lag_entries);
  rte_tel_data_add_dict_u64(d, "lag_ms", static_cast<uint64_t>(std::max<int64_t>(0, s.lag_ms)));
  rte_tel_data_add_dict_u64(d, "applied", s.applied);
  rte_tel_data_add_dict_u64(d, "published", s.published);
  rte_tel_data_add_dict_u64(d, "garbage", s.garbage);
  rte_tel_data_add_dict_u64(d, "refused_full", t.refused);
  rte_tel_data_add_dict_u64(d, "publish_failures", s.publish_failures);
  rte_tel_data_add_dict_u64(d, "reconnects", s.reconnects);
  rte_tel_data_add_dict_u64(d, "snapshots_written", s.snapshots_written);
  rte_tel_data_add_dict_u64(d, "snapshot_rebuilds", s.snapshot_rebuilds);
  rte_tel_data_add_dict_u64(d, "gaps", s.gaps);
  rte_tel_data_add_dict_string(d, "offline_writes", t.queue_offline ? "queue" : "refuse");
  rte_tel_data_add_dict_u64(d, "queued", t.queued);
  rte_tel_data_add_dict_u64(d, "outbox_appended", s.outbox_appended);
  // Telemetry strings are bounded (RTE_TEL_MAX_STRING_LEN); the full text is in `info`.
  rte_tel_data_add_dict_string(d, "last_error", s.last_error.substr(0, 120).c_str());
  return 0;
}

}  // namespace

sync::SyncOptions sync_options(const SyncConfig& c) {
  sync::SyncOptions o;
  o.url = sync::parse_redis_url(c.redis).url.value_or(sync::RedisUrl{});
  if (!c.user.empty()) o.url.user = c.user;
  if (!c.password.empty()) o.url.password = c.password;
  o.url.tls.on = o.url.tls.on || c.tls;
  o.url.tls.ca_file = c.tls_ca;
  o.url.tls.ca_dir = c.tls_ca_dir;
  o.url.tls.cert_file = c.tls_cert;
  o.url.tls.key_file = c.tls_key;
  o.url.tls.server_name = c.tls_server_name;
  o.stream = c.stream;
  o.gateway_id = c.gateway_id;
  if (o.gateway_id.empty()) {
    char host[256] = {};
    o.gateway_id = ::gethostname(host, sizeof(host) - 1) == 0 ? host : "gateway";
  }
  o.io_timeout = std::chrono::milliseconds(c.timeout_ms);
  o.snapshot_every = std::chrono::seconds(c.snapshot_interval_s);
  o.wait_replicas = static_cast<int>(c.wait_replicas);
  return o;
}

CommandHandler::TextProvider with_sync_lines(CommandHandler::TextProvider f,
                                             const std::unique_ptr<BlocklistSync>& s) {
  return [f = std::move(f), &s](std::string& out) {
    f(out);
    if (s) s->text(out);
  };
}

void BlocklistSync::attach(CommandHandler& h, ControlServer& server) {
  h.set_replicator(this);
  // fd() is asked once per poll round: the telemetry copy is refreshed there.
  server.set_poll_hook({[this] {
                          publish_telemetry();
                          return sync_->fd();
                        },
                        [this] { sync_->on_readable(); }});
  static std::once_flag registered;
  std::call_once(registered, [] {
    rte_telemetry_register_cmd("/cuckoogate/sync", telemetry_sync,
                               "Redis sync state (docs/sync.md): connection, position, lag, counters. No parameters.");
  });
  publish_telemetry();
}

void BlocklistSync::publish_telemetry() const {
  TelemetryCopy& t = telemetry_copy();
  std::lock_guard lock(t.mu);
  t.live = true;
  t.stats = sync_->stats();
  if (t.redis.empty()) {
    t.redis = sync::describe(sync_->options().url);
    t.stream = sync_->options().stream;
    t.gateway_id = sync_->options().gateway_id;
  }
  t.queue_offline = queue_offline_;
  t.queued = queued();
  t.refused = refused_;
}

BlocklistSync::BlocklistSync(Blocklist& b, sync::SyncOptions o) : b_(b) {
  sync::StreamId start;
  if (const auto m = b.mark(kMarkName)) {
    if (const auto id = sync::StreamId::parse(*m)) start = *id;
  }
  // The position is a place in one stream: a state directory synced with
  // another stream (the config's `stream` changed) has read none of this
  // one, which is read from its start; the rules stay. (A directory from
  // before this mark existed is taken to be of this stream.)
  const auto was = b.mark(kStreamMark);
  if (was && *was != o.stream && !start.is_zero()) {
    CG_LOG(WARNING, control, "sync: this state directory was synced with stream '%s', not '%s': reading '%s' "
           "from its start (the rules from '%s' stay; replace them with load --replace if they should not)",
           was->c_str(), o.stream.c_str(), o.stream.c_str(), was->c_str());
    start = {};
    // The old position goes first: a crash before the new stream's first
    // entry is applied must not find it again beside the new name.
    if (b.set_mark({std::string(kMarkName), start.str()}) != Blocklist::Result::kOk)
      CG_LOG(ERR, control, "sync: cannot reset the position in the journal: %s", b.last_error().c_str());
  }
  if (!was || *was != o.stream) {
    if (b.set_mark({std::string(kStreamMark), o.stream}) != Blocklist::Result::kOk)
      CG_LOG(ERR, control, "sync: cannot record the stream's name in the journal: %s", b.last_error().c_str());
  }
  sync_ = std::make_unique<sync::StreamSync>(std::move(o), *this, start);
  load_outbox();
}

// The outbox a previous run left in the journal (docs/sync.md, offline
// writes): its groups go to the stream first thing when Redis answers.
void BlocklistSync::load_outbox() {
  const auto idx = b_.mark(kOutboxMark);
  unsigned long long epoch = 0, first = 0, line = 0, next = 0;
  if (!idx || idx->empty() ||
      std::sscanf(idx->c_str(), "%llu %llu %llu %llu", &epoch, &first, &line, &next) != 4 || first > next ||
      next - first > kMaxOutboxGroups) {
    if (idx && !idx->empty())
      CG_LOG(ERR, control, "sync: the outbox index '%s' in the journal does not parse: queued writes lost",
             idx->c_str());
    epoch_ = static_cast<uint64_t>(b_.now_ms());  // a new state: its own tokens
    return;
  }
  epoch_ = epoch;
  next_group_ = next;
  first_line_ = line;
  for (uint64_t g = first; g < next; ++g) {
    const auto v = b_.mark(std::string(kOutboxMark) + "." + std::to_string(g % kMaxOutboxGroups));
    OutboxGroup grp;
    grp.id = g;
    std::string why;
    if (!v || !sync::decode_outbox_group(*v, &grp.entries, &why)) {
      CG_LOG(ERR, control, "sync: outbox group %llu in the journal is unreadable (%s): its writes are lost",
             static_cast<unsigned long long>(g), v ? why.c_str() : "missing");
      continue;
    }
    grp.bytes = v->size();
    outbox_bytes_ += grp.bytes;
    outbox_.push_back(std::move(grp));
  }
  if (!outbox_.empty() && outbox_.front().id != first) first_line_ = 0;
  if (!outbox_.empty())
    CG_LOG(NOTICE, control, "sync: %zu writes queued while Redis was down wait in the journal", queued());
}

std::size_t BlocklistSync::queued() const noexcept {
  std::size_t n = 0;
  for (const OutboxGroup& g : outbox_) n += g.entries.size();
  return outbox_.empty() ? 0 : n - first_line_;
}

std::string BlocklistSync::outbox_token(uint64_t group, std::size_t line) const {
  return std::to_string(epoch_) + "." + std::to_string(group) + "." + std::to_string(line);
}

bool BlocklistSync::write_outbox_index(std::string* err) {
  const uint64_t first = outbox_.empty() ? next_group_ : outbox_.front().id;
  const std::string v = std::to_string(epoch_) + " " + std::to_string(first) + " " +
                        std::to_string(outbox_.empty() ? 0 : first_line_) + " " + std::to_string(next_group_);
  if (b_.set_mark({kOutboxMark, v}) == Blocklist::Result::kOk) return true;
  *err = "the outbox could not be journalled: " + b_.last_error();
  return false;
}

// Durable before the change is applied here: the group's mark, then the
// index that makes it part of the outbox. A crash between the two loses a
// write nobody was answered for; a crash after them keeps it queued.
bool BlocklistSync::enqueue(std::vector<sync::Entry> entries, std::string* err) {
  OutboxGroup g;
  g.id = next_group_;
  g.entries = std::move(entries);
  const std::string text = sync::encode_outbox_group(g.entries);
  g.bytes = text.size();
  if (g.bytes > kMaxOutboxGroupBytes) {
    *err = "redis unavailable, and this write is too large to queue (" + std::to_string(g.bytes) +
           " bytes; the limit is " + std::to_string(kMaxOutboxGroupBytes) + ")";
    return false;
  }
  if (outbox_.size() >= kMaxOutboxGroups || outbox_bytes_ + g.bytes > kMaxOutboxBytes) {
    *err = "redis unavailable, and the offline queue is full (" + std::to_string(outbox_.size()) + " writes, " +
           std::to_string(outbox_bytes_) + " bytes)";
    return false;
  }
  const std::string name = std::string(kOutboxMark) + "." + std::to_string(g.id % kMaxOutboxGroups);
  if (b_.set_mark({name, text}) != Blocklist::Result::kOk) {
    *err = "the outbox could not be journalled: " + b_.last_error();
    return false;
  }
  const bool was_empty = outbox_.empty();
  outbox_bytes_ += g.bytes;
  outbox_.push_back(std::move(g));
  ++next_group_;
  if (was_empty) first_line_ = 0;
  if (!write_outbox_index(err)) {
    unqueue_last();
    return false;
  }
  return true;
}

// The write failed here as a whole (a batch with an absent rule, a full
// load): it must not reach the stream either.
void BlocklistSync::unqueue_last() {
  if (outbox_.empty()) return;
  outbox_bytes_ -= std::min(outbox_bytes_, outbox_.back().bytes);
  outbox_.pop_back();
  --next_group_;
  std::string err;
  if (!write_outbox_index(&err)) CG_LOG(ERR, control, "sync: %s", err.c_str());
}

void BlocklistSync::set_startup_rules(std::vector<Rule> rules) {
  startup_ = std::move(rules);
  // This run's token: an older run's start-up load in the stream is not this one.
  startup_token_ = startup_.empty() ? "" : "start." + std::to_string(b_.now_ms()) + "." + std::to_string(::getpid());
}

void BlocklistSync::outbox(std::vector<sync::Entry>* entries) const {
  const std::string& id = sync_->options().gateway_id;
  for (const OutboxGroup& g : outbox_) {
    for (std::size_t i = g.id == outbox_.front().id ? first_line_ : 0; i < g.entries.size(); ++i) {
      entries->push_back(g.entries[i]);
      entries->back().origin = id;
      entries->back().outbox = outbox_token(g.id, i);
    }
  }
  if (!startup_token_.empty()) {
    sync::Entry e = entry_of(sync::EntryOp::kLoad);
    for (const Rule& r : startup_) e.changes.push_back({false, r, 0});
    e.origin = id;
    e.outbox = startup_token_;
    entries->push_back(std::move(e));
  }
}

namespace {

bool same_content(const sync::Entry& a, const sync::Entry& b) {
  if (a.op != b.op || a.kind != b.kind || a.changes.size() != b.changes.size()) return false;
  for (std::size_t i = 0; i < a.changes.size(); ++i) {
    const sync::EntryChange &x = a.changes[i], &y = b.changes[i];
    if (x.del != y.del || x.expiry_unix_ms != y.expiry_unix_ms || x.action != y.action || !(x.rule == y.rule))
      return false;
  }
  return true;
}

}  // namespace

// Entries of ours coming back from the stream: what the outbox holds up to
// them is in the stream now. Recorded before they are applied, so a crash in
// between leaves them in the stream after the last applied ID (read again),
// never in the outbox as well (appended twice).
bool BlocklistSync::note_delivered(std::span<const sync::Received> entries, std::string* err) {
  const std::string& id = sync_->options().gateway_id;
  const std::string prefix = std::to_string(epoch_) + ".";
  std::vector<uint64_t> done;  // groups now wholly in the stream
  bool moved = false;
  for (const sync::Received& r : entries) {
    if (r.entry == nullptr || r.entry->outbox.empty() || r.entry->origin != id) continue;
    const std::string& t = r.entry->outbox;
    if (t == startup_token_) {
      startup_token_.clear();
      startup_.clear();
      continue;
    }
    unsigned long long g = 0, line = 0;
    if (t.rfind(prefix, 0) != 0 || std::sscanf(t.c_str() + prefix.size(), "%llu.%llu", &g, &line) != 2) continue;
    // Only the next entry of the outbox moves it: an older copy is ignored,
    // and after a gap (an XADD refused in the middle) the rest is appended
    // again rather than taken as delivered.
    if (outbox_.empty() || g != outbox_.front().id || line != first_line_) continue;
    // And only with the queued content: a token is no proof (another writer
    // can copy it, or share this gateway's id), so an entry saying something
    // else leaves the queued one to be appended.
    if (!same_content(*r.entry, outbox_.front().entries[first_line_])) {
      CG_LOG(WARNING, control, "sync: an entry in the stream carries this gateway's outbox token %s but not the "
             "queued change: the queued one is appended", t.c_str());
      continue;
    }
    ++first_line_;
    moved = true;
    if (first_line_ >= outbox_.front().entries.size()) {
      done.push_back(outbox_.front().id);
      outbox_bytes_ -= std::min(outbox_bytes_, outbox_.front().bytes);
      outbox_.pop_front();
      first_line_ = 0;
    }
  }
  if (!moved) return true;
  if (!write_outbox_index(err)) return false;
  for (const uint64_t g : done) {  // free the journal's copy (best effort: the index no longer names it)
    if (b_.set_mark({std::string(kOutboxMark) + "." + std::to_string(g % kMaxOutboxGroups), ""}) !=
        Blocklist::Result::kOk)
      CG_LOG(WARNING, control, "sync: cannot clear outbox group %" PRIu64 ": %s", g, b_.last_error().c_str());
  }
  if (outbox_.empty()) CG_LOG(NOTICE, control, "sync: every write queued while Redis was down is in the stream");
  return true;
}

BlocklistSync::~BlocklistSync() {
  TelemetryCopy& t = telemetry_copy();
  std::lock_guard lock(t.mu);
  t.live = false;
}

bool BlocklistSync::mark(sync::StreamId id, std::string* err) {
  const std::string v = id.str();
  if (b_.set_mark({kMarkName, v}) == Blocklist::Result::kOk) return true;
  *err = b_.last_error();
  return false;
}

Blocklist::Change BlocklistSync::change_of(const sync::EntryChange& c, int64_t now) const {
  Blocklist::Change ch{c.del ? Blocklist::Change::Op::kDel : Blocklist::Change::Op::kAdd, c.rule, 0, {},
                       c.del ? RuleAction::kDefault : c.action};
  if (!c.del && c.expiry_unix_ms != 0) {
    // The expiry is absolute, so every gateway expires the rule at the same
    // moment. One that is already past (a gateway catching up): the rule
    // must not be there, and whether it is must not matter. A strict del
    // failed a batch holding it where the rule was absent, so the batch's
    // other changes, acknowledged by its writer, were lost here.
    if (c.expiry_unix_ms > now) ch.ttl_ms = c.expiry_unix_ms - now;
    else ch.op = Blocklist::Change::Op::kForget;
  }
  return ch;
}

bool BlocklistSync::commit_group(std::vector<Blocklist::Change>& group, std::vector<sync::StreamId>& ids,
                                 sync::StreamId last, std::string* err) {
  const std::string v = last.str();
  const store::RuleStore::Mark m{kMarkName, v};
  // In key order with one journal sync (apply_group): the same outcomes and
  // final set as applying the run in stream order; a crash before the sync
  // completes leaves the previous mark, so the run is read and applied again.
  const std::vector<Blocklist::Outcome> out = b_.apply_group(group, &m);
  if (io_failed(out)) {
    *err = b_.last_error();
    return false;
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == Blocklist::Outcome::kFull) ++refused_;
    if (collecting_) results_[ids[i]].outcomes = {out[i]};
  }
  group.clear();
  ids.clear();
  return true;
}

bool BlocklistSync::apply(std::span<const sync::Received> entries, std::string* err) {
  if (!note_delivered(entries, err)) return false;
  const int64_t now = b_.now_ms();
  // Runs of add/del entries go to the Blocklist as one group (one journal
  // sync, with the mark of the run's last entry); the other ops alone.
  // Reused from batch to batch (members): a catch-up batch is 50 000 entries,
  // whose change vector would otherwise be fresh pages (faults) every time.
  std::vector<Blocklist::Change>& group = group_;
  std::vector<sync::StreamId>& group_ids = group_ids_;
  group.clear();
  group_ids.clear();
  group.reserve(entries.size());  // no regrowth copies
  group_ids.reserve(entries.size());
  sync::StreamId pending_mark;  // an ID applied but not yet journalled
  bool unmarked = false;
  for (const sync::Received& r : entries) {
    if (r.entry == nullptr) {  // garbage: skipped, its ID recorded with the next write
      pending_mark = r.id;
      unmarked = true;
      continue;
    }
    const sync::Entry& e = *r.entry;
    if (e.op == sync::EntryOp::kAdd || e.op == sync::EntryOp::kDel) {
      group.push_back(change_of(e.changes[0], now));
      group_ids.push_back(r.id);
      pending_mark = r.id;
      unmarked = true;
      continue;
    }
    if (!group.empty() && !commit_group(group, group_ids, pending_mark, err)) return false;
    Result res;
    switch (e.op) {
      case sync::EntryOp::kBatch: {
        std::vector<Blocklist::Change> batch;
        for (const sync::EntryChange& c : e.changes) batch.push_back(change_of(c, now));
        const std::string v = r.id.str();
        const store::RuleStore::Mark m{kMarkName, v};
        res.outcomes = b_.apply(batch, /*atomic=*/true, &m);
        if (io_failed(res.outcomes)) {
          *err = b_.last_error();
          return false;
        }
        break;
      }
      case sync::EntryOp::kLoad: {
        std::vector<Rule> rules;
        for (const sync::EntryChange& c : e.changes) rules.push_back(c.rule);
        res.batch = b_.add_batch(rules);
        if (res.batch.result == Blocklist::Result::kIoError) {
          *err = b_.last_error();
          return false;
        }
        if (res.batch.result == Blocklist::Result::kFull) ++refused_;
        if (!mark(r.id, err)) return false;
        break;
      }
      default:  // flush
        res.flush = e.kind ? b_.flush_kind(*e.kind, &res.flushed) : b_.flush(&res.flushed);
        if (res.flush != Blocklist::Result::kOk) {
          *err = b_.last_error();
          return false;
        }
        if (!mark(r.id, err)) return false;
        break;
    }
    unmarked = false;
    if (collecting_) results_[r.id] = std::move(res);
  }
  if (!group.empty()) return commit_group(group, group_ids, pending_mark, err);
  return !unmarked || mark(pending_mark, err);
}

bool BlocklistSync::replace_all(const std::vector<sync::EntryChange>& rules, sync::StreamId at,
                                std::string* err) {
  // One group that ends in the snapshot's state: deletes of what it lacks,
  // adds of what it has (a present rule keeps its place in the filter, so the
  // data path never misses a rule that stays).
  std::map<std::string, const sync::EntryChange*> want;
  for (const sync::EntryChange& c : rules) want.emplace(format_rule(c.rule), &c);
  std::vector<Blocklist::Change> group;
  b_.for_each(std::nullopt, "", [&](std::string_view text, int64_t) {
    if (want.count(std::string(text)) == 0) {
      if (RuleParse p = parse_rule(text); p.rule) group.push_back({Blocklist::Change::Op::kDel, std::move(*p.rule), 0, {}});
    }
  });
  const int64_t now = b_.now_ms();
  for (const auto& [text, c] : want) group.push_back(change_of(*c, now));
  std::vector<sync::StreamId> ids(group.size());
  const bool was = collecting_;
  collecting_ = false;
  const bool ok = commit_group(group, ids, at, err);
  collecting_ = was;
  if (ok) CG_LOG(NOTICE, control, "sync: rebuilt from the snapshot at %s (%zu rules)", at.str().c_str(), rules.size());
  return ok;
}

void BlocklistSync::dump(std::vector<sync::EntryChange>* rules) const {
  const int64_t now = b_.now_ms();
  b_.for_each_in_set(std::nullopt, "", std::nullopt,
                     [&](std::string_view text, int64_t ttl_left_ms, std::string_view, RuleAction action) {
                       if (RuleParse p = parse_rule(text); p.rule)
                         rules->push_back({false, std::move(*p.rule), ttl_left_ms > 0 ? now + ttl_left_ms : 0, action});
                     });
}

bool BlocklistSync::publish(const std::vector<sync::Entry>& entries, std::vector<sync::StreamId>* ids,
                            std::string* err) {
  // The IDs are known only once XADD answers, and publish() applies the
  // stream up to them before it returns: so every result of the call is
  // kept, and the caller picks its own by ID.
  results_.clear();
  collecting_ = true;
  const bool ok = sync_->publish(entries, ids, err);
  collecting_ = false;
  if (!ok) return false;
  for (const sync::StreamId& id : *ids) {
    if (results_.count(id) == 0) {
      *err = "entry " + id.str() + " was appended but not applied here";
      return false;
    }
  }
  return true;
}

bool BlocklistSync::changes(const std::vector<Blocklist::Change>& c, bool atomic,
                            std::vector<Blocklist::Outcome>* out, std::string* err) {
  const int64_t now = b_.now_ms();
  auto entry_change = [&](const Blocklist::Change& ch) {
    return sync::EntryChange{ch.op == Blocklist::Change::Op::kDel, ch.rule, ch.ttl_ms > 0 ? now + ch.ttl_ms : 0,
                             ch.op == Blocklist::Change::Op::kDel ? RuleAction::kDefault : ch.action};
  };
  if (queue_offline_ && !sync_->connected()) {
    // Redis down: applied here now, appended later as single add/del
    // entries (docs/sync.md: a queued batch is atomic here, not in the log).
    std::vector<sync::Entry> q;
    for (const Blocklist::Change& ch : c) {
      q.push_back(entry_of(ch.op == Blocklist::Change::Op::kDel ? sync::EntryOp::kDel : sync::EntryOp::kAdd));
      q.back().changes.push_back(entry_change(ch));
    }
    if (!enqueue(std::move(q), err)) return false;
    *out = b_.apply(c, atomic);
    const bool failed = std::any_of(out->begin(), out->end(), [](Blocklist::Outcome o) {
      return o == Blocklist::Outcome::kIoError || o == Blocklist::Outcome::kNotApplied ||
             o == Blocklist::Outcome::kAbsent || o == Blocklist::Outcome::kFull;
    });
    if (io_failed(*out) || (atomic && failed)) unqueue_last();
    return true;
  }
  std::vector<sync::Entry> entries;
  if (atomic) {
    entries.push_back(entry_of(sync::EntryOp::kBatch));
    for (const Blocklist::Change& ch : c) entries[0].changes.push_back(entry_change(ch));
  } else {
    for (const Blocklist::Change& ch : c) {
      entries.push_back(entry_of(ch.op == Blocklist::Change::Op::kDel ? sync::EntryOp::kDel : sync::EntryOp::kAdd));
      entries.back().changes.push_back(entry_change(ch));
    }
  }
  std::vector<sync::StreamId> ids;
  if (!publish(entries, &ids, err)) return false;
  out->clear();
  for (const sync::StreamId& id : ids) {
    const std::vector<Blocklist::Outcome>& o = results_[id].outcomes;
    out->insert(out->end(), o.begin(), o.end());
  }
  if (out->size() != c.size()) {
    *err = "internal: " + std::to_string(out->size()) + " outcomes for " + std::to_string(c.size()) + " changes";
    return false;
  }
  return true;
}

bool BlocklistSync::load(const std::vector<Rule>& rules, Blocklist::BatchResult* out, std::string* err) {
  std::vector<sync::Entry> entries(1, entry_of(sync::EntryOp::kLoad));
  for (const Rule& r : rules) entries[0].changes.push_back({false, r, 0});
  std::vector<sync::StreamId> ids;
  if (rules.empty()) {
    *out = {};
    return true;
  }
  if (queue_offline_ && !sync_->connected()) {
    std::vector<sync::Entry> q;
    for (const Rule& r : rules) {
      q.push_back(entry_of(sync::EntryOp::kAdd));
      q.back().changes.push_back({false, r, 0});
    }
    if (!enqueue(std::move(q), err)) return false;
    *out = b_.add_batch(rules);
    if (out->result != Blocklist::Result::kOk) unqueue_last();
    return true;
  }
  if (!publish(entries, &ids, err)) return false;
  *out = results_[ids[0]].batch;
  return true;
}

bool BlocklistSync::flush(std::optional<RuleKind> kind, Blocklist::Result* res, std::size_t* n,
                          std::string* err) {
  std::vector<sync::Entry> entries(1, entry_of(sync::EntryOp::kFlush));
  entries[0].kind = kind;
  if (queue_offline_ && !sync_->connected()) {
    if (!enqueue(entries, err)) return false;
    *res = kind ? b_.flush_kind(*kind, n) : b_.flush(n);
    if (*res != Blocklist::Result::kOk) unqueue_last();
    return true;
  }
  std::vector<sync::StreamId> ids;
  if (!publish(entries, &ids, err)) return false;
  *res = results_[ids[0]].flush;
  *n = results_[ids[0]].flushed;
  return true;
}

void BlocklistSync::text(std::string& out) const {
  const sync::SyncStats& s = sync_->stats();
  const sync::SyncOptions& o = sync_->options();
  auto line = [&](std::string_view k, const std::string& v) {
    out += "sync.";
    out += k;
    out += ' ';
    out += v;
    out += '\n';
  };
  line("redis", sync::describe(o.url));
  line("stream", o.stream);
  line("gateway_id", o.gateway_id);
  line("connected", s.connected ? "true" : "false");
  line("last_applied_id", s.last_applied.str());
  line("last_seen_id", s.last_seen.str());
  line("lag_entries", std::to_string(s.lag_entries));
  line("lag_ms", std::to_string(s.lag_ms));
  line("applied", std::to_string(s.applied));
  line("published", std::to_string(s.published));
  line("garbage", std::to_string(s.garbage));
  line("refused_full", std::to_string(refused_));
  line("publish_failures", std::to_string(s.publish_failures));
  line("reconnects", std::to_string(s.reconnects));
  line("snapshots_written", std::to_string(s.snapshots_written));
  line("snapshot_rebuilds", std::to_string(s.snapshot_rebuilds));
  line("gaps", std::to_string(s.gaps));
  line("offline_writes", queue_offline_ ? "queue" : "refuse");
  line("queued", std::to_string(queued()));
  // The outbox token of the next queued entry to append ("-": none), as the
  // `outbox` field of the stream entry it becomes.
  line("outbox_head", outbox_.empty() ? "-" : outbox_token(outbox_.front().id, first_line_));
  line("outbox_appended", std::to_string(s.outbox_appended));
  // One line: the error text never holds a newline from us, but Redis' might.
  std::string e = s.last_error.empty() ? "-" : s.last_error;
  for (char& ch : e)
    if (ch == '\n' || ch == '\r') ch = ' ';
  line("last_error", e);
}

}  // namespace cg
