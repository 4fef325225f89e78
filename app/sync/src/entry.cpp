#include "cuckoogate/sync/entry.hpp"

#include <charconv>

namespace cg::sync {
namespace {

constexpr std::string_view kOps[] = {"add", "del", "flush", "batch", "load"};

bool number(std::string_view s, int64_t* v) {
  if (s.empty() || s.size() > 19 || s.front() == '-' || s.front() == '+') return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && end == s.data() + s.size() && *v >= 0;
}

// A rule field: parse_rule accepts a trailing '#' comment, a stream entry
// must hold a rule and nothing else, so a '#' or a line break is refused.
bool rule_of(std::string_view text, Rule* out, std::string* err) {
  if (text.find_first_of("#\n\r") != std::string_view::npos) {
    *err = "rule text holds '#' or a line break";
    return false;
  }
  RuleParse p = parse_rule(text);
  if (!p.rule) {
    *err = "rule: " + p.error.message();
    return false;
  }
  *out = std::move(*p.rule);
  return true;
}

void encode_line(const EntryChange& c, std::string* out) {
  if (c.del) {
    *out += "del ";
  } else {
    *out += "add ";
    *out += std::to_string(c.expiry_unix_ms);
    *out += ' ';
    if (const std::string_view a = rule_action_name(c.action); !a.empty()) {
      *out += "action=";
      *out += a;
      *out += ' ';
    }
  }
  *out += format_rule(c.rule);
  *out += '\n';
}

// One change line: any (batch, outbox), adds with their actions (snapshot),
// or adds without actions (`load`, as the control socket's load).
enum class Lines : uint8_t { kChanges, kSnapshot, kLoad };
bool decode_line(std::string_view line, Lines what, EntryChange* c, std::string* err) {
  const bool adds_only = what != Lines::kChanges;
  const std::size_t sp = line.find(' ');
  const std::string_view verb = line.substr(0, sp);
  std::string_view rest = sp == std::string_view::npos ? std::string_view{} : line.substr(sp + 1);
  if (verb == "del" && !adds_only) {
    c->del = true;
    return rule_of(rest, &c->rule, err);
  }
  if (verb != "add") {
    *err = adds_only ? "a load line is not 'add EXPIRY RULE'" : "a change line is not 'add EXPIRY RULE' or 'del RULE'";
    return false;
  }
  const std::size_t sp2 = rest.find(' ');
  if (sp2 == std::string_view::npos || !number(rest.substr(0, sp2), &c->expiry_unix_ms)) {
    *err = "add line without a valid expiry (Unix ms, 0 = none)";
    return false;
  }
  c->del = false;
  rest.remove_prefix(sp2 + 1);
  c->action = RuleAction::kDefault;
  if (rest.starts_with("action=") && what == Lines::kLoad) {
    *err = "a load line has no action (a load gives new rules the default one)";
    return false;
  }
  if (rest.starts_with("action=")) {  // no rule text starts so: it starts with a kind
    const std::size_t sp3 = rest.find(' ');
    const std::optional<RuleAction> a = rule_action_named(rest.substr(7, sp3 == std::string_view::npos ? sp3 : sp3 - 7));
    if (!a || sp3 == std::string_view::npos) {
      *err = "add line with a bad action (drop or reject, then the rule)";
      return false;
    }
    c->action = *a;
    rest.remove_prefix(sp3 + 1);
  }
  return rule_of(rest, &c->rule, err);
}

// Decodes '\n'-separated change lines into *out; false and *err (naming the
// line, counted from first_line) on the first that does not decode.
bool decode_lines(std::string_view text, Lines what, std::size_t first_line, std::vector<EntryChange>* out,
                  std::string* err) {
  for (std::size_t line_no = first_line; !text.empty(); ++line_no) {
    const std::size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    EntryChange c;
    std::string why;
    if (!decode_line(line, what, &c, &why)) {
      *err = "line " + std::to_string(line_no) + ": " + why;
      return false;
    }
    out->push_back(std::move(c));
  }
  return true;
}

}  // namespace

std::string_view op_name(EntryOp op) noexcept {
  const auto i = static_cast<std::size_t>(op);
  return i < std::size(kOps) ? kOps[i] : std::string_view{};
}

Fields encode_entry(const Entry& e) {
  Fields f;
  f.emplace_back("op", std::string(op_name(e.op)));
  switch (e.op) {
    case EntryOp::kAdd:
    case EntryOp::kDel:
      f.emplace_back("rule", format_rule(e.changes.at(0).rule));
      if (e.op == EntryOp::kAdd && e.changes[0].expiry_unix_ms != 0)
        f.emplace_back("ttl", std::to_string(e.changes[0].expiry_unix_ms));
      if (const std::string_view a = rule_action_name(e.changes[0].action); e.op == EntryOp::kAdd && !a.empty())
        f.emplace_back("action", std::string(a));
      break;
    case EntryOp::kFlush:
      if (e.kind) f.emplace_back("kind", std::string(kind_name(*e.kind)));
      break;
    case EntryOp::kBatch:
    case EntryOp::kLoad: {
      std::string lines;
      for (const EntryChange& c : e.changes) encode_line(c, &lines);
      f.emplace_back("changes", std::move(lines));
      break;
    }
  }
  if (!e.origin.empty()) f.emplace_back("origin", e.origin);
  if (!e.outbox.empty()) f.emplace_back("outbox", e.outbox);
  return f;
}

EntryDecode decode_entry(const Fields& fields) {
  FieldViews views;
  views.reserve(fields.size());
  for (const auto& [k, v] : fields) views.emplace_back(k, v);
  return decode_entry_views(views);
}

EntryDecode decode_entry_views(const FieldViews& fields) {
  Entry e;
  std::string err;
  if (!decode_entry_into(fields, &e, &err)) return {std::nullopt, std::move(err)};
  return {std::move(e), {}};
}

bool decode_entry_into(const FieldViews& fields, Entry* out, std::string* err) {
  const std::string_view* op = nullptr;
  const std::string_view* rule = nullptr;
  const std::string_view* ttl = nullptr;
  const std::string_view* kind = nullptr;
  const std::string_view* changes = nullptr;
  const std::string_view* origin = nullptr;
  const std::string_view* outbox = nullptr;
  const std::string_view* action = nullptr;
  auto fail = [err](std::string why) {
    *err = std::move(why);
    return false;
  };
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const std::string_view k = fields[i].first;
    const std::string_view** slot = k == "op"        ? &op
                                    : k == "rule"    ? &rule
                                    : k == "ttl"     ? &ttl
                                    : k == "kind"    ? &kind
                                    : k == "changes" ? &changes
                                    : k == "origin"  ? &origin
                                    : k == "outbox"  ? &outbox
                                    : k == "action"  ? &action
                                                     : nullptr;
    if (slot == nullptr) continue;  // a field of a newer writer
    if (*slot != nullptr) return fail("field '" + std::string(k) + "' given twice");
    *slot = &fields[i].second;
  }
  if (op == nullptr) return fail("no 'op' field");
  // *out is reused (its vector and strings keep their capacity): every
  // member is set below.
  Entry& e = *out;
  std::size_t which = std::size(kOps);
  for (std::size_t i = 0; i < std::size(kOps); ++i)
    if (*op == kOps[i]) which = i;
  if (which == std::size(kOps)) return fail("unknown op '" + std::string(op->substr(0, 32)) + "'");
  e.op = static_cast<EntryOp>(which);
  e.kind.reset();
  e.origin.assign(origin != nullptr ? origin->substr(0, 128) : std::string_view{});
  e.outbox.assign(outbox != nullptr ? outbox->substr(0, 128) : std::string_view{});
  const bool single = e.op == EntryOp::kAdd || e.op == EntryOp::kDel;
  const bool multi = e.op == EntryOp::kBatch || e.op == EntryOp::kLoad;
  if ((rule != nullptr) != single) return fail(single ? "no 'rule' field" : "'rule' field on a " + std::string(*op));
  if ((changes != nullptr) != multi) return fail(multi ? "no 'changes' field" : "'changes' field on a " + std::string(*op));
  if (ttl != nullptr && e.op != EntryOp::kAdd) return fail("'ttl' field on a " + std::string(*op));
  if (action != nullptr && e.op != EntryOp::kAdd) return fail("'action' field on a " + std::string(*op));
  if (kind != nullptr && e.op != EntryOp::kFlush) return fail("'kind' field on a " + std::string(*op));
  if (single) {
    e.changes.resize(1);
    EntryChange& c = e.changes[0];
    c.del = e.op == EntryOp::kDel;
    c.expiry_unix_ms = 0;
    c.action = RuleAction::kDefault;
    if (!rule_of(*rule, &c.rule, err)) return false;
    if (action != nullptr) {
      const std::optional<RuleAction> a = rule_action_named(*action);
      if (!a) return fail("action '" + std::string(action->substr(0, 32)) + "' is not drop or reject");
      c.action = *a;
    }
    if (ttl != nullptr && (!number(*ttl, &c.expiry_unix_ms) || c.expiry_unix_ms == 0))
      return fail("ttl '" + std::string(ttl->substr(0, 32)) + "' is not an expiry time in Unix ms");
  } else if (multi) {
    e.changes.clear();
    if (changes->size() > kMaxChangesBytes) return fail("'changes' longer than the limit");
    std::string why;
    if (!decode_lines(*changes, e.op == EntryOp::kLoad ? Lines::kLoad : Lines::kChanges, 1, &e.changes, &why))
      return fail("changes " + why);
    if (e.changes.empty()) return fail("'changes' holds no change");
  } else {
    e.changes.clear();
    if (kind != nullptr) {
      e.kind = kind_from_name(*kind);
      if (!e.kind) return fail("flush of an unknown kind '" + std::string(kind->substr(0, 32)) + "'");
    }
  }
  return true;
}

constexpr std::string_view kSnapshotMagic = "cuckoogate-snapshot 1 ";

std::string encode_snapshot(const std::vector<EntryChange>& rules, const std::string& at) {
  std::string out(kSnapshotMagic);
  out += at;
  out += '\n';
  for (const EntryChange& c : rules) encode_line(c, &out);
  return out;
}

bool decode_snapshot(std::string_view text, std::vector<EntryChange>* rules, std::string* at, std::string* err) {
  rules->clear();
  if (text.substr(0, kSnapshotMagic.size()) != kSnapshotMagic) {
    *err = "not a cuckoogate snapshot (version 1)";
    return false;
  }
  text.remove_prefix(kSnapshotMagic.size());
  const std::size_t nl = text.find('\n');
  if (nl == std::string_view::npos || nl == 0) {
    *err = "snapshot header has no stream id";
    return false;
  }
  at->assign(text.substr(0, nl));
  if (!decode_lines(text.substr(nl + 1), Lines::kSnapshot, 2, rules, err)) {
    *err = "snapshot " + *err;
    return false;
  }
  return true;
}

constexpr std::string_view kOutboxMagic = "cuckoogate-outbox 1\n";

std::string encode_outbox_group(const std::vector<Entry>& entries) {
  std::string out(kOutboxMagic);
  for (const Entry& e : entries) {
    if (e.op == EntryOp::kFlush) {
      out += "flush";
      if (e.kind) {
        out += ' ';
        out += kind_name(*e.kind);
      }
      out += '\n';
    } else {
      encode_line(e.changes.at(0), &out);  // add / del: one change
    }
  }
  return out;
}

bool decode_outbox_group(std::string_view text, std::vector<Entry>* entries, std::string* err) {
  entries->clear();
  if (text.substr(0, kOutboxMagic.size()) != kOutboxMagic) {
    *err = "not a cuckoogate outbox group (version 1)";
    return false;
  }
  text.remove_prefix(kOutboxMagic.size());
  for (std::size_t line_no = 2; !text.empty(); ++line_no) {
    const std::size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    Entry e;
    if (line == "flush" || line.substr(0, 6) == "flush ") {
      e.op = EntryOp::kFlush;
      if (line.size() > 5) {
        e.kind = kind_from_name(line.substr(6));
        if (!e.kind) {
          *err = "outbox line " + std::to_string(line_no) + ": flush of an unknown kind";
          return false;
        }
      }
    } else {
      EntryChange c;
      std::string why;
      if (!decode_line(line, Lines::kChanges, &c, &why)) {
        *err = "outbox line " + std::to_string(line_no) + ": " + why;
        return false;
      }
      e.op = c.del ? EntryOp::kDel : EntryOp::kAdd;
      e.changes.push_back(std::move(c));
    }
    entries->push_back(std::move(e));
  }
  if (entries->empty()) {
    *err = "outbox group holds no entry";
    return false;
  }
  return true;
}

}  // namespace cg::sync
