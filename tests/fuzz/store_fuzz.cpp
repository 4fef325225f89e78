// libFuzzer target for what the rule store reads back from disk (docs/store.md):
// record payloads (decode_record) and the journal/snapshot framing
// (parse_file_header, parse_record, find_next_valid_record). Beyond "no
// crash, no UB":
// - a payload decode_record accepts is the canonical encoding of what it
//   decoded (encode_record gives back the same bytes);
// - walking any bytes as recovery does never leaves them: every record
//   parsed lies inside the data, every resync point moves forward;
// - the fuzzer cannot forge the XXH3 checks, so the input is also framed as
//   valid records and then damaged (cut short or one byte flipped at a place
//   the input picks): every record wholly before the damage still parses,
//   with its own sequence number and payload, and the damaged one does not
//   parse as the record that was written there.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "cuckoogate/store/journal.hpp"
#include "cuckoogate/store/record.hpp"

namespace {

using namespace cg::store;

// Walks data as DurableLog's recovery does: records from the start, and past
// a bad one, the next valid record. Returns the records that parsed.
std::size_t walk(std::string_view data) {
  std::size_t off = 0, parsed = 0;
  while (off < data.size()) {
    ParsedRecord p;
    const std::string_view rest = data.substr(off);
    if (parse_record(rest, &p) == RecordParse::ok) {
      if (p.size < kRecordHeaderSize || p.size > rest.size() || p.size % 8 != 0) std::abort();
      if (p.payload.data() < rest.data() || p.payload.data() + p.payload.size() > rest.data() + p.size) std::abort();
      StoreRecord r;
      (void)decode_record(p.payload, &r);
      off += p.size;
      ++parsed;
      continue;
    }
    const std::size_t next = find_next_valid_record(data, off + 8);
    if (next == std::string_view::npos) break;
    if (next <= off || next % 8 != 0 || next >= data.size()) std::abort();
    off = next;
  }
  return parsed;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);

  // 1. A record payload.
  StoreRecord r;
  if (decode_record(in, &r)) {
    std::string again;
    encode_record(r, &again);
    if (again != in) std::abort();
  }

  // 2. The bytes as a journal or snapshot file.
  std::uint64_t seq = 0, count = 0;
  const bool journal = parse_file_header(in, kJournalMagic, &seq, &count);
  const bool snapshot = parse_file_header(in, kSnapshotMagic, &seq, &count);
  if (journal && snapshot) std::abort();
  (void)walk(journal || snapshot ? in.substr(kFileHeaderSize) : in);

  // 3. Valid records made of the input, then damaged. Byte 0: the damage
  // (bit 0: flip, else cut), bytes 1-2: where; then payloads, each a length
  // byte and that many bytes.
  if (size < 3) return 0;
  std::vector<std::string_view> payloads;
  for (std::size_t at = 3; at < size;) {
    const std::size_t len = data[at++];
    payloads.push_back(in.substr(at, len));
    at += len;
  }
  if (payloads.empty()) return 0;
  std::string framed;
  std::vector<std::size_t> ends;
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    append_record(framed, 100 + i, payloads[i]);
    ends.push_back(framed.size());
  }
  if (walk(framed) != payloads.size()) std::abort();
  const std::size_t pos = (std::size_t{data[1]} << 8 | data[2]) % framed.size();
  if (data[0] & 1) {
    framed[pos] = static_cast<char>(framed[pos] ^ 0x5a);
  } else {
    framed.resize(pos);
  }
  std::size_t off = 0;
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    ParsedRecord p;
    const RecordParse res = parse_record(std::string_view(framed).substr(off), &p);
    if (ends[i] <= pos) {  // wholly before the damage
      if (res != RecordParse::ok || p.seq != 100 + i || p.payload != payloads[i]) std::abort();
    } else {
      // A flip inside the padding is caught too: the padding must be zero.
      if (res == RecordParse::ok && p.seq == 100 + i && p.payload == payloads[i]) std::abort();
      break;
    }
    off += p.size;
  }
  (void)walk(framed);
  return 0;
}
