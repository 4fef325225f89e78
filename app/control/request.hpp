// The control protocol's request language, independent of sockets and of
// DPDK (so it is unit-tested and fuzzed on its own): framing of a byte stream
// into request lines, and the parsing and argument checking of every command.
// The protocol is specified in docs/control-protocol.md.
//
// Thread safety: LineFramer is owned by one connection; parse_* are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cuckoogate/keys/rule.hpp"

namespace cg {

inline constexpr std::size_t kMaxRequestLine = 8192;  // bytes, without the newline

// Splits a byte stream into '\n'-terminated lines of at most max_line bytes.
// A longer line is reported once as too long and its bytes are dropped up to
// its newline; the framer never holds more than max_line bytes of a line.
class LineFramer {
 public:
  explicit LineFramer(std::size_t max_line = kMaxRequestLine) : max_(max_line) {}

  // Takes bytes from the stream. The framer holds what it is given until
  // next() returns it; a caller bounds that by not reading more input while
  // it holds back lines (kOutHighWater in the server).
  void append(std::string_view bytes);

  enum class Kind { kNone, kLine, kTooLong };
  struct Item {
    Kind kind = Kind::kNone;
    std::string_view line;  // kLine: without the '\n'; valid until the next call
  };
  // The next complete line, a too-long notice, or kNone (need more bytes).
  Item next();

  // Bytes held that next() has not returned yet.
  std::size_t buffered() const noexcept { return buf_.size() - off_; }
  // True if next() would return something without more input.
  bool ready() const noexcept { return buf_.find('\n', off_) != std::string::npos || buffered() > max_; }

 private:
  std::size_t max_;
  std::string buf_;
  std::size_t off_ = 0;         // start of the unconsumed part of buf_
  bool discarding_ = false;     // inside a too-long line: drop up to its '\n'
};

enum class Verb : uint8_t {
  kAdd, kDel, kCheck, kLoad, kBatch, kList, kHits, kStats, kInfo, kFlush, kPing, kHelp, kQuit,
};

struct Request {
  Verb verb = Verb::kPing;
  std::optional<Rule> rule;       // add, del, check
  int64_t ttl_ms = 0;             // add: 0 = no expiry
  RuleAction action = RuleAction::kDefault;  // add: action=drop|reject (none: the gateway's)
  std::optional<RuleKind> kind;   // list, hits: filter; flush: the kind (nullopt with all = true)
  bool all = false;               // flush all
  std::string prefix;             // list, hits
  std::string set = {};           // add: set=NAME; load: set=NAME; list, hits: only this set ("" = not given)
  bool replace = false;           // load: `replace` (the set becomes exactly the stream's rules)
};

struct RequestParse {
  std::optional<Request> req;  // empty: code and error say why
  int code = 400;
  std::string error;
};

// A set name (set=NAME): 1 to kMaxSetName bytes of a-z, 0-9, '_' and '-'.
inline constexpr std::size_t kMaxSetName = 64;
bool valid_set_name(std::string_view name) noexcept;
// What a set name must be, for errors: "expected 1 to 64 of a-z, 0-9, '_', '-'".
std::string set_name_expected();

// Longest ttl= value, in seconds (about 31 years).
inline constexpr uint64_t kMaxTtlSeconds = 999'999'999;

// Parses one request line (without its '\n'; one trailing '\r' is ignored).
// Any other control character (a CR or NUL inside the line, for example) is
// refused: a line is exactly one request.
RequestParse parse_request(std::string_view line);

// Parses one line inside a `batch`: `add RULE [ttl=SECONDS] [action=A]` or `del RULE`.
RequestParse parse_batch_line(std::string_view line);

// The one-line command summary `help` answers with.
std::string_view request_help();

}  // namespace cg
