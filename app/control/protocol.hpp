// The control-socket protocol, independent of sockets (see
// docs/control-protocol.md). One request per line; exactly one response per
// request, in order. A response's first line is `OK ...` or
// `ERR <code> <message>`; a multi-line response ends with a line holding a
// single '.' (payload lines never start with '.').
//
// Thread safety: a CommandHandler and its Sessions belong to the control thread.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "control/blocklist.hpp"

namespace cg {

inline constexpr std::size_t kMaxRequestLine = 8192;  // bytes, without the newline

// Per-connection state: a `load` in progress collects rules until ".".
struct Session {
  bool loading = false;
  bool closing = false;          // `quit` was handled: close after the response is sent
  std::vector<Rule> load_rules;
  std::string load_error;        // first error in the stream (the load is then rejected)
  std::size_t load_line = 0;     // lines read since `load`
};

class CommandHandler {
 public:
  // stats/info providers append `key value` lines (no terminator).
  using TextProvider = std::function<void(std::string& out)>;
  CommandHandler(Blocklist& b, TextProvider stats, TextProvider info)
      : b_(b), stats_(std::move(stats)), info_(std::move(info)) {}

  // Handles one request line (without its newline) and appends the complete
  // response to `out`; during a `load` it appends nothing until the final ".".
  void handle_line(Session& s, std::string_view line, std::string& out);
  // The line exceeded kMaxRequestLine and was discarded.
  void line_too_long(Session& s, std::string& out);

  // Applied changes since start, for the stats: adds, deletes.
  uint64_t adds() const noexcept { return adds_; }
  uint64_t dels() const noexcept { return dels_; }

 private:
  void load_line(Session& s, std::string_view line, std::string& out);
  Blocklist& b_;
  TextProvider stats_, info_;
  uint64_t adds_ = 0, dels_ = 0;
};

}  // namespace cg
