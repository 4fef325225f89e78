// Crash recovery: a child process bulk-loads rules in synced batches and
// acknowledges each batch to the parent over a pipe; the parent SIGKILLs it
// part-way, recovers the state directory and checks that every acknowledged
// rule is present, nothing that was never written is, and what is present is
// a prefix of the load order (the journal is sequential).
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <random>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "cuckoogate/store/rule_store.hpp"
#include "test_util.hpp"

namespace cg::store {
namespace {

std::string rule_key(int i) {
  char b[32];
  std::snprintf(b, sizeof b, "rule/%08d", i);
  return b;
}
std::string rule_text(int i) { return "ip 10." + std::to_string(i) + " # bulk"; }

[[noreturn]] void child_load(const std::string& dir, int fd, int total, int batch) {
  RuleStore::Options o;
  o.state_dir = dir;
  std::unique_ptr<RuleStore> s;
  if (!RuleStore::open(o, &s).ok()) _exit(2);
  std::vector<std::string> keys, texts;
  std::vector<RuleStore::AddRequest> reqs;
  std::vector<Errc> res;
  for (int b = 0; b * batch < total; ++b) {
    keys.clear();
    texts.clear();
    reqs.clear();
    for (int i = b * batch; i < (b + 1) * batch; ++i) {
      keys.push_back(rule_key(i));
      texts.push_back(rule_text(i));
    }
    for (std::size_t j = 0; j < keys.size(); ++j) reqs.push_back({keys[j], texts[j], 0});
    if (!s->add_batch(reqs, &res).ok()) _exit(3);
    const int acked = (b + 1) * batch;  // the "OK" for everything up to here
    if (::write(fd, &acked, sizeof acked) != sizeof acked) _exit(4);
  }
  _exit(0);
}

// Loads kTotal rules in batches of kBatch in a child, kills it after
// kill_after acknowledgements and up to max_wait_us more, and checks what a
// restart recovers.
void crash_and_recover(int kTotal, int kBatch, int kill_after, useconds_t max_wait_us, std::mt19937_64& rng) {
  test::TempDir dir;

  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    child_load(dir.path(), fds[1], kTotal, kBatch);
  }
  ::close(fds[1]);
  int acked = 0, msgs = 0, v = 0;
  while (msgs < kill_after && ::read(fds[0], &v, sizeof v) == sizeof v) {
    acked = v;
    ++msgs;
  }
  // Land the kill anywhere in the next batch (encoding, write, fdatasync).
  ::usleep(static_cast<useconds_t>(rng() % max_wait_us));
  ::kill(pid, SIGKILL);
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  // Acks already in the pipe were sent before the kill: the client got them.
  while (::read(fds[0], &v, sizeof v) == sizeof v) acked = v;
  ::close(fds[0]);
  std::printf("[ crash    ] child %s after %d acknowledged rules\n",
              WIFSIGNALED(wstatus) ? "killed" : "finished", acked);
  ASSERT_TRUE(WIFSIGNALED(wstatus) || (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0))
      << "child failed with status " << wstatus;

  RuleStore::Options o;
  o.state_dir = dir.path();
  std::unique_ptr<RuleStore> s;
  RecoveryReport rep;
  const Status st = RuleStore::open(o, &s, &rep);
  ASSERT_TRUE(st.ok()) << st.to_string();
  for (const auto& n : rep.notes) std::printf("[ recovery ] %s\n", n.c_str());
  // Present set == {0 .. present-1} with acked <= present <= kTotal.
  int present = 0;
  for (auto c = s->list(); c.next(); ++present) {
    ASSERT_EQ(c.key(), rule_key(present)) << "recovered rules are not a prefix of the load";
    ASSERT_EQ(c.value().text, rule_text(present));
  }
  std::printf("[ crash    ] recovered %d rules (acknowledged %d)\n", present, acked);
  EXPECT_GE(present, acked);
  EXPECT_LE(present, kTotal);
  EXPECT_EQ(s->size(), static_cast<std::size_t>(present));

  // The store keeps working after recovery, and a second restart agrees.
  ASSERT_TRUE(s->add("after/crash", "x").ok());
  s.reset();
  ASSERT_TRUE(RuleStore::open(o, &s).ok());
  EXPECT_EQ(s->size(), static_cast<std::size_t>(present) + 1);
}

TEST(RuleStoreCrash, SigkillDuringBulkLoadLosesNoAcknowledgedRule) {
  std::mt19937_64 rng(test::test_seed());
  // Kill after 20-119 acknowledgements (or at the end, if it is faster).
  const int kill_after = 20 + static_cast<int>(rng() % 100);
  crash_and_recover(200'000, 1000, kill_after, 3000, rng);
}

// Batches large enough that the journal's fdatasync runs on a thread of its
// own while the arena faults in the batch's node memory (RuleStore::add_many):
// the kill lands in either, or in the inserts after them.
TEST(RuleStoreCrash, SigkillDuringLargeBatchesWhoseSyncOverlapsTheNodeMemory) {
  std::mt19937_64 rng(test::test_seed());
  const int kill_after = 1 + static_cast<int>(rng() % 4);
  crash_and_recover(400'000, 50'000, kill_after, 150'000, rng);
}

}  // namespace
}  // namespace cg::store
