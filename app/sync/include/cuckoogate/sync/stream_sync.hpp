// The gateway side of the shared blocklist: follows a Redis stream of rule
// changes and publishes local ones to it (docs/sync.md).
//
// Every gateway applies the same log in the same order, its own changes
// included: a control-socket change is appended (XADD) and then applied when
// the gateway has read the stream up to it, so all gateways pass through the
// same sequence of states, and the answer a client gets is the outcome of its
// change at its place in the log. The Applier makes each applied entry's
// effect and its stream ID durable together, so a restart resumes after the
// last applied entry; a gateway whose next entries were trimmed away rebuilds
// from the snapshot (a Redis key written periodically by the holder of a
// lease, SET NX PX) and then reads the rest.
//
// Redis unavailable: publish() fails at once (the caller refuses the write),
// the follower reconnects with exponential backoff and catches up. Nothing
// here touches the data path; all calls are made by the control thread, and
// the longest a call can block is the I/O timeout of one command.
//
// Thread safety: one thread (the control thread) owns a StreamSync.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cuckoogate/sync/entry.hpp"
#include "cuckoogate/sync/redis_client.hpp"
#include "cuckoogate/sync/redis_url.hpp"
#include "cuckoogate/sync/stream_id.hpp"

namespace cg::sync {

struct Received {
  StreamId id;
  const Entry* entry = nullptr;  // nullptr: the entry did not decode (counted, skipped)
};

// What StreamSync drives: the local blocklist.
class Applier {
 public:
  virtual ~Applier() = default;
  // Applies the entries in order (skipping those with entry == nullptr) and
  // records the last one's ID durably with their effect. false and *err: the
  // local state could not be written (nothing of this call counts as applied).
  virtual bool apply(std::span<const Received> entries, std::string* err) = 0;
  // Makes the local rule set exactly `rules` (adds only) as of stream ID `at`.
  virtual bool replace_all(const std::vector<EntryChange>& rules, StreamId at, std::string* err) = 0;
  // The current rule set (adds, absolute expiry) for a snapshot.
  virtual void dump(std::vector<EntryChange>* rules) const = 0;
  // Entries to append, in order, each time the connection is made, after
  // catching up and before any new write: what this gateway accepted while
  // Redis was down, and its start-up rule files (docs/sync.md). The Applier
  // recognises them when they come back in the stream (origin and outbox
  // token) and stops offering them. Default: none.
  virtual void outbox(std::vector<Entry>* entries) const { (void)entries; }
};

struct SyncOptions {
  RedisUrl url;
  std::string stream = "cuckoogate:rules";
  std::string gateway_id;
  std::chrono::milliseconds io_timeout{1000};      // connect, and each command
  std::chrono::milliseconds block{1000};           // XREAD BLOCK of the follower
  std::size_t read_count = 1000;                   // entries per XREAD of the follower
  std::size_t catch_up_count = 10000;              // entries per XREAD when catching up
  std::size_t apply_batch = 50000;                 // entries per Applier call when catching up (one journal sync)
  std::chrono::milliseconds backoff_min{100};      // reconnect backoff, doubling
  std::chrono::milliseconds backoff_max{2000};
  std::chrono::milliseconds snapshot_every{60000}; // 0: this gateway writes no snapshots
  int wait_replicas = 0;                           // > 0: WAIT for that many replicas before OK
  std::chrono::milliseconds lag_every{1000};       // how often tick() measures the lag
  // Redis keys next to the stream: the snapshot and the snapshot writer's lease.
  std::string snapshot_key() const { return stream + ":snapshot"; }
  std::string lease_key() const { return stream + ":snapshot-lease"; }
};

struct SyncStats {
  bool connected = false;
  StreamId last_applied;
  StreamId last_seen;          // the stream's last ID when last looked (tick)
  uint64_t applied = 0;        // entries applied (own and others')
  uint64_t garbage = 0;        // entries that did not decode, skipped
  uint64_t published = 0;      // entries this gateway appended
  uint64_t outbox_appended = 0; // of them: from the Applier's outbox, on (re)connecting
  uint64_t publish_failures = 0;
  uint64_t reconnects = 0;     // connections lost
  uint64_t snapshots_written = 0;
  uint64_t snapshot_rebuilds = 0;
  uint64_t gaps = 0;           // trimmed past our ID with no usable snapshot
  uint64_t lag_entries = 0;    // entries after last_applied (capped at kLagCap)
  int64_t lag_ms = 0;          // last_seen's time minus last_applied's
  std::string last_error;
};

inline constexpr uint64_t kLagCap = 10000;

class StreamSync {
 public:
  using Clock = std::chrono::steady_clock;
  // `start`: the last ID this gateway applied (zero: read from the beginning).
  StreamSync(SyncOptions o, Applier& a, StreamId start);
  ~StreamSync();
  StreamSync(const StreamSync&) = delete;
  StreamSync& operator=(const StreamSync&) = delete;

  // The follower's socket, to poll for POLLIN; -1 while disconnected.
  int fd() const noexcept;
  // The follower's socket is readable: applies what arrived.
  void on_readable();
  // Connects or reconnects (after backoff), writes a snapshot when due,
  // refreshes the lag. Returns the ms until it wants to run again.
  int tick();
  // Appends the entries (XADD, pipelined) and applies the stream up to the
  // last of them; ids gets their IDs. false and *err if Redis is unavailable
  // or fails: the entries may or may not be in the stream (if they are, they
  // are applied when the connection is back).
  bool publish(std::span<const Entry> entries, std::vector<StreamId>* ids, std::string* err);
  // Writes a snapshot now if this gateway holds (or takes) the lease.
  bool write_snapshot(std::string* err);

  bool connected() const noexcept { return pub_ != nullptr; }
  const SyncStats& stats() const noexcept { return stats_; }
  const SyncOptions& options() const noexcept { return o_; }

 private:
  bool connect(std::string* err);
  void disconnect(const std::string& why);
  void stream_replaced(const char* what, StreamId from);
  bool rebuild_if_trimmed(std::string* err);
  bool catch_up(const StreamId* target, std::string* err);  // nullptr: to the end
  bool apply_page(const FlatReply& p, std::size_t* n, std::string* err);  // decode_page + apply_batch
  bool decode_page(const FlatReply& p, std::size_t* n, std::string* err);
  bool apply_batch(std::string* err);
  void discard_batch();
  bool send_follow(std::string* err);
  bool append(std::span<const Entry> entries, std::vector<StreamId>* ids, std::string* err);
  bool append_outbox(std::string* err);
  void refresh_lag();

  SyncOptions o_;
  Applier& a_;
  std::unique_ptr<RedisConn> pub_, follow_;
  SyncStats stats_;
  std::chrono::milliseconds backoff_;
  Clock::time_point next_connect_{};
  Clock::time_point next_snapshot_{};
  Clock::time_point next_lag_{};
  bool local_failed_ = false;  // the Applier failed: stop (the journal is read-only)
  // Reused from page to page (no allocation per entry once grown): the
  // catch-up's and the follower's replies, the decoded entries, the batch.
  FlatReply page_, follow_page_;
  std::deque<Entry> decoded_;   // [0, decoded_used_) hold the batch's entries
  std::size_t decoded_used_ = 0;
  std::vector<Received> batch_;  // decoded, not applied yet
  FieldViews fields_;
};

}  // namespace cg::sync
