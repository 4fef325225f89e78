// One blocklist for many gateways through Redis (issue 14, docs/sync.md):
// gateways share a private redis-server (Unix socket, AOF) and each other's
// changes; what other tools append reaches them; a killed gateway resumes;
// Redis going away stops writes but never filtering; a trimmed stream is
// rebuilt from the snapshot.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gateway_test_env.hpp"
#include "packet_builder.hpp"
#include "pcap_file.hpp"
#include "redis_server.hpp"
#include "subprocess.hpp"
#include "test_certs.hpp"

namespace cg::test {
namespace {

using namespace std::chrono_literals;

// `stats` as text values (the sync lines are not all numbers).
std::map<std::string, std::string> stats(CtlClient& c) {
  std::map<std::string, std::string> m;
  for (const std::string& l : c.ask_multi("stats")) {
    const auto sp = l.find(' ');
    if (sp != std::string::npos) m[l.substr(0, sp)] = l.substr(sp + 1);
  }
  return m;
}
uint64_t num(const std::map<std::string, std::string>& m, const std::string& k) {
  const auto it = m.find(k);
  return it == m.end() ? 0 : std::stoull(it->second);
}

template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = 10s) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

const Bytes& target_frame() {
  static const Bytes f = Packet().ipv4("192.0.2.99", "10.1.1.1").udp(4000, 53).payload("target").frame();
  return f;
}

// A gateway: a looping paced replay (traffic: the target's packets) or a
// `run` on net_null ports with a state directory.
class Gw {
 public:
  static std::unique_ptr<Gw> replay(const std::string& name, const std::string& redis_url) {
    const std::string dir = GatewayEnv::dir();
    write_pcap(dir + "/" + name + "-in.pcap", repeated({target_frame()}, 100));  // x100: fewer passes
    std::ofstream(dir + "/" + name + ".rules") << "src 198.51.100.200\n";
    auto g = std::unique_ptr<Gw>(new Gw(dir + "/" + name + ".sock"));
    g->proc_ = std::make_unique<Process>(
        // 20 s of traffic: enough for any test here (the replay ends after it).
        std::vector<std::string>{GatewayEnv::gateway(), "replay", "--rules", dir + "/" + name + ".rules", "--in",
                                 dir + "/" + name + "-in.pcap", "--out", "/dev/null", "--ctl", g->sock_, "--loop",
                                 "400", "--pps", "2000", "--redis", redis_url, "--gateway-id", name},
        dir + "/" + name + ".out", dir + "/" + name + ".err");
    g->up_ = wait_for_socket(g->sock_, 30s);
    return g;
  }
  static std::unique_ptr<Gw> run(const std::string& name, const std::string& redis_url,
                                 const std::string& state, const std::string& config = "") {
    const std::string dir = GatewayEnv::dir();
    auto g = std::unique_ptr<Gw>(new Gw(dir + "/" + name + ".sock"));
    std::vector<std::string> argv = {GatewayEnv::gateway(), "run", "--ctl", g->sock_, "--state-dir", state,
                                     "--redis", redis_url, "--gateway-id", name};
    if (!config.empty()) argv.insert(argv.end(), {"--config", config});
    argv.insert(argv.end(), {"--", "--no-huge", "--no-pci", "--no-shconf", "-m", "512", "--vdev=net_null0",
                             "--vdev=net_null1", "--log-level=lib.eal:error"});
    g->proc_ = std::make_unique<Process>(argv, dir + "/" + name + ".out", dir + "/" + name + ".err");
    g->up_ = wait_for_socket(g->sock_, 60s);
    return g;
  }
  bool up() const { return up_; }
  CtlClient& ctl() {
    if (!ctl_) ctl_ = std::make_unique<CtlClient>(sock_);
    return *ctl_;
  }
  Process& proc() { return *proc_; }
  std::string err() { return proc_->err(); }
  std::vector<std::string> list() { return ctl().ask_multi("list"); }
  bool has(const std::string& rule) { return ctl().ask("check " + rule) == "OK present"; }

 private:
  explicit Gw(std::string sock) : sock_(std::move(sock)) {}
  std::string sock_;
  std::unique_ptr<Process> proc_;
  std::unique_ptr<CtlClient> ctl_;
  bool up_ = false;
};

class SyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = GatewayEnv::dir() + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
    redis_ = std::make_unique<RedisServer>(dir_);
  }
  // A [sync] config with offline_writes = "queue" (no snapshots).
  std::string queue_config() {
    const std::string path = dir_ + "/queue.toml";
    std::ofstream(path) << "[sync]\nredis = \"" << redis_->url()
                        << "\"\noffline_writes = \"queue\"\nsnapshot_interval = 0\n";
    return path;
  }
  // While Redis is down: `g` queues an add of each rule, then dies (SIGKILL)
  // before Redis is back up. *head: the outbox head its journal then holds
  // (the first queued write's token). Use under ASSERT_NO_FATAL_FAILURE.
  void queue_then_crash(std::unique_ptr<Gw>& g, const std::vector<std::string>& rules, std::string* head) {
    redis_->stop();
    ASSERT_TRUE(eventually([&] { return stats(g->ctl()).at("sync.connected") == "false"; }));
    EXPECT_EQ(stats(g->ctl()).at("sync.outbox_head"), "-");
    for (const std::string& r : rules) ASSERT_EQ(g->ctl().ask("add " + r), "OK added");
    *head = stats(g->ctl()).at("sync.outbox_head");
    ASSERT_NE(*head, "-");
    g->proc().signal(SIGKILL);
    g->proc().wait(10s);
    g.reset();
    redis_->start();
  }
  std::string dir_;
  std::unique_ptr<RedisServer> redis_;
};

TEST_F(SyncTest, ARuleAddedThroughOneGatewayDropsOnTheOtherAndDelLikewise) {
  auto a = Gw::replay("sa", redis_->url());
  auto b = Gw::replay("sb", redis_->url());
  ASSERT_TRUE(a->up()) << a->err();
  ASSERT_TRUE(b->up()) << b->err();
  ASSERT_TRUE(eventually([&] { return num(stats(b->ctl()), "rx") > 100; })) << b->err();
  EXPECT_EQ(num(stats(b->ctl()), "dropped_by_kind.src"), 0u);

  EXPECT_EQ(a->ctl().ask("add src 192.0.2.99"), "OK added");
  // B drops the target's traffic: the change came through Redis.
  ASSERT_TRUE(eventually([&] { return num(stats(b->ctl()), "dropped_by_kind.src") > 20; })) << b->err();
  EXPECT_TRUE(b->has("src 192.0.2.99"));

  // del through B: A lets it pass again.
  EXPECT_EQ(b->ctl().ask("del src 192.0.2.99"), "OK deleted");
  ASSERT_TRUE(eventually([&] { return !a->has("src 192.0.2.99"); }));
  ASSERT_TRUE(a->ctl().wait_bursts_in_flight());
  const uint64_t dropped = num(stats(a->ctl()), "dropped_by_kind.src");
  const uint64_t passed = num(stats(a->ctl()), "passed");
  ASSERT_TRUE(eventually([&] { return num(stats(a->ctl()), "passed") > passed + 100; }));
  EXPECT_EQ(num(stats(a->ctl()), "dropped_by_kind.src"), dropped);
  // An answer is the outcome at the change's place in the log.
  EXPECT_EQ(a->ctl().ask("del src 192.0.2.99").rfind("ERR 404", 0), 0u);

  // TTL: the expiry is absolute, so both gateways drop the rule together.
  EXPECT_EQ(a->ctl().ask("add host ttl.example ttl=2"), "OK added");
  ASSERT_TRUE(eventually([&] { return b->has("host ttl.example"); }));
  ASSERT_TRUE(eventually([&] { return !a->has("host ttl.example"); }, 5s));
  const auto gone_a = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually([&] { return !b->has("host ttl.example"); }, 5s));
  EXPECT_LT(std::chrono::steady_clock::now() - gone_a, 300ms);
  const std::string xr = redis_->cli({"XRANGE", "cuckoogate:rules", "-", "+"});
  EXPECT_NE(xr.find("ttl"), std::string::npos) << xr;
  EXPECT_NE(xr.find("sa"), std::string::npos) << xr;  // the origin field

  // batch and flush travel too.
  std::string first;
  const auto batch = a->ctl().ask_multi("batch\nadd ip 10.7.7.7\nadd host batch.example\n.", &first);
  EXPECT_EQ(first, "OK 2");
  ASSERT_TRUE(eventually([&] { return b->has("ip 10.7.7.7") && b->has("host batch.example"); }));
  EXPECT_EQ(b->ctl().ask("flush host"), "OK flushed 1");
  ASSERT_TRUE(eventually([&] { return !a->has("host batch.example"); }));
  EXPECT_EQ(a->list(), b->list());
}

TEST_F(SyncTest, RedisCliAppendsReachBothGatewaysAndGarbageIsCountedAndSkipped) {
  auto a = Gw::replay("ca", redis_->url());
  auto b = Gw::replay("cb", redis_->url());
  ASSERT_TRUE(a->up()) << a->err();
  ASSERT_TRUE(b->up()) << b->err();
  redis_->cli({"XADD", "cuckoogate:rules", "*", "op", "add", "rule", "host X.Example"});
  redis_->cli({"XADD", "cuckoogate:rules", "*", "op", "add", "rule", "host"});
  redis_->cli({"XADD", "cuckoogate:rules", "*", "op", "explode"});
  redis_->cli({"XADD", "cuckoogate:rules", "*", "op", "add", "rule", "src 192.0.2.99"});
  for (Gw* g : {a.get(), b.get()}) {
    ASSERT_TRUE(eventually([&] { return g->has("src 192.0.2.99"); })) << g->err();
    EXPECT_TRUE(g->has("host x.example"));
    const auto s = stats(g->ctl());
    EXPECT_EQ(num(s, "sync.garbage"), 2u);
    // The two good redis-cli entries and both gateways' start-up `load` (their
    // --rules file); the two garbage ones are skipped, not applied.
    EXPECT_EQ(num(s, "sync.applied"), 4u);
    EXPECT_EQ(s.at("sync.connected"), "true");
    EXPECT_NE(s.at("sync.last_error").find("skipped"), std::string::npos);
    ASSERT_TRUE(eventually([&] { return num(stats(g->ctl()), "dropped_by_kind.src") > 20; }));
  }
  EXPECT_EQ(a->list(), b->list());
  // info shows the same state.
  bool found = false;
  for (const std::string& l : a->ctl().ask_multi("info")) found = found || l == "sync.gateway_id ca";
  EXPECT_TRUE(found);
}

std::string rule_n(int i) { return "src 10.9." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1); }

TEST_F(SyncTest, AKilledGatewayRestartsWithExactlyTheOthersSet) {
  auto a = Gw::run("da", redis_->url(), dir_ + "/state-a");
  auto b = Gw::run("db", redis_->url(), dir_ + "/state-b");
  ASSERT_TRUE(a->up()) << a->err();
  ASSERT_TRUE(b->up()) << b->err();
  for (int i = 0; i < 20; ++i) ASSERT_EQ(a->ctl().ask("add " + rule_n(i)), "OK added");
  ASSERT_TRUE(eventually([&] { return b->has(rule_n(19)); }));
  b->proc().signal(SIGKILL);
  b->proc().wait(10s);
  b.reset();
  // Meanwhile: adds, deletes, one through redis-cli.
  for (int i = 20; i < 40; ++i) ASSERT_EQ(a->ctl().ask("add " + rule_n(i)), "OK added");
  for (int i = 0; i < 10; ++i) ASSERT_EQ(a->ctl().ask("del " + rule_n(i)), "OK deleted");
  redis_->cli({"XADD", "cuckoogate:rules", "*", "op", "add", "rule", "host late.example"});
  ASSERT_TRUE(eventually([&] { return a->has("host late.example"); }));
  auto b2 = Gw::run("db2", redis_->url(), dir_ + "/state-b");
  ASSERT_TRUE(b2->up()) << b2->err();
  ASSERT_TRUE(eventually([&] { return b2->has("host late.example"); })) << b2->err();
  EXPECT_EQ(b2->list(), a->list());
  EXPECT_EQ(b2->list().size(), 31u);
  // It resumed after its recorded ID: only what it missed was read.
  EXPECT_EQ(num(stats(b2->ctl()), "sync.applied"), 31u);
  EXPECT_EQ(stats(b2->ctl()).at("sync.last_applied_id"), stats(a->ctl()).at("sync.last_applied_id"));
}

// A batch holding a rule with a TTL, read by a gateway after that TTL ran
// out (catching up after a restart): the rule must not be there, and its
// absence must not fail the batch. It did (the expired add became a strict
// del of an absent rule): the batch's other rule, acknowledged by its
// writer, was never added on the gateway that caught up.
TEST_F(SyncTest, ABatchWhoseTtlRuleExpiredBeforeItWasReadStillAppliesItsOtherRules) {
  auto a = Gw::run("ea", redis_->url(), dir_ + "/state-a");
  ASSERT_TRUE(a->up()) << a->err();
  std::string first;
  a->ctl().ask_multi("batch\nadd host brief.example ttl=1\nadd host lasting.example\n.", &first);
  ASSERT_EQ(first, "OK 2") << first;
  std::this_thread::sleep_for(1500ms);  // brief.example expires before B ever reads the batch
  auto b = Gw::run("eb", redis_->url(), dir_ + "/state-b");
  ASSERT_TRUE(b->up()) << b->err();
  ASSERT_TRUE(eventually([&] { return stats(b->ctl()).at("sync.last_applied_id") == stats(a->ctl()).at("sync.last_applied_id"); }));
  EXPECT_TRUE(b->has("host lasting.example"));
  EXPECT_FALSE(b->has("host brief.example"));
  EXPECT_EQ(b->list(), a->list());
}

// The recorded position is a place in one stream: a state directory synced
// with cuckoogate:rules, restarted on another stream, reads that one from
// its start (it silently skipped its entries up to the old position before).
TEST_F(SyncTest, AStateDirectoryMovedToAnotherStreamReadsItFromItsStart) {
  auto a = Gw::run("fa", redis_->url(), dir_ + "/state-a");
  ASSERT_TRUE(a->up()) << a->err();
  ASSERT_EQ(a->ctl().ask("add host first.example"), "OK added");
  a->proc().signal(SIGTERM);
  EXPECT_EQ(a->proc().wait(30s), 0) << a->err();
  a.reset();
  // Another stream, whose entries have IDs below A's position.
  redis_->cli({"XADD", "other:rules", "1000-0", "op", "add", "rule", "host old1.example"});
  const std::string config = dir_ + "/other.toml";
  std::ofstream(config) << "[sync]\nredis = \"" << redis_->url() << "\"\nstream = \"other:rules\"\n";
  {  // first started on the new stream while Redis is down, stopped before it is back
    redis_->stop();
    auto down = Gw::run("fa1", redis_->url(), dir_ + "/state-a", config);
    ASSERT_TRUE(down->up()) << down->err();
    down->proc().signal(SIGTERM);
    EXPECT_EQ(down->proc().wait(30s), 0) << down->err();
    redis_->start();
  }
  auto a2 = Gw::run("fa2", redis_->url(), dir_ + "/state-a", config);
  ASSERT_TRUE(a2->up()) << a2->err();
  ASSERT_TRUE(eventually([&] { return a2->has("host old1.example"); })) << a2->err();
  EXPECT_TRUE(a2->has("host first.example"));  // the rules stay
  // (The warning was the first start's, the one with Redis down: that start
  // moved the position, so this one reads other:rules from its start too.)
}

// The bytes of the gateway's journal files (0 before the first): they grow
// once per catch-up batch, at its journal sync.
std::uintmax_t journal_bytes(const std::string& state) {
  std::uintmax_t n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(state, ec))
    if (e.path().extension() == ".cgj") n += std::filesystem::file_size(e.path(), ec);
  return n;
}

// A catch-up is applied in batches of 50 000 entries, each in rule-key order
// with one journal sync and the batch's last ID as the mark
// (Blocklist::apply_group): a gateway killed while catching up (SIGKILL, once
// just after a batch reached its journal, once a moment later) restarts from
// the last batch it recorded and ends with exactly the writer's set.
TEST_F(SyncTest, AGatewayKilledDuringACatchUpResumesToExactlyTheWritersSet) {
  // The writer's log: adds (some expiring in an hour), dels of earlier rules,
  // re-adds, and adds followed by their del a few entries later (inside one
  // batch): about 240 000 entries, piped into Redis with redis-cli --pipe.
  std::string resp;
  std::map<std::string, bool> want;  // rule -> expiring
  const std::string expiry = std::to_string(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count() + 3'600'000);
  std::size_t entries = 0;
  auto xadd = [&](std::initializer_list<std::string> fields) {
    resp += "*" + std::to_string(3 + fields.size()) + "\r\n$4\r\nXADD\r\n$16\r\ncuckoogate:rules\r\n$1\r\n*\r\n";
    for (const std::string& f : fields) resp += "$" + std::to_string(f.size()) + "\r\n" + f + "\r\n";
    ++entries;
  };
  auto rule = [](int i) {
    return "src 10." + std::to_string(i >> 16) + "." + std::to_string((i >> 8) & 255) + "." + std::to_string(i & 255);
  };
  auto add = [&](int i, bool expiring) {
    if (expiring) xadd({"op", "add", "rule", rule(i), "ttl", expiry});
    else xadd({"op", "add", "rule", rule(i)});
    want[rule(i)] = expiring;
  };
  auto del = [&](int i) {
    xadd({"op", "del", "rule", rule(i)});
    want.erase(rule(i));
  };
  for (int i = 0; i < 150000; ++i) {
    add(i, i % 7 == 0);
    if (i % 3 == 0) del(i / 2);
    if (i % 11 == 0) add(i / 2, false);
    if (i % 13 == 0) {
      add(200000 + i, false);
      del(200000 + i);
    }
  }
  const std::string file = dir_ + "/backlog.resp";
  std::ofstream(file, std::ios::binary) << resp;
  ASSERT_EQ(std::system(("redis-cli -s '" + redis_->socket() + "' --pipe < '" + file + "' > /dev/null").c_str()), 0);
  std::string last = redis_->cli({"XREVRANGE", "cuckoogate:rules", "+", "-", "COUNT", "1"});
  last = last.substr(0, last.find('\n'));  // the last entry's ID
  const std::string state = dir_ + "/state-k";
  for (int kill = 0; kill < 2; ++kill) {
    auto b = Gw::run("kb" + std::to_string(kill), redis_->url(), state);
    ASSERT_TRUE(b->up()) << b->err();
    // Killed once the journal has grown by a batch (the next one is being
    // read or applied), the second time a moment later.
    const std::uintmax_t before = journal_bytes(state);
    ASSERT_TRUE(eventually([&] { return journal_bytes(state) > before + 4096; }, 60s)) << b->err();
    if (kill == 1) std::this_thread::sleep_for(15ms);
    b->proc().signal(SIGKILL);
    b->proc().wait(10s);
  }
  auto b = Gw::run("kb2", redis_->url(), state);
  ASSERT_TRUE(b->up()) << b->err();
  ASSERT_TRUE(eventually([&] { return stats(b->ctl()).at("sync.last_applied_id") == last; }, 120s))
      << b->err() << last;
  std::map<std::string, bool> got;
  for (const std::string& l : b->list()) {
    const auto t = l.find(" ttl=");
    got[l.substr(0, t)] = t != std::string::npos;
  }
  EXPECT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want);
  // The restarts resumed after their recorded IDs: at least the first batch
  // (recorded before the first kill) was not read again.
  EXPECT_LE(num(stats(b->ctl()), "sync.applied"), entries - 50000);
  EXPECT_GT(entries, 200000u);
}

TEST_F(SyncTest, RedisDownKeepsFilteringRefusesWritesAndConvergesWhenBack) {
  auto a = Gw::replay("oa", redis_->url());
  auto b = Gw::replay("ob", redis_->url());
  ASSERT_TRUE(a->up()) << a->err();
  ASSERT_TRUE(b->up()) << b->err();
  EXPECT_EQ(a->ctl().ask("add src 192.0.2.99"), "OK added");
  ASSERT_TRUE(eventually([&] { return num(stats(b->ctl()), "dropped_by_kind.src") > 10; }));
  redis_->stop();  // SIGKILL
  for (Gw* g : {a.get(), b.get()})
    ASSERT_TRUE(eventually([&] { return stats(g->ctl()).at("sync.connected") == "false"; }));
  // Filtering goes on.
  for (Gw* g : {a.get(), b.get()}) {
    const uint64_t d = num(stats(g->ctl()), "dropped_by_kind.src");
    ASSERT_TRUE(eventually([&] { return num(stats(g->ctl()), "dropped_by_kind.src") > d + 20; }));
  }
  // Writes are refused with a clear error, reads still served.
  const std::string r = a->ctl().ask("add host down.example");
  EXPECT_EQ(r.rfind("ERR 503 rule not added: the shared blocklist is unavailable", 0), 0u) << r;
  EXPECT_EQ(a->ctl().ask("del src 192.0.2.99").rfind("ERR 503", 0), 0u);
  EXPECT_TRUE(b->has("src 192.0.2.99"));
  EXPECT_FALSE(a->has("host down.example"));
  EXPECT_GE(num(stats(a->ctl()), "sync.publish_failures"), 2u);
  // Redis back (AOF): both reconnect and converge.
  redis_->start();
  for (Gw* g : {a.get(), b.get()})
    ASSERT_TRUE(eventually([&] { return stats(g->ctl()).at("sync.connected") == "true"; }, 15s)) << g->err();
  EXPECT_EQ(b->ctl().ask("add host back.example"), "OK added");
  ASSERT_TRUE(eventually([&] { return a->has("host back.example"); }));
  EXPECT_TRUE(a->has("src 192.0.2.99"));  // nothing acknowledged was lost
  EXPECT_EQ(a->list(), b->list());
  EXPECT_GE(num(stats(a->ctl()), "sync.reconnects"), 1u);
}

// offline_writes = "queue": with Redis down, writes are applied locally and
// kept in the journal (a SIGKILL keeps them), then appended in order when
// Redis is back; every gateway converges and each queued write is in the
// stream exactly once.
TEST_F(SyncTest, QueuedOfflineWritesSurviveACrashAndReachEveryGatewayOnce) {
  auto a = Gw::run("qa", redis_->url(), dir_ + "/state-a", queue_config());
  auto b = Gw::run("qb", redis_->url(), dir_ + "/state-b", queue_config());
  ASSERT_TRUE(a->up()) << a->err();
  ASSERT_TRUE(b->up()) << b->err();
  ASSERT_EQ(a->ctl().ask("add " + rule_n(0)), "OK added");
  ASSERT_EQ(a->ctl().ask("add " + rule_n(1)), "OK added");
  ASSERT_TRUE(eventually([&] { return b->has(rule_n(1)); }));
  redis_->stop();  // SIGKILL
  for (Gw* g : {a.get(), b.get()})
    ASSERT_TRUE(eventually([&] { return stats(g->ctl()).at("sync.connected") == "false"; }));
  // Accepted and applied here at once; in the journal, not yet in Redis.
  EXPECT_EQ(a->ctl().ask("add " + rule_n(2)), "OK added");
  EXPECT_EQ(a->ctl().ask("add " + rule_n(3)), "OK added");
  EXPECT_EQ(a->ctl().ask("del " + rule_n(0)), "OK deleted");
  EXPECT_EQ(a->ctl().ask("flush host"), "OK flushed 0");
  EXPECT_TRUE(a->has(rule_n(2)));
  EXPECT_FALSE(a->has(rule_n(0)));
  // A batch is all or nothing here (queued as its two changes); one that
  // fails here is not queued at all.
  a->ctl().send("batch\nadd " + rule_n(5) + "\nadd " + rule_n(6) + "\n.\n");
  EXPECT_EQ(a->ctl().line(), "OK 2");
  EXPECT_EQ(a->ctl().line(), "added");
  EXPECT_EQ(a->ctl().line(), "added");
  EXPECT_EQ(a->ctl().line(), ".");
  a->ctl().send("batch\nadd host never.example\ndel " + rule_n(9) + "\n.\n");
  const std::string bad = a->ctl().line();
  EXPECT_EQ(bad.rfind("ERR 404", 0), 0u) << bad;
  // A conflict: B deletes what A had added before the outage.
  EXPECT_EQ(b->ctl().ask("del " + rule_n(1)), "OK deleted");
  EXPECT_EQ(b->ctl().ask("add " + rule_n(4)), "OK added");
  EXPECT_EQ(num(stats(a->ctl()), "sync.queued"), 6u);
  EXPECT_EQ(num(stats(b->ctl()), "sync.queued"), 2u);
  // A crashes with its queue; it comes back with it (Redis still down).
  a->proc().signal(SIGKILL);
  a->proc().wait(10s);
  a.reset();
  auto a2 = Gw::run("qa2", redis_->url(), dir_ + "/state-a", queue_config());
  ASSERT_TRUE(a2->up()) << a2->err();
  EXPECT_TRUE(a2->has(rule_n(2)));
  EXPECT_TRUE(a2->has(rule_n(3)));
  EXPECT_FALSE(a2->has(rule_n(0)));
  EXPECT_TRUE(a2->has(rule_n(6)));
  EXPECT_EQ(num(stats(a2->ctl()), "sync.queued"), 6u);
  // Redis back (AOF): both append their queues and converge.
  redis_->start();
  for (Gw* g : {a2.get(), b.get()})
    ASSERT_TRUE(eventually([&] { return stats(g->ctl()).at("sync.connected") == "true" &&
                                        num(stats(g->ctl()), "sync.queued") == 0; }, 15s)) << g->err();
  ASSERT_TRUE(eventually([&] { return a2->list() == b->list() && a2->has(rule_n(4)) && b->has(rule_n(3)); }))
      << a2->err() << b->err();
  EXPECT_FALSE(b->has(rule_n(0)));
  EXPECT_FALSE(a2->has(rule_n(1)));  // deleted by B, touched by nobody else
  EXPECT_FALSE(a2->has("host never.example"));
  EXPECT_TRUE(b->has(rule_n(6)));
  // Exactly once: 2 before the outage, 6 queued on A, 2 on B.
  EXPECT_EQ(redis_->cli({"XLEN", "cuckoogate:rules"}), "10\n");
  EXPECT_EQ(num(stats(a2->ctl()), "sync.outbox_appended"), 6u);
}

// The crash that falls after a queued entry reached the stream and before
// the gateway read it back: the entry is in the stream (here put there by
// redis-cli, with the gateway's origin and outbox token) while the journal's
// outbox still holds it. On reconnecting, the gateway recognises it and
// appends only the rest: nothing twice.
TEST_F(SyncTest, AQueuedEntryAlreadyInTheStreamIsNotAppendedAgain) {
  auto a = Gw::run("xa", redis_->url(), dir_ + "/state-a", queue_config());
  ASSERT_TRUE(a->up()) << a->err();
  ASSERT_EQ(a->ctl().ask("add " + rule_n(0)), "OK added");
  std::string first;
  ASSERT_NO_FATAL_FAILURE(queue_then_crash(a, {rule_n(1), rule_n(2)}, &first));
  redis_->cli({"XADD", "cuckoogate:rules", "*", "op", "add", "rule", rule_n(1), "origin", "xa", "outbox", first});
  auto a2 = Gw::run("xa", redis_->url(), dir_ + "/state-a", queue_config());
  ASSERT_TRUE(a2->up()) << a2->err();
  ASSERT_TRUE(eventually([&] { return num(stats(a2->ctl()), "sync.queued") == 0; })) << a2->err();
  EXPECT_EQ(redis_->cli({"XLEN", "cuckoogate:rules"}), "3\n");  // rule 0, rule 1 (once), rule 2
  EXPECT_EQ(num(stats(a2->ctl()), "sync.outbox_appended"), 1u);
  EXPECT_EQ(stats(a2->ctl()).at("sync.outbox_head"), "-");
  EXPECT_TRUE(a2->has(rule_n(1)));
  EXPECT_TRUE(a2->has(rule_n(2)));
}

// The token alone is no proof: an entry carrying the gateway's origin and
// next outbox token but another rule (a third party, or a second gateway
// with the same id) leaves the queued write to be appended. It was taken
// as delivered, and the queued rule never reached the stream.
TEST_F(SyncTest, AnEntryWithOurOutboxTokenButAnotherRuleIsNotTakenAsOurs) {
  auto a = Gw::run("ya", redis_->url(), dir_ + "/state-a", queue_config());
  ASSERT_TRUE(a->up()) << a->err();
  std::string token;
  ASSERT_NO_FATAL_FAILURE(queue_then_crash(a, {rule_n(1)}, &token));
  redis_->cli({"XADD", "cuckoogate:rules", "*", "op", "add", "rule", "host impostor.example", "origin", "ya",
               "outbox", token});
  auto a2 = Gw::run("ya", redis_->url(), dir_ + "/state-a", queue_config());
  ASSERT_TRUE(a2->up()) << a2->err();
  ASSERT_TRUE(eventually([&] { return num(stats(a2->ctl()), "sync.queued") == 0; })) << a2->err();
  EXPECT_EQ(redis_->cli({"XLEN", "cuckoogate:rules"}), "2\n");  // the impostor, then the queued rule
  EXPECT_EQ(num(stats(a2->ctl()), "sync.outbox_appended"), 1u);
  EXPECT_TRUE(a2->has(rule_n(1)));
  EXPECT_TRUE(a2->has("host impostor.example"));
}

// The action is part of what the token must carry: an entry with our token
// and the queued rule but without its action= is not ours either (it was
// taken as delivered, and the other gateways never learnt the action).
TEST_F(SyncTest, AnEntryWithOurOutboxTokenButAnotherActionIsNotTakenAsOurs) {
  auto a = Gw::run("yb", redis_->url(), dir_ + "/state-a", queue_config());
  ASSERT_TRUE(a->up()) << a->err();
  std::string token;
  ASSERT_NO_FATAL_FAILURE(queue_then_crash(a, {"host x.example action=reject"}, &token));
  redis_->cli({"XADD", "cuckoogate:rules", "*", "op", "add", "rule", "host x.example", "origin", "yb", "outbox", token});
  auto a2 = Gw::run("yb", redis_->url(), dir_ + "/state-a", queue_config());
  ASSERT_TRUE(a2->up()) << a2->err();
  ASSERT_TRUE(eventually([&] { return num(stats(a2->ctl()), "sync.queued") == 0; })) << a2->err();
  EXPECT_EQ(redis_->cli({"XLEN", "cuckoogate:rules"}), "2\n");  // the look-alike, then the queued change
  EXPECT_EQ(num(stats(a2->ctl()), "sync.outbox_appended"), 1u);
  EXPECT_EQ(a2->list(), (std::vector<std::string>{"host x.example action=reject"}));
}

// Per-rule actions travel with their rules: an add with action=, a change
// of it, and a snapshot rebuild all reach the other gateway.
TEST_F(SyncTest, PerRuleActionsReachTheOtherGateway) {
  auto a = Gw::run("pa", redis_->url(), dir_ + "/state-a");
  auto b = Gw::run("pb", redis_->url(), dir_ + "/state-b");
  ASSERT_TRUE(a->up()) << a->err();
  ASSERT_TRUE(b->up()) << b->err();
  EXPECT_EQ(a->ctl().ask("add host r.example action=reject"), "OK added");
  std::string first;
  EXPECT_EQ(a->ctl().ask_multi("batch\nadd host d.example action=drop\nadd src 192.0.2.5\n.", &first),
            (std::vector<std::string>{"added", "added"}));
  EXPECT_EQ(first, "OK 2");
  ASSERT_TRUE(eventually([&] { return b->list() == a->list() && a->list().size() == 3; })) << b->err();
  EXPECT_EQ(b->list(), (std::vector<std::string>{"src 192.0.2.5", "host d.example action=drop",
                                                 "host r.example action=reject"}));
  EXPECT_EQ(a->ctl().ask("add host r.example action=drop"), "OK action updated");
  ASSERT_TRUE(eventually([&] { return b->list() == a->list(); })) << b->err();
  EXPECT_EQ(b->list()[2], "host r.example action=drop");
}

// A write too large for one outbox group (one journal record) is refused
// with the reason while Redis is down, and nothing of it is applied.
TEST_F(SyncTest, AnOfflineWriteTooLargeToQueueIsRefusedWhole) {
  auto a = Gw::run("la", redis_->url(), dir_ + "/state-a", queue_config());
  ASSERT_TRUE(a->up()) << a->err();
  redis_->stop();
  ASSERT_TRUE(eventually([&] { return stats(a->ctl()).at("sync.connected") == "false"; }));
  std::string load = "load\n";
  for (int i = 0; i < 60000; ++i) load += "src 10.200." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1) + "\n";
  a->ctl().send(load + ".\n");
  const std::string r = a->ctl().line();
  EXPECT_EQ(r.rfind("ERR 503", 0), 0u) << r;
  EXPECT_NE(r.find("too large to queue"), std::string::npos) << r;
  EXPECT_FALSE(a->has("src 10.200.0.1"));
  EXPECT_EQ(num(stats(a->ctl()), "sync.queued"), 0u);
  EXPECT_EQ(a->ctl().ask("add src 10.200.0.1"), "OK added");  // a small one still queues
  EXPECT_EQ(num(stats(a->ctl()), "sync.queued"), 1u);
}

// Rule files given at start are not local-only with sync on: they are
// appended as one `load` entry when the gateway connects.
TEST_F(SyncTest, StartUpRuleFilesAreSharedOnceConnected) {
  auto a = Gw::replay("ra", redis_->url());  // its rule file: src 198.51.100.200
  ASSERT_TRUE(a->up()) << a->err();
  auto b = Gw::run("rb", redis_->url(), dir_ + "/state-b");
  ASSERT_TRUE(b->up()) << b->err();
  ASSERT_TRUE(eventually([&] { return b->has("src 198.51.100.200"); })) << b->err();
  EXPECT_EQ(a->list(), b->list());
  const std::string xr = redis_->cli({"XRANGE", "cuckoogate:rules", "-", "+"});
  EXPECT_NE(xr.find("load"), std::string::npos) << xr;
  EXPECT_NE(xr.find("src 198.51.100.200"), std::string::npos) << xr;
}

// One DPDK telemetry command of a `run` gateway (dpdk_telemetry.v2 in its
// runtime directory): the JSON answer's body.
nlohmann::json telemetry(pid_t gateway, const std::string& cmd) {
  const std::string path = "/var/run/dpdk/cuckoogate-" + std::to_string(gateway) + "/dpdk_telemetry.v2";
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
  nlohmann::json body;
  char buf[16384];
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && ::recv(fd, buf, sizeof(buf), 0) > 0 &&
      ::send(fd, cmd.data(), cmd.size(), 0) == static_cast<ssize_t>(cmd.size())) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n > 0) body = nlohmann::json::parse(std::string(buf, static_cast<std::size_t>(n)))[cmd];
  }
  ::close(fd);
  return body;
}

TEST_F(SyncTest, SyncStateIsServedAsDpdkTelemetry) {
  auto a = Gw::run("te", redis_->url(), dir_ + "/state-a");
  ASSERT_TRUE(a->up()) << a->err();
  ASSERT_EQ(a->ctl().ask("add host tel.example"), "OK added");
  const auto s = stats(a->ctl());
  ASSERT_TRUE(eventually([&] { return telemetry(a->proc().pid(), "/cuckoogate/sync")["published"] == 1; }));
  const nlohmann::json t = telemetry(a->proc().pid(), "/cuckoogate/sync");
  EXPECT_EQ(t["enabled"], 1);
  EXPECT_EQ(t["connected"], 1);
  EXPECT_EQ(t["applied"], 1);
  EXPECT_EQ(t["last_applied_id"], s.at("sync.last_applied_id"));
  EXPECT_EQ(t["gateway_id"], "te");
  EXPECT_EQ(t["offline_writes"], "refuse");
  redis_->stop();
  EXPECT_TRUE(eventually([&] { return telemetry(a->proc().pid(), "/cuckoogate/sync")["connected"] == 0; }));
}

TEST_F(SyncTest, AGatewayBehindATrimmedStreamRebuildsFromTheSnapshot) {
  std::ofstream(dir_ + "/snap.toml") << "[sync]\nredis = \"" << redis_->url() << "\"\nsnapshot_interval = 1\n";
  auto a = Gw::run("ta", redis_->url(), dir_ + "/state-a", dir_ + "/snap.toml");
  ASSERT_TRUE(a->up()) << a->err();
  for (int i = 0; i < 10; ++i) ASSERT_EQ(a->ctl().ask("add " + rule_n(i)), "OK added");
  ASSERT_EQ(a->ctl().ask("del " + rule_n(0)), "OK deleted");
  const std::string last = stats(a->ctl()).at("sync.last_applied_id");
  // Wait for a snapshot at the last change, then trim everything before it.
  ASSERT_TRUE(eventually([&] {
    return redis_->cli({"GET", "cuckoogate:rules:snapshot"}).find(" " + last + "\n") != std::string::npos;
  }, 10s));
  redis_->cli({"XTRIM", "cuckoogate:rules", "MINID", last});
  EXPECT_EQ(a->ctl().ask("add host after.example"), "OK added");
  auto b = Gw::run("tb", redis_->url(), dir_ + "/state-b");
  ASSERT_TRUE(b->up()) << b->err();
  ASSERT_TRUE(eventually([&] { return b->has("host after.example"); })) << b->err();
  const auto s = stats(b->ctl());
  EXPECT_EQ(num(s, "sync.snapshot_rebuilds"), 1u);
  EXPECT_EQ(num(s, "sync.gaps"), 0u);
  EXPECT_EQ(b->list(), a->list());
  EXPECT_EQ(b->list().size(), 10u);
}

// TLS (docs/sync.md, "TLS"): Debian's redis-server 7.0 with --tls-port and
// client certificates required; certificates made in the test's directory.
// Two gateways share the blocklist through rediss://; one that trusts
// another CA stays disconnected and says why, and keeps serving reads.
TEST_F(SyncTest, GatewaysShareTheBlocklistOverTlsAndAWrongCaIsRefused) {
  const std::string tdir = dir_ + "/tls";
  std::filesystem::create_directories(tdir);
  TestCert ca("cuckoogate test CA", nullptr, "", 1), server("localhost", &ca, "DNS:localhost,IP:127.0.0.1", 2),
      client("gateway", &ca, "", 3), other("another CA", nullptr, "", 4);
  ca.write(tdir, "ca");
  server.write(tdir, "server");
  client.write(tdir, "client");
  other.write(tdir, "other");
  const uint16_t port = free_tcp_port();
  RedisServer r(tdir, {"--tls-port", std::to_string(port), "--tls-cert-file", tdir + "/server.pem", "--tls-key-file",
                       tdir + "/server.key", "--tls-ca-cert-file", tdir + "/ca.pem"});
  const std::string url = "rediss://localhost:" + std::to_string(port) + "/0";
  auto config = [&](const std::string& name, const std::string& ca_file) {
    const std::string path = tdir + "/" + name + ".toml";
    std::ofstream(path) << "[sync]\nredis = \"" << url << "\"\nsnapshot_interval = 0\ntls_ca = \"" << ca_file
                        << "\"\ntls_cert = \"" << tdir << "/client.pem\"\ntls_key = \"" << tdir << "/client.key\"\n";
    return path;
  };
  auto a = Gw::run("ta", url, dir_ + "/state-a", config("a", tdir + "/ca.pem"));
  auto b = Gw::run("tb", url, dir_ + "/state-b", config("b", tdir + "/ca.pem"));
  ASSERT_TRUE(a->up()) << a->err();
  ASSERT_TRUE(b->up()) << b->err();
  ASSERT_TRUE(eventually([&] { return stats(a->ctl())["sync.connected"] == "true"; })) << stats(a->ctl())["sync.last_error"];
  EXPECT_EQ(stats(a->ctl())["sync.redis"], url);
  EXPECT_EQ(a->ctl().ask("add host tls.example"), "OK added");
  ASSERT_TRUE(eventually([&] { return b->has("host tls.example"); })) << stats(b->ctl())["sync.last_error"];
  EXPECT_EQ(b->ctl().ask("del host tls.example"), "OK deleted");
  ASSERT_TRUE(eventually([&] { return !a->has("host tls.example"); }));
  // The entries are in Redis' stream (read over the Unix socket).
  EXPECT_NE(r.cli({"XRANGE", "cuckoogate:rules", "-", "+"}).find("host tls.example"), std::string::npos);

  auto c = Gw::run("tc", url, dir_ + "/state-c", config("c", tdir + "/other.pem"));
  ASSERT_TRUE(c->up()) << c->err();
  ASSERT_TRUE(eventually([&] { return stats(c->ctl())["sync.last_error"].find("certificate") != std::string::npos; }));
  const auto s = stats(c->ctl());
  EXPECT_EQ(s.at("sync.connected"), "false");
  EXPECT_NE(s.at("sync.last_error").find("the server's certificate is refused"), std::string::npos)
      << s.at("sync.last_error");
  EXPECT_EQ(c->ctl().ask("add host no.example").rfind("ERR 503", 0), 0u);
}

}  // namespace
}  // namespace cg::test

int main(int argc, char** argv) { return cg::test::gateway_test_main(argc, argv); }
