// The control-socket protocol, independent of sockets (see
// docs/control-protocol.md). One request per line; exactly one response per
// request, in order. A response's first line is `OK ...` or
// `ERR <code> <message>`; a multi-line response ends with a line holding a
// single '.' (payload lines never start with '.').
//
// Group commit: `add` and `del` requests are queued and applied by commit(),
// all that a poll round read with one journal sync, and only then answered.
// Any other request first commits what is queued, so every client sees its
// requests take effect in order. Every `OK` of a change is sent after the
// change is on disk (with a state directory).
//
// Thread safety: a CommandHandler and its Sessions belong to the control thread.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "control/blocklist.hpp"
#include "control/request.hpp"

namespace cg {

// Memory one client's `load` or `batch` may hold before its final '.', and
// all clients together. Counted per rule: a `load` line as its order key, its
// end offset (KeyBatch::kIndexBytes) and kLoadBytesPerRule (what applying the
// load adds per rule: its sort entry and store request), together the key +
// 100 bytes (an upper bound: the end offset is 4 bytes since session 8, the
// limit users see was kept); a `batch` line as the parsed rule (~100 bytes
// plus the name). Past either, the client gets ERR 413 and is closed.
inline constexpr std::size_t kMaxLoadBytesPerClient = std::size_t{512} << 20;
inline constexpr std::size_t kMaxLoadBytesTotal = std::size_t{1} << 30;
inline constexpr std::size_t kLoadBytesPerRule = 96;
// Queued add/del requests before a commit is forced within a poll round.
inline constexpr std::size_t kMaxGroup = 1024;

// Per-connection state: a `load` or `batch` in progress collects its lines
// until ".".
struct Session {
  enum class Mode { kCommand, kLoad, kBatch };
  Mode mode = Mode::kCommand;
  bool closing = false;          // close after the response is sent (quit, limit hit)
  Blocklist::KeyBatch load_keys;  // kLoad: each rule as its order key (parsed straight into it)
  std::vector<Blocklist::Change> batch;  // kBatch
  std::vector<std::size_t> batch_lines;  // the stream line of each batch change
  std::size_t held_bytes = 0;    // accounted memory of load_rules / batch
  std::string stream_error;      // first error in the stream (the load/batch is then rejected)
  std::size_t stream_line = 0;   // lines read since `load`/`batch`
  int stream_code = 400;         // the code stream_error is answered with
  std::string load_set;          // kLoad: `load set=NAME` ("" = default)
  bool load_replace = false;     // kLoad: `load set=NAME replace`
};

// Where the control socket's writes go when the blocklist is shared by many
// gateways (the Redis sync, docs/sync.md): each call appends the change to the
// shared log and applies the log up to it, so the outcomes are those of the
// change at its place in the log. false and *err: the change could not be
// appended (the log is unavailable): nothing is acknowledged.
class Replicator {
 public:
  virtual ~Replicator() = default;
  // add/del: one log entry per change (atomic false), or one for them all.
  virtual bool changes(const std::vector<Blocklist::Change>& c, bool atomic,
                       std::vector<Blocklist::Outcome>* out, std::string* err) = 0;
  virtual bool load(const std::vector<Rule>& rules, Blocklist::BatchResult* out, std::string* err) = 0;
  // kind nullopt: every rule. *res as Blocklist::flush; *n how many went.
  virtual bool flush(std::optional<RuleKind> kind, Blocklist::Result* res, std::size_t* n,
                     std::string* err) = 0;
};

class CommandHandler {
 public:
  // stats/info providers append `key value` lines (no terminator).
  using TextProvider = std::function<void(std::string& out)>;
  CommandHandler(Blocklist& b, TextProvider stats, TextProvider info)
      : b_(b), stats_(std::move(stats)), info_(std::move(info)) {}

  // Memory limits of `load`/`batch` streams (defaults above; tests lower them).
  struct Limits {
    std::size_t load_bytes_per_client = kMaxLoadBytesPerClient;
    std::size_t load_bytes_total = kMaxLoadBytesTotal;
  };
  void set_limits(const Limits& l) { limits_ = l; }
  // With a replicator, every change goes through it (nullptr: straight to
  // the Blocklist). It must outlive the handler.
  void set_replicator(Replicator* r) noexcept { repl_ = r; }

  // Handles one request line (without its newline). The response is appended
  // to `out` now, or for a queued add/del at the next commit(): `out` must
  // stay valid until then. During a `load`/`batch` nothing is appended until
  // the final ".".
  void handle_line(Session& s, std::string_view line, std::string& out);
  // The line exceeded kMaxRequestLine and was discarded.
  void line_too_long(Session& s, std::string& out);
  // Applies the queued add/del requests (one journal sync) and appends their
  // responses. The server calls it once per poll round, after reading.
  void commit();
  // The connection is going away: drops what its session holds. Call commit()
  // first if its out buffer still has queued responses coming.
  void end_session(Session& s);

  // Applied changes since start, for the stats: adds, deletes.
  uint64_t adds() const noexcept { return adds_; }
  uint64_t dels() const noexcept { return dels_; }
  // Journal syncs done for queued requests, and requests they covered.
  uint64_t commits() const noexcept { return commits_; }
  uint64_t committed_requests() const noexcept { return committed_requests_; }
  std::size_t load_bytes_held() const noexcept { return held_total_; }

 private:
  void stream_line(Session& s, std::string_view line, std::string& out);
  void finish_load(Session& s, std::string& out);
  void finish_batch(Session& s, std::string& out);
  bool hold(Session& s, std::size_t bytes, std::string& out);  // false: limit hit
  void release(Session& s);
  void queue(const Request& r, std::string& out);
  void answer(Blocklist::Outcome o, const Blocklist::Change& c, std::string& out);

  struct Pending {
    Blocklist::Change change;
    std::string* out;
  };
  Blocklist& b_;
  TextProvider stats_, info_;
  std::vector<Pending> pending_;
  std::vector<Blocklist::Change> group_;  // scratch for commit()
  std::size_t held_total_ = 0;
  Limits limits_;
  Replicator* repl_ = nullptr;
  uint64_t adds_ = 0, dels_ = 0, commits_ = 0, committed_requests_ = 0;
};

}  // namespace cg
