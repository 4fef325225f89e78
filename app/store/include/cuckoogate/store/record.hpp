// The typed record the RuleStore writes into journal and snapshot payloads.
//
// Payload layout (little-endian), 32 bytes + key + set [+ action] + text:
//   0  u8  op            1 add, 2 del, 3 flush, 4 mark, 5 txn, 6 txn_abort
//   1  u8  version       1 (no set name), 2 (with a set name),
//                        3 (an action byte follows the set name)
//   2  u16 set_len       0 in version 1 (this was a reserved 0 before sets)
//   4  u32 key_len
//   8  u64 id            add: the rule id (the journal number of its add);
//                        txn: how many records follow in the transaction
//   16 i64 added_unix_ms
//   24 i64 expiry_unix_ms   0 = no expiry
//   32 key[key_len], set[set_len], (version 3: u8 action), text[rest]
// del carries only the key; flush carries nothing but the fixed part; mark
// carries a name (key) and its value (text): a fact recorded with the rules
// (the Redis sync's last applied stream ID), not a rule. An add's set is the
// named set the rule belongs to (empty: the set "default"); records written
// before sets existed are version 1 and mean "default". An add's action is
// a byte the store keeps for its caller without reading it (the gateway's
// per-rule action, docs/rules.md); 0, the default, is written as version 1
// or 2, so state without actions stays readable by versions before them.
//
// txn opens an all-or-nothing group: the `id` records after it take effect
// together, at replay, only if all of them are in the journal (a crash in the
// middle leaves none of them applied). txn_abort closes a group that a crash
// cut short, written at the next open so that later records stand alone.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cg::store {

enum class RecordOp : std::uint8_t { add = 1, del = 2, flush = 3, mark = 4, txn = 5, txn_abort = 6 };

struct StoreRecord {
  RecordOp op = RecordOp::add;
  std::uint64_t id = 0;
  std::int64_t added_unix_ms = 0;
  std::int64_t expiry_unix_ms = 0;
  std::string key;
  std::string text;
  std::string set = {};  // add: the rule's named set ("" = default)
  std::uint8_t action = 0;  // add: the caller's per-rule byte (0 = none)

  bool operator==(const StoreRecord&) const = default;
};

inline constexpr std::size_t kStoreRecordFixed = 32;

// Appends the encoding of r to out.
void encode_record(const StoreRecord& r, std::string* out);
// Appends the encoding of an add record made of these parts (what
// encode_record writes for it), without building a StoreRecord.
void encode_add_record(std::uint64_t id, std::int64_t added_unix_ms, std::int64_t expiry_unix_ms,
                       std::string_view key, std::string_view set, std::string_view text, std::uint8_t action,
                       std::string* out);
// False (and r unspecified) if payload is not a well-formed record.
bool decode_record(std::string_view payload, StoreRecord* r);

}  // namespace cg::store
