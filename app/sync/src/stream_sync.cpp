#include "cuckoogate/sync/stream_sync.hpp"

#include <algorithm>
#include <chrono>
#include <optional>

namespace cg::sync {
namespace {

// Fields of one stream entry ([id, [f1, v1, f2, v2, ...]]), as views into
// the page; false if the entry is not shaped like one (then it is skipped as
// garbage).
bool entry_fields(const FlatReply& p, FlatReply::Ref e, FieldViews* f) {
  const FlatReply::Ref kv = p.at(e, 1);
  f->clear();
  if (!p.is_array(kv) || p.size(kv) % 2 != 0) return false;
  for (std::size_t i = 0; i + 1 < p.size(kv); i += 2) f->emplace_back(p.str(p.at(kv, i)), p.str(p.at(kv, i + 1)));
  return true;
}

// The entries of an XREAD reply on one stream: [[stream, [entry, ...]]].
FlatReply::Ref page_entries(const FlatReply& p) { return p.at(p.at(p.root(), 0), 1); }

// The ID of the last entry of an XREAD reply (nullopt: none, or not an ID).
std::optional<StreamId> last_id(const FlatReply& p) {
  const FlatReply::Ref entries = page_entries(p);
  const std::size_t n = p.size(entries);
  if (n == 0) return std::nullopt;
  return StreamId::parse(p.str(p.at(p.at(entries, n - 1), 0)));
}

// A field of a flat XINFO-style [name, value, ...] reply.
const redisReply* info_field(const redisReply* r, std::string_view name) {
  for (std::size_t i = 0; i + 1 < reply_size(r); i += 2)
    if (reply_str(reply_at(r, i)) == name) return reply_at(r, i + 1);
  return nullptr;
}

}  // namespace

StreamSync::StreamSync(SyncOptions o, Applier& a, StreamId start)
    : o_(std::move(o)), a_(a), backoff_(o_.backoff_min) {
  stats_.last_applied = start;
}

StreamSync::~StreamSync() = default;

int StreamSync::fd() const noexcept { return follow_ ? follow_->fd() : -1; }

void StreamSync::disconnect(const std::string& why) {
  if (pub_ || follow_) ++stats_.reconnects;
  pub_.reset();
  follow_.reset();
  stats_.connected = false;
  stats_.last_error = why;
  next_connect_ = Clock::now() + backoff_;
  backoff_ = std::min(backoff_ * 2, o_.backoff_max);
}

bool StreamSync::connect(std::string* err) {
  pub_ = RedisConn::connect(o_.url, o_.io_timeout, err);
  if (pub_) follow_ = RedisConn::connect(o_.url, o_.io_timeout, err);
  if (!pub_ || !follow_) return false;
  // Connected again: the error that broke the last connection (or kept this
  // one from being made) is over. What the steps below find (a gap, a
  // garbage entry) is recorded afresh.
  stats_.last_error.clear();
  if (!rebuild_if_trimmed(err) || !catch_up(nullptr, err) || !append_outbox(err) || !send_follow(err))
    return false;
  stats_.connected = true;
  backoff_ = o_.backoff_min;
  next_lag_ = Clock::now();
  return true;
}

int StreamSync::tick() {
  if (local_failed_) return 1000;
  const auto now = Clock::now();
  if (!pub_) {
    if (now < next_connect_)
      return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(next_connect_ - now).count());
    std::string err;
    if (!connect(&err)) {
      disconnect(err);
      return static_cast<int>(backoff_.count());
    }
  }
  if (o_.snapshot_every.count() > 0 && now >= next_snapshot_) {
    next_snapshot_ = now + o_.snapshot_every;
    std::string err;
    if (!write_snapshot(&err)) {
      if (pub_ && pub_->broken()) {
        disconnect(err);
        return static_cast<int>(backoff_.count());
      }
      stats_.last_error = err;
    }
  }
  if (now >= next_lag_) {
    next_lag_ = now + o_.lag_every;
    refresh_lag();
  }
  return 1000;
}

bool StreamSync::send_follow(std::string* err) {
  const std::string block = std::to_string(o_.block.count());
  const std::string count = std::to_string(o_.read_count);
  const std::string from = stats_.last_applied.str();
  return follow_->send({"XREAD", "COUNT", count, "BLOCK", block, "STREAMS", o_.stream, from}, err);
}

void StreamSync::on_readable() {
  if (!follow_) return;
  std::string err;
  bool complete = false;
  if (!follow_->read_ready_flat(&follow_page_, &complete, &err)) {
    disconnect(err);
    return;
  }
  if (!complete) return;  // partial reply: more to come
  if (follow_page_.is_error(follow_page_.root())) {
    disconnect("XREAD: " + std::string(follow_page_.str(follow_page_.root())));
    return;
  }
  std::size_t n = 0;
  if (!apply_page(follow_page_, &n, &err) || !send_follow(&err)) disconnect(err);
}

bool StreamSync::apply_page(const FlatReply& p, std::size_t* n, std::string* err) {
  if (!decode_page(p, n, err)) {
    discard_batch();
    return false;
  }
  return apply_batch(err);
}

// [[stream, [[id, fields], ...]]] (nil when XREAD found nothing): the
// entries after the last applied one go to batch_, decoded into decoded_,
// whose Entry objects (their vectors and strings) are reused from batch to
// batch (a deque: references stay valid while it grows).
bool StreamSync::decode_page(const FlatReply& p, std::size_t* n, std::string* err) {
  *n = 0;
  if (p.is_nil(p.root())) return true;
  const FlatReply::Ref entries = page_entries(p);
  const std::size_t count = p.size(entries);
  *n = count;
  if (decoded_.size() < decoded_used_ + count) decoded_.resize(decoded_used_ + count);
  std::string why;
  for (std::size_t i = 0; i < count; ++i) {
    const FlatReply::Ref e = p.at(entries, i);
    const std::optional<StreamId> id = StreamId::parse(p.str(p.at(e, 0)));
    if (!id) {
      *err = "XREAD: an entry without a stream id";
      return false;
    }
    if (*id <= stats_.last_applied) continue;  // applied already (read by the other connection)
    if (!batch_.empty() && *id <= batch_.back().id) continue;  // in this batch already
    bool ok = entry_fields(p, e, &fields_);
    if (!ok) why = "entry is not [id, fields]";
    else ok = decode_entry_into(fields_, &decoded_[decoded_used_], &why);
    if (ok) {
      batch_.push_back({*id, &decoded_[decoded_used_++]});
    } else {
      batch_.push_back({*id, nullptr});
      ++stats_.garbage;
      stats_.last_error = "entry " + id->str() + " skipped: " + why;
    }
  }
  return true;
}

// The batch as one Applier call (in the gateway: one Blocklist::apply and one
// journal sync, with the batch's last ID as the mark, for every run of
// add/del entries). The batch is empty afterwards, whatever happened.
bool StreamSync::apply_batch(std::string* err) {
  if (batch_.empty()) return true;
  const bool ok = a_.apply(batch_, err);
  if (ok) {
    // Garbage entries (no decoded entry) were skipped, not applied; they
    // still move the position past them.
    for (const Received& r : batch_) stats_.applied += r.entry != nullptr;
    stats_.last_applied = batch_.back().id;
  } else {
    local_failed_ = true;
    *err = "the local state could not be written, sync stopped: " + *err;
  }
  discard_batch();
  return ok;
}

void StreamSync::discard_batch() {
  // A huge entry (a `load` of many rules) should not pin its memory.
  for (std::size_t i = 0; i < decoded_used_; ++i)
    if (decoded_[i].changes.capacity() > 4096) decoded_[i] = Entry{};
  decoded_used_ = 0;
  batch_.clear();
}

// Reads pages of catch_up_count entries and applies them in batches of
// apply_batch entries. The next page's XREAD is sent as soon as a page has
// arrived (its last ID is the next start), so Redis serialises page k+1
// while this thread decodes page k and applies a batch. A batch is one
// Applier call (one journal sync in the gateway); pages stay small so Redis
// never spends long on one reply for us while other clients wait.
bool StreamSync::catch_up(const StreamId* target, std::string* err) {
  const std::string count = std::to_string(o_.catch_up_count);
  auto xread = [&](const StreamId& from) {
    const std::string start = from.str();
    return pub_->send({"XREAD", "COUNT", count, "STREAMS", o_.stream, start}, err);
  };
  if (target != nullptr && *target <= stats_.last_applied) return true;
  if (!xread(stats_.last_applied)) return false;
  struct Discard {  // entries decoded but not applied when this returns early: read again later
    StreamSync* s;
    ~Discard() { s->discard_batch(); }
  } discard{this};
  for (;;) {
    if (!pub_->reply_flat(&page_, err)) return false;
    if (page_.is_error(page_.root())) {
      *err = "XREAD: " + std::string(page_.str(page_.root()));
      return false;
    }
    const std::optional<StreamId> last = last_id(page_);
    const std::size_t n = page_.size(page_entries(page_));
    // More to read: a full page that does not reach the target yet.
    const bool more = last && n >= o_.catch_up_count && (target == nullptr || *last < *target);
    if (more && !xread(*last)) return false;
    std::size_t decoded = 0;
    bool ok = decode_page(page_, &decoded, err);
    if (ok && (!more || batch_.size() >= o_.apply_batch)) ok = apply_batch(err);
    if (!ok) {
      std::string ignored;  // the pipelined page: read and dropped, the connection stays in step
      if (more) pub_->reply_flat(&page_, &ignored);
      return false;
    }
    if (more) continue;
    if (target == nullptr || stats_.last_applied >= *target) return true;
    *err = "XREAD: the stream ends before " + target->str() + " (trimmed or deleted meanwhile?)";
    return false;
  }
}

bool StreamSync::rebuild_if_trimmed(std::string* err) {
  // A new gateway (last applied 0-0) reads the stream from its first entry,
  // or from the snapshot first if entries were trimmed already.
  ReplyPtr info = pub_->command({"XINFO", "STREAM", o_.stream}, err);
  if (!info) return false;
  if (reply_is_error(info.get())) {
    const std::string_view e = reply_str(info.get());
    if (e.find("no such key") == std::string_view::npos) {  // NOPERM, WRONGTYPE, ...: say so, retry
      *err = "XINFO STREAM " + o_.stream + ": " + std::string(e);
      return false;
    }
    // No stream: none yet, or it was deleted. Whatever is made next is new here.
    if (!stats_.last_applied.is_zero()) stream_replaced("is gone", StreamId{});
    return true;
  }
  // Were entries after ours removed? XDEL records the largest deleted ID;
  // XTRIM only moves the first entry, so an entry count larger than the
  // length with a first entry past ours means some of what we need may be
  // gone (or only what we had applied: Redis cannot tell, so the snapshot
  // decides). Trim with MINID at or below the snapshot's ID (docs/sync.md).
  const auto max_deleted = StreamId::parse(reply_str(info_field(info.get(), "max-deleted-entry-id")));
  const auto first = StreamId::parse(reply_str(info_field(info.get(), "recorded-first-entry-id")));
  const auto last_gen = StreamId::parse(reply_str(info_field(info.get(), "last-generated-id")));
  const long long length = reply_int(info_field(info.get(), "length"));
  const long long added = reply_int(info_field(info.get(), "entries-added"));
  if (!max_deleted || !first || !last_gen) {
    *err = "XINFO STREAM: no max-deleted-entry-id / recorded-first-entry-id (Redis 7 or newer needed)";
    return false;
  }
  // Deleted and made again (a Redis restarted without its data, a DEL):
  // IDs only grow within one stream, so one whose IDs never reached our last
  // entry, or one that never lost an entry (trimmed or deleted) yet starts
  // after ours, is not the stream we read. Everything in it is new here.
  // The position after such a gap: a stream made anew is all new here (its
  // start); one whose IDs stop short of ours went back in time (Redis
  // restored from an older copy): what it holds up to its last ID is
  // history this gateway applied or never will, so only what comes after
  // is read. Either way the rules stay as they are: no snapshot rebuild
  // (it would delete rules acknowledged here since).
  const StreamId mine = stats_.last_applied;
  if (!mine.is_zero() && *last_gen < mine) {
    stream_replaced("went back to an earlier state", *last_gen);
    return true;
  }
  if (!mine.is_zero() && added == length && max_deleted->is_zero() && (length == 0 || *first > mine)) {
    stream_replaced("was deleted and made anew", StreamId{});
    return true;
  }
  const StreamId last = stats_.last_applied;
  const bool trimmed = added > length && (length == 0 ? *last_gen > last : *first > last);
  if (*max_deleted <= last && !trimmed) return true;
  ReplyPtr snap = pub_->command({"GET", o_.snapshot_key()}, err);
  if (!snap) return false;
  std::vector<EntryChange> rules;
  std::string at_text, why;
  std::optional<StreamId> at;
  if (reply_str(snap.get()).empty()) {
    why = "no snapshot in " + o_.snapshot_key();
  } else if (!decode_snapshot(reply_str(snap.get()), &rules, &at_text, &why)) {
  } else if (!(at = StreamId::parse(at_text))) {
    why = "snapshot stream id '" + at_text + "' does not parse";
  } else if (*at < last || *at < *max_deleted) {
    why = "the snapshot (" + at->str() + ") is older than what this gateway needs";
  }
  if (!why.empty()) {
    // Carry on from what the stream still has, and say so loudly.
    ++stats_.gaps;
    stats_.last_error = "entries after " + last.str() + " were trimmed and " + why +
                        ": the rule set may miss changes";
    return true;
  }
  if (*at == last) return true;
  if (!a_.replace_all(rules, *at, err)) {
    local_failed_ = true;
    return false;
  }
  stats_.last_applied = *at;
  ++stats_.snapshot_rebuilds;
  return true;
}

// The stream no longer holds this gateway's history: changes made while it
// was away may be lost for good (counted as a gap, said in last_error). The
// position moves to `from` (see rebuild_if_trimmed), so that what is new
// here is read; the rules stay.
void StreamSync::stream_replaced(const char* what, StreamId from) {
  ++stats_.gaps;
  stats_.last_error = "the stream " + o_.stream + " " + what + " (it does not hold " + stats_.last_applied.str() +
                      ", the last entry applied here): the rule set may miss changes; reading it after " +
                      from.str();
  stats_.last_applied = from;
}

bool StreamSync::publish(std::span<const Entry> entries, std::vector<StreamId>* ids, std::string* err) {
  ids->clear();
  if (local_failed_) {
    *err = "sync stopped after a local journal failure: " + stats_.last_error;
    return false;
  }
  if (!pub_) {
    *err = "redis unavailable (" + stats_.last_error + ")";
    ++stats_.publish_failures;
    return false;
  }
  bool ok = append(entries, ids, err);
  if (ok && !ids->empty()) ok = catch_up(&ids->back(), err);
  if (!ok) {
    ++stats_.publish_failures;
    if (pub_ && pub_->broken()) disconnect(*err);
    return false;
  }
  stats_.published += entries.size();
  return true;
}

// What the Applier kept while Redis was down (and its start-up files): after
// catching up, so its entries come after everything already in the stream,
// and before the follower starts, so before any new write. The Applier drops
// them from its outbox as they are applied (it knows them by their token).
bool StreamSync::append_outbox(std::string* err) {
  std::vector<Entry> out;
  a_.outbox(&out);
  if (out.empty()) return true;
  std::vector<StreamId> ids;
  if (!append(out, &ids, err) || !catch_up(&ids.back(), err)) return false;
  stats_.published += out.size();
  stats_.outbox_appended += out.size();
  return true;
}

// XADDs pipelined (and WAIT); the IDs in order. Does not apply them.
bool StreamSync::append(std::span<const Entry> entries, std::vector<StreamId>* ids, std::string* err) {
  ids->clear();
  for (const Entry& e : entries) {
    Fields f = encode_entry(e);
    if (!o_.gateway_id.empty() && e.origin.empty()) f.emplace_back("origin", o_.gateway_id);
    std::vector<std::string_view> args{"XADD", o_.stream, "*"};
    for (const auto& [k, v] : f) {
      args.emplace_back(k);
      args.emplace_back(v);
    }
    pub_->append(args);
  }
  // WAIT must answer before the socket's own timeout (io_timeout) fires.
  const std::string wait_ms = std::to_string(std::max<int64_t>(1, o_.io_timeout.count() / 2));
  const std::string replicas = std::to_string(o_.wait_replicas);
  if (o_.wait_replicas > 0) pub_->append({"WAIT", replicas, wait_ms});
  bool ok = true;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    ReplyPtr r = pub_->reply(err);
    if (!r) return false;
    const std::optional<StreamId> id = StreamId::parse(reply_str(r.get()));
    if (reply_is_error(r.get()) || !id) {
      *err = "XADD refused: " + std::string(reply_str(r.get()));
      ok = false;  // keep reading the pipelined replies
      continue;
    }
    ids->push_back(*id);
  }
  if (o_.wait_replicas > 0) {  // its reply is read whatever XADD said: the pipeline stays in step
    ReplyPtr r = pub_->reply(err);
    if (!r) return false;
    if (ok && reply_int(r.get()) < o_.wait_replicas) {
      *err = "WAIT: " + std::to_string(reply_int(r.get())) + " of " + replicas + " replicas acknowledged in time";
      return false;
    }
  }
  return ok;
}

bool StreamSync::write_snapshot(std::string* err) {
  if (!pub_) {
    *err = "redis unavailable";
    return false;
  }
  // The lease: one writer at a time; the holder renews it.
  const std::string ms = std::to_string(std::max<int64_t>(o_.snapshot_every.count() * 3, 1000));
  ReplyPtr r = pub_->command({"SET", o_.lease_key(), o_.gateway_id, "NX", "PX", ms}, err);
  if (!r) return false;
  if (reply_is_nil(r.get())) {
    ReplyPtr holder = pub_->command({"GET", o_.lease_key()}, err);
    if (!holder) return false;
    if (reply_str(holder.get()) != o_.gateway_id) return true;  // another gateway writes them
    if (!pub_->command({"PEXPIRE", o_.lease_key(), ms}, err)) return false;
  }
  // Up to date first, so the snapshot is the state at a stream ID.
  if (!catch_up(nullptr, err)) return false;
  std::vector<EntryChange> rules;
  a_.dump(&rules);
  const std::string body = encode_snapshot(rules, stats_.last_applied.str());
  r = pub_->command({"SET", o_.snapshot_key(), body}, err);
  if (!r) return false;
  if (reply_is_error(r.get())) {
    *err = "SET snapshot: " + std::string(reply_str(r.get()));
    return false;
  }
  ++stats_.snapshots_written;
  return true;
}

void StreamSync::refresh_lag() {
  std::string err;
  ReplyPtr info = pub_->command({"XINFO", "STREAM", o_.stream}, &err);
  if (!info) {
    disconnect(err);
    return;
  }
  if (reply_is_error(info.get())) {
    stats_.lag_entries = 0;
    stats_.lag_ms = 0;
    return;
  }
  const auto last = StreamId::parse(reply_str(info_field(info.get(), "last-generated-id")));
  if (!last) return;
  stats_.last_seen = *last;
  if (*last <= stats_.last_applied) {
    stats_.lag_entries = 0;
    stats_.lag_ms = 0;
    return;
  }
  stats_.lag_ms = static_cast<int64_t>(last->ms) - static_cast<int64_t>(stats_.last_applied.ms);
  std::string after = "(";  // exclusive start; built by append (GCC 12 -Wrestrict, see redis_url.cpp)
  after += stats_.last_applied.str();
  ReplyPtr range = pub_->command({"XRANGE", o_.stream, after, "+", "COUNT", std::to_string(kLagCap)}, &err);
  if (!range) {
    disconnect(err);
    return;
  }
  stats_.lag_entries = reply_size(range.get());
}

}  // namespace cg::sync
