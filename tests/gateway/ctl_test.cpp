// cuckoogatectl against a running gateway (`cuckoogate run` on net_null
// vdevs): every command, exit codes, messages, and a 100k-rule bulk load.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gateway_test_env.hpp"
#include "subprocess.hpp"

namespace cg::test {
namespace {

using namespace std::chrono_literals;

class Ctl : public NullGatewaySuite {
 protected:
  static void TearDownTestSuite() {
    const auto r = stop_gateway();
    if (!r) return;
    EXPECT_EQ(r->first, 0);
    EXPECT_NE(r->second.find("packets in"), std::string::npos) << r->second;  // final stats printed
  }
};

TEST_F(Ctl, AddCheckDelAndTheirExitCodes) {
  Result r = ctl({"add", "src", "192.0.2.1"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("added"), std::string::npos);
  r = ctl({"add", "src 192.0.2.1"});
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("exists"), std::string::npos);
  EXPECT_EQ(ctl({"check", "src", "192.0.2.1"}).status, 0);
  EXPECT_EQ(ctl({"check", "src 192.0.2.2"}).status, 1);
  r = ctl({"add", "host Example.ORG.", "url http://a.example/x#top"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(ctl({"check", "host example.org"}).status, 0);  // canonical forms are the same rule
  EXPECT_EQ(ctl({"check", "url a.example/x"}).status, 0);
  EXPECT_EQ(ctl({"del", "src", "192.0.2.1"}).status, 0);
  EXPECT_EQ(ctl({"check", "src", "192.0.2.1"}).status, 1);
  r = ctl({"del", "src", "192.0.2.1"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("not in blocklist"), std::string::npos) << r.err;
  EXPECT_EQ(ctl({"del", "host example.org", "url a.example/x"}).status, 0);
  // --ttl: the rule is listed with its remaining lifetime.
  ASSERT_EQ(ctl({"add", "--ttl", "600", "src", "192.0.2.77"}).status, 0);
  r = ctl({"list", "src", "192.0.2.77"});
  EXPECT_EQ(r.out.rfind("src 192.0.2.77 ttl=", 0), 0u) << r.out;
  EXPECT_EQ(ctl({"del", "src 192.0.2.77"}).status, 0);
  // --action: the rules' own action, listed after them; a bad one is a usage error.
  ASSERT_EQ(ctl({"add", "--action", "reject", "src 192.0.2.78", "src 192.0.2.79"}).status, 0);
  r = ctl({"list", "src", "192.0.2.7"});
  EXPECT_EQ(r.out, "src 192.0.2.78 action=reject\nsrc 192.0.2.79 action=reject\n") << r.out;
  EXPECT_EQ(ctl({"add", "--action", "rst", "src 192.0.2.78"}).status, 2);
  ASSERT_EQ(ctl({"add", "src 192.0.2.78"}).status, 0);  // the latest add: no own action
  EXPECT_EQ(ctl({"list", "src", "192.0.2.78"}).out, "src 192.0.2.78\n");
  EXPECT_EQ(ctl({"del", "src 192.0.2.78", "src 192.0.2.79"}).status, 0);
}

TEST_F(Ctl, BadInputGetsOneLineErrorAndNonZeroExit) {
  Result r = ctl({"add", "src", "300.1.1.1"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("column"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  r = ctl({"list", "nosuchkind"});
  EXPECT_EQ(r.status, 2);
  r = run({GatewayEnv::ctl(), "-s", GatewayEnv::dir() + "/no-such.sock", "ping"}, GatewayEnv::dir());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("cannot connect"), std::string::npos) << r.err;
  r = run({GatewayEnv::ctl(), "frobnicate"}, GatewayEnv::dir());
  EXPECT_EQ(r.status, 2);  // bad usage
  EXPECT_EQ(ctl({"add", "--ttl", "0", "src 192.0.2.1"}).status, 2);
  // Decimal seconds only, as the protocol's ttl= (CLI11 alone took these).
  for (const char* bad : {"0x10", "+5", " 5", "5 ", "1e3", "010b"}) {
    const auto r = ctl({"add", "--ttl", bad, "src 192.0.2.1"});
    EXPECT_EQ(r.status, 2) << bad;
    EXPECT_NE(r.err.find("decimal"), std::string::npos) << bad << ": " << r.err;
  }
  r = run({GatewayEnv::ctl(), "--help"}, GatewayEnv::dir());
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("load"), std::string::npos);
}

// The socket's option has the gateway's name too (`cuckoogate run --ctl
// PATH`): a tester reached for `cuckoogatectl --ctl PATH`.
TEST_F(Ctl, TheSocketIsNamedWithSOrSocketOrCtl) {
  for (const char* opt : {"-s", "--socket", "--ctl"}) {
    const Result r = run({GatewayEnv::ctl(), opt, sock_, "ping"}, GatewayEnv::dir());
    EXPECT_EQ(r.status, 0) << opt << ": " << r.err;
  }
  const Result r = run({GatewayEnv::ctl(), "--help"}, GatewayEnv::dir());
  EXPECT_NE(r.out.find("--ctl"), std::string::npos) << r.out;
}

TEST_F(Ctl, ListIsOrderedAndFiltersByKindAndPrefix) {
  ASSERT_EQ(ctl({"add", "dst 10.0.0.10", "dst 10.0.0.9", "dst 9.0.0.1", "host b.example.com",
                 "host a.example.com"}).status, 0);
  Result r = ctl({"list", "dst"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "dst 9.0.0.1\ndst 10.0.0.9\ndst 10.0.0.10\n");  // numeric order
  r = ctl({"list", "dst", "10.0.0.1"});
  EXPECT_EQ(r.out, "dst 10.0.0.10\n");
  r = ctl({"list", "host"});
  EXPECT_EQ(r.out, "host a.example.com\nhost b.example.com\n");
  ASSERT_EQ(ctl({"del", "dst 10.0.0.10", "dst 10.0.0.9", "dst 9.0.0.1", "host b.example.com",
                 "host a.example.com"}).status, 0);
}

TEST_F(Ctl, StatsAndInfoAsTextAndJson) {
  Result r = ctl({"stats", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto s = nlohmann::json::parse(r.out);
  EXPECT_GT(s["rx"].get<uint64_t>(), 0u);  // net_null delivers packets all the time
  EXPECT_TRUE(s.contains("dropped_by_kind"));
  EXPECT_TRUE(s["worker"].contains("0"));
  r = ctl({"info", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto i = nlohmann::json::parse(r.out);
  EXPECT_EQ(i["filter"]["fingerprint_bits"], 12);
  EXPECT_GT(i["filter"]["slots"].get<uint64_t>(), 0u);
  r = ctl({"info"});
  EXPECT_NE(r.out.find("filter.load_factor"), std::string::npos);
}

// info reports memory per structure; the rule store's share grows with rules
// and goes back down when they are deleted, and the total is the sum.
TEST_F(Ctl, InfoReportsMemoryPerStructure) {
  auto mem = [&] {  // memory.<name> lines of `info` as {name: value}
    nlohmann::json m = nlohmann::json::object();
    std::istringstream in(ctl({"info"}).out);
    for (std::string l; std::getline(in, l);)
      if (l.rfind("memory.", 0) == 0) m[l.substr(7, l.find(' ') - 7)] = std::stoull(l.substr(l.find(' ') + 1));
    return m;
  };
  const auto before = mem();
  for (const char* k : {"filter", "exact", "store", "ttl", "prefixes", "hits", "total", "bytes_per_rule"})
    ASSERT_TRUE(before.contains(k)) << k;
  EXPECT_GT(before["filter"].get<uint64_t>(), 0u);
  EXPECT_GT(before["exact"].get<uint64_t>(), 0u);
  std::vector<std::string> add = {"add"}, del = {"del"};
  for (int i = 0; i < 200; ++i) {
    add.push_back("url memory.example/" + std::to_string(i) + "/a-path-longer-than-fifteen-bytes");
    del.push_back(add.back());
  }
  ASSERT_EQ(ctl(add).status, 0);
  const auto after = mem();
  EXPECT_GE(after["store"].get<uint64_t>(), before["store"].get<uint64_t>() + 200 * 64);
  EXPECT_EQ(after["prefixes"].get<uint64_t>(), 0u);  // no IPv4 prefix yet: no table
  EXPECT_GT(after["bytes_per_rule"].get<uint64_t>(), 0u);
  ASSERT_EQ(ctl(del).status, 0);
  EXPECT_EQ(mem()["store"].get<uint64_t>(), before["store"].get<uint64_t>());
  // An IPv4 prefix longer than /24 brings the kind's table: its tbl24 page,
  // a chunk of groups (256 KiB) and the rule index; the total counts them.
  ASSERT_EQ(ctl({"add", "src 10.9.0.128/25"}).status, 0);
  const auto pre = mem();
  EXPECT_GE(pre["prefixes"].get<uint64_t>(), 256u * 1024 + 4096);
  EXPECT_EQ(pre["total"].get<uint64_t>(),
            pre["filter"].get<uint64_t>() + pre["exact"].get<uint64_t>() + pre["store"].get<uint64_t>() +
                pre["ttl"].get<uint64_t>() + pre["prefixes"].get<uint64_t>() + pre["hits"].get<uint64_t>());
  ASSERT_EQ(ctl({"del", "src 10.9.0.128/25"}).status, 0);
  EXPECT_EQ(mem()["prefixes"].get<uint64_t>(), 0u);  // the kind's last IPv4 prefix: the table is freed
}

// A standard DPDK telemetry client: SOCK_SEQPACKET to the runtime directory's
// dpdk_telemetry.v2, one JSON answer per command.
TEST_F(Ctl, StatsAreServedAsDpdkTelemetryCommands) {
  // The control socket is bound before the engine starts, the commands are
  // registered after: a ping's answer (served once it runs) says they are.
  // (Run alone, this test asked before and found no /cuckoogate commands.)
  ASSERT_EQ(ctl({"ping"}).status, 0);
  const std::string path =
      "/var/run/dpdk/cuckoogate-" + std::to_string(gw_->pid()) + "/dpdk_telemetry.v2";
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << path;
  char buf[16384];
  ASSERT_GT(::recv(fd, buf, sizeof(buf), 0), 0);  // the greeting
  auto query = [&](const std::string& cmd) {
    EXPECT_EQ(::send(fd, cmd.data(), cmd.size(), 0), static_cast<ssize_t>(cmd.size()));
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    return nlohmann::json::parse(std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0));
  };
  const auto list = query("/");
  const auto cmds = list["/"].dump();
  EXPECT_NE(cmds.find("/cuckoogate/stats"), std::string::npos) << cmds;
  const auto st = query("/cuckoogate/stats");
  EXPECT_GT(st["/cuckoogate/stats"]["rx"].get<uint64_t>(), 0u);
  // The counters stats has for flows and rejects, telemetry has too.
  for (const char* k : {"flows_active", "flows_untracked", "cache_hits", "rejects_sent", "rejects_failed"})
    EXPECT_TRUE(st["/cuckoogate/stats"].contains(k)) << k;
  const auto info = query("/cuckoogate/info");
  EXPECT_EQ(info["/cuckoogate/info"]["filter_fingerprint_bits"], 12);
  EXPECT_EQ(info["/cuckoogate/info"]["reject_dns"], "refused");
  EXPECT_EQ(info["/cuckoogate/info"]["reject_rate"], 1000);
  // info's sets.NAME counts, for the sets that hold rules.
  ASSERT_EQ(ctl({"add", "src 192.0.2.201", "--set", "telemetry"}).status, 0);
  const auto with_set = query("/cuckoogate/info");
  EXPECT_EQ(with_set["/cuckoogate/info"]["sets_telemetry"], 1) << with_set.dump();
  EXPECT_EQ(ctl({"del", "src 192.0.2.201"}).status, 0);
  ::close(fd);
}

TEST_F(Ctl, BulkLoadOf100kRulesThenFlush) {
  const std::string file = GatewayEnv::dir() + "/100k.rules";
  {
    std::ofstream f(file);
    f << "# 100k rules\n";
    for (int i = 0; i < 100000; ++i)
      f << "src 10." << (i >> 16) << "." << ((i >> 8) & 255) << "." << (i & 255) << "\n";
  }
  const auto t0 = std::chrono::steady_clock::now();
  Result r = ctl({"load", file});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("added 100000"), std::string::npos) << r.out;
  std::printf("loaded 100000 rules in %.3f s\n", secs);
  EXPECT_EQ(ctl({"check", "src 10.1.134.159"}).status, 0);  // i = 99999
  r = ctl({"list", "src"});
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 100000);
  // Loading again: everything exists, nothing added.
  r = ctl({"load", "-"}, file);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("added 0 existed 100000"), std::string::npos) << r.out;
  r = ctl({"flush", "all"});
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("flushed 100000"), std::string::npos) << r.out;
  EXPECT_EQ(ctl({"check", "src 10.1.134.159"}).status, 1);
}

TEST_F(Ctl, LoadRefusesALineThatWouldEndTheStream) {
  // " ." would end the server's load stream early and run the rest as commands.
  const std::string file = GatewayEnv::dir() + "/dot.rules";
  std::ofstream(file) << "src 192.0.2.60\n \t.\nflush\n";
  Result r = ctl({"load", file});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("dot.rules:2"), std::string::npos) << r.err;
  EXPECT_EQ(ctl({"check", "src 192.0.2.60"}).status, 1);
  // A CR before the dot too: the gateway trims it (a feed fetched with CRLF
  // line ends), and the lines after it ran as commands.
  ASSERT_EQ(ctl({"add", "src 192.0.2.61"}).status, 0);
  std::ofstream(file) << "src 192.0.2.60\n\r.\nflush all\n";
  r = ctl({"load", file});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("dot.rules:2"), std::string::npos) << r.err;
  EXPECT_EQ(ctl({"check", "src 192.0.2.61"}).status, 0);  // not flushed
  EXPECT_EQ(ctl({"check", "src 192.0.2.60"}).status, 1);
  ASSERT_EQ(ctl({"del", "src 192.0.2.61"}).status, 0);
}

// A rule file loads through cuckoogatectl as it does from the config: a
// comment or trailing blanks past the request line limit (8192 bytes) are
// not a reason to refuse it (only what precedes '#' is sent, trimmed), and
// errors still name the file's own line.
TEST_F(Ctl, LongCommentsAndTrailingBlanksDoNotRefuseARuleFile) {
  const std::string file = GatewayEnv::dir() + "/long.rules";
  std::ofstream(file) << "host ok1.example\n#" << std::string(9000, 'c') << "\nhost ok2.example"
                      << std::string(9000, ' ') << "\nhost ok3.example # " << std::string(9000, 'x') << "\n";
  Result r = ctl({"load", file});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* rule : {"host ok1.example", "host ok2.example", "host ok3.example"})
    EXPECT_EQ(ctl({"check", rule}).status, 0) << rule;
  const std::string bad = GatewayEnv::dir() + "/long-bad.rules";
  std::ofstream(bad) << "host ok4.example\n#" << std::string(9000, 'c') << "\n\nhost\n";
  r = ctl({"load", bad});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("long-bad.rules:4"), std::string::npos) << r.err;  // the file's line
  EXPECT_EQ(ctl({"check", "host ok4.example"}).status, 1);
  ASSERT_EQ(ctl({"flush", "host"}).status, 0);
}

TEST_F(Ctl, LoadWithABadLineAppliesNothing) {
  const std::string file = GatewayEnv::dir() + "/bad.rules";
  std::ofstream(file) << "src 192.0.2.50\nsrc 192.0.2.51\nsrc nonsense\n";
  Result r = ctl({"load", file});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("bad.rules:3:5: expected"), std::string::npos) << r.err;  // file, line, column
  EXPECT_EQ(ctl({"check", "src 192.0.2.50"}).status, 1);
}

// Sends raw bytes to the control socket, half-closes, returns all it answered.
std::string raw_request(const std::string& sock, const std::string& bytes) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, sock.c_str(), sizeof(a.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return "<no connection>";
  }
  [[maybe_unused]] ssize_t w = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  ::shutdown(fd, SHUT_WR);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

// Item 1: an argument holding a line break must not become a second command.
TEST_F(Ctl, ALineBreakInAnArgumentIsRefusedBeforeAnythingIsSent) {
  ASSERT_EQ(ctl({"add", "host keep.example"}).status, 0);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"add", "host a.example\nflush all"},
        {"add", "host a.example\rflush all"},
        {"check", "host keep.example\nflush all"},
        {"del", "host nothing.example\ndel host keep.example"},
        {"add", "host a.example", "host b.example\nflush all"},
        {"list", "host\nflush all"},
        {"flush", "host\nflush all"}}) {
    const Result r = ctl(args);
    EXPECT_EQ(r.status, 2) << args[1];
    EXPECT_NE(r.err.find("line break"), std::string::npos) << r.err;
    EXPECT_EQ(ctl({"check", "host keep.example"}).status, 0) << "smuggled through " << args[0];
  }
  EXPECT_EQ(ctl({"check", "host a.example"}).status, 1);  // nothing of it was applied
  // The server side: a CR or NUL inside a line is an error, not a second command.
  const std::string got = raw_request(sock_, std::string("add host a.example\rflush all\nadd host b.example\0flush all\n", 58));
  EXPECT_EQ(std::count(got.begin(), got.end(), '\n'), 2) << got;
  EXPECT_EQ(got.rfind("ERR 400 control character 0x0d", 0), 0u) << got;
  EXPECT_NE(got.find("\nERR 400 control character 0x00"), std::string::npos) << got;
  EXPECT_EQ(ctl({"check", "host keep.example"}).status, 0);
  EXPECT_EQ(ctl({"del", "host keep.example"}).status, 0);
}

// A value that becomes one word of a request must not add words: a blank in
// --set used to turn a load into a replace of the set ("spam replace") or
// give rules an expiry ("x ttl=5"); an empty --set silently meant default.
TEST_F(Ctl, ASetNameScopeOrListWordWithABlankIsRefusedBeforeAnythingIsSent) {
  const std::string kept = GatewayEnv::dir() + "/spam-v1.txt", other = GatewayEnv::dir() + "/spam-v2.txt";
  std::ofstream(kept) << "198.51.100.0/24\n";
  std::ofstream(other) << "203.0.113.0/24\n";
  ASSERT_EQ(ctl({"load", "--format", "cidr", "--set", "spam", kept}).status, 0);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"load", "--format", "cidr", "--set", "spam replace", other},
        {"load", "--format", "cidr", "--set", "spam\treplace", other},
        {"load", "--format", "cidr", "--set", "", other},
        {"add", "--set", "x ttl=5", "src 192.0.2.98"},
        {"add", "--set", "", "src 192.0.2.98"},
        {"list", "--set", "spam x"},
        {"hits", "--set", "Spam"}}) {
    const Result r = ctl(args);
    EXPECT_EQ(r.status, 2) << args[3];
    EXPECT_NE(r.err.find("bad set name"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("nothing was sent"), std::string::npos) << r.err;
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"list", "ip 198.51.100.0/24 x"}, {"hits", "ip", "198 x"}, {"flush", "ip all"}}) {
    const Result r = ctl(args);
    EXPECT_EQ(r.status, 2) << args[1];
    EXPECT_NE(r.err.find("holds a blank"), std::string::npos) << r.err;
  }
  // Nothing of it was applied: the set kept its prefix, no other rule came.
  EXPECT_EQ(ctl({"list", "--set", "spam"}).out, "ip 198.51.100.0/24 set=spam\n");
  EXPECT_EQ(ctl({"check", "ip 203.0.113.0/24"}).status, 1);
  EXPECT_EQ(ctl({"check", "src 192.0.2.98"}).status, 1);
  ASSERT_EQ(ctl({"flush", "ip"}).status, 0);
}

// `rules` in info and stats counts the changes just made (it lagged up to a
// control tick behind: 'load' then 'info' showed the old count).
TEST_F(Ctl, InfoAndStatsCountRulesAtOnce) {
  auto rules_in = [](const std::string& out, std::size_t from) -> long {
    const std::size_t at = out.find("\nrules ", from);
    return at == std::string::npos ? -1 : std::stol(out.substr(at + 7));
  };
  const long before = rules_in(raw_request(sock_, "info\n"), 0);
  ASSERT_GE(before, 0);
  // Pipelined on one connection: the changes and the reports in one read.
  const std::string got = raw_request(sock_, "add src 192.0.2.230\nadd src 192.0.2.231\ninfo\nstats\n"
                                             "del src 192.0.2.230\ndel src 192.0.2.231\ninfo\n");
  const std::size_t info1 = got.find("version ");
  ASSERT_NE(info1, std::string::npos) << got;
  EXPECT_EQ(rules_in(got, info1), before + 2) << got;
  const std::size_t stats1 = got.find("\nrx ", info1);
  ASSERT_NE(stats1, std::string::npos) << got;
  EXPECT_EQ(rules_in(got, stats1), before + 2) << got;
  const std::size_t info2 = got.find("version ", stats1);
  ASSERT_NE(info2, std::string::npos) << got;
  EXPECT_EQ(rules_in(got, info2), before) << got;
}

// Item 2: every command checks its arguments; flushing everything takes 'all'.
TEST_F(Ctl, CommandsCheckTheirArgumentsAndFlushNeedsAScope) {
  ASSERT_EQ(ctl({"add", "host tracker.example.net", "src 192.0.2.200"}).status, 0);
  const std::string got = raw_request(sock_, "flush host tracker.example.net\nflush\nping x\nhelp x\nquit x\n");
  std::istringstream lines(got);
  std::string l;
  int n = 0;
  while (std::getline(lines, l)) {
    EXPECT_EQ(l.rfind("ERR 400", 0), 0u) << l;
    ++n;
  }
  EXPECT_EQ(n, 5) << got;
  EXPECT_EQ(ctl({"check", "host tracker.example.net"}).status, 0);  // nothing flushed
  Result r = ctl({"flush"});
  EXPECT_EQ(r.status, 2);  // the scope is required
  r = ctl({"flush", "host"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "flushed 1\n");
  EXPECT_EQ(ctl({"check", "host tracker.example.net"}).status, 1);
  EXPECT_EQ(ctl({"check", "src 192.0.2.200"}).status, 0);  // another kind stays
  EXPECT_EQ(ctl({"del", "src 192.0.2.200"}).status, 0);
  r = ctl({"ping"});
  EXPECT_EQ(r.out, "pong\n");  // no protocol prefix, like every other command
  // A misspelt command is named (CLI11 said "A subcommand is required"), and
  // a kind is read as add reads it (list SRC was "unknown rule kind").
  r = ctl({"bogus"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown command 'bogus'"), std::string::npos) << r.err;
  ASSERT_EQ(ctl({"add", "SRC 192.0.2.9"}).status, 0);
  r = ctl({"list", "SRC"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "src 192.0.2.9\n");
}

// Item 3, client side: only regular files (or -) are loaded.
TEST_F(Ctl, LoadRefusesDirectoriesDevicesAndFifos) {
  const std::string fifo = GatewayEnv::dir() + "/rules.fifo";
  ::mkfifo(fifo.c_str(), 0600);
  for (const std::string& f : {GatewayEnv::dir(), std::string("/dev/zero"), fifo}) {
    const auto t0 = std::chrono::steady_clock::now();
    const Result r = ctl({"load", f});
    EXPECT_EQ(r.status, 2) << f;
    EXPECT_NE(r.err.find(f), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("loaded"), std::string::npos) << r.out;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s) << f;  // no hang on a FIFO
  }
}

// Item 8: cuckoogatectl believes only a server run by root or by the caller.
TEST_F(Ctl, RefusesAServerOfAnotherUser) {
  if (::getuid() != 0) GTEST_SKIP() << "needs root to run a listener as another user";
  // The test directory is 0700; the other user needs one it can enter.
  char tmpl[] = "/tmp/cg-ctl-other-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ::chmod(dir.c_str(), 0777);
  const std::string path = dir + "/fake.sock";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {  // a fake gateway as nobody: answers OK to anything
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) _exit(3);
    const int l = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    if (::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(l, 4) != 0) _exit(4);
    ::chmod(path.c_str(), 0777);
    [[maybe_unused]] ssize_t w = ::write(ready[1], "r", 1);
    for (int i = 0; i < 4; ++i) {
      const int c = ::accept(l, nullptr, nullptr);
      if (c < 0) break;
      static constexpr char kOk[] = "OK present\n";
      w = ::send(c, kOk, sizeof(kOk) - 1, MSG_NOSIGNAL);
      ::close(c);
    }
    _exit(0);
  }
  ::close(ready[1]);
  char b;
  const bool up = ::read(ready[0], &b, 1) == 1;  // 0: the child failed before listening
  const Result r = run({GatewayEnv::ctl(), "-s", path, "check", "host x.example"}, GatewayEnv::dir());
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ::close(ready[0]);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(up) << "the fake server as uid 65534 did not start";
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("uid 65534"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

// Item 9: the latest add defines the lifetime, and the answer says so.
TEST_F(Ctl, TheLatestAddDefinesTheRuleLifetime) {
  ASSERT_EQ(ctl({"add", "--ttl", "600", "host ttl.example"}).status, 0);
  Result r = ctl({"add", "host ttl.example"});
  EXPECT_EQ(r.out, "host ttl.example: ttl updated\n");
  r = ctl({"list", "host", "ttl.example"});
  EXPECT_EQ(r.out, "host ttl.example\n");  // permanent now
  r = ctl({"add", "host ttl.example"});
  EXPECT_EQ(r.out, "host ttl.example: exists\n");
  r = ctl({"add", "--ttl", "900", "host ttl.example"});
  EXPECT_EQ(r.out, "host ttl.example: ttl updated\n");
  r = ctl({"list", "host", "ttl.example"});
  EXPECT_EQ(r.out.rfind("host ttl.example ttl=", 0), 0u) << r.out;
  EXPECT_EQ(ctl({"del", "host ttl.example"}).status, 0);
}

// Item 10: several rules in one command are one batch: all or nothing.
TEST_F(Ctl, SeveralRulesInOneCommandAreAllOrNothing) {
  Result r = ctl({"add", "host a.test", "host b.test", "host bad..x"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("nothing applied"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("nothing applied: batch rejected"), std::string::npos) << r.err;  // said once
  EXPECT_EQ(ctl({"check", "host a.test"}).status, 1);
  EXPECT_EQ(ctl({"check", "host b.test"}).status, 1);
  r = ctl({"add", "host a.test", "host b.test"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "host a.test: added\nhost b.test: added\n");
  r = ctl({"del", "host a.test", "host absent.test"});  // one absent: nothing deleted
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("not in blocklist: host absent.test"), std::string::npos) << r.err;
  EXPECT_EQ(ctl({"check", "host a.test"}).status, 0);
  r = ctl({"del", "host a.test", "host b.test"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "host a.test: deleted\nhost b.test: deleted\n");
}

// `list` prints each rule as a valid `add` argument (ttl=, set=, action=
// after it); `add --file` takes such lines back as one batch, so a saved
// list restores the rules with their sets, actions and lifetimes. `load`
// takes rule lines only, and says where a list goes instead.
TEST_F(Ctl, AListIsRestoredByAddFile) {
  ASSERT_EQ(ctl({"flush", "all"}).status, 0);  // only this test's rules
  ASSERT_EQ(ctl({"add", "--ttl", "600", "dst 198.51.100.1", "host keep.restore.example"}).status, 0);
  ASSERT_EQ(ctl({"add", "--set", "restoreset", "host set.restore.example"}).status, 0);
  ASSERT_EQ(ctl({"add", "--action", "reject", "src 198.51.100.2"}).status, 0);
  const std::string saved = GatewayEnv::dir() + "/saved.list";
  Result r = ctl({"list"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::ofstream(saved) << "# saved\n\n" << r.out;
  // The listing keeps the lifetimes' remaining seconds: compare without them.
  auto without_ttls = [](std::string s) {
    for (std::size_t at; (at = s.find(" ttl=")) != std::string::npos;)
      s.erase(at, s.find_first_of(" \n", at + 1) - at);
    return s;
  };
  const std::string before = without_ttls(r.out);
  EXPECT_NE(before.find("host set.restore.example set=restoreset\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dst 198.51.100.1 ttl="), std::string::npos) << r.out;

  r = ctl({"load", saved});  // a list is not a rule file
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("add --file"), std::string::npos) << r.err;

  ASSERT_EQ(ctl({"flush", "all"}).status, 0);
  r = ctl({"add", "--file", saved});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, saved + ": 4 rules: added 4\n") << r.out;
  r = ctl({"list"});
  EXPECT_EQ(without_ttls(r.out), before);
  EXPECT_NE(r.out.find("host keep.restore.example ttl="), std::string::npos) << r.out;
  r = ctl({"add", "--file", "-"}, saved);  // again, from stdin: every rule present
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "stdin: 4 rules: exists 2, ttl updated 2\n") << r.out;  // counted in list order

  // One bad line: nothing is added, and the error names the file's line and
  // column (an indented rule's column counts its blanks).
  const std::string bad = GatewayEnv::dir() + "/bad.list";
  std::ofstream(bad) << "host new.restore.example action=reject\n# c\n   host bad..restore\n";
  r = ctl({"add", "--file", bad});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("bad.list:3:13: expected host name"), std::string::npos) << r.err;
  EXPECT_EQ(ctl({"check", "host new.restore.example"}).status, 1);
  std::ofstream(bad) << "src 198.51.100.3\nsrc 198.51.100.4 ttl=5\n";
  r = ctl({"add", "--ttl", "9", "--file", bad});  // the options go after every line
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("bad.list:2: ttl= given twice"), std::string::npos) << r.err;
  EXPECT_EQ(ctl({"check", "src 198.51.100.3"}).status, 1);

  EXPECT_EQ(ctl({"add"}).status, 2);  // rules or --file, not neither or both
  r = ctl({"add", "--file", saved, "host x.example"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("not both"), std::string::npos) << r.err;
  EXPECT_EQ(ctl({"add", "--file", GatewayEnv::dir()}).status, 2);  // a directory
  ASSERT_EQ(ctl({"flush", "all"}).status, 0);
}

}  // namespace
}  // namespace cg::test

int main(int argc, char** argv) { return cg::test::gateway_test_main(argc, argv); }
