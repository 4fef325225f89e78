// End-to-end: the `cuckoogate` command line and what it leaves behind. Files
// replay would destroy, --pps, EAL options in either order, EAL failures in
// DPDK's words, the EAL runtime directory, and the bad-frame warning.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gateway_test_env.hpp"
#include "packet_builder.hpp"
#include "pcap_file.hpp"
#include "subprocess.hpp"

namespace cg::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

class Cli : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = GatewayEnv::dir() + "/" + info->name();
    fs::create_directories(dir_);
    rules_ = path("r.rules");
    std::ofstream(rules_) << "src 192.0.2.7\n";
    frames_ = {Packet().ipv4("192.0.2.7", "10.1.1.1").udp(1, 2).frame(),
               Packet().ipv4("10.1.1.1", "10.1.1.2").udp(1, 2).frame()};
    in_ = path("in.pcap");
    write_pcap(in_, frames_);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  Result cuckoogate(std::vector<std::string> args) const {
    args.insert(args.begin(), GatewayEnv::gateway());
    return run(args, dir_);
  }
  // A replay of in_ with these output options.
  Result replay(const std::vector<std::string>& outputs) const {
    std::vector<std::string> a = {"replay", "--rules", rules_, "--in", in_};
    a.insert(a.end(), outputs.begin(), outputs.end());
    return cuckoogate(a);
  }
  std::string dir_, rules_, in_;
  std::vector<Bytes> frames_;
};

// --- replay must not destroy its input --------------------------------------

TEST_F(Cli, ReplayRefusesToWriteItsInputAndLeavesItUntouched) {
  const std::string before = slurp(in_);
  const Result r = replay({"--out", in_});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("same file"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(in_), before);
}

TEST_F(Cli, ReplayComparesFilesNotNames) {
  const std::string before = slurp(in_);
  fs::create_hard_link(in_, path("hard.pcap"));
  fs::create_symlink(in_, path("soft.pcap"));
  for (const std::string& alias : {path("hard.pcap"), path("soft.pcap"), dir_ + "/./in.pcap",
                                   dir_ + "/../" + fs::path(dir_).filename().string() + "/in.pcap"}) {
    for (const char* opt : {"--out", "--drop", "--stats-json"}) {
      std::vector<std::string> o = {"--out", path("pass.pcap")};
      if (std::string(opt) == "--out") o.clear();
      o.push_back(opt);
      o.push_back(alias);
      const Result r = replay(o);
      EXPECT_EQ(r.status, 2) << opt << " " << alias << ": " << r.err;
      EXPECT_NE(r.err.find("same file"), std::string::npos) << r.err;
    }
  }
  EXPECT_EQ(slurp(in_), before);
  EXPECT_FALSE(fs::exists(path("pass.pcap")));  // refused before anything was opened
}

TEST_F(Cli, ReplayRefusesTwoOutputsInOneFileEvenBeforeItExists) {
  // Relative and absolute spellings of a file that does not exist yet.
  const fs::path cwd = fs::current_path();
  fs::current_path(dir_);  // the child's working directory too
  Result r = replay({"--out", "a.pcap", "--drop", "./a.pcap"});
  fs::current_path(cwd);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("same file"), std::string::npos) << r.err;
  fs::create_directories(path("sub"));
  r = replay({"--out", path("b.pcap"), "--stats-json", dir_ + "/sub/../b.pcap"});
  EXPECT_EQ(r.status, 2) << r.err;
  // A dangling symlink names the file writing through it would create.
  fs::create_symlink(path("c.pcap"), path("link.pcap"));
  r = replay({"--out", path("c.pcap"), "--drop", path("link.pcap")});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_FALSE(fs::exists(path("a.pcap")));
  EXPECT_FALSE(fs::exists(path("b.pcap")));
  EXPECT_FALSE(fs::exists(path("c.pcap")));
  // Refusing the rules file as an output keeps the rules too.
  r = replay({"--out", rules_});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(slurp(rules_), "src 192.0.2.7\n");
}

TEST_F(Cli, ReplayStillAcceptsDistinctFilesAndDevNullTwice) {
  Result r = replay({"--out", path("p.pcap"), "--drop", path("d.pcap"), "--stats-json", path("s.json")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_pcap(path("p.pcap")), std::vector<Bytes>{frames_[1]});
  EXPECT_EQ(read_pcap(path("d.pcap")), std::vector<Bytes>{frames_[0]});
  r = replay({"--out", "/dev/null", "--drop", "/dev/null", "--quiet"});
  EXPECT_EQ(r.status, 0) << r.err;
  // A replay that went well says nothing on stderr either: not even DPDK's
  // fragment table's "USER1: rte_ip_frag_table_create: allocated ..." line.
  EXPECT_EQ(r.err, "");
}

TEST_F(Cli, ReplayRefusesARateThatIsNotPositive) {
  for (const char* pps : {"0", "-1", "-0.5", "0.4", "nan", "inf", "1e30"}) {
    Result r = replay({"--out", path("p.pcap"), "--pps", pps});
    EXPECT_EQ(r.status, 2) << "--pps " << pps << ": " << r.err;
    EXPECT_NE(r.err.find("--pps"), std::string::npos) << r.err;
    r = replay({"--out", path("p.pcap"), std::string("--pps=") + pps});
    EXPECT_EQ(r.status, 2) << "--pps=" << pps << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(path("p.pcap")));
  const Result r = replay({"--out", path("p.pcap"), "--pps", "100000"});
  EXPECT_EQ(r.status, 0) << r.err;
}

TEST_F(Cli, AnEmptyPathIsRefusedNotTakenAsTheDefault) {
  Result r = replay({"--out", path("p.pcap"), "--ctl", ""});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--ctl"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("an empty path"), std::string::npos) << r.err;
  for (const char* opt : {"--ctl", "--state-dir"}) {
    r = cuckoogate({"run", opt, "", "--", "--no-huge", "--no-pci", "--no-shconf", "-m", "512"});
    EXPECT_EQ(r.status, 2) << opt << ": " << r.err;
    EXPECT_NE(r.err.find(opt), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("an empty path"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(path("p.pcap")));
}

// --- EAL options in either order ---------------------------------------------

// `run` on two net_pcap ports whose EAL arguments contain '=' and ','.
class CliRun : public Cli {
 protected:
  std::vector<std::string> eal() const {
    return {"--no-huge", "--no-pci", "--no-shconf", "-m", "512", "--log-level=lib.eal:error",
            "--vdev", "net_pcap0,rx_pcap=" + in_ + ",tx_pcap=" + path("tx0.pcap"),
            "--vdev", "net_pcap1,rx_pcap=" + in_ + ",tx_pcap=" + path("tx1.pcap")};
  }
  // Starts `run` with these arguments, checks it serves and stops cleanly.
  void serves(const std::vector<std::string>& args, const std::string& sock) {
    std::vector<std::string> argv = {GatewayEnv::gateway()};
    argv.insert(argv.end(), args.begin(), args.end());
    Process gw(argv, sock + ".out", sock + ".err");
    ASSERT_TRUE(wait_for_socket(sock, 30s)) << gw.err();
    CtlClient c(sock);
    EXPECT_EQ(c.ask("check src 192.0.2.7").rfind("OK", 0), 0u);  // the --rules file was loaded
    gw.signal(SIGTERM);
    EXPECT_EQ(gw.wait(30s), 0) << gw.err();
    EXPECT_NE(gw.out().find("1 port pairs"), std::string::npos) << gw.out();
  }
};

TEST_F(CliRun, EalOptionsWithCommasAndEqualsAfterTheCommand) {
  const std::string sock = path("after.sock");
  std::vector<std::string> a = {"run", "--workers", "1", "--verify", "--ctl", sock, "--rules", rules_, "--"};
  const auto e = eal();
  a.insert(a.end(), e.begin(), e.end());
  serves(a, sock);
}

TEST_F(CliRun, EalOptionsWithCommasAndEqualsBeforeTheCommand) {
  const std::string sock = path("before.sock");
  std::vector<std::string> a = eal();
  for (const std::string& s : std::vector<std::string>{"--", "run", "--ctl", sock, "--workers", "1", "--rules", rules_})
    a.push_back(s);
  serves(a, sock);
}

TEST_F(Cli, ReplayTakesEalOptionsInEitherOrder) {
  const std::string vdev = "--vdev=net_null9,size=64,no-rx=1";
  Result r = cuckoogate({"replay", "--in", in_, "--out", path("a.pcap"), "--rules", rules_, "--",
                         vdev, "--log-level=lib.eal:error"});
  EXPECT_EQ(r.status, 0) << r.err;
  r = cuckoogate({vdev, "--log-level=lib.eal:error", "--", "replay", "--rules", rules_, "--in", in_,
                  "--out", path("b.pcap")});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_pcap(path("a.pcap")), std::vector<Bytes>{frames_[1]});
  EXPECT_EQ(read_pcap(path("b.pcap")), std::vector<Bytes>{frames_[1]});
}

TEST_F(Cli, EalOptionsWithoutTheDoubleDashGetAHintInOrder) {
  Result r = cuckoogate({"run", "--ctl", path("x.sock"), "--vdev=net_null0", "--no-huge", "-m", "512"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--vdev=net_null0 --no-huge -m 512"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("after `--`"), std::string::npos) << r.err;
  r = cuckoogate({"replay", "--rules", rules_, "--in", in_, "--out", path("p.pcap"), "--no-huge"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("`--`"), std::string::npos) << r.err;
  r = cuckoogate({"--no-huge", "run"});  // EAL options first, the `--` forgotten
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("`--`"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("p.pcap")));
}

// --- EAL failures in DPDK's words --------------------------------------------

TEST_F(Cli, AFilePrefixInUseIsReportedWithDpdksReason) {
  const std::string prefix = "cg-cli-busy-" + std::to_string(getpid());
  const std::vector<std::string> eal = {"--no-huge", "--no-pci", "-m", "512", "--file-prefix=" + prefix,
                                        "--vdev=net_null0", "--vdev=net_null1", "--log-level=lib.eal:error"};
  const std::string sock = path("busy.sock");
  std::vector<std::string> first = {GatewayEnv::gateway(), "run", "--ctl", sock, "--"};
  first.insert(first.end(), eal.begin(), eal.end());
  {
    Process holder(first, path("holder.out"), path("holder.err"));
    ASSERT_TRUE(wait_for_socket(sock, 30s)) << holder.err();
    std::vector<std::string> second = {"run", "--ctl", path("busy2.sock"), "--"};
    second.insert(second.end(), eal.begin(), eal.end());
    const Result r = cuckoogate(second);
    EXPECT_EQ(r.status, 1);
    const std::size_t at = r.err.rfind("EAL initialisation failed");
    ASSERT_NE(at, std::string::npos) << r.err;
    const std::string last = r.err.substr(at);
    EXPECT_EQ(last.find("Success"), std::string::npos) << r.err;
    EXPECT_NE(last.find("Is another primary process running?"), std::string::npos) << r.err;
    holder.signal(SIGTERM);
    EXPECT_EQ(holder.wait(30s), 0) << holder.err();
  }
  // A prefix the user names keeps DPDK's shared files (other processes may
  // use them); this test's own are removed here.
  std::error_code ec;
  fs::remove_all(eal_runtime_base() + "/" + prefix, ec);
}

TEST_F(Cli, AMissingPairDeviceIsReportedWithThePortsEalHas) {
  const std::string cfg = path("pair.toml");
  std::ofstream(cfg) << "[[pair]]\nports = [\"net_null0\", \"nosuch\"]\n";
  const Result r = cuckoogate({"run", "--config", cfg, "--ctl", path("p.sock"), "--", "--no-huge",
                               "--no-pci", "--no-shconf", "-m", "512", "--vdev=net_null0",
                               "--vdev=net_null1", "--log-level=lib.eal:error"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("'nosuch' not found (EAL ports: 2)"), std::string::npos) << r.err;
  // A port used twice, in one pair or in two (by name or number), names the
  // pair and the port (it failed in DPDK with "Device or resource busy").
  for (const char* pairs : {"[[pair]]\nports = [\"net_null0\", \"net_null0\"]\n",
                            "[[pair]]\nports = [\"net_null0\", \"net_null1\"]\n[[pair]]\nports = [1, 0]\n"}) {
    std::ofstream(cfg) << pairs;
    const Result d = cuckoogate({"run", "--config", cfg, "--ctl", path("p.sock"), "--", "--no-huge",
                                 "--no-pci", "--no-shconf", "-m", "512", "--vdev=net_null0",
                                 "--vdev=net_null1", "--log-level=lib.eal:error"});
    EXPECT_EQ(d.status, 2) << pairs;
    EXPECT_NE(d.err.find("].ports: port "), std::string::npos) << d.err;
    EXPECT_NE(d.err.find("is already paired"), std::string::npos) << d.err;
  }
}

// --- nothing left behind -------------------------------------------------------

TEST_F(Cli, ReplayAndRunLeaveNoEalRuntimeDirectory) {
  Process rep({GatewayEnv::gateway(), "replay", "--rules", rules_, "--in", in_, "--out", path("p.pcap")},
              path("rep.out"), path("rep.err"));
  ASSERT_EQ(rep.wait(60s), 0) << rep.err();
  EXPECT_FALSE(fs::exists(eal_runtime_base() + "/cuckoogate-replay-" + std::to_string(rep.pid())));

  const std::string sock = path("rt.sock");
  Process gw({GatewayEnv::gateway(), "run", "--ctl", sock, "--", "--no-huge", "--no-pci", "--no-shconf",
              "-m", "512", "--vdev=net_null0", "--vdev=net_null1", "--log-level=lib.eal:error"},
             path("run.out"), path("run.err"));
  ASSERT_TRUE(wait_for_socket(sock, 30s)) << gw.err();
  const std::string own = eal_runtime_base() + "/cuckoogate-" + std::to_string(gw.pid());
  EXPECT_TRUE(fs::exists(own));  // the right place to look
  gw.signal(SIGTERM);
  ASSERT_EQ(gw.wait(30s), 0) << gw.err();
  EXPECT_FALSE(fs::exists(own));

  // A prefix of the user's own, without shared files: left empty, so removed.
  const std::string prefix = "cg-cli-own-" + std::to_string(getpid());
  const Result r = cuckoogate({"replay", "--rules", rules_, "--in", in_, "--out", path("q.pcap"), "--",
                               "--file-prefix=" + prefix});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(fs::exists(eal_runtime_base() + "/" + prefix));
}

// Several workers on devices that offer no RSS (net_pcap here; net_af_packet,
// which an outside check ran with two workers, likewise): the device picks
// each packet's queue, so the operator is told a flow may reach two workers.
TEST_F(Cli, RunWarnsWhenQueuesAreSpreadWithoutRss) {
  auto start = [&](const std::string& tag, unsigned workers) {
    const std::string sock = path(tag + ".sock");
    std::vector<std::string> a = {GatewayEnv::gateway(), "run", "--workers", std::to_string(workers), "--ctl", sock,
                                  "--", "--no-huge", "--no-pci", "--no-shconf", "-m", "512",
                                  "--lcores=(0-2)@(0-1)", "--log-level=lib.eal:error"};  // 3 lcores on 2 CPUs
    for (const char* port : {"0", "1"}) {
      std::string v = std::string("--vdev=net_pcap") + port + tag;
      for (unsigned q = 0; q < workers; ++q) v += ",rx_pcap=" + in_ + ",tx_pcap=" + path(tag + port + std::to_string(q) + ".pcap");
      a.push_back(v);
    }
    Process gw(a, path(tag + ".out"), path(tag + ".err"));
    EXPECT_TRUE(wait_for_socket(sock, 30s)) << gw.err();
    gw.signal(SIGTERM);
    EXPECT_EQ(gw.wait(30s), 0) << gw.err();
    return gw.err();
  };
  const std::string two = start("w2", 2);
  EXPECT_NE(two.find("2 rx queues but the device offers no RSS"), std::string::npos) << two;
  const std::string one = start("w1", 1);
  EXPECT_EQ(one.find("offers no RSS"), std::string::npos) << one;
}

// Two ports on one kernel interface: refused before any frame moves (an
// outside check paired two af_packet ports on one veth; the gateway looped
// every frame back out where it came in).
TEST_F(Cli, RunRefusesTwoPortsOnOneInterface) {
  const Result r = cuckoogate({"run", "--ctl", path("dup.sock"), "--", "--no-huge", "--no-pci", "--no-shconf", "-m",
                               "512", "--vdev=net_af_packet0,iface=lo", "--vdev=net_af_packet1,iface=lo,qpairs=1",
                               "--log-level=lib.eal:error"});
  if (r.err.find("both on interface") == std::string::npos && r.err.find("af_packet") != std::string::npos)
    GTEST_SKIP() << "no packet sockets here: " << r.err;
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("ports 'net_af_packet0' and 'net_af_packet1' are both on interface lo"), std::string::npos)
      << r.err;
}

// --- bad frames are reported ---------------------------------------------------

// What GRO on an af_packet port delivers: a merged segment longer than the
// MTU, cut to the ring's frame size (IP total length beyond the frame).
Bytes gro_frame(int i) {
  Bytes f = Packet().ipv4("10.1.1.1", "10.1.1.2").tcp(static_cast<uint16_t>(40000 + i), 80)
                .payload(std::string(1800, 'x')).frame();
  f[14 + 2] = 0x40;  // total length 16384
  f[14 + 3] = 0x00;
  return f;
}

TEST_F(Cli, ClimbingMalformedAndOversizedFramesAreWarnedAboutOncePerPort) {
  std::vector<Bytes> bad;
  for (int i = 0; i < 200; ++i) bad.push_back(gro_frame(i));
  write_pcap(path("gro.pcap"), bad);
  Result r = cuckoogate({"replay", "--rules", rules_, "--in", path("gro.pcap"), "--out", path("p.pcap"),
                         "--stats-json", path("s.json")});
  ASSERT_EQ(r.status, 0) << r.err;
  // One warning per kind: the first look (after a burst or after all 200)
  // reports, the rest falls within the 10 s that follow.
  EXPECT_EQ(count_of(r.err, "malformed frames (truncated"), 1u) << r.err;
  EXPECT_EQ(count_of(r.err, "frames longer than its MTU 1500"), 1u) << r.err;
  EXPECT_NE(r.err.find("ethtool -K"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("net_pcap_in"), std::string::npos) << r.err;
  EXPECT_NE(slurp(path("s.json")).find("\"oversized\": 200"), std::string::npos);
  // Through rte_log: DPDK's --log-level silences our log type.
  r = cuckoogate({"replay", "--rules", rules_, "--in", path("gro.pcap"), "--out", path("p2.pcap"), "--",
                  "--log-level=cuckoogate.dataplane:error"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("malformed frames"), std::string::npos) << r.err;
  // A stray malformed frame among good ones is not worth a warning.
  std::vector<Bytes> mixed(300, frames_[1]);
  mixed[150] = gro_frame(0);
  write_pcap(path("mixed.pcap"), mixed);
  r = cuckoogate({"replay", "--rules", rules_, "--in", path("mixed.pcap"), "--out", path("p3.pcap")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("malformed frames"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace cg::test

int main(int argc, char** argv) { return cg::test::gateway_test_main(argc, argv); }
