// One rule change as a Redis stream entry (docs/sync.md has the format).
//
//   op=add    rule=<rule text>  [ttl=<absolute expiry, Unix ms>]  [origin=<gateway id>]
//   op=del    rule=<rule text>
//   op=flush  [kind=<kind>]                      every rule, or every rule of a kind
//   op=batch  changes=<lines>    all or nothing, as the control socket's `batch`
//   op=load   changes=<lines>    adds only, all or nothing, as `load`
// Change lines (batch, load), '\n' separated:
//   add <expiry Unix ms, 0 = none> <rule text>
//   del <rule text>
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
};

struct Entry {
  EntryOp op = EntryOp::kAdd;
  std::vector<EntryChange> changes;  // add, del: exactly one; batch, load: one or more
  std::optional<RuleKind> kind;      // flush: nullopt = every rule
  std::string origin;                // gateway id of the writer ("" from other tools)
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

// The snapshot of a whole rule set at a stream ID, as a Redis string:
// "cuckoogate-snapshot 1 <stream id>\n" then one change line per rule
// ("add <expiry> <rule>"). decode: false and *err on anything else.
std::string encode_snapshot(const std::vector<EntryChange>& rules, const std::string& at);
bool decode_snapshot(std::string_view text, std::vector<EntryChange>* rules, std::string* at, std::string* err);

}  // namespace cg::sync
