#include "sync/blocklist_sync.hpp"

#include <unistd.h>

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

}  // namespace

sync::SyncOptions sync_options(const SyncConfig& c) {
  sync::SyncOptions o;
  o.url = sync::parse_redis_url(c.redis).url.value_or(sync::RedisUrl{});
  if (!c.user.empty()) o.url.user = c.user;
  if (!c.password.empty()) o.url.password = c.password;
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
  server.set_poll_hook({[this] { return sync_->fd(); }, [this] { sync_->on_readable(); }});
}

BlocklistSync::BlocklistSync(Blocklist& b, sync::SyncOptions o) : b_(b) {
  sync::StreamId start;
  if (const auto m = b.mark(kMarkName)) {
    if (const auto id = sync::StreamId::parse(*m)) start = *id;
  }
  sync_ = std::make_unique<sync::StreamSync>(std::move(o), *this, start);
}

BlocklistSync::~BlocklistSync() = default;

bool BlocklistSync::mark(sync::StreamId id, std::string* err) {
  const std::string v = id.str();
  if (b_.set_mark({kMarkName, v}) == Blocklist::Result::kOk) return true;
  *err = b_.last_error();
  return false;
}

Blocklist::Change BlocklistSync::change_of(const sync::EntryChange& c, int64_t now) const {
  Blocklist::Change ch{c.del ? Blocklist::Change::Op::kDel : Blocklist::Change::Op::kAdd, c.rule, 0};
  if (!c.del && c.expiry_unix_ms != 0) {
    // The expiry is absolute, so every gateway expires the rule at the same
    // moment. One that is already past: the rule must not be there.
    if (c.expiry_unix_ms > now) ch.ttl_ms = c.expiry_unix_ms - now;
    else ch.op = Blocklist::Change::Op::kDel;
  }
  return ch;
}

bool BlocklistSync::commit_group(std::vector<Blocklist::Change>& group, std::vector<sync::StreamId>& ids,
                                 sync::StreamId last, std::string* err) {
  const std::string v = last.str();
  const store::RuleStore::Mark m{kMarkName, v};
  const std::vector<Blocklist::Outcome> out = b_.apply(group, /*atomic=*/false, &m);
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
  const int64_t now = b_.now_ms();
  // Runs of add/del entries go to the Blocklist as one group (one journal
  // sync, with the mark of the run's last entry); the other ops alone.
  std::vector<Blocklist::Change> group;
  std::vector<sync::StreamId> group_ids;
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
      if (RuleParse p = parse_rule(text); p.rule) group.push_back({Blocklist::Change::Op::kDel, std::move(*p.rule), 0});
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
  b_.for_each(std::nullopt, "", [&](std::string_view text, int64_t ttl_left_ms) {
    if (RuleParse p = parse_rule(text); p.rule)
      rules->push_back({false, std::move(*p.rule), ttl_left_ms > 0 ? now + ttl_left_ms : 0});
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
    return sync::EntryChange{ch.op == Blocklist::Change::Op::kDel, ch.rule,
                             ch.ttl_ms > 0 ? now + ch.ttl_ms : 0};
  };
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
  if (!publish(entries, &ids, err)) return false;
  *out = results_[ids[0]].batch;
  return true;
}

bool BlocklistSync::flush(std::optional<RuleKind> kind, Blocklist::Result* res, std::size_t* n,
                          std::string* err) {
  std::vector<sync::Entry> entries(1, entry_of(sync::EntryOp::kFlush));
  entries[0].kind = kind;
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
  // One line: the error text never holds a newline from us, but Redis' might.
  std::string e = s.last_error.empty() ? "-" : s.last_error;
  for (char& ch : e)
    if (ch == '\n' || ch == '\r') ch = ' ';
  line("last_error", e);
}

}  // namespace cg
