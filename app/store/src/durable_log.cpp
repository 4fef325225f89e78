#include "cuckoogate/store/durable_log.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cinttypes>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

#include "fs_util.hpp"

namespace cg::store {

namespace {

// Parses "<prefix><20 digits><suffix>".
bool parse_name(const std::string& name, std::string_view prefix, std::string_view suffix,
                std::uint64_t* seq) {
  if (name.size() != prefix.size() + 20 + suffix.size()) return false;
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  if (name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return false;
  std::uint64_t v = 0;
  for (std::size_t i = prefix.size(); i < prefix.size() + 20; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    v = v * 10 + static_cast<std::uint64_t>(name[i] - '0');
  }
  *seq = v;
  return true;
}

std::string make_name(std::string_view prefix, std::uint64_t seq, std::string_view suffix) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%020" PRIu64, seq);
  std::string s(prefix);
  s += digits;
  s += suffix;
  return s;
}

const char* parse_reason(RecordParse p) {
  switch (p) {
    case RecordParse::ok: return "record out of sequence";
    case RecordParse::truncated: return "record cut short";
    case RecordParse::bad_header: return "bad record header checksum";
    case RecordParse::bad_payload: return "bad record payload checksum";
  }
  return "?";
}

// The most bytes one record takes on disk: a window this far ahead of a
// record's start holds all of it, or the file's end.
constexpr std::size_t kMaxRecordSize = record_size(kMaxPayload);

// Whether a complete valid record starts at an 8-aligned offset at or after
// `from`: find_next_valid_record over the whole file, one window at a time
// (asked after a record failed to parse — a torn tail after every crash
// during an append — so it must not read a 700 MB journal whole). In each
// window the offsets with a whole record's worth of bytes after them are
// judged; the others again from the next window.
Status has_valid_record(fsu::FileWindow& file, std::uint64_t from, bool* found) {
  *found = false;
  for (std::uint64_t off = (from + 7) & ~std::uint64_t{7}; off + kRecordHeaderSize <= file.size();) {
    std::string_view rest;
    if (Status s = file.at(off, kMaxRecordSize, &rest); !s.ok()) return s;
    if (find_next_valid_record(rest, 0) != std::string_view::npos) {
      *found = true;
      break;
    }
    if (off + rest.size() >= file.size()) break;  // judged to the end
    off += std::max<std::uint64_t>(8, (rest.size() - kMaxRecordSize) & ~std::size_t{7});
  }
  return Status::Ok();
}

// A file of the state directory opened for recovery, with its first
// kFileHeaderSize bytes (fewer if it is shorter) in *head.
Status open_window(const std::string& path, fsu::FileWindow* file, std::string_view* head) {
  if (Status s = file->open(path); !s.ok()) return s;
  return file->at(0, kFileHeaderSize, head);
}

// Copies a damaged file aside as <path>.corrupt (kept for the operator).
Status copy_aside(const std::string& path) {
  std::string data;
  if (Status s = fsu::read_file(path, &data); !s.ok()) return s;
  const std::string dst = path + ".corrupt";
  const int fd = ::open(dst.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return errno_status("create " + dst, errno);
  Status s = fsu::write_all(fd, data, dst);
  if (s.ok()) s = fsu::fsync_fd(fd, dst);
  ::close(fd);
  return s;
}


// Clears the group and other permission bits of `path` (to `mode`) when any is
// set; a note says so. Never widens anything.
Status restrict_to_owner(const std::string& path, mode_t mode, RecoveryReport* rep) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return errno_status("stat " + path, errno);
  if ((st.st_mode & 077) == 0) return Status::Ok();
  if (::chmod(path.c_str(), mode) != 0) return errno_status("chmod " + path, errno);
  char old[8];
  std::snprintf(old, sizeof(old), "%04o", static_cast<unsigned>(st.st_mode & 07777));
  rep->notes.push_back("tightened " + path + " from " + old + " to owner-only");
  return Status::Ok();
}
}  // namespace

std::string DurableLog::journal_name(std::uint64_t first_seq) {
  return make_name("wal-", first_seq, ".cgj");
}
std::string DurableLog::snapshot_name(std::uint64_t seq) {
  return make_name("snap-", seq, ".cgs");
}

Status DurableLog::open(const Options& opt, const RecordFn& on_snapshot,
                        const RecordFn& on_journal, std::unique_ptr<DurableLog>* out,
                        RecoveryReport* report) {
  namespace fs = std::filesystem;
  RecoveryReport local;
  RecoveryReport& rep = report != nullptr ? *report : local;
  rep = RecoveryReport{};
  const std::string& dir = opt.dir;
  if (dir.empty()) return {Errc::invalid_argument, "state directory not set"};

  std::error_code ec;
  fs::create_directory(dir, ec);
  if (ec) return {Errc::io_error, "create state directory " + dir + ": " + ec.message()};
  // The blocklist is for the gateway's user alone: the directory is 0700 and
  // every file in it 0600. State written by an older version (0755/0644) is
  // tightened here.
  if (Status s = restrict_to_owner(dir, 0700, &rep); !s.ok()) return s;

  std::vector<std::uint64_t> snaps, wals;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::directory_entry& ent = *it;
    const std::string name = ent.path().filename().string();
    std::uint64_t seq = 0;
    if (parse_name(name, "snap-", ".cgs", &seq)) {
      snaps.push_back(seq);
      if (Status s = restrict_to_owner(ent.path().string(), 0600, &rep); !s.ok()) return s;
    } else if (parse_name(name, "wal-", ".cgj", &seq)) {
      wals.push_back(seq);
      if (Status s = restrict_to_owner(ent.path().string(), 0600, &rep); !s.ok()) return s;
    } else if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0) {
      // An unfinished snapshot: never renamed, never used. Said as it went
      // (a directory of that name, say, is not removed, and not claimed to be).
      if (::unlink(ent.path().c_str()) == 0) {
        rep.notes.push_back("removed unfinished snapshot " + name);
      } else {
        rep.notes.push_back("left " + name + " (not an unfinished snapshot this store can remove: " +
                            std::strerror(errno) + ")");
      }
    }
  }
  if (ec) return {Errc::io_error, "list state directory " + dir + ": " + ec.message()};
  std::sort(snaps.begin(), snaps.end());
  std::sort(wals.begin(), wals.end());

  // 1. The newest snapshot.
  std::uint64_t snap_seq = 0;
  if (!snaps.empty()) {
    snap_seq = snaps.back();
    const std::string path = fsu::join(dir, snapshot_name(snap_seq));
    fsu::FileWindow file;
    std::string_view head;
    if (Status s = open_window(path, &file, &head); !s.ok()) return s;
    std::uint64_t hseq = 0, count = 0;
    std::string damage;
    std::uint64_t n = 0;
    std::uint64_t off = kFileHeaderSize;
    if (!parse_file_header(head, kSnapshotMagic, &hseq, &count) || hseq != snap_seq) {
      damage = "bad snapshot header";
    } else {
      for (; n < count; ++n) {
        std::string_view rest;
        if (Status s = file.at(off, kMaxRecordSize, &rest); !s.ok()) return s;
        ParsedRecord r;
        const RecordParse p = parse_record(rest, &r);
        if (p != RecordParse::ok || r.seq != n + 1) {
          damage = std::string(parse_reason(p)) + " at offset " + std::to_string(off);
          break;
        }
        on_snapshot(snap_seq, r.payload);
        off += r.size;
      }
      if (damage.empty() && off != file.size()) damage = "trailing bytes after the last record";
    }
    rep.snapshot_seq = snap_seq;
    rep.snapshot_records = n;
    if (!damage.empty()) {
      if (!opt.salvage) {
        return {Errc::corrupt, path + ": " + damage +
                                   " (snapshots are written atomically, so this is media damage;"
                                   " open with salvage to keep the " +
                                   std::to_string(n) + " readable records)"};
      }
      rep.salvaged = true;
      rep.notes.push_back("salvage: " + path + ": " + damage + "; kept " + std::to_string(n) +
                          " snapshot records");
      if (Status s = copy_aside(path); !s.ok()) return s;
    }
  }

  // 2. The journals, oldest first. A snapshot S is renamed into place only
  // after wal-(S+1) was made and synced (rotate), and that journal is removed
  // only by a later snapshot: without it, whatever was acknowledged after S
  // may be gone, and nothing else would tell.
  if (snap_seq != 0 && !std::binary_search(wals.begin(), wals.end(), snap_seq + 1)) {
    const std::string what = journal_name(snap_seq + 1) + " is missing (" + snapshot_name(snap_seq) +
                             " was written after it was made): records after " + std::to_string(snap_seq) +
                             " may be lost";
    if (!opt.salvage) return {Errc::corrupt, fsu::join(dir, what) + " (open with salvage to go on from the snapshot)"};
    rep.salvaged = true;
    rep.notes.push_back("salvage: " + what);
  }
  std::uint64_t expected = snap_seq + 1;  // the next record number to replay
  std::string last_path;                  // journal to append to, if reusable
  std::uint64_t last_first = 0, last_end = 0, last_file_next = 0;
  bool stop = false;
  for (std::size_t i = 0; i < wals.size() && !stop; ++i) {
    const bool is_last = i + 1 == wals.size();
    const std::string path = fsu::join(dir, journal_name(wals[i]));
    fsu::FileWindow file;
    std::string_view head;
    if (Status s = open_window(path, &file, &head); !s.ok()) return s;
    std::uint64_t first = 0, unused = 0;
    std::string damage;
    std::uint64_t bad_off = 0;
    std::uint64_t off = kFileHeaderSize;
    std::uint64_t file_next = 0;
    bool valid_in_file = false;
    if (!parse_file_header(head, kJournalMagic, &first, &unused) || first != wals[i]) {
      if (is_last) {
        if (Status s = has_valid_record(file, 0, &valid_in_file); !s.ok()) return s;
      }
      // The journal a snapshot was taken into had its header synced before
      // the snapshot was renamed into place: no crash leaves it headerless.
      const bool made_before_snapshot = snap_seq != 0 && wals[i] == snap_seq + 1;
      if (is_last && !valid_in_file && !made_before_snapshot) {
        // Crash while creating the journal: it never held a record.
        ::unlink(path.c_str());
        rep.torn_tail = true;
        rep.tail_file = path;
        rep.tail_reason = "journal header never completed";
        rep.tail_bytes_dropped = file.size();
        rep.notes.push_back(path + ": torn journal header, file removed");
        break;
      }
      damage = made_before_snapshot ? "bad journal header (emptied or overwritten since " +
                                          snapshot_name(snap_seq) + " was written after it)"
                                    : "bad journal header";
    } else {
      file_next = first;
      while (off < file.size()) {
        std::string_view rest;
        if (Status s = file.at(off, kMaxRecordSize, &rest); !s.ok()) return s;
        ParsedRecord r;
        const RecordParse p = parse_record(rest, &r);
        if (p == RecordParse::ok && r.seq == file_next) {
          if (r.seq >= expected) {
            if (r.seq != expected) {
              damage = "records " + std::to_string(expected) + ".." + std::to_string(r.seq - 1) +
                       " are missing";
              bad_off = off;
              break;
            }
            on_journal(r.seq, r.payload);
            ++expected;
            ++rep.journal_records;
          }
          off += r.size;
          ++file_next;
          continue;
        }
        bool valid_after = p == RecordParse::ok;
        if (!valid_after) {
          if (Status s = has_valid_record(file, off + 8, &valid_after); !s.ok()) return s;
        }
        if (is_last && !valid_after) {
          rep.torn_tail = true;
          rep.tail_file = path;
          rep.tail_offset = off;
          rep.tail_bytes_dropped = file.size() - off;
          rep.tail_reason = parse_reason(p);
          rep.notes.push_back(path + ": torn tail at offset " + std::to_string(off) + " (" +
                              parse_reason(p) + "), " + std::to_string(file.size() - off) +
                              " bytes dropped");
          break;
        }
        damage = std::string(parse_reason(p)) + " at offset " + std::to_string(off) +
                 (valid_after ? ", valid records follow" : " in a closed journal");
        bad_off = off;
        break;
      }
    }
    if (!damage.empty()) {
      if (!opt.salvage) {
        return {Errc::corrupt, path + ": " + damage +
                                   "; the journal is damaged before its tail (open with salvage"
                                   " to keep the records before the damage)"};
      }
      rep.salvaged = true;
      rep.notes.push_back("salvage: " + path + ": " + damage + "; dropped the rest of it and " +
                          std::to_string(wals.size() - i - 1) + " later journal(s)");
      for (std::size_t j = i; j < wals.size(); ++j) {
        const std::string p = fsu::join(dir, journal_name(wals[j]));
        if (Status s = copy_aside(p); !s.ok()) return s;
        if (j > i) ::unlink(p.c_str());
      }
      if (bad_off == 0) {  // header damaged: nothing in this file is usable
        ::unlink(path.c_str());
        break;
      }
      off = bad_off;
      stop = true;
    }
    if (is_last || stop) {
      last_path = path;
      last_first = first;
      last_end = off;
      last_file_next = file_next;
    }
  }

  // 3. Open the journal for appending.
  auto log = std::unique_ptr<DurableLog>(new DurableLog());
  log->dir_ = dir;
  log->snapshot_seq_.store(snap_seq, std::memory_order_relaxed);
  if (!last_path.empty() && last_file_next == expected) {
    if (Status s = JournalWriter::open_append(last_path, last_first, last_end, expected,
                                              &log->journal_);
        !s.ok()) {
      return s;
    }
  } else {
    if (!last_path.empty() && last_first >= expected) {
      // The newest journal starts after what was replayed: the records
      // between are gone, whether or not it holds any itself (a journal
      // holding none yet is the normal state right after a snapshot, so a
      // lost snapshot looks exactly like this). Removing it would also
      // remove the only trace that they existed.
      const std::string what = last_path + ": records " + std::to_string(expected) + ".." +
                               std::to_string(last_first - 1) + " are missing" +
                               (last_file_next > last_first ? "" : " (this journal holds none yet: was a snapshot lost?)");
      if (!opt.salvage) return {Errc::corrupt, what};
      rep.salvaged = true;
      rep.notes.push_back("salvage: " + what + "; the journal is set aside and the store starts without them");
      if (Status s = copy_aside(last_path); !s.ok()) return s;
      ::unlink(last_path.c_str());
    }
    const std::string path = fsu::join(dir, journal_name(expected));
    if (Status s = JournalWriter::create(path, expected, &log->journal_); !s.ok()) return s;
  }
  if (Status s = fsu::fsync_dir(dir); !s.ok()) return s;
  rep.last_seq = expected - 1;
  *out = std::move(log);
  return Status::Ok();
}

Status DurableLog::append(std::string_view payload) { return journal_->append(payload); }

Status DurableLog::sync() { return journal_->sync(); }

Status DurableLog::start_sync() { return journal_->start_sync(); }

Status DurableLog::rotate(std::uint64_t* snapshot_seq) {
  if (Status s = journal_->sync(); !s.ok()) return s;
  const std::uint64_t seq = last_seq();
  if (journal_->first_seq() != seq + 1) {
    std::unique_ptr<JournalWriter> next;
    if (Status s = JournalWriter::create(fsu::join(dir_, journal_name(seq + 1)), seq + 1, &next);
        !s.ok()) {
      return s;
    }
    journal_ = std::move(next);
  }
  *snapshot_seq = seq;
  return Status::Ok();
}

Status DurableLog::write_snapshot(std::uint64_t seq,
                                  const std::function<bool(std::string* payload)>& next) {
  const std::string final_path = fsu::join(dir_, snapshot_name(seq));
  const std::string tmp = final_path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return errno_status("create " + tmp, errno);
  auto fail = [&](Status s) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  };
  std::string buf;
  append_file_header(buf, kSnapshotMagic, seq, 0);  // count patched below
  std::uint64_t count = 0;
  std::string payload;
  while (next(&payload)) {
    if (payload.size() > kMaxPayload) {
      return fail({Errc::invalid_argument, "snapshot record exceeds the record limit"});
    }
    append_record(buf, ++count, payload);
    if (buf.size() >= JournalWriter::kBufferBytes) {
      if (Status s = fsu::write_all(fd, buf, tmp); !s.ok()) return fail(std::move(s));
      buf.clear();
    }
  }
  if (Status s = fsu::write_all(fd, buf, tmp); !s.ok()) return fail(std::move(s));
  std::string hdr;
  append_file_header(hdr, kSnapshotMagic, seq, count);
  if (Status s = fsu::pwrite_all(fd, hdr, 0, tmp); !s.ok()) return fail(std::move(s));
  if (Status s = fsu::fsync_fd(fd, tmp); !s.ok()) return fail(std::move(s));
  ::close(fd);
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return errno_status("rename " + tmp, e);
  }
  if (Status s = fsu::fsync_dir(dir_); !s.ok()) return s;
  snapshot_seq_.store(seq, std::memory_order_release);
  return remove_obsolete(seq);
}

Status DurableLog::remove_obsolete(std::uint64_t snapshot_seq) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::string> victims;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::directory_entry& ent = *it;
    const std::string name = ent.path().filename().string();
    std::uint64_t seq = 0;
    if (parse_name(name, "snap-", ".cgs", &seq) && seq < snapshot_seq) {
      victims.push_back(ent.path().string());
    } else if (parse_name(name, "wal-", ".cgj", &seq) && seq <= snapshot_seq &&
               seq != journal_->first_seq()) {
      // Journals are rotated at snapshot time: one starting at or before the
      // snapshot ends at or before it (the current one is kept regardless).
      victims.push_back(ent.path().string());
    }
  }
  if (ec) return {Errc::io_error, "list state directory " + dir_ + ": " + ec.message()};
  for (const auto& v : victims) {
    if (::unlink(v.c_str()) != 0 && errno != ENOENT) return errno_status("unlink " + v, errno);
  }
  if (!victims.empty()) return fsu::fsync_dir(dir_);
  return Status::Ok();
}

}  // namespace cg::store
