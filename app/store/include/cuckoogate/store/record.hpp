// The typed record the RuleStore writes into journal and snapshot payloads.
//
// Payload layout (little-endian), 32 bytes + key + text:
//   0  u8  op            1 add, 2 del, 3 flush, 4 mark
//   1  u8  version       1
//   2  u16 reserved      0
//   4  u32 key_len
//   8  u64 id            add: the rule id (the journal number of its add)
//   16 i64 added_unix_ms
//   24 i64 expiry_unix_ms   0 = no expiry
//   32 key[key_len], text[rest]
// del carries only the key; flush carries nothing but the fixed part; mark
// carries a name (key) and its value (text): a fact recorded with the rules
// (the Redis sync's last applied stream ID), not a rule.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cg::store {

enum class RecordOp : std::uint8_t { add = 1, del = 2, flush = 3, mark = 4 };

struct StoreRecord {
  RecordOp op = RecordOp::add;
  std::uint64_t id = 0;
  std::int64_t added_unix_ms = 0;
  std::int64_t expiry_unix_ms = 0;
  std::string key;
  std::string text;

  bool operator==(const StoreRecord&) const = default;
};

inline constexpr std::size_t kStoreRecordFixed = 32;

// Appends the encoding of r to out.
void encode_record(const StoreRecord& r, std::string* out);
// False (and r unspecified) if payload is not a well-formed record.
bool decode_record(std::string_view payload, StoreRecord* r);

}  // namespace cg::store
