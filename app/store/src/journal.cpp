#include "cuckoogate/store/journal.hpp"

#include <bit>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include "fs_util.hpp"

namespace cg::store {

static_assert(std::endian::native == std::endian::little,
              "the on-disk format is written with memcpy of little-endian integers");

namespace {

template <class T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

template <class T>
T get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

std::uint32_t header_check(const char* hdr, std::uint32_t len) {
  return static_cast<std::uint32_t>(XXH3_64bits_withSeed(hdr + 8, 16, len));
}

}  // namespace

void append_file_header(std::string& out, const char (&magic)[8], std::uint64_t seq,
                        std::uint64_t count) {
  const std::size_t start = out.size();
  out.append(magic, 8);
  put(out, seq);
  put(out, count);
  put(out, static_cast<std::uint64_t>(XXH3_64bits(out.data() + start, 24)));
}

bool parse_file_header(std::string_view data, const char (&magic)[8], std::uint64_t* seq,
                       std::uint64_t* count) {
  if (data.size() < kFileHeaderSize) return false;
  if (std::memcmp(data.data(), magic, 8) != 0) return false;
  if (get<std::uint64_t>(data.data() + 24) != XXH3_64bits(data.data(), 24)) return false;
  *seq = get<std::uint64_t>(data.data() + 8);
  *count = get<std::uint64_t>(data.data() + 16);
  return true;
}

void append_record(std::string& out, std::uint64_t seq, std::string_view payload) {
  const auto len = static_cast<std::uint32_t>(payload.size());
  char hdr[kRecordHeaderSize];
  std::memcpy(hdr, &len, 4);
  std::memcpy(hdr + 8, &seq, 8);
  const std::uint64_t body = XXH3_64bits_withSeed(payload.data(), payload.size(), seq);
  std::memcpy(hdr + 16, &body, 8);
  const std::uint32_t hc = header_check(hdr, len);
  std::memcpy(hdr + 4, &hc, 4);
  out.append(hdr, kRecordHeaderSize);
  out.append(payload);
  out.append(record_size(payload.size()) - kRecordHeaderSize - payload.size(), '\0');
}

RecordParse parse_record(std::string_view data, ParsedRecord* out) {
  if (data.size() < kRecordHeaderSize) return RecordParse::bad_header;
  const char* p = data.data();
  const auto len = get<std::uint32_t>(p);
  if (len > kMaxPayload || get<std::uint32_t>(p + 4) != header_check(p, len)) {
    return RecordParse::bad_header;
  }
  const std::uint64_t seq = get<std::uint64_t>(p + 8);
  if (seq == 0) return RecordParse::bad_header;
  const std::size_t size = record_size(len);
  if (data.size() < size) return RecordParse::truncated;
  if (XXH3_64bits_withSeed(p + kRecordHeaderSize, len, seq) != get<std::uint64_t>(p + 16)) {
    return RecordParse::bad_payload;
  }
  for (std::size_t i = kRecordHeaderSize + len; i < size; ++i) {
    if (p[i] != 0) return RecordParse::bad_payload;
  }
  out->seq = seq;
  out->payload = data.substr(kRecordHeaderSize, len);
  out->size = size;
  return RecordParse::ok;
}

std::size_t find_next_valid_record(std::string_view data, std::size_t from) {
  ParsedRecord r;
  for (std::size_t off = (from + 7) & ~std::size_t{7}; off + kRecordHeaderSize <= data.size();
       off += 8) {
    if (parse_record(data.substr(off), &r) == RecordParse::ok) return off;
  }
  return std::string_view::npos;
}

// ---------------------------------------------------------------------------

JournalWriter::JournalWriter(int fd, std::string path, std::uint64_t first_seq,
                             std::uint64_t next_seq, std::uint64_t file_bytes)
    : fd_(fd),
      path_(std::move(path)),
      first_seq_(first_seq),
      next_seq_(next_seq),
      synced_seq_(next_seq - 1),
      file_bytes_(file_bytes),
      synced_bytes_(file_bytes) {
  buf_.reserve(kBufferBytes + 4096);
}

JournalWriter::~JournalWriter() {
  if (fd_ >= 0) ::close(fd_);
}

Status JournalWriter::create(const std::string& path, std::uint64_t first_seq,
                             std::unique_ptr<JournalWriter>* out) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return errno_status("create " + path, errno);
  std::unique_ptr<JournalWriter> w(new JournalWriter(fd, path, first_seq, first_seq, 0));
  std::string hdr;
  append_file_header(hdr, kJournalMagic, first_seq, 0);
  if (Status s = fsu::write_all(fd, hdr, path); !s.ok()) return s;
  if (Status s = fsu::fsync_fd(fd, path); !s.ok()) return s;
  if (Status s = fsu::fsync_dir(fsu::dir_of(path)); !s.ok()) return s;
  w->file_bytes_ = w->synced_bytes_ = hdr.size();
  *out = std::move(w);
  return Status::Ok();
}

Status JournalWriter::open_append(const std::string& path, std::uint64_t first_seq,
                                  std::uint64_t valid_end, std::uint64_t next_seq,
                                  std::unique_ptr<JournalWriter>* out) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno_status("open " + path, errno);
  std::unique_ptr<JournalWriter> w(new JournalWriter(fd, path, first_seq, next_seq, valid_end));
  if (::ftruncate(fd, static_cast<off_t>(valid_end)) != 0) {
    return errno_status("truncate " + path, errno);
  }
  if (::lseek(fd, static_cast<off_t>(valid_end), SEEK_SET) < 0) {
    return errno_status("seek " + path, errno);
  }
  if (Status s = fsu::fsync_fd(fd, path); !s.ok()) return s;
  *out = std::move(w);
  return Status::Ok();
}

Status JournalWriter::fail(Status s) {
  failed_ = true;
  // Whatever reached the file after the last sync was never acknowledged:
  // cut it off, durably (truncating needs no free space).
  if (::ftruncate(fd_, static_cast<off_t>(synced_bytes_)) != 0 || ::fdatasync(fd_) != 0) {
    const int err = errno;
    return {s.code(), s.message() + "; the unacknowledged records after byte " + std::to_string(synced_bytes_) +
                          " could not be cut off (" + std::strerror(err) + "): a restart may replay them"};
  }
  return s;
}

Status JournalWriter::append(std::string_view payload) {
  if (failed_) return {Errc::io_error, path_ + ": journal unusable after an earlier I/O error"};
  if (payload.size() > kMaxPayload) {
    return {Errc::invalid_argument, "record of " + std::to_string(payload.size()) +
                                        " bytes exceeds the journal limit"};
  }
  append_record(buf_, next_seq_, payload);
  ++next_seq_;
  if (buf_.size() >= kBufferBytes) return flush_buffer();
  return Status::Ok();
}

Status JournalWriter::start_sync() {
  if (failed_) return {Errc::io_error, path_ + ": journal unusable after an earlier I/O error"};
  return flush_buffer(/*write_back=*/true);
}

Status JournalWriter::flush_buffer(bool write_back) {
  if (buf_.empty()) return Status::Ok();
  if (Status s = fsu::write_all(fd_, buf_, path_); !s.ok()) return fail(std::move(s));
  if (write_back || buf_.size() >= kBufferBytes) {
    // A full buffer means a large batch whose next records are still being
    // encoded: start writing these pages back now, so that the batch's one
    // fdatasync() waits for the tail only (a million-rule load's journal
    // took 62 ms to sync at the end, all of it after the CPU work). A hint:
    // durability still comes from sync(), and an error here is ignored.
    (void)::sync_file_range(fd_, static_cast<off_t>(file_bytes_), static_cast<off_t>(buf_.size()),
                            SYNC_FILE_RANGE_WRITE);
  }
  file_bytes_ += buf_.size();
  buf_.clear();
  return Status::Ok();
}

Status JournalWriter::sync() {
  if (failed_) return {Errc::io_error, path_ + ": journal unusable after an earlier I/O error"};
  if (synced_seq_ + 1 == next_seq_ && buf_.empty()) return Status::Ok();
  if (Status s = flush_buffer(); !s.ok()) return s;
  // fdatasync also persists the file size, which is what appends change.
  if (::fdatasync(fd_) != 0) return fail(errno_status("fdatasync " + path_, errno));
  synced_seq_ = next_seq_ - 1;
  synced_bytes_ = file_bytes_;
  return Status::Ok();
}

}  // namespace cg::store
