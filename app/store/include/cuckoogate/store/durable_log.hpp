// A state directory holding a journal of opaque records plus compacted
// snapshots, and the recovery that turns them back into a record stream.
//
// Files in the directory (docs/store.md has the full rules):
//   snap-<seq, 20 digits>.cgs  a snapshot covering journal records 1..seq
//   wal-<seq, 20 digits>.cgj   a journal whose first record has number seq
//   *.tmp                      an unfinished snapshot (deleted on open)
//   *.corrupt                  damaged files moved aside by a salvage
//
// Recovery (open): newest snapshot, then every journal record numbered after
// it, in order. The last journal's tail may be torn (a crash mid-write): a
// bad record with no valid record after it is reported and truncated away.
// Any other damage (bad record followed by valid ones, a bad record in an
// older journal, a gap in the numbering, a damaged snapshot) fails with
// Errc::corrupt, unless Options::salvage: then the valid prefix is kept, the
// damaged files are copied aside as *.corrupt and the report says what was
// dropped.
//
// Thread-safety: not thread-safe; the owner serialises calls. The one
// exception: write_snapshot() may run concurrently with append()/sync()
// (it touches other files), but not with rotate() or another write_snapshot().
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cuckoogate/store/journal.hpp"
#include "cuckoogate/store/status.hpp"

namespace cg::store {

struct RecoveryReport {
  std::uint64_t snapshot_seq = 0;       // 0: no snapshot
  std::uint64_t snapshot_records = 0;
  std::uint64_t journal_records = 0;    // replayed (numbered after the snapshot)
  std::uint64_t last_seq = 0;           // last record number recovered
  bool torn_tail = false;               // a torn tail was found and truncated
  std::string tail_file;
  std::uint64_t tail_offset = 0;        // where the valid journal ends
  std::uint64_t tail_bytes_dropped = 0;
  std::string tail_reason;
  bool salvaged = false;                // damage before the tail was skipped
  std::vector<std::string> notes;       // one line per event worth logging
};

class DurableLog {
 public:
  struct Options {
    std::string dir;        // created if missing (parent must exist)
    bool salvage = false;
  };
  // Receives (sequence number, payload). For snapshot records the number is
  // the snapshot's seq. The payload view is only valid during the call.
  using RecordFn = std::function<void(std::uint64_t seq, std::string_view payload)>;

  // Recovers the directory (see above), calling on_snapshot for each snapshot
  // record then on_journal for each journal record after the snapshot, and
  // opens the journal for appending. On error nothing is opened; records may
  // already have been delivered and should be discarded by the caller.
  static Status open(const Options& opt, const RecordFn& on_snapshot, const RecordFn& on_journal,
                     std::unique_ptr<DurableLog>* out, RecoveryReport* report);

  // Buffers a record; it gets number next_seq(). Durable only after sync().
  Status append(std::string_view payload);
  // Makes every appended record durable (write + fdatasync).
  Status sync();
  // Writes what is buffered and starts its write-back without waiting
  // (JournalWriter::start_sync); sync() still makes it durable.
  Status start_sync();

  std::uint64_t next_seq() const noexcept { return journal_->next_seq(); }
  std::uint64_t last_seq() const noexcept { return journal_->next_seq() - 1; }
  std::uint64_t snapshot_seq() const noexcept {
    return snapshot_seq_.load(std::memory_order_acquire);
  }
  std::uint64_t records_since_snapshot() const noexcept { return last_seq() - snapshot_seq(); }
  bool failed() const noexcept { return journal_->failed(); }
  const std::string& dir() const noexcept { return dir_; }

  // Compaction, step 1 (under the owner's writer serialisation): syncs the
  // journal and starts a new one, so that the snapshot about to be written
  // covers exactly records 1..*snapshot_seq (= last_seq()).
  Status rotate(std::uint64_t* snapshot_seq);
  // Compaction, step 2 (may run without the writer serialisation): writes
  // snap-<seq>.cgs from the payloads produced by `next` (return false when
  // done) to a temporary file, fsyncs it, renames it into place, fsyncs the
  // directory, then deletes older snapshots and journals it makes obsolete.
  Status write_snapshot(std::uint64_t seq, const std::function<bool(std::string* payload)>& next);

  static std::string journal_name(std::uint64_t first_seq);
  static std::string snapshot_name(std::uint64_t seq);

 private:
  DurableLog() = default;
  Status remove_obsolete(std::uint64_t snapshot_seq);

  std::string dir_;
  std::unique_ptr<JournalWriter> journal_;
  std::atomic<std::uint64_t> snapshot_seq_{0};  // written by write_snapshot()
};

}  // namespace cg::store
