#include "control/protocol.hpp"

#include <malloc.h>

#include <algorithm>

#include "gateway/log.hpp"

namespace cg {
namespace {

void err(std::string& out, int code, std::string_view msg) {
  out += "ERR ";
  out += std::to_string(code);
  out += ' ';
  out += msg;
  out += '\n';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::string mib(std::size_t bytes) {
  return bytes >= (1u << 20) ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes) + " bytes";
}

// Memory a held rule accounts for.
std::size_t rule_bytes(const Rule& r) { return sizeof(Rule) + r.name.size(); }

int outcome_code(Blocklist::Outcome o) {
  switch (o) {
    case Blocklist::Outcome::kAbsent: return 404;
    case Blocklist::Outcome::kFull: return 507;
    default: return 500;
  }
}

bool failed(Blocklist::Outcome o) {
  return o == Blocklist::Outcome::kAbsent || o == Blocklist::Outcome::kFull ||
         o == Blocklist::Outcome::kIoError || o == Blocklist::Outcome::kNotApplied;
}

std::string_view outcome_word(Blocklist::Outcome o) {
  switch (o) {
    case Blocklist::Outcome::kAdded: return "added";
    case Blocklist::Outcome::kExists: return "exists";
    case Blocklist::Outcome::kUpdated: return "ttl updated";
    case Blocklist::Outcome::kActionUpdated: return "action updated";
    case Blocklist::Outcome::kDeleted: return "deleted";
    default: return "";
  }
}

// Named sets are not carried by the Redis sync's entries (docs/sync.md).
// Loads and batches holding at least this much trim the heap when done.
constexpr std::size_t kTrimAfterBytes = std::size_t{16} << 20;

// A pure-filter gateway has no hit-counter slots to keep an action in.
constexpr std::string_view kNoPerRuleActions =
    "action= needs the exact set: this gateway runs --no-verify (gateway.verify = false), where every rule has "
    "the gateway's --action";

constexpr std::string_view kSetsNotShared =
    "named sets and load replace are not replicated by the Redis sync: with a shared blocklist, "
    "use the default set";
bool named_set(std::string_view set) { return !set.empty() && set != "default"; }

// The shared log could not take a change: nothing was acknowledged.
void unavailable(std::string& out, std::string_view what, const std::string& why) {
  err(out, 503, std::string(what) + ": the shared blocklist is unavailable: " + why);
}

}  // namespace

bool CommandHandler::hold(Session& s, std::size_t bytes, std::string& out) {
  const bool client_limit = s.held_bytes + bytes > limits_.load_bytes_per_client;
  if (!client_limit && held_total_ + bytes <= limits_.load_bytes_total) {
    s.held_bytes += bytes;
    held_total_ += bytes;
    return true;
  }
  const char* what = s.mode == Session::Mode::kBatch ? "batch" : "load";
  err(out, 413,
      std::string(what) + " rejected, nothing applied: " +
          (client_limit ? "larger than the per-client limit of " + mib(limits_.load_bytes_per_client)
                        : "all clients' pending loads exceed " + mib(limits_.load_bytes_total)) +
          " (split it); closing the connection");
  CG_LOG(NOTICE, control, "control client's %s refused past the %s limit (%zu bytes held in all)", what,
         client_limit ? "per-client" : "total", held_total_);
  release(s);
  s.mode = Session::Mode::kCommand;
  s.closing = true;
  return false;
}

void CommandHandler::release(Session& s) {
  const std::size_t held = s.held_bytes;
  held_total_ -= s.held_bytes;
  s.held_bytes = 0;
  s.load_keys.clear();
  s.batch.clear();
  s.batch.shrink_to_fit();
  s.batch_lines.clear();
  s.batch_lines.shrink_to_fit();
  // A large load leaves millions of small freed chunks (parsed rules, the
  // Blocklist's keys and texts, journal records) that glibc keeps: without
  // this the gateway's resident size stays at the load's peak. Returning the
  // free pages costs milliseconds, on the control thread only.
  if (held >= kTrimAfterBytes) ::malloc_trim(0);
}

void CommandHandler::end_session(Session& s) {
  release(s);
  s.mode = Session::Mode::kCommand;
}

void CommandHandler::line_too_long(Session& s, std::string& out) {
  if (s.mode != Session::Mode::kCommand) {
    ++s.stream_line;
    if (s.stream_error.empty()) {
      s.stream_error = "line " + std::to_string(s.stream_line) + ": longer than " +
                       std::to_string(kMaxRequestLine) + " bytes";
      release(s);
    }
    return;
  }
  commit();
  err(out, 413, "request line longer than " + std::to_string(kMaxRequestLine) + " bytes");
}

void CommandHandler::finish_load(Session& s, std::string& out) {
  if (s.load_replace) {
    const Blocklist::ReplaceResult r = b_.replace_set(s.load_set, s.load_keys);
    if (r.result == Blocklist::Result::kFull) {
      err(out, 507, "replace rejected, nothing changed: blocklist full (" + b_.last_error() +
                        "; a replace adds its new rules before it deletes the old ones, so both must fit at once)");
    } else if (r.result != Blocklist::Result::kOk) {
      err(out, 500, "replace rejected, nothing changed: the journal could not be written: " + b_.last_error());
    } else {
      adds_ += r.added;
      dels_ += r.deleted;
      out += "OK replaced set " + s.load_set + ": loaded " + std::to_string(s.load_keys.size()) + " added " +
             std::to_string(r.added) + " deleted " + std::to_string(r.deleted) + " kept " +
             std::to_string(r.kept) + " elsewhere " + std::to_string(r.elsewhere) + "\n";
    }
    return;
  }
  Blocklist::BatchResult r;
  std::string why;
  if (repl_ == nullptr) {
    r = b_.add_batch(s.load_keys, s.load_set);
  } else if (!repl_->load(s.load_keys.rules(), &r, &why)) {
    unavailable(out, "load rejected, nothing applied", why);
    return;
  }
  if (r.result == Blocklist::Result::kFull) {
    err(out, 507, "load rejected, nothing applied: blocklist full (" + b_.last_error() + ")");
  } else if (r.result != Blocklist::Result::kOk) {
    err(out, 500, "load rejected, nothing applied: the journal could not be written: " + b_.last_error());
  } else {
    adds_ += r.added;
    out += "OK loaded " + std::to_string(s.load_keys.size()) + " added " + std::to_string(r.added) +
           " existed " + std::to_string(r.existed) + " updated " + std::to_string(r.updated) + "\n";
  }
}

void CommandHandler::finish_batch(Session& s, std::string& out) {
  std::vector<Blocklist::Outcome> res;
  std::string why;
  if (repl_ == nullptr) {
    res = b_.apply(s.batch, /*atomic=*/true);
  } else if (!repl_->changes(s.batch, /*atomic=*/true, &res, &why)) {
    unavailable(out, "batch rejected, nothing applied", why);
    return;
  }
  for (std::size_t i = 0; i < res.size(); ++i) {
    if (!failed(res[i]) || res[i] == Blocklist::Outcome::kNotApplied) continue;
    const std::string rule = format_rule(s.batch[i].rule);
    std::string why = res[i] == Blocklist::Outcome::kAbsent ? "not in blocklist: " + rule
                      : res[i] == Blocklist::Outcome::kFull
                          ? "blocklist full (" + b_.last_error() + "): " + rule
                          : "the journal could not be written: " + b_.last_error();
    err(out, outcome_code(res[i]),
        "batch rejected, nothing applied: line " + std::to_string(s.batch_lines[i]) + ": " + why);
    return;
  }
  out += "OK " + std::to_string(res.size()) + "\n";
  for (const Blocklist::Outcome o : res) {
    adds_ += o == Blocklist::Outcome::kAdded;
    dels_ += o == Blocklist::Outcome::kDeleted;
    out += outcome_word(o);
    out += '\n';
  }
  out += ".\n";
}

void CommandHandler::stream_line(Session& s, std::string_view line, std::string& out) {
  const std::string_view t = trim(line);
  if (t == ".") {
    if (!s.stream_error.empty()) {
      err(out, s.stream_code, std::string(s.mode == Session::Mode::kBatch ? "batch" : "load") +
                                  " rejected, nothing applied: " + s.stream_error);
    } else if (s.mode == Session::Mode::kLoad) {
      finish_load(s, out);
    } else {
      finish_batch(s, out);
    }
    release(s);
    s.mode = Session::Mode::kCommand;
    s.stream_error.clear();
    return;
  }
  ++s.stream_line;
  if (!s.stream_error.empty()) return;  // keep consuming until "." but stop parsing
  if (s.mode == Session::Mode::kLoad) {
    if (t.empty() || t.front() == '#') return;
    RuleParse p = parse_rule(t, s.stream_line);
    if (!p.rule) {
      s.stream_error = p.error.message();
      release(s);  // rejected anyway: hold nothing more until '.'
      return;
    }
    const std::size_t before = s.load_keys.bytes();
    s.load_keys.add(*p.rule);  // over the limit, hold() releases it with the rest (ERR 413)
    hold(s, s.load_keys.bytes() - before + Blocklist::KeyBatch::kIndexBytes + kLoadBytesPerRule, out);
    return;
  }
  if (t.empty()) return;
  RequestParse p = parse_batch_line(t);
  if (!p.req) {
    s.stream_error = "line " + std::to_string(s.stream_line) + ": " + p.error;
    release(s);
    return;
  }
  if (repl_ != nullptr && named_set(p.req->set)) {
    s.stream_error = "line " + std::to_string(s.stream_line) + ": " + std::string(kSetsNotShared);
    s.stream_code = 501;
    release(s);
    return;
  }
  if (p.req->action != RuleAction::kDefault && !b_.per_rule_actions()) {
    s.stream_error = "line " + std::to_string(s.stream_line) + ": " + std::string(kNoPerRuleActions);
    release(s);
    return;
  }
  if (!hold(s, rule_bytes(*p.req->rule), out)) return;
  s.batch.push_back({p.req->verb == Verb::kAdd ? Blocklist::Change::Op::kAdd : Blocklist::Change::Op::kDel,
                     std::move(*p.req->rule), p.req->ttl_ms, std::move(p.req->set), p.req->action});
  s.batch_lines.push_back(s.stream_line);
}

void CommandHandler::queue(const Request& r, std::string& out) {
  pending_.push_back({{r.verb == Verb::kAdd ? Blocklist::Change::Op::kAdd : Blocklist::Change::Op::kDel,
                       *r.rule, r.ttl_ms, r.set, r.action},
                      &out});
  if (pending_.size() >= kMaxGroup) commit();
}

void CommandHandler::answer(Blocklist::Outcome o, const Blocklist::Change& c, std::string& out) {
  const bool add = c.op == Blocklist::Change::Op::kAdd;
  switch (o) {
    case Blocklist::Outcome::kAdded: ++adds_; out += "OK added\n"; break;
    case Blocklist::Outcome::kExists: out += "OK exists\n"; break;
    case Blocklist::Outcome::kUpdated: out += "OK ttl updated\n"; break;
    case Blocklist::Outcome::kActionUpdated: out += "OK action updated\n"; break;
    case Blocklist::Outcome::kDeleted: ++dels_; out += "OK deleted\n"; break;
    case Blocklist::Outcome::kAbsent: err(out, 404, "not in blocklist: " + format_rule(c.rule)); break;
    case Blocklist::Outcome::kFull:
      err(out, 507, "blocklist full (" + b_.last_error() + "), rule not added");
      break;
    default:
      err(out, 500, std::string(add ? "rule not added" : "rule not deleted") +
                        ": the journal could not be written: " + b_.last_error());
      break;
  }
}

void CommandHandler::commit() {
  if (pending_.empty()) return;
  group_.clear();
  group_.reserve(pending_.size());
  for (const Pending& p : pending_) group_.push_back(p.change);
  std::vector<Blocklist::Outcome> res;
  std::string why;
  if (repl_ == nullptr) {
    res = b_.apply(group_, /*atomic=*/false);
  } else if (!repl_->changes(group_, /*atomic=*/false, &res, &why)) {
    for (const Pending& p : pending_)
      unavailable(*p.out, p.change.op == Blocklist::Change::Op::kAdd ? "rule not added" : "rule not deleted", why);
    ++commits_;
    committed_requests_ += pending_.size();
    pending_.clear();
    return;
  }
  for (std::size_t i = 0; i < pending_.size(); ++i) answer(res[i], pending_[i].change, *pending_[i].out);
  ++commits_;
  committed_requests_ += pending_.size();
  pending_.clear();
}

void CommandHandler::handle_line(Session& s, std::string_view line, std::string& out) {
  if (s.mode != Session::Mode::kCommand) {
    stream_line(s, line, out);
    return;
  }
  RequestParse p = parse_request(line);
  if (p.req && repl_ != nullptr && p.req->verb == Verb::kAdd && named_set(p.req->set)) {
    commit();  // answers stay in request order
    err(out, 501, kSetsNotShared);
    return;
  }
  if (p.req && p.req->action != RuleAction::kDefault && !b_.per_rule_actions()) {
    commit();
    err(out, 400, std::string(kNoPerRuleActions));
    return;
  }
  if (p.req && (p.req->verb == Verb::kAdd || p.req->verb == Verb::kDel)) {
    queue(*p.req, out);
    return;
  }
  // Everything else is answered now: first what is queued, so every response
  // (and every change) stays in request order.
  commit();
  if (!p.req) {
    // A refused `batch` or `load` line still opens its stream: the lines up
    // to '.' are read and refused with it, one answer at the '.', as for
    // ERR 501 below. Answered at once, they would run as commands: the
    // batch's adds and dels applied one by one, half of an all-or-nothing
    // change (found by an outside check).
    std::string_view word = trim(line);
    word = word.substr(0, std::min(word.find_first_of(" \t"), word.size()));
    if (word == "batch" || word == "load") {
      s.mode = word == "load" ? Session::Mode::kLoad : Session::Mode::kBatch;
      s.stream_line = 0;
      s.stream_error = p.error;
      s.stream_code = p.code;
      s.load_set.clear();
      s.load_replace = false;
      release(s);
      return;
    }
    err(out, p.code, p.error);
    return;
  }
  const Request& r = *p.req;
  switch (r.verb) {
    case Verb::kCheck:
      out += b_.contains(*r.rule) ? "OK present\n" : "OK absent\n";
      break;
    case Verb::kLoad:
    case Verb::kBatch:
      s.mode = r.verb == Verb::kLoad ? Session::Mode::kLoad : Session::Mode::kBatch;
      s.stream_line = 0;
      s.stream_error.clear();
      s.stream_code = 400;
      s.load_set = r.set;
      s.load_replace = r.replace;
      if (repl_ != nullptr && (r.replace || named_set(r.set))) {
        // Refused at the final '.': the stream's lines must still be read as rules.
        s.stream_error = kSetsNotShared;
        s.stream_code = 501;
      }
      release(s);
      break;
    case Verb::kList:
    case Verb::kHits: {
      // `list` shows the remaining ttl, `hits` each rule's confirmed-hit count.
      const bool with_hits = r.verb == Verb::kHits;
      std::string body;
      std::size_t n = 0;
      const auto only = r.set.empty() ? std::nullopt : std::optional<std::string_view>(r.set);
      b_.for_each_in_set(r.kind, r.prefix, only, [&](std::string_view text, int64_t ttl_left_ms, std::string_view set,
                                                      RuleAction action) {
        body += text;
        if (with_hits) {
          const RuleParse rp = parse_rule(text);  // stored texts always parse
          body += " hits=" + std::to_string(rp.rule ? b_.hits(*rp.rule) : 0);
        } else if (ttl_left_ms > 0) {
          body += " ttl=" + std::to_string((ttl_left_ms + 999) / 1000);
        }
        if (!with_hits && named_set(set)) {  // a list line is an add argument: it keeps its set
          body += " set=";
          body += set;
        }
        if (!with_hits && !rule_action_name(action).empty()) {  // and its action
          body += " action=";
          body += rule_action_name(action);
        }
        body += '\n';
        ++n;
      });
      out += "OK " + std::to_string(n) + "\n" + body + ".\n";
      break;
    }
    case Verb::kStats:
    case Verb::kInfo:
      out += "OK\n";
      (r.verb == Verb::kStats ? stats_ : info_)(out);
      if (r.verb == Verb::kInfo) b_.set_count_lines(out);
      out += ".\n";
      break;
    case Verb::kFlush: {
      std::size_t n = 0;
      Blocklist::Result res = Blocklist::Result::kOk;
      std::string why;
      if (repl_ == nullptr) {
        res = r.all ? b_.flush(&n) : b_.flush_kind(*r.kind, &n);
      } else if (!repl_->flush(r.all ? std::nullopt : r.kind, &res, &n, &why)) {
        unavailable(out, "flush failed, nothing removed", why);
        break;
      }
      if (res != Blocklist::Result::kOk) {
        err(out, 500, "flush failed, nothing removed: the journal could not be written: " + b_.last_error());
        break;
      }
      dels_ += n;
      out += "OK flushed " + std::to_string(n) + "\n";
      break;
    }
    case Verb::kPing: out += "OK pong\n"; break;
    case Verb::kHelp:
      out += "OK ";
      out += request_help();
      out += '\n';
      break;
    case Verb::kQuit:
      s.closing = true;
      out += "OK bye\n";
      break;
    default: break;
  }
}

}  // namespace cg
