#include "control/protocol.hpp"

#include <optional>

namespace cg {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Splits "word rest" at the first blank.
std::pair<std::string_view, std::string_view> split_word(std::string_view s) {
  s = trim(s);
  const std::size_t sp = s.find_first_of(" \t");
  if (sp == std::string_view::npos) return {s, {}};
  return {s.substr(0, sp), trim(s.substr(sp + 1))};
}

void err(std::string& out, int code, std::string_view msg) {
  out += "ERR ";
  out += std::to_string(code);
  out += ' ';
  out += msg;
  out += '\n';
}

// Parses the RULE argument of add/del/check; on failure writes the error.
std::optional<Rule> rule_arg(std::string_view arg, std::string& out) {
  if (arg.empty()) {
    err(out, 400, "missing rule");
    return std::nullopt;
  }
  RuleParse p = parse_rule(arg, 1);
  if (!p.rule) {
    err(out, 400, "bad rule: " + p.error.message());
    return std::nullopt;
  }
  return p.rule;
}

constexpr std::string_view kHelp =
    "add RULE [ttl=SECONDS]|del RULE|check RULE|load (rules, then '.')|list [KIND] [PREFIX]|hits [KIND] [PREFIX]|stats|info|flush|ping|quit";

}  // namespace

void CommandHandler::line_too_long(Session& s, std::string& out) {
  if (s.loading) {
    ++s.load_line;
    if (s.load_error.empty())
      s.load_error = "line " + std::to_string(s.load_line) + ": longer than " +
                     std::to_string(kMaxRequestLine) + " bytes";
    return;
  }
  err(out, 413, "request line longer than " + std::to_string(kMaxRequestLine) + " bytes");
}

void CommandHandler::load_line(Session& s, std::string_view line, std::string& out) {
  const std::string_view t = trim(line);
  if (t == ".") {
    s.loading = false;
    if (!s.load_error.empty()) {
      err(out, 400, "load rejected, nothing applied: " + s.load_error);
    } else {
      const Blocklist::BatchResult r = b_.add_batch(s.load_rules);
      if (r.result == Blocklist::Result::kFull) {
        err(out, 507, "load rejected, nothing applied: blocklist full (capacity " +
                          std::to_string(b_.capacity()) + ")");
      } else if (r.result != Blocklist::Result::kOk) {
        err(out, 500, "load rejected, nothing applied: the journal could not be written: " +
                          b_.last_error());
      } else {
        adds_ += r.added;
        out += "OK loaded " + std::to_string(s.load_rules.size()) + " added " +
               std::to_string(r.added) + " existed " + std::to_string(r.existed) + "\n";
      }
    }
    s.load_rules.clear();
    s.load_rules.shrink_to_fit();
    s.load_error.clear();
    return;
  }
  ++s.load_line;
  if (!s.load_error.empty()) return;  // keep consuming until "." but stop parsing
  if (t.empty() || t.front() == '#') return;
  RuleParse p = parse_rule(t, s.load_line);
  if (!p.rule) {
    s.load_error = p.error.message();
    return;
  }
  s.load_rules.push_back(std::move(*p.rule));
}

void CommandHandler::handle_line(Session& s, std::string_view line, std::string& out) {
  if (s.loading) {
    load_line(s, line, out);
    return;
  }
  auto [cmd, arg] = split_word(line);
  if (cmd.empty()) {
    err(out, 400, "empty request (try 'help')");
  } else if (cmd == "add") {
    // `add RULE [ttl=SECONDS]`: a trailing ttl= word makes the rule expire.
    int64_t ttl_ms = 0;
    const std::size_t last = arg.find_last_of(" \t");
    if (last != std::string_view::npos && arg.substr(last + 1).starts_with("ttl=")) {
      const std::string_view v = arg.substr(last + 1 + 4);
      uint64_t secs = 0;
      bool ok = !v.empty() && v.size() <= 9;
      for (char ch : v) {
        ok = ok && ch >= '0' && ch <= '9';
        secs = secs * 10 + static_cast<uint64_t>(ch - '0');
      }
      if (!ok || secs == 0) {
        err(out, 400, "bad ttl '" + std::string(v) + "': expected whole seconds, 1 to 999999999");
        return;
      }
      ttl_ms = static_cast<int64_t>(secs) * 1000;
      arg = trim(arg.substr(0, last));
    }
    auto r = rule_arg(arg, out);
    if (!r) return;
    switch (b_.add(*r, ttl_ms)) {
      case Blocklist::Result::kOk: ++adds_; out += "OK added\n"; break;
      case Blocklist::Result::kExists: out += "OK exists\n"; break;
      case Blocklist::Result::kFull:
        err(out, 507, "blocklist full (capacity " + std::to_string(b_.capacity()) + "), rule not added");
        break;
      default:
        err(out, 500, "rule not added: the journal could not be written: " + b_.last_error());
        break;
    }
  } else if (cmd == "del") {
    auto r = rule_arg(arg, out);
    if (!r) return;
    switch (b_.del(*r)) {
      case Blocklist::Result::kOk: ++dels_; out += "OK deleted\n"; break;
      case Blocklist::Result::kAbsent: err(out, 404, "not in blocklist: " + format_rule(*r)); break;
      default: err(out, 500, "rule not deleted: the journal could not be written: " + b_.last_error()); break;
    }
  } else if (cmd == "check") {
    auto r = rule_arg(arg, out);
    if (!r) return;
    out += b_.contains(*r) ? "OK present\n" : "OK absent\n";
  } else if (cmd == "load") {
    if (!arg.empty()) {
      err(out, 400, "load takes no argument; send rules on the following lines, then '.'");
      return;
    }
    s.loading = true;
    s.load_line = 0;
    s.load_error.clear();
    s.load_rules.clear();
  } else if (cmd == "list" || cmd == "hits") {
    // `list|hits [KIND] [PREFIX]`: rules in listing order; `list` shows the
    // remaining ttl, `hits` each rule's confirmed-hit count.
    auto [kind_word, prefix] = split_word(arg);
    std::optional<RuleKind> kind;
    if (!kind_word.empty()) {
      kind = kind_from_name(kind_word);
      if (!kind) {
        err(out, 400, "unknown rule kind '" + std::string(kind_word) +
                          "' (flow, src, dst, ip, service, url, host)");
        return;
      }
    }
    if (prefix.find_first_of(" \t") != std::string_view::npos) {
      err(out, 400, std::string(cmd) + " takes at most a kind and a prefix");
      return;
    }
    const bool with_hits = cmd == "hits";
    std::string body;
    std::size_t n = 0;
    b_.for_each(kind, prefix, [&](std::string_view text, int64_t ttl_left_ms) {
      body += text;
      if (with_hits) {
        const RuleParse p = parse_rule(text);  // stored texts always parse
        body += " hits=" + std::to_string(p.rule ? b_.hits(*p.rule) : 0);
      } else if (ttl_left_ms > 0) {
        body += " ttl=" + std::to_string((ttl_left_ms + 999) / 1000);
      }
      body += '\n';
      ++n;
    });
    out += "OK " + std::to_string(n) + "\n" + body + ".\n";
  } else if (cmd == "stats" || cmd == "info") {
    if (!arg.empty()) {
      err(out, 400, std::string(cmd) + " takes no argument");
      return;
    }
    out += "OK\n";
    (cmd == "stats" ? stats_ : info_)(out);
    out += ".\n";
  } else if (cmd == "flush") {
    std::size_t n = 0;
    if (b_.flush(&n) != Blocklist::Result::kOk) {
      err(out, 500, "flush failed: the journal could not be written: " + b_.last_error());
      return;
    }
    dels_ += n;
    out += "OK flushed " + std::to_string(n) + "\n";
  } else if (cmd == "ping") {
    out += "OK pong\n";
  } else if (cmd == "help") {
    out += "OK ";
    out += kHelp;
    out += '\n';
  } else if (cmd == "quit") {
    s.closing = true;
    out += "OK bye\n";
  } else {
    err(out, 400, "unknown command '" + std::string(cmd) + "' (try 'help')");
  }
}

}  // namespace cg
