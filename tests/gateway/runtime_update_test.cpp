// Runtime rule updates while packets flow: a looping, paced replay with a
// control socket; `add` starts dropping the matching flow, `del` lets it pass
// again; bad commands get errors and change nothing.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gateway_test_env.hpp"
#include "packet_builder.hpp"
#include "pcap_file.hpp"
#include "subprocess.hpp"

namespace cg::test {
namespace {

using namespace std::chrono_literals;

TEST(RuntimeUpdate, AddStartsDroppingTheFlowAndDelLetsItPassAgain) {
  const std::string dir = GatewayEnv::dir();
  const Bytes target = Packet().ipv4("192.0.2.99", "10.1.1.1").udp(4000, 53).payload("target").frame();
  const Bytes other = Packet().ipv4("10.1.1.2", "10.1.1.1").udp(4001, 53).payload("other").frame();
  write_pcap(dir + "/ru-in.pcap", repeated({target, other}, 100));  // x100: --loop reads the file each pass
  std::ofstream(dir + "/ru.rules") << "# starts empty of the target\nsrc 198.51.100.200\n";
  const std::string sock = dir + "/ru.sock";
  Process gw({GatewayEnv::gateway(), "replay", "--rules", dir + "/ru.rules", "--in", dir + "/ru-in.pcap",
              "--out", dir + "/ru-pass.pcap", "--drop", dir + "/ru-drop.pcap", "--ctl", sock, "--loop",
              "2000", "--pps", "20000"},
             dir + "/ru.out", dir + "/ru.err");
  ASSERT_TRUE(wait_for_socket(sock, 20s)) << gw.err();
  CtlClient c(sock);
  ASSERT_TRUE(c.connected());

  // Traffic flows and the target passes.
  ASSERT_TRUE(c.wait_stats([](auto s) { return s["rx"] > 200; })) << gw.err();
  EXPECT_EQ(c.stats()["dropped_by_kind.src"], 0u);

  // add: the target's packets start being dropped.
  EXPECT_EQ(c.ask("add src 192.0.2.99"), "OK added");
  ASSERT_TRUE(c.wait_stats([](auto s) { return s["dropped_by_kind.src"] > 50; }));
  EXPECT_EQ(c.ask("check src 192.0.2.99"), "OK present");
  // Per-rule hit counters: the new rule has its drops, the untouched one none.
  {
    const auto h = c.ask_multi("hits src");
    ASSERT_EQ(h.size(), 2u);
    EXPECT_EQ(h[0].rfind("src 192.0.2.99 hits=", 0), 0u) << h[0];
    EXPECT_GE(std::stoull(h[0].substr(h[0].find("hits=") + 5)), 50u) << h[0];
    EXPECT_EQ(h[1], "src 198.51.100.200 hits=0");
  }

  // Bad commands: an error each, nothing changes, the connection stays usable.
  const auto before = c.ask_multi("list");
  EXPECT_EQ(c.ask("bogus command").rfind("ERR 400", 0), 0u);
  EXPECT_EQ(c.ask("add src 999.1.1.1").rfind("ERR 400", 0), 0u);
  EXPECT_EQ(c.ask("del src 192.0.2.100").rfind("ERR 404", 0), 0u);
  EXPECT_EQ(c.ask("add " + std::string(20000, 'x')).rfind("ERR 413", 0), 0u);
  EXPECT_EQ(c.ask("list nosuchkind").rfind("ERR 400", 0), 0u);
  EXPECT_EQ(c.ask_multi("list"), before);
  EXPECT_EQ(c.ask("ping"), "OK pong");

  // del: it passes again. The burst in flight at the del may still drop.
  EXPECT_EQ(c.ask("del src 192.0.2.99"), "OK deleted");
  ASSERT_TRUE(c.wait_bursts_in_flight());
  const auto s1 = c.stats();
  ASSERT_TRUE(c.wait_stats([&](auto s) { return s["passed"] > s1.at("passed") + 400; }));
  const auto s2 = c.stats();
  EXPECT_EQ(s2.at("dropped_by_kind.src"), s1.at("dropped_by_kind.src"));
  EXPECT_EQ(c.ask("check src 192.0.2.99"), "OK absent");
  // Re-added, the rule's counter starts again from zero (its slot was freed).
  EXPECT_EQ(c.ask("add src 192.0.2.77"), "OK added");
  {
    const auto h = c.ask_multi("hits src 192.0.2.77");
    ASSERT_EQ(h.size(), 1u);
    EXPECT_EQ(h[0], "src 192.0.2.77 hits=0");
  }

  // The first rule of a kind that had none (flow) takes effect too.
  EXPECT_EQ(c.ask("add flow udp 10.1.1.2:4001 10.1.1.1:53"), "OK added");
  ASSERT_TRUE(c.wait_stats([](auto s) { return s["dropped_by_kind.flow"] > 20; }));
  EXPECT_EQ(c.ask("del flow udp 10.1.1.2:4001 10.1.1.1:53"), "OK deleted");

  gw.signal(SIGINT);
  const int st = gw.wait(30s);
  EXPECT_EQ(st, 130) << gw.err();  // interrupted replay: outputs flushed, status says so
  const auto pass = read_pcap(dir + "/ru-pass.pcap");
  const auto drop = read_pcap(dir + "/ru-drop.pcap");
  ASSERT_FALSE(drop.empty());
  std::size_t dropped_other = 0;
  for (const auto& f : drop) {
    EXPECT_TRUE(f == target || f == other);
    dropped_other += f == other;
  }
  EXPECT_GT(dropped_other, 20u);
  // The target passed before the add and after the del.
  std::size_t target_passes = 0;
  for (const auto& f : pass) target_passes += f == target;
  EXPECT_GT(target_passes, 200u);
}

TEST(RuntimeUpdate, SeveralClientsAtOnceEachGetTheirOwnAnswersInOrder) {
  const std::string dir = GatewayEnv::dir();
  write_pcap(dir + "/mc-in.pcap", repeated({Packet().ipv4("10.1.1.2", "10.1.1.1").udp(1, 2).frame()}, 100));
  std::ofstream(dir + "/mc.rules") << "src 198.51.100.200\n";
  const std::string sock = dir + "/mc.sock";
  Process gw({GatewayEnv::gateway(), "replay", "--rules", dir + "/mc.rules", "--in", dir + "/mc-in.pcap",
              "--out", dir + "/mc-pass.pcap", "--ctl", sock, "--loop", "1000", "--pps", "5000"},
             dir + "/mc.out", dir + "/mc.err");
  ASSERT_TRUE(wait_for_socket(sock, 20s)) << gw.err();
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      CtlClient c(sock);
      if (!c.connected()) { ++failures; return; }
      // Pipelined: 200 requests sent at once, answers read afterwards.
      std::string req;
      for (int i = 0; i < 100; ++i) {
        const std::string rule = "dst 10." + std::to_string(t) + "." + std::to_string(i / 250) + "." +
                                 std::to_string(i % 250);
        req += "add " + rule + "\ncheck " + rule + "\n";
      }
      c.send(req);
      for (int i = 0; i < 100; ++i) {
        if (c.line() != "OK added") ++failures;
        if (c.line() != "OK present") ++failures;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0);
  CtlClient c(sock);
  std::string first;
  const auto dsts = c.ask_multi("list dst", &first);
  EXPECT_EQ(first, "OK 400");
  EXPECT_EQ(dsts.size(), 400u);
  gw.signal(SIGTERM);
  EXPECT_EQ(gw.wait(30s), 130);
}

// DPDK's convention, EAL options first: cuckoogate [EAL options] -- run ...
TEST(Run, AcceptsEalOptionsBeforeTheCommand) {
  const std::string sock = GatewayEnv::dir() + "/ealfirst.sock";
  Process gw({GatewayEnv::gateway(), "--no-huge", "--no-pci", "--no-shconf", "-m", "512",
              "--vdev=net_null0", "--vdev=net_null1", "--log-level=lib.eal:error", "--", "run",
              "--ctl", sock},
             GatewayEnv::dir() + "/ealfirst.out", GatewayEnv::dir() + "/ealfirst.err");
  ASSERT_TRUE(wait_for_socket(sock, 30s)) << gw.err();
  CtlClient c(sock);
  EXPECT_EQ(c.ask("ping"), "OK pong");
  gw.signal(SIGTERM);
  EXPECT_EQ(gw.wait(30s), 0) << gw.err();
  EXPECT_NE(gw.out().find("1 port pairs"), std::string::npos) << gw.out();
}

TEST(ControlSocket, AStaleSocketFileIsReplacedAndAnythingElseIsLeftAlone) {
  const std::string dir = GatewayEnv::dir();
  write_pcap(dir + "/st-in.pcap", repeated({Packet().ipv4("10.1.1.2", "10.1.1.1").udp(1, 2).frame()}, 100));
  std::ofstream(dir + "/st.rules") << "src 198.51.100.200\n";
  // A socket file nobody listens on: what a killed gateway leaves behind.
  const std::string stale = dir + "/stale.sock";
  {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, stale.c_str(), sizeof(a.sun_path) - 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    ::close(fd);
  }
  Process gw({GatewayEnv::gateway(), "replay", "--rules", dir + "/st.rules", "--in", dir + "/st-in.pcap",
              "--out", dir + "/st-pass.pcap", "--ctl", stale, "--loop", "1000", "--pps", "2000"},
             dir + "/st.out", dir + "/st.err");
  ASSERT_TRUE(wait_for_socket(stale, 20s)) << gw.err();
  struct stat st {};
  ASSERT_EQ(::stat(stale.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  // A live socket is not taken over by a second gateway.
  Result second = run({GatewayEnv::gateway(), "replay", "--rules", dir + "/st.rules", "--in",
                       dir + "/st-in.pcap", "--out", dir + "/st-pass2.pcap", "--ctl", stale},
                      dir);
  EXPECT_NE(second.status, 0);
  EXPECT_NE(second.err.find("in use"), std::string::npos) << second.err;
  gw.signal(SIGINT);
  EXPECT_EQ(gw.wait(30s), 130);
  // A regular file at the path is never removed.
  const std::string file = dir + "/not-a-socket";
  std::ofstream(file) << "keep me";
  Result r = run({GatewayEnv::gateway(), "replay", "--rules", dir + "/st.rules", "--in", dir + "/st-in.pcap",
                  "--out", dir + "/st-pass3.pcap", "--ctl", file},
                 dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("not a socket"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(file), "keep me");
}

}  // namespace
}  // namespace cg::test

int main(int argc, char** argv) { return cg::test::gateway_test_main(argc, argv); }
