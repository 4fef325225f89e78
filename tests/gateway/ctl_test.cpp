// cuckoogatectl against a running gateway (`cuckoogate run` on net_null
// vdevs): every command, exit codes, messages, and a 100k-rule bulk load.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gateway_test_env.hpp"
#include "subprocess.hpp"

namespace cg::test {
namespace {

using namespace std::chrono_literals;

class Ctl : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    sock_ = GatewayEnv::dir() + "/ctl.sock";
    gw_ = new Process({GatewayEnv::gateway(), "run", "--ctl", sock_, "--", "--no-huge", "--no-pci",
                       "--no-shconf", "-m", "512", "--vdev=net_null0", "--vdev=net_null1",
                       "--log-level=lib.eal:error"},
                      GatewayEnv::dir() + "/gw.out", GatewayEnv::dir() + "/gw.err");
    ASSERT_TRUE(wait_for_socket(sock_, 30s)) << gw_->err();
  }
  static void TearDownTestSuite() {
    gw_->signal(SIGINT);
    const int st = gw_->wait(30s);
    const std::string out = gw_->out();
    delete gw_;
    EXPECT_EQ(st, 0);
    EXPECT_NE(out.find("packets in"), std::string::npos) << out;  // final stats printed
  }
  Result ctl(std::vector<std::string> args, const std::string& in = "/dev/null") {
    args.insert(args.begin(), {GatewayEnv::ctl(), "-s", sock_});
    return run(args, GatewayEnv::dir(), in);
  }
  static std::string sock_;
  static Process* gw_;
};
std::string Ctl::sock_;
Process* Ctl::gw_ = nullptr;

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
  r = run({GatewayEnv::ctl(), "--help"}, GatewayEnv::dir());
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("load"), std::string::npos);
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

// A standard DPDK telemetry client: SOCK_SEQPACKET to the runtime directory's
// dpdk_telemetry.v2, one JSON answer per command.
TEST_F(Ctl, StatsAreServedAsDpdkTelemetryCommands) {
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
  const auto info = query("/cuckoogate/info");
  EXPECT_EQ(info["/cuckoogate/info"]["filter_fingerprint_bits"], 12);
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
}

TEST_F(Ctl, LoadWithABadLineAppliesNothing) {
  const std::string file = GatewayEnv::dir() + "/bad.rules";
  std::ofstream(file) << "src 192.0.2.50\nsrc 192.0.2.51\nsrc nonsense\n";
  Result r = ctl({"load", file});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("line 3"), std::string::npos) << r.err;
  EXPECT_EQ(ctl({"check", "src 192.0.2.50"}).status, 1);
}

}  // namespace
}  // namespace cg::test

int main(int argc, char** argv) { return cg::test::gateway_test_main(argc, argv); }
