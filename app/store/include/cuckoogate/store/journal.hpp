// On-disk framing shared by the journal (write-ahead log) and the snapshots,
// and the append-only journal writer. Payloads are opaque bytes.
//
// File header, 32 bytes, little-endian:
//   0  char[8] magic      "CGWAL\0v1" (journal) or "CGSNP\0v1" (snapshot)
//   8  u64     seq        journal: sequence number of its first record
//                         snapshot: last journal sequence number it covers
//   16 u64     count      snapshot: number of records; journal: 0
//   24 u64     check      XXH3-64 of bytes 0..23
// Record, 8-byte aligned, 24-byte header + payload + zero padding to 8:
//   0  u32 len            payload length (<= kMaxPayload)
//   4  u32 hdr_check      low 32 bits of XXH3-64(bytes 8..23, seed = len)
//   8  u64 seq            journal: global sequence number (consecutive);
//                         snapshot: 1, 2, ... count
//   16 u64 body_check     XXH3-64(payload, seed = seq)
//   24 payload[len], then 0..7 zero bytes
// The header check makes a damaged length detectable, so a torn tail (a record
// cut short, zeros, garbage with nothing valid after it) can be told from
// damage before the tail (a bad record followed by a valid one).
//
// Thread-safety: JournalWriter is not thread-safe; one owner at a time.
// The free functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "cuckoogate/store/status.hpp"

namespace cg::store {

inline constexpr std::size_t kFileHeaderSize = 32;
inline constexpr std::size_t kRecordHeaderSize = 24;
inline constexpr std::uint32_t kMaxPayload = 1U << 20;
inline constexpr char kJournalMagic[8] = {'C', 'G', 'W', 'A', 'L', '\0', 'v', '1'};
inline constexpr char kSnapshotMagic[8] = {'C', 'G', 'S', 'N', 'P', '\0', 'v', '1'};

// Bytes a record with this payload occupies on disk.
constexpr std::size_t record_size(std::size_t payload_len) {
  return kRecordHeaderSize + ((payload_len + 7) & ~std::size_t{7});
}

void append_file_header(std::string& out, const char (&magic)[8], std::uint64_t seq,
                        std::uint64_t count);
// True if `data` starts with a valid header with this magic.
bool parse_file_header(std::string_view data, const char (&magic)[8], std::uint64_t* seq,
                       std::uint64_t* count);

void append_record(std::string& out, std::uint64_t seq, std::string_view payload);

enum class RecordParse {
  ok,
  truncated,    // a valid header whose record extends past the end of data
  bad_header,   // header check failed (or too short for a header)
  bad_payload,  // header fine, payload or padding check failed
};
struct ParsedRecord {
  std::uint64_t seq = 0;
  std::string_view payload;
  std::size_t size = 0;  // bytes consumed, including padding
};
RecordParse parse_record(std::string_view data, ParsedRecord* out);

// Offset of the first position (8-aligned relative to `data`) at or after
// `from` where a complete valid record starts, or npos.
std::size_t find_next_valid_record(std::string_view data, std::size_t from);

class JournalWriter {
 public:
  // Writes are buffered up to this many bytes before a write(2).
  static constexpr std::size_t kBufferBytes = 1U << 20;

  // Creates `path` (must not exist) with a header for first_seq; the header
  // and the directory entry are made durable before returning.
  static Status create(const std::string& path, std::uint64_t first_seq,
                       std::unique_ptr<JournalWriter>* out);
  // Opens an existing journal for appending after `valid_end` bytes (anything
  // beyond is truncated and the truncation made durable); the next record
  // gets sequence number next_seq.
  static Status open_append(const std::string& path, std::uint64_t first_seq,
                            std::uint64_t valid_end, std::uint64_t next_seq,
                            std::unique_ptr<JournalWriter>* out);
  ~JournalWriter();
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;

  // Buffers one record with sequence number next_seq(). Not durable until sync().
  Status append(std::string_view payload);
  // Writes the buffer and fdatasync()s. After this returns ok, every record
  // appended so far survives a crash.
  Status sync();
  // Writes the buffer and starts its write-back (sync_file_range), without
  // waiting: the caller can work while the disk writes, then sync() waits
  // for what is left. Durability still comes from sync() alone.
  Status start_sync();

  std::uint64_t first_seq() const noexcept { return first_seq_; }
  std::uint64_t next_seq() const noexcept { return next_seq_; }
  std::uint64_t synced_seq() const noexcept { return synced_seq_; }  // last durable seq
  std::uint64_t bytes() const noexcept { return file_bytes_ + buf_.size(); }
  const std::string& path() const noexcept { return path_; }
  // True after an I/O error: every later call fails. The records written
  // since the last successful sync (never acknowledged) are cut off the file
  // then, so that a restart does not replay changes that were refused (a
  // disk that filled up in the middle of a load); if even that fails, the
  // error says so and a restart may replay them.
  bool failed() const noexcept { return failed_; }

 private:
  JournalWriter(int fd, std::string path, std::uint64_t first_seq, std::uint64_t next_seq,
                std::uint64_t file_bytes);
  // write_back: start the write-back of a buffer that is not full too.
  Status flush_buffer(bool write_back = false);
  Status fail(Status s);

  int fd_;
  std::string path_;
  std::uint64_t first_seq_;
  std::uint64_t next_seq_;
  std::uint64_t synced_seq_;
  std::uint64_t file_bytes_;
  std::uint64_t synced_bytes_;  // the file's size at the last successful sync
  std::string buf_;
  bool failed_ = false;
};

}  // namespace cg::store
