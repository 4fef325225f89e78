// Journal framing, DurableLog recovery and its corruption cases.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cuckoogate/store/durable_log.hpp"
#include "cuckoogate/store/journal.hpp"
#include "test_util.hpp"

namespace cg::store {
namespace {

namespace fs = std::filesystem;

std::string payload_of(std::uint64_t i) {
  return "record-" + std::to_string(i) + std::string(i % 13, 'x');
}

struct Recovered {
  std::vector<std::string> snapshot;
  std::vector<std::pair<std::uint64_t, std::string>> journal;
  std::unique_ptr<DurableLog> log;
  RecoveryReport report;
  Status status;
};

Recovered recover(const std::string& dir, bool salvage = false) {
  Recovered r;
  DurableLog::Options o;
  o.dir = dir;
  o.salvage = salvage;
  r.status = DurableLog::open(
      o, [&](std::uint64_t, std::string_view p) { r.snapshot.emplace_back(p); },
      [&](std::uint64_t s, std::string_view p) { r.journal.emplace_back(s, std::string(p)); },
      &r.log, &r.report);
  return r;
}

// Writes n records numbered 1..n into a fresh directory; returns the journal path.
std::string write_records(const std::string& dir, std::uint64_t n) {
  Recovered r = recover(dir);
  EXPECT_TRUE(r.status.ok()) << r.status.to_string();
  for (std::uint64_t i = 1; i <= n; ++i) EXPECT_TRUE(r.log->append(payload_of(i)).ok());
  EXPECT_TRUE(r.log->sync().ok());
  return dir + "/" + DurableLog::journal_name(1);
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void write_all(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}
// Offset of record number i (1-based) in a journal written by write_records.
std::size_t offset_of(std::uint64_t i) {
  std::size_t off = kFileHeaderSize;
  for (std::uint64_t k = 1; k < i; ++k) off += record_size(payload_of(k).size());
  return off;
}

// Journal records 1..n were replayed, record i with payload(i).
void expect_records(const Recovered& r, std::uint64_t n, std::string (*payload)(std::uint64_t) = payload_of) {
  ASSERT_EQ(r.journal.size(), n);
  for (std::uint64_t i = 1; i <= n; ++i) {
    ASSERT_EQ(r.journal[i - 1].first, i);
    ASSERT_TRUE(r.journal[i - 1].second == payload(i)) << "record " << i;
  }
}

TEST(JournalFormat, RecordRoundTripAndAlignment) {
  std::string buf;
  append_record(buf, 42, "hello");
  ASSERT_EQ(buf.size(), record_size(5));
  ASSERT_EQ(buf.size() % 8, 0U);
  ParsedRecord r;
  ASSERT_EQ(parse_record(buf, &r), RecordParse::ok);
  EXPECT_EQ(r.seq, 42U);
  EXPECT_EQ(r.payload, "hello");
  EXPECT_EQ(parse_record(std::string_view(buf).substr(0, buf.size() - 1), &r),
            RecordParse::truncated);
  std::string zeros(64, '\0');
  EXPECT_EQ(parse_record(zeros, &r), RecordParse::bad_header);
  buf[kRecordHeaderSize] ^= 1;
  EXPECT_EQ(parse_record(buf, &r), RecordParse::bad_payload);
  buf[kRecordHeaderSize] ^= 1;
  buf[0] ^= 4;  // damaged length
  EXPECT_EQ(parse_record(buf, &r), RecordParse::bad_header);
}

TEST(DurableLog, RecordsSurviveReopenAndNumberingContinues) {
  test::TempDir dir;
  write_records(dir.path(), 100);
  {
    Recovered r = recover(dir.path());
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    expect_records(r, 100);
    EXPECT_FALSE(r.report.torn_tail);
    EXPECT_EQ(r.log->next_seq(), 101U);
    ASSERT_TRUE(r.log->append(payload_of(101)).ok());
    ASSERT_TRUE(r.log->sync().ok());
  }
  Recovered r = recover(dir.path());
  expect_records(r, 101);
}

// A write that fails half way (the disk full; here the file size limit,
// RLIMIT_FSIZE) leaves the journal as of its last sync: the records written
// since were never acknowledged, and a restart must not replay them (it did:
// a load refused with 500 came back after a restart, less its torn tail).
TEST(DurableLog, AFailedWriteCutsOffTheRecordsSinceTheLastSync) {
  test::TempDir dir;
  write_records(dir.path(), 10);
  {
    Recovered r = recover(dir.path());
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    const std::string journal = dir.path() + "/" + DurableLog::journal_name(1);
    const auto size = fs::file_size(journal);
    struct sigaction ignore {}, old {};
    ignore.sa_handler = SIG_IGN;  // EFBIG instead of SIGXFSZ
    ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &old), 0);
    rlimit saved{};
    ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
    rlimit lim = saved;
    lim.rlim_cur = size + 2000;  // room for some whole records, not all
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &lim), 0);
    for (std::uint64_t i = 11; i <= 200; ++i) ASSERT_TRUE(r.log->append(payload_of(i)).ok());
    const Status st = r.log->sync();
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
    ASSERT_EQ(::sigaction(SIGXFSZ, &old, nullptr), 0);
    EXPECT_EQ(st.code(), Errc::io_error) << st.to_string();
    EXPECT_EQ(fs::file_size(journal), size);  // cut back to the last sync
    EXPECT_FALSE(r.log->append(payload_of(201)).ok());  // and unusable until reopened
  }
  Recovered again = recover(dir.path());
  ASSERT_TRUE(again.status.ok()) << again.status.to_string();
  expect_records(again, 10);
  EXPECT_FALSE(again.report.torn_tail);
}

TEST(DurableLog, UnsyncedRecordsAreNotClaimedDurable) {
  test::TempDir dir;
  Recovered r = recover(dir.path());
  ASSERT_TRUE(r.log->append("a").ok());
  EXPECT_EQ(r.log->last_seq(), 1U);
  ASSERT_TRUE(r.log->sync().ok());
  ASSERT_TRUE(r.log->append("b").ok());  // buffered only
  r.log.reset();                         // "crash" without sync: the buffer is lost
  Recovered again = recover(dir.path());
  ASSERT_EQ(again.journal.size(), 1U);
}

TEST(DurableLogCorruption, TruncatedLastRecordIsATornTailAndIsCutOff) {
  test::TempDir dir;
  const std::string path = write_records(dir.path(), 50);
  std::string data = read_all(path);
  const std::size_t cut = offset_of(50) + 10;  // inside the last record's header+payload
  data.resize(cut);
  write_all(path, data);
  Recovered r = recover(dir.path());
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  expect_records(r, 49);
  EXPECT_TRUE(r.report.torn_tail);
  EXPECT_EQ(r.report.tail_offset, offset_of(50));
  EXPECT_EQ(fs::file_size(path), offset_of(50));  // truncated on disk
  // The next record reuses number 50 and recovery sees it.
  ASSERT_TRUE(r.log->append("new-50").ok());
  ASSERT_TRUE(r.log->sync().ok());
  r.log.reset();
  Recovered again = recover(dir.path());
  ASSERT_EQ(again.journal.size(), 50U);
  EXPECT_EQ(again.journal.back().second, "new-50");
  EXPECT_FALSE(again.report.torn_tail);
}

TEST(DurableLogCorruption, BadChecksumInLastRecordIsATornTail) {
  test::TempDir dir;
  const std::string path = write_records(dir.path(), 20);
  std::string data = read_all(path);
  data[offset_of(20) + kRecordHeaderSize + 2] ^= 0x55;
  write_all(path, data);
  Recovered r = recover(dir.path());
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  expect_records(r, 19);
  EXPECT_TRUE(r.report.torn_tail);
  EXPECT_EQ(r.report.tail_reason, "bad record payload checksum");
}

TEST(DurableLogCorruption, ZeroFilledTailIsIgnored) {
  test::TempDir dir;
  const std::string path = write_records(dir.path(), 20);
  std::string data = read_all(path);
  const std::size_t good = data.size();
  data.append(8192 + 5, '\0');  // e.g. blocks allocated but never written before a crash
  write_all(path, data);
  Recovered r = recover(dir.path());
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  expect_records(r, 20);
  EXPECT_TRUE(r.report.torn_tail);
  EXPECT_EQ(r.report.tail_bytes_dropped, 8192U + 5);
  EXPECT_EQ(fs::file_size(path), good);
}

TEST(DurableLogCorruption, GarbageTailWithoutAValidRecordIsIgnored) {
  test::TempDir dir;
  const std::string path = write_records(dir.path(), 5);
  std::string data = read_all(path);
  for (int i = 0; i < 1000; ++i) data.push_back(static_cast<char>(i * 37 + 11));
  write_all(path, data);
  Recovered r = recover(dir.path());
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  expect_records(r, 5);
  EXPECT_TRUE(r.report.torn_tail);
}

// A crash while a new journal was being created leaves it without a whole
// header: with nothing valid in it, the file is removed; with a valid record
// after a bad header it is damage, not a crash.
TEST(DurableLogCorruption, ANewestJournalWithoutAWholeHeaderIsRemoved) {
  test::TempDir dir;
  write_records(dir.path(), 10);
  const std::string next = dir.file(DurableLog::journal_name(11));
  write_all(next, std::string(16, 'J'));
  Recovered r = recover(dir.path());
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  expect_records(r, 10);
  EXPECT_TRUE(r.report.torn_tail);
  EXPECT_EQ(r.report.tail_reason, "journal header never completed");
  EXPECT_EQ(r.report.tail_bytes_dropped, 16u);
  EXPECT_EQ(fs::file_size(next), kFileHeaderSize);  // removed, then made again for appending
  ASSERT_TRUE(r.log->append(payload_of(11)).ok());
  ASSERT_TRUE(r.log->sync().ok());
  r.log.reset();
  Recovered again = recover(dir.path());
  ASSERT_TRUE(again.status.ok()) << again.status.to_string();
  expect_records(again, 11);
}

TEST(DurableLogCorruption, ABadJournalHeaderWithValidRecordsAfterItIsAnError) {
  test::TempDir dir;
  const std::string path = write_records(dir.path(), 10);
  std::string data = read_all(path);
  data[3] ^= 0x40;  // the magic
  write_all(path, data);
  Recovered r = recover(dir.path());
  ASSERT_EQ(r.status.code(), Errc::corrupt) << r.status.to_string();
  EXPECT_NE(r.status.message().find("bad journal header"), std::string::npos) << r.status.message();
  EXPECT_EQ(read_all(path), data);
}

TEST(DurableLogCorruption, BadRecordBeforeTheTailIsAnError) {
  test::TempDir dir;
  const std::string path = write_records(dir.path(), 100);
  std::string data = read_all(path);
  data[offset_of(40) + kRecordHeaderSize] ^= 1;  // payload of record 40
  write_all(path, data);
  Recovered r = recover(dir.path());
  ASSERT_EQ(r.status.code(), Errc::corrupt) << r.status.to_string();
  EXPECT_NE(r.status.message().find("offset " + std::to_string(offset_of(40))), std::string::npos)
      << r.status.message();
  EXPECT_EQ(read_all(path), data);  // nothing touched without salvage
}

TEST(DurableLogCorruption, DamagedLengthBeforeTheTailIsAnError) {
  test::TempDir dir;
  const std::string path = write_records(dir.path(), 100);
  std::string data = read_all(path);
  data[offset_of(60) + 1] = '\x7f';  // length says ~8 MB: must not look like a torn tail
  write_all(path, data);
  Recovered r = recover(dir.path());
  ASSERT_EQ(r.status.code(), Errc::corrupt) << r.status.to_string();
}

TEST(DurableLogCorruption, SalvageKeepsThePrefixAndSetsTheDamagedFileAside) {
  test::TempDir dir;
  const std::string path = write_records(dir.path(), 100);
  std::string data = read_all(path);
  data[offset_of(40) + kRecordHeaderSize] ^= 1;
  write_all(path, data);
  Recovered r = recover(dir.path(), /*salvage=*/true);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  expect_records(r, 39);
  EXPECT_TRUE(r.report.salvaged);
  EXPECT_TRUE(fs::exists(path + ".corrupt"));
  EXPECT_EQ(read_all(path + ".corrupt"), data);
  ASSERT_TRUE(r.log->append("after-salvage").ok());
  ASSERT_TRUE(r.log->sync().ok());
  r.log.reset();
  Recovered again = recover(dir.path());  // clean now, no salvage needed
  ASSERT_TRUE(again.status.ok()) << again.status.to_string();
  ASSERT_EQ(again.journal.size(), 40U);
  EXPECT_EQ(again.journal.back(), (std::pair<std::uint64_t, std::string>(40, "after-salvage")));
}

// Recovery reads a file through an 8 MiB window (fsu::FileWindow), not whole:
// files of several windows, with records of up to kMaxPayload that straddle
// the window's end, read exactly as a file read whole.
std::string big_payload(std::uint64_t i) {
  static constexpr std::size_t kSizes[] = {kMaxPayload, 1, 700001, 3, 65536 + 5, kMaxPayload - 7, 0, 999999};
  std::string p(kSizes[i % std::size(kSizes)], '\0');
  for (std::size_t k = 0; k < p.size(); k += 4093) p[k] = static_cast<char>(i * 31 + k);
  if (!p.empty()) p.back() = static_cast<char>(i);
  return p;
}
constexpr std::uint64_t kBigRecords = 40;  // ~19 MiB: three windows

std::string write_big_records(const std::string& dir) {
  Recovered r = recover(dir);
  EXPECT_TRUE(r.status.ok()) << r.status.to_string();
  for (std::uint64_t i = 1; i <= kBigRecords; ++i) EXPECT_TRUE(r.log->append(big_payload(i)).ok());
  EXPECT_TRUE(r.log->sync().ok());
  return dir + "/" + DurableLog::journal_name(1);
}
std::size_t big_offset_of(std::uint64_t i) {
  std::size_t off = kFileHeaderSize;
  for (std::uint64_t k = 1; k < i; ++k) off += record_size(big_payload(k).size());
  return off;
}

TEST(DurableLogLargeFiles, AJournalOfSeveralReadWindowsRecoversEveryRecord) {
  test::TempDir dir;
  const std::string path = write_big_records(dir.path());
  ASSERT_GT(fs::file_size(path), std::size_t{2} * (8u << 20));
  Recovered r = recover(dir.path());
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  expect_records(r, kBigRecords, big_payload);
  EXPECT_FALSE(r.report.torn_tail);
}

TEST(DurableLogLargeFiles, ATornTailPastTheFirstWindowIsCutOff) {
  test::TempDir dir;
  const std::string path = write_big_records(dir.path());
  std::string data = read_all(path);
  data.resize(big_offset_of(kBigRecords) + kRecordHeaderSize + 100);  // the last record cut short
  write_all(path, data);
  Recovered r = recover(dir.path());
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  expect_records(r, kBigRecords - 1, big_payload);
  EXPECT_TRUE(r.report.torn_tail);
  EXPECT_EQ(r.report.tail_offset, big_offset_of(kBigRecords));
  EXPECT_EQ(r.report.tail_bytes_dropped, kRecordHeaderSize + 100);
  EXPECT_EQ(fs::file_size(path), big_offset_of(kBigRecords));
}

TEST(DurableLogLargeFiles, DamagePastTheFirstWindowIsAnErrorAtItsOffset) {
  test::TempDir dir;
  const std::string path = write_big_records(dir.path());
  std::string data = read_all(path);
  const std::uint64_t bad = 29;  // past 8 MiB (a payload of kMaxPayload - 7), valid records follow
  ASSERT_GT(big_offset_of(bad), std::size_t{8} << 20);
  data[big_offset_of(bad) + kRecordHeaderSize + 1] ^= 0x20;
  write_all(path, data);
  Recovered r = recover(dir.path());
  ASSERT_EQ(r.status.code(), Errc::corrupt) << r.status.to_string();
  EXPECT_NE(r.status.message().find("offset " + std::to_string(big_offset_of(bad)) + ", valid records follow"),
            std::string::npos)
      << r.status.message();
  Recovered salvaged = recover(dir.path(), /*salvage=*/true);
  ASSERT_TRUE(salvaged.status.ok()) << salvaged.status.to_string();
  expect_records(salvaged, bad - 1, big_payload);
}

// After a bad record recovery asks whether any valid record follows (torn
// tail or damage?): that scan goes through the window too, past its end.
TEST(DurableLogLargeFiles, GarbageOfSeveralWindowsAfterATornRecordIsATornTail) {
  test::TempDir dir;
  const std::string path = write_big_records(dir.path());
  std::string data = read_all(path);
  const std::size_t cut = big_offset_of(10) + kRecordHeaderSize + 5;
  data.resize(cut);
  for (std::size_t i = 0; i < (std::size_t{17} << 20); ++i) data.push_back(static_cast<char>(i * 131 + 7));
  write_all(path, data);
  Recovered r = recover(dir.path());
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  expect_records(r, 9, big_payload);
  EXPECT_TRUE(r.report.torn_tail);
  EXPECT_EQ(r.report.tail_offset, big_offset_of(10));
  EXPECT_EQ(r.report.tail_bytes_dropped, data.size() - big_offset_of(10));
}

TEST(DurableLogLargeFiles, AValidRecordSeveralWindowsAfterDamageMakesItCorruption) {
  test::TempDir dir;
  const std::string path = write_big_records(dir.path());
  std::string data = read_all(path);
  // Records 3..24 zeroed: the next valid record, 25, starts > 8 MiB later.
  ASSERT_GT(big_offset_of(25) - big_offset_of(3), std::size_t{8} << 20);
  std::fill(data.begin() + static_cast<std::ptrdiff_t>(big_offset_of(3)),
            data.begin() + static_cast<std::ptrdiff_t>(big_offset_of(25)), '\0');
  write_all(path, data);
  Recovered r = recover(dir.path());
  ASSERT_EQ(r.status.code(), Errc::corrupt) << r.status.to_string();
  EXPECT_NE(r.status.message().find("offset " + std::to_string(big_offset_of(3)) + ", valid records follow"),
            std::string::npos)
      << r.status.message();
  EXPECT_EQ(read_all(path), data);  // nothing touched without salvage
}

TEST(DurableLogLargeFiles, ASnapshotOfSeveralReadWindowsRecoversEveryRecord) {
  test::TempDir dir;
  write_big_records(dir.path());
  {
    Recovered r = recover(dir.path());
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    std::uint64_t seq = 0;
    ASSERT_TRUE(r.log->rotate(&seq).ok());
    std::uint64_t k = 0;
    ASSERT_TRUE(r.log->write_snapshot(seq, [&](std::string* p) {
      if (k == kBigRecords) return false;
      *p = big_payload(++k);
      return true;
    }).ok());
  }
  Recovered again = recover(dir.path());
  ASSERT_TRUE(again.status.ok()) << again.status.to_string();
  ASSERT_EQ(again.snapshot.size(), kBigRecords);
  for (std::uint64_t i = 1; i <= kBigRecords; ++i) ASSERT_TRUE(again.snapshot[i - 1] == big_payload(i)) << i;
  EXPECT_EQ(again.report.snapshot_records, kBigRecords);
}

std::vector<std::string> payloads_1_to(std::uint64_t n) {
  std::vector<std::string> v;
  for (std::uint64_t i = 1; i <= n; ++i) v.push_back(payload_of(i));
  return v;
}

// Rotates the journal and writes a snapshot of records 1..n (their payloads).
void snapshot_records(DurableLog& log, std::uint64_t n) {
  std::uint64_t seq = 0;
  ASSERT_TRUE(log.rotate(&seq).ok());
  const auto pl = payloads_1_to(n);
  std::size_t k = 0;
  ASSERT_TRUE(log.write_snapshot(seq, [&](std::string* p) {
    if (k == pl.size()) return false;
    *p = pl[k++];
    return true;
  }).ok());
}

// Snapshot of records 1..S (here: the payloads themselves), then more journal.
TEST(DurableLogSnapshot, SnapshotPlusJournalRecoversAndOldFilesGo) {
  test::TempDir dir;
  write_records(dir.path(), 30);
  Recovered r = recover(dir.path());
  std::uint64_t seq = 0;
  ASSERT_TRUE(r.log->rotate(&seq).ok());
  EXPECT_EQ(seq, 30U);
  for (std::uint64_t i = 31; i <= 45; ++i) ASSERT_TRUE(r.log->append(payload_of(i)).ok());
  ASSERT_TRUE(r.log->sync().ok());
  auto pl = payloads_1_to(30);
  std::size_t k = 0;
  ASSERT_TRUE(r.log->write_snapshot(seq, [&](std::string* p) {
    if (k == pl.size()) return false;
    *p = pl[k++];
    return true;
  }).ok());
  EXPECT_FALSE(fs::exists(dir.file(DurableLog::journal_name(1))));
  EXPECT_TRUE(fs::exists(dir.file(DurableLog::journal_name(31))));
  EXPECT_TRUE(fs::exists(dir.file(DurableLog::snapshot_name(30))));
  EXPECT_EQ(r.log->records_since_snapshot(), 15U);
  r.log.reset();

  Recovered again = recover(dir.path());
  ASSERT_TRUE(again.status.ok()) << again.status.to_string();
  EXPECT_EQ(again.snapshot, pl);
  ASSERT_EQ(again.journal.size(), 15U);
  EXPECT_EQ(again.journal.front().first, 31U);
  EXPECT_EQ(again.report.snapshot_seq, 30U);
  EXPECT_EQ(again.report.last_seq, 45U);
}

TEST(DurableLogSnapshot, CrashBeforeTheSnapshotIsRenamedLosesNothing) {
  test::TempDir dir;
  write_records(dir.path(), 10);
  Recovered r = recover(dir.path());
  std::uint64_t seq = 0;
  ASSERT_TRUE(r.log->rotate(&seq).ok());
  ASSERT_TRUE(r.log->append(payload_of(11)).ok());
  ASSERT_TRUE(r.log->sync().ok());
  r.log.reset();
  write_all(dir.file(DurableLog::snapshot_name(10) + ".tmp"), "half a snapshot");
  Recovered again = recover(dir.path());
  ASSERT_TRUE(again.status.ok()) << again.status.to_string();
  expect_records(again, 11);  // both journals replayed, no snapshot
  EXPECT_FALSE(fs::exists(dir.file(DurableLog::snapshot_name(10) + ".tmp")));
  EXPECT_NE(std::find(again.report.notes.begin(), again.report.notes.end(),
                      "removed unfinished snapshot " + DurableLog::snapshot_name(10) + ".tmp"),
            again.report.notes.end());
  // A directory of such a name is not removed, and not said to be.
  again.log.reset();
  fs::create_directory(dir.file("x.tmp"));
  Recovered third = recover(dir.path());
  ASSERT_TRUE(third.status.ok()) << third.status.to_string();
  EXPECT_TRUE(fs::exists(dir.file("x.tmp")));
  for (const std::string& n : third.report.notes) EXPECT_EQ(n.find("removed unfinished snapshot x.tmp"), std::string::npos);
}

TEST(DurableLogSnapshot, DamagedSnapshotIsAnErrorUnlessSalvaging) {
  test::TempDir dir;
  write_records(dir.path(), 10);
  {
    Recovered r = recover(dir.path());
    snapshot_records(*r.log, 10);
  }
  const std::string snap = dir.file(DurableLog::snapshot_name(10));
  std::string data = read_all(snap);
  data[data.size() - 3] ^= 0x20;  // inside the last record
  write_all(snap, data);
  EXPECT_EQ(recover(dir.path()).status.code(), Errc::corrupt);
  Recovered s = recover(dir.path(), true);
  ASSERT_TRUE(s.status.ok()) << s.status.to_string();
  EXPECT_EQ(s.snapshot.size(), 9U);
  EXPECT_TRUE(s.report.salvaged);
}

TEST(DurableLogCorruption, MissingJournalInTheMiddleIsAnError) {
  test::TempDir dir;
  write_records(dir.path(), 10);
  {
    Recovered r = recover(dir.path());
    std::uint64_t seq = 0;
    ASSERT_TRUE(r.log->rotate(&seq).ok());  // wal-11
    for (int i = 11; i <= 20; ++i) ASSERT_TRUE(r.log->append(payload_of(i)).ok());
    ASSERT_TRUE(r.log->rotate(&seq).ok());  // wal-21
    for (int i = 21; i <= 25; ++i) ASSERT_TRUE(r.log->append(payload_of(i)).ok());
    ASSERT_TRUE(r.log->sync().ok());
  }
  fs::remove(dir.file(DurableLog::journal_name(11)));
  Recovered r = recover(dir.path());
  EXPECT_EQ(r.status.code(), Errc::corrupt) << r.status.to_string();
  EXPECT_NE(r.status.message().find("missing"), std::string::npos) << r.status.message();
}

// The journal after the newest snapshot was made before it: deleted, or
// emptied to nothing (which a crash at rotation cannot do to it), the
// records acknowledged after the snapshot are gone, and recovery says so.
TEST(DurableLogCorruption, TheJournalAfterTheSnapshotMissingOrEmptiedIsAnError) {
  for (const bool remove : {true, false}) {
    SCOPED_TRACE(remove ? "removed" : "emptied");
    test::TempDir dir;
    write_records(dir.path(), 10);
    {
      Recovered r = recover(dir.path());
      std::uint64_t seq = 0;
      ASSERT_TRUE(r.log->rotate(&seq).ok());  // wal-11, then records 11..15 in it
      for (int i = 11; i <= 15; ++i) ASSERT_TRUE(r.log->append(payload_of(i)).ok());
      ASSERT_TRUE(r.log->sync().ok());
      auto pl = payloads_1_to(10);
      std::size_t k = 0;
      ASSERT_TRUE(r.log->write_snapshot(seq, [&](std::string* p) {  // snap-10 (rotate would start wal-16)
        if (k == pl.size()) return false;
        *p = pl[k++];
        return true;
      }).ok());
    }
    const std::string wal = dir.file(DurableLog::journal_name(11));
    if (remove) fs::remove(wal);
    else write_all(wal, "");
    Recovered r = recover(dir.path());
    EXPECT_EQ(r.status.code(), Errc::corrupt) << r.status.to_string();
    EXPECT_NE(r.status.message().find(DurableLog::journal_name(11)), std::string::npos) << r.status.message();
    EXPECT_NE(r.status.message().find(remove ? "is missing" : "emptied"), std::string::npos) << r.status.message();
    r.log.reset();
    Recovered s = recover(dir.path(), true);  // salvage goes on from the snapshot
    ASSERT_TRUE(s.status.ok()) << s.status.to_string();
    EXPECT_TRUE(s.report.salvaged);
    EXPECT_EQ(s.snapshot.size(), 10U);
    EXPECT_TRUE(s.journal.empty());
    s.log.reset();
    Recovered again = recover(dir.path());  // and the store is whole again
    EXPECT_TRUE(again.status.ok()) << again.status.to_string();
  }
}

// The normal state right after a compaction: snap-S and a wal-(S+1) that
// holds no record yet. With the snapshot lost, recovery used to remove that
// journal and start empty, quietly; it must say records 1..S are missing.
TEST(DurableLogCorruption, ALostSnapshotBeforeAnEmptyJournalIsAnError) {
  test::TempDir dir;
  write_records(dir.path(), 10);
  {
    Recovered r = recover(dir.path());
    snapshot_records(*r.log, 10);  // snap-10 and wal-11, no record in it
  }
  fs::remove(dir.file(DurableLog::snapshot_name(10)));
  Recovered r = recover(dir.path());
  EXPECT_EQ(r.status.code(), Errc::corrupt) << r.status.to_string();
  EXPECT_NE(r.status.message().find("records 1..10 are missing"), std::string::npos) << r.status.message();
  EXPECT_TRUE(fs::exists(dir.file(DurableLog::journal_name(11))));  // the evidence stays
  r.log.reset();
  Recovered s = recover(dir.path(), true);
  ASSERT_TRUE(s.status.ok()) << s.status.to_string();
  EXPECT_TRUE(s.report.salvaged);
  EXPECT_TRUE(s.snapshot.empty());
  EXPECT_TRUE(s.journal.empty());
}

TEST(DurableLogCorruption, DamageInAnOlderJournalIsAnErrorEvenAtItsEnd) {
  test::TempDir dir;
  write_records(dir.path(), 10);
  {
    Recovered r = recover(dir.path());
    std::uint64_t seq = 0;
    ASSERT_TRUE(r.log->rotate(&seq).ok());
    ASSERT_TRUE(r.log->append(payload_of(11)).ok());
    ASSERT_TRUE(r.log->sync().ok());
  }
  const std::string old = dir.file(DurableLog::journal_name(1));
  std::string data = read_all(old);
  data.resize(data.size() - 4);  // its last record cut: it was synced before rotation
  write_all(old, data);
  EXPECT_EQ(recover(dir.path()).status.code(), Errc::corrupt);
}

// Bulk appends with one fsync: the rate the gateway's bulk load relies on.
TEST(DurableLogThroughput, BatchedAppendThenOneSync) {
  test::TempDir dir;
  Recovered r = recover(dir.path());
  const int n = test::kSlowBuild ? 100000 : 1000000;
  // ~64-byte payloads: the size of an add record with a short rule.
  std::vector<std::string> pl;
  pl.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    std::string p = "add 10.0." + std::to_string(i / 256 % 256) + "." + std::to_string(i % 256);
    p.resize(64, ' ');
    pl.push_back(std::move(p));
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& p : pl) ASSERT_TRUE(r.log->append(p).ok());
  ASSERT_TRUE(r.log->sync().ok());
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ perf     ] %d records (64 B payload, %zu B framed) appended + 1 fdatasync in "
              "%.3f s = %.0f records/s\n",
              n, record_size(64), s, n / s);
  RecordProperty("records_per_second", static_cast<int>(n / s));
  r.log.reset();
  const auto t1 = std::chrono::steady_clock::now();
  Recovered again = recover(dir.path());
  const double rs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  std::printf("[ perf     ] recovery scan of %d records: %.3f s\n", n, rs);
  ASSERT_EQ(again.journal.size(), static_cast<std::size_t>(n));
}

}  // namespace
}  // namespace cg::store
