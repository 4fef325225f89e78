#include "control/request.hpp"

#include <cstdio>
#include <tuple>

namespace cg {
namespace {

bool blank(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

// Splits "word rest" at the first blank; rest is trimmed.
std::pair<std::string_view, std::string_view> split_word(std::string_view s) {
  s = trim(s);
  std::size_t sp = 0;
  while (sp < s.size() && !blank(s[sp])) ++sp;
  return {s.substr(0, sp), trim(s.substr(sp))};
}

// A rule kind as `add` reads it: case-insensitively (`add SRC ...` works,
// so `list SRC` must too).
std::optional<RuleKind> kind_named(std::string_view word) {
  std::string w(word.substr(0, 16));
  for (char& c : w) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return word.size() <= 16 ? kind_from_name(w) : std::nullopt;
}

RequestParse fail(std::string msg, int code = 400) {
  RequestParse p;
  p.code = code;
  p.error = std::move(msg);
  return p;
}

constexpr std::string_view kKinds = "flow, src, dst, ip, service, url, host";

// "set=NAME" -> NAME into *set, or the error.
std::optional<std::string> set_option(std::string_view word, std::string* set) {
  const std::string_view v = word.substr(4);
  if (!set->empty()) return "set= given twice";
  if (!valid_set_name(v))
    return "bad set name '" + std::string(v.substr(0, kMaxSetName)) + "': " + set_name_expected();
  set->assign(v);
  return std::nullopt;
}

// "ttl=SECONDS" -> milliseconds into *ttl_ms, or the error.
std::optional<std::string> ttl_option(std::string_view word, int64_t* ttl_ms) {
  const std::string_view v = word.substr(4);
  if (*ttl_ms != 0) return "ttl= given twice";
  uint64_t secs = 0;
  bool ok = !v.empty() && v.size() <= 9;
  for (char ch : v) {
    ok = ok && ch >= '0' && ch <= '9';
    if (ok) secs = secs * 10 + static_cast<uint64_t>(ch - '0');
  }
  if (!ok || secs == 0 || secs > kMaxTtlSeconds)
    return "bad ttl '" + std::string(v) + "': expected whole seconds, 1 to " + std::to_string(kMaxTtlSeconds);
  *ttl_ms = static_cast<int64_t>(secs) * 1000;
  return std::nullopt;
}

// "action=drop|reject" -> *action, or the error.
std::optional<std::string> action_option(std::string_view word, RuleAction* action, bool* given) {
  const std::string_view v = word.substr(7);
  if (*given) return "action= given twice";
  const std::optional<RuleAction> a = rule_action_named(v);
  if (!a) return "bad action '" + std::string(v.substr(0, 64)) + "': expected drop or reject";
  *action = *a;
  *given = true;
  return std::nullopt;
}

// `RULE [ttl=SECONDS] [set=NAME] [action=drop|reject]` (the options, in any
// order, only for add).
RequestParse rule_args(Verb verb, std::string_view arg, bool options_allowed) {
  Request r;
  r.verb = verb;
  bool action_given = false;
  for (;;) {
    std::size_t last = arg.size();
    while (last > 0 && !blank(arg[last - 1])) --last;
    const std::string_view tail = arg.substr(last);
    const std::string_view option = tail.starts_with("ttl=")      ? "ttl="
                                    : tail.starts_with("set=")    ? "set="
                                    : tail.starts_with("action=") ? "action="
                                                                  : "";
    if (option.empty()) break;
    if (!options_allowed) return fail(std::string(option) + " is only for add");
    std::optional<std::string> bad = option == "ttl=" ? ttl_option(tail, &r.ttl_ms)
                                     : option == "set=" ? set_option(tail, &r.set)
                                                        : action_option(tail, &r.action, &action_given);
    if (bad) return fail(*bad);
    arg = trim(arg.substr(0, last));
  }
  if (arg.empty()) return fail("missing rule");
  RuleParse p = parse_rule(arg, 1);
  if (!p.rule) return fail("bad rule: " + p.error.message());
  r.rule = std::move(p.rule);
  RequestParse out;
  out.req = std::move(r);
  return out;
}

RequestParse no_args(Verb verb, std::string_view name, std::string_view arg) {
  if (!arg.empty()) return fail(std::string(name) + " takes no argument");
  RequestParse out;
  out.req = Request{};
  out.req->verb = verb;
  return out;
}

// The line without its trailing '\r', or the error for a control character.
std::optional<std::string> check_line(std::string_view& line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  for (std::size_t i = 0; i < line.size(); ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      char msg[128];
      std::snprintf(msg, sizeof(msg),
                    "control character 0x%02x at column %zu: a request is one line of text", c, i + 1);
      return std::string(msg);
    }
  }
  return std::nullopt;
}

}  // namespace

void LineFramer::append(std::string_view bytes) {
  if (discarding_) {
    const std::size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) return;
    discarding_ = false;
    bytes.remove_prefix(nl + 1);
  }
  if (off_ != 0 && off_ >= buf_.size() / 2) {  // compact: consumed lines go
    buf_.erase(0, off_);
    off_ = 0;
  }
  buf_.append(bytes);
}

LineFramer::Item LineFramer::next() {
  const std::size_t nl = buf_.find('\n', off_);
  if (nl == std::string::npos) {
    if (buffered() <= max_) return {};
    // An unfinished line already longer than allowed: drop it, and the rest
    // of it as it arrives.
    buf_.clear();
    off_ = 0;
    discarding_ = true;
    return {Kind::kTooLong, {}};
  }
  const std::size_t start = off_;
  off_ = nl + 1;
  if (nl - start > max_) return {Kind::kTooLong, {}};
  return {Kind::kLine, std::string_view(buf_).substr(start, nl - start)};
}

RequestParse parse_request(std::string_view line) {
  if (auto bad = check_line(line)) return fail(*bad);
  auto [cmd, arg] = split_word(line);
  if (cmd.empty()) return fail("empty request (try 'help')");
  if (cmd == "add") return rule_args(Verb::kAdd, arg, true);
  if (cmd == "del") return rule_args(Verb::kDel, arg, false);
  if (cmd == "check") return rule_args(Verb::kCheck, arg, false);
  if (cmd == "list" || cmd == "hits") {
    // `list|hits [KIND [PREFIX]]`
    Request r;
    r.verb = cmd == "list" ? Verb::kList : Verb::kHits;
    auto [kind_word, prefix] = split_word(arg);
    if (kind_word.starts_with("set=")) {  // `list|hits set=NAME [KIND [PREFIX]]`
      if (auto bad = set_option(kind_word, &r.set)) return fail(*bad);
      std::tie(kind_word, prefix) = split_word(prefix);
    }
    if (!kind_word.empty()) {
      r.kind = kind_named(kind_word);
      if (!r.kind)
        return fail("unknown rule kind '" + std::string(kind_word) + "' (" + std::string(kKinds) + ")");
    }
    for (char c : prefix)
      if (blank(c)) return fail(std::string(cmd) + " takes at most a kind and a prefix");
    r.prefix.assign(prefix);
    RequestParse out;
    out.req = std::move(r);
    return out;
  }
  if (cmd == "flush") {
    // Removing everything is never the default: `flush all` or `flush KIND`.
    Request r;
    r.verb = Verb::kFlush;
    if (arg == "all") {
      r.all = true;
    } else if (auto k = kind_named(arg); k && !arg.empty()) {
      r.kind = k;
    } else {
      return fail(arg.empty() ? "flush needs a scope: 'flush all' removes every rule, 'flush KIND' "
                                "the rules of one kind (" + std::string(kKinds) + ")"
                              : "flush takes 'all' or one rule kind (" + std::string(kKinds) +
                                    "), not '" + std::string(arg) + "'");
    }
    RequestParse out;
    out.req = std::move(r);
    return out;
  }
  if (cmd == "load") {
    // `load [set=NAME] [replace]`
    Request r;
    r.verb = Verb::kLoad;
    for (auto [w, rest] = split_word(arg); !w.empty(); std::tie(w, rest) = split_word(rest)) {
      if (w.starts_with("set=")) {
        if (auto bad = set_option(w, &r.set)) return fail(*bad);
      } else if (w == "replace" && !r.replace) {
        r.replace = true;
      } else {
        return fail("load takes set=NAME and replace, not '" + std::string(w.substr(0, 64)) + "'");
      }
    }
    if (r.replace && r.set.empty()) return fail("load replace needs set=NAME: the set it replaces");
    RequestParse out;
    out.req = std::move(r);
    return out;
  }
  if (cmd == "batch") return no_args(Verb::kBatch, cmd, arg);
  if (cmd == "stats") return no_args(Verb::kStats, cmd, arg);
  if (cmd == "info") return no_args(Verb::kInfo, cmd, arg);
  if (cmd == "ping") return no_args(Verb::kPing, cmd, arg);
  if (cmd == "help") return no_args(Verb::kHelp, cmd, arg);
  if (cmd == "quit") return no_args(Verb::kQuit, cmd, arg);
  std::string shown(cmd.substr(0, 64));
  return fail("unknown command '" + shown + "' (try 'help')");
}

RequestParse parse_batch_line(std::string_view line) {
  if (auto bad = check_line(line)) return fail(*bad);
  auto [cmd, arg] = split_word(line);
  if (cmd == "add") return rule_args(Verb::kAdd, arg, true);
  if (cmd == "del") return rule_args(Verb::kDel, arg, false);
  return fail("a batch holds only 'add RULE [ttl=SECONDS] [action=drop|reject]' and 'del RULE' lines");
}

std::string set_name_expected() {
  return "expected 1 to " + std::to_string(kMaxSetName) + " of a-z, 0-9, '_', '-'";
}

bool valid_set_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > kMaxSetName) return false;
  for (const char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

std::string_view request_help() {
  return "add RULE [ttl=SECONDS] [set=NAME] [action=drop|reject]|del RULE|check RULE|batch (add/del lines, then '.')|"
         "load [set=NAME] [replace] (rules, then '.')|list [set=NAME] [KIND] [PREFIX]|"
         "hits [set=NAME] [KIND] [PREFIX]|stats|info|"
         "flush all|flush KIND|ping|help|quit";
}

}  // namespace cg
