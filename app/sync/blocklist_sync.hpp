// The Redis sync wired to the gateway's Blocklist (docs/sync.md): the Applier
// that applies stream entries through the same Blocklist path as control
// socket changes, and the Replicator through which the control socket's
// changes reach the stream before they are acknowledged.
//
// The last applied stream ID is the Blocklist store's mark "sync.last_id",
// journalled in the same sync as the changes it covers, so a restart resumes
// right after it (replay of the entries after an older mark would be harmless
// too: every op sets a rule's state, so applying a suffix again is idempotent).
//
// Thread safety: the control thread only.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "control/blocklist.hpp"
#include "control/protocol.hpp"
#include "control/server.hpp"
#include "cuckoogate/sync/stream_sync.hpp"
#include "gateway/config.hpp"

namespace cg {

// The StreamSync options of a [sync] section (validated by the config
// parser or the command line): the gateway id defaults to the host name.
sync::SyncOptions sync_options(const SyncConfig& c);

class BlocklistSync;
// A `stats`/`info` provider followed by the sync lines of `s` (if it is set
// when the request comes).
CommandHandler::TextProvider with_sync_lines(CommandHandler::TextProvider f,
                                             const std::unique_ptr<BlocklistSync>& s);

class BlocklistSync final : public sync::Applier, public Replicator {
 public:
  static constexpr std::string_view kMarkName = "sync.last_id";
  // The stream kMarkName is a position in (its key name).
  static constexpr std::string_view kStreamMark = "sync.stream";
  // The offline queue in the journal: the index "<epoch> <first group>
  // <lines of it already appended> <next group>", and one mark per group
  // ("sync.outbox.<group % kMaxOutboxGroups>", sync::encode_outbox_group).
  static constexpr std::string_view kOutboxMark = "sync.outbox";
  static constexpr uint64_t kMaxOutboxGroups = 4096;
  // A group is one journal record (store/journal.hpp: 1 MiB payloads).
  static constexpr std::size_t kMaxOutboxGroupBytes = (std::size_t{1} << 20) - (std::size_t{4} << 10);
  static constexpr std::size_t kMaxOutboxBytes = std::size_t{64} << 20;
  // Resumes after the Blocklist's recorded mark (none: from the start).
  BlocklistSync(Blocklist& b, sync::SyncOptions o);
  ~BlocklistSync() override;

  sync::StreamSync& stream() noexcept { return *sync_; }
  // Control-socket writes go through this sync, and its follower's socket is
  // polled with the clients. Both must outlive it.
  void attach(CommandHandler& h, ControlServer& server);
  // `sync.*` lines for `info` and `stats`.
  void text(std::string& out) const;
  // Copies the state for DPDK telemetry (/cuckoogate/sync, registered by
  // attach()); done each poll round.
  void publish_telemetry() const;
  // Entries this gateway skipped because its Blocklist refused them (full).
  uint64_t refused() const noexcept { return refused_; }
  // offline_writes = "queue": while Redis is down, control-socket writes are
  // applied here, kept in the journal's outbox (in the same order) and
  // appended to the stream when Redis is back (docs/sync.md).
  void set_queue_offline(bool on) noexcept { queue_offline_ = on; }
  // The start-up rule files (already added to the Blocklist): appended as
  // one `load` entry when this gateway first connects, so no gateway keeps
  // rules the others do not have.
  void set_startup_rules(std::vector<Rule> rules);
  // Entries waiting in the outbox (offline writes; not the start-up load).
  std::size_t queued() const noexcept;

  // sync::Applier
  bool apply(std::span<const sync::Received> entries, std::string* err) override;
  bool replace_all(const std::vector<sync::EntryChange>& rules, sync::StreamId at, std::string* err) override;
  void dump(std::vector<sync::EntryChange>* rules) const override;
  void outbox(std::vector<sync::Entry>* entries) const override;

  // Replicator
  bool changes(const std::vector<Blocklist::Change>& c, bool atomic, std::vector<Blocklist::Outcome>* out,
               std::string* err) override;
  bool load(const std::vector<Rule>& rules, Blocklist::BatchResult* out, std::string* err) override;
  bool flush(std::optional<RuleKind> kind, Blocklist::Result* res, std::size_t* n, std::string* err) override;

 private:
  // What applying one of this gateway's own entries gave, for its client.
  struct Result {
    std::vector<Blocklist::Outcome> outcomes;  // add, del, batch
    Blocklist::BatchResult batch;              // load
    Blocklist::Result flush = Blocklist::Result::kOk;
    std::size_t flushed = 0;
  };
  // Publishes and fills results_ for the entries' IDs; false: not published.
  bool publish(const std::vector<sync::Entry>& entries, std::vector<sync::StreamId>* ids, std::string* err);
  Blocklist::Change change_of(const sync::EntryChange& c, int64_t now) const;
  bool commit_group(std::vector<Blocklist::Change>& group, std::vector<sync::StreamId>& ids,
                    sync::StreamId mark, std::string* err);
  bool mark(sync::StreamId id, std::string* err);
  // The offline queue: a group in, the last group out again (the write
  // failed here as a whole), and the groups the stream now holds.
  struct OutboxGroup {
    uint64_t id = 0;
    std::vector<sync::Entry> entries;
    std::size_t bytes = 0;
  };
  bool enqueue(std::vector<sync::Entry> entries, std::string* err);
  void unqueue_last();
  bool write_outbox_index(std::string* err);
  bool note_delivered(std::span<const sync::Received> entries, std::string* err);
  std::string outbox_token(uint64_t group, std::size_t line) const;
  void load_outbox();

  Blocklist& b_;
  std::unique_ptr<sync::StreamSync> sync_;
  std::map<sync::StreamId, Result> results_;  // own entries being published
  bool collecting_ = false;                   // results_ wanted (inside publish)
  uint64_t refused_ = 0;
  bool queue_offline_ = false;
  std::deque<OutboxGroup> outbox_;
  uint64_t epoch_ = 0;            // tells this state's tokens from an older one's
  uint64_t next_group_ = 0;
  std::size_t first_line_ = 0;    // entries of outbox_.front() already in the stream
  std::size_t outbox_bytes_ = 0;
  std::vector<Rule> startup_;     // the start-up load, until it is in the stream
  std::vector<Blocklist::Change> group_;  // apply()'s run of add/del entries (capacity kept)
  std::vector<sync::StreamId> group_ids_;
  std::string startup_token_;
};

}  // namespace cg
