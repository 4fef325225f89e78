// One rule change as a Redis stream entry (docs/sync.md has the format).
//
//   op=add    rule=<rule text>  [ttl=<absolute expiry, Unix ms>]  [action=drop|reject]
//   op=del    rule=<rule text>
//   op=flush  [kind=<kind>]                      every rule, or every rule of a kind
//   op=batch  changes=<lines>    all or nothing, as the control socket's `batch`
//   op=load   changes=<lines>    adds only, all or nothing, as `load`
// Every op may carry origin=<gateway id> and outbox=<token> (docs/sync.md).
// Change lines (batch, load), '\n' separated:
//   add <expiry Unix ms, 0 = none> [action=drop|reject] <rule text>
//   del <rule text>
// (A rule with its own action, docs/rules.md: readers before per-rule
// actions refuse such an entry or line as a rule that does not parse.)
// Rule text goes through the gateway's rule parser (parse_rule), so anything a
// control client may write is accepted, and stored in canonical form. Unknown
// fields are ignored (newer writers may add some); an unknown op, a missing or
// repeated field, a rule that does not parse, a bad number: the entry is
// rejected as a whole (the caller counts and skips it).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cuckoogate/keys/rule.hpp"

namespace cg::sync {

enum class EntryOp : uint8_t { kAdd, kDel, kFlush, kBatch, kLoad };
std::string_view op_name(EntryOp) noexcept;

struct EntryChange {
  bool del = false;
  Rule rule;
  int64_t expiry_unix_ms = 0;  // add: 0 = no expiry
  RuleAction action = RuleAction::kDefault;  // add: the rule's own action (action=)
};

struct Entry {
  EntryOp op = EntryOp::kAdd;
  std::vector<EntryChange> changes;  // add, del: exactly one; batch, load: one or more
  std::optional<RuleKind> kind;      // flush: nullopt = every rule
  std::string origin;                // gateway id of the writer ("" from other tools)
  // Field `outbox`: the writer's token for an entry it queued while Redis was
  // down (docs/sync.md, offline_writes), so it can tell after a crash whether
  // the entry reached the stream. "" for every other entry.
  std::string outbox;
};

using Fields = std::vector<std::pair<std::string, std::string>>;

// Longest `changes` value accepted (a `load` of ~1M rules) and most lines.
inline constexpr std::size_t kMaxChangesBytes = std::size_t{256} << 20;

Fields encode_entry(const Entry& e);

struct EntryDecode {
  std::optional<Entry> entry;  // empty => error says why
  std::string error;
};
EntryDecode decode_entry(const Fields& fields);
// The same over views into a reply (no copy of the field texts).
using FieldViews = std::vector<std::pair<std::string_view, std::string_view>>;
EntryDecode decode_entry_views(const FieldViews& fields);
// The same into *out, whose storage (the changes vector, the strings) is
// reused: a reader decoding page after page allocates nothing per entry for
// address rules. false and *err (why) when the entry does not decode; *out
// is then unspecified (decode into it again before use).
bool decode_entry_into(const FieldViews& fields, Entry* out, std::string* err);

// The snapshot of a whole rule set at a stream ID, as a Redis string:
// "cuckoogate-snapshot 1 <stream id>\n" then one change line per rule
// ("add <expiry> <rule>"). decode: false and *err on anything else.
std::string encode_snapshot(const std::vector<EntryChange>& rules, const std::string& at);
bool decode_snapshot(std::string_view text, std::vector<EntryChange>* rules, std::string* at, std::string* err);

// The offline queue (docs/sync.md, offline_writes = "queue"): a group of
// entries a gateway accepted while Redis was down, kept in its journal (a
// mark) until they are in the stream. Only add, del and flush entries (a
// queued batch or load is queued as its single changes):
// "cuckoogate-outbox 1\n" then one line per entry: "add <expiry> <rule>",
// "del <rule>", "flush" or "flush <kind>". decode: false and *err on
// anything else (an empty group included).
std::string encode_outbox_group(const std::vector<Entry>& entries);
bool decode_outbox_group(std::string_view text, std::vector<Entry>* entries, std::string* err);

}  // namespace cg::sync
