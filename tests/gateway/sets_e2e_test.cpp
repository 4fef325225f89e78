// Named sets end to end (issue 12, item 6): `cuckoogatectl load --set NAME
// [--replace]`, `list --set`, `info`, membership across a restart, and a
// gateway killed (SIGKILL) in the middle of a replace comes back with the set
// all old or all new.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gateway_test_env.hpp"
#include "subprocess.hpp"

namespace cg::test {
namespace {

using namespace std::chrono_literals;

// `cuckoogate run --state-dir STATE` on net_null vdevs.
class Gateway {
 public:
  Gateway(const std::string& name, const std::string& state) {
    sock_ = GatewayEnv::dir() + "/" + name + ".sock";
    proc_.reset(start_null_gateway(GatewayEnv::gateway(), sock_, GatewayEnv::dir(), &err_, {"--state-dir", state},
                                   name));
  }
  bool up() const { return proc_ != nullptr; }
  const std::string& err() const { return err_; }
  const std::string& sock() const { return sock_; }
  Process& proc() { return *proc_; }
  Result ctl(std::vector<std::string> args, const std::string& in = "/dev/null") {
    args.insert(args.begin(), {GatewayEnv::ctl(), "-s", sock_});
    return run(args, GatewayEnv::dir(), in);
  }
  void stop() {
    proc_->signal(SIGTERM);
    EXPECT_EQ(proc_->wait(30s), 0);
  }

 private:
  std::string sock_, err_;
  std::unique_ptr<Process> proc_;
};

std::string write(const std::string& name, const std::string& text) {
  const std::string path = GatewayEnv::dir() + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(SetsE2e, LoadIntoASetReplaceItListItAndKeepItAcrossARestart) {
  const std::string state = GatewayEnv::dir() + "/state-sets";
  {
    Gateway g("sets1", state);
    ASSERT_TRUE(g.up()) << g.err();
    const std::string v1 = write("ads-v1.hosts", "0.0.0.0 a.ads.test b.ads.test\n0.0.0.0 c.ads.test\n");
    Result r = g.ctl({"load", "--format", "hosts", "--set", "ads", v1});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("added 3"), std::string::npos) << r.out;
    ASSERT_EQ(g.ctl({"add", "host own.test"}).status, 0);  // the default set
    ASSERT_EQ(g.ctl({"add", "--set", "manual", "src 192.0.2.5"}).status, 0);
    const std::string v2 = write("ads-v2.hosts", "0.0.0.0 b.ads.test\n0.0.0.0 c.ads.test d.ads.test own.test\n");
    r = g.ctl({"load", "--format", "hosts", "--set", "ads", "--replace", v2});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "replaced set ads: loaded 4 added 1 deleted 1 kept 2 elsewhere 1\n");
    r = g.ctl({"list", "--set", "ads"});
    EXPECT_EQ(r.out, "host b.ads.test set=ads\nhost c.ads.test set=ads\nhost d.ads.test set=ads\n");
    r = g.ctl({"info"});
    EXPECT_NE(r.out.find("sets.ads 3\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("sets.default 1\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("sets.manual 1\n"), std::string::npos) << r.out;
    // A replace from an input whose every line is bad (an error page instead
    // of the feed) is refused, with --skip-bad too: the set stays as it was.
    const std::string page = write("ads-error.hosts", "<html>\n<body>503 Service Unavailable</body>\n</html>\n");
    r = g.ctl({"load", "--format", "hosts", "--set", "ads", "--replace", "--skip-bad", page});
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("every line was bad"), std::string::npos) << r.err;
    EXPECT_EQ(g.ctl({"list", "--set", "ads"}).out,
              "host b.ads.test set=ads\nhost c.ads.test set=ads\nhost d.ads.test set=ads\n");
    // An input with no rule that is not empty (a hosts file cut after its
    // header and localhost lines) is refused too; an empty one empties the
    // set. (It emptied the set.)
    const std::string header = write("ads-cut.hosts", "# StevenBlack hosts\n127.0.0.1 localhost\n::1 localhost\n");
    r = g.ctl({"load", "--format", "hosts", "--set", "ads", "--replace", header});
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("no rule in it"), std::string::npos) << r.err;
    const std::string comments = write("ads-comments.rules", "# nothing yet\n\n");
    EXPECT_EQ(g.ctl({"load", "--set", "ads", "--replace", comments}).status, 2);
    EXPECT_EQ(g.ctl({"list", "--set", "ads"}).out,
              "host b.ads.test set=ads\nhost c.ads.test set=ads\nhost d.ads.test set=ads\n");
    ASSERT_EQ(g.ctl({"add", "--set", "scratch", "host s.test"}).status, 0);
    r = g.ctl({"load", "--set", "scratch", "--replace", write("empty.rules", "")});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "replaced set scratch: loaded 0 added 0 deleted 1 kept 0 elsewhere 0\n");
    // --replace means a set; bad set names are the gateway's 400.
    EXPECT_EQ(g.ctl({"load", "--replace", v2}).status, 2);
    r = g.ctl({"load", "--set", "Ads", v2});
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("bad set name"), std::string::npos) << r.err;
    g.stop();
  }
  Gateway g("sets2", state);
  ASSERT_TRUE(g.up()) << g.err();
  EXPECT_EQ(g.ctl({"list", "--set", "ads"}).out,
            "host b.ads.test set=ads\nhost c.ads.test set=ads\nhost d.ads.test set=ads\n");
  EXPECT_EQ(g.ctl({"list", "--set", "manual"}).out, "src 192.0.2.5 set=manual\n");
  EXPECT_EQ(g.ctl({"check", "host a.ads.test"}).status, 1);
  g.stop();
}

std::string addr(int i) {  // 10.a.b.c, distinct for i < 2^24
  return "10." + std::to_string((i >> 16) & 255) + "." + std::to_string((i >> 8) & 255) + "." +
         std::to_string(i & 255);
}

std::string addr_list(int from, int to) {  // a cidr feed
  std::string s;
  for (int i = from; i < to; ++i) s += addr(i) + "\n";
  return s;
}

// [[rules]] set = "NAME" in the configuration: a feed read at start joins
// its set, as `cuckoogatectl load --set NAME` would.
TEST(SetsE2e, ConfigFeedsJoinTheirNamedSets) {
  const std::string ads = write("cfg-ads.hosts", "0.0.0.0 a.cfg.test b.cfg.test\n");
  const std::string drop = write("cfg-drop.txt", "198.51.100.0/24 ; SBL1\n");
  const std::string cfg = write("cfg-sets.toml", "[[rules]]\npath = \"" + ads +
                                                   "\"\nformat = \"hosts\"\nset = \"ads\"\n"
                                                   "[[rules]]\npath = \"" + drop +
                                                   "\"\nformat = \"cidr\"\n");
  const std::string sock = GatewayEnv::dir() + "/cfgsets.sock";
  std::string err;
  std::unique_ptr<Process> gw(
      start_null_gateway(GatewayEnv::gateway(), sock, GatewayEnv::dir(), &err, {"--config", cfg}, "cfgsets"));
  ASSERT_NE(gw, nullptr) << err;
  const Result l = run({GatewayEnv::ctl(), "-s", sock, "list"}, GatewayEnv::dir());
  EXPECT_EQ(l.out, "ip 198.51.100.0/24\nhost a.cfg.test set=ads\nhost b.cfg.test set=ads\n");
  const Result i = run({GatewayEnv::ctl(), "-s", sock, "info"}, GatewayEnv::dir());
  EXPECT_NE(i.out.find("sets.ads 2\n"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("sets.default 1\n"), std::string::npos) << i.out;
  // SIGHUP (a closed terminal) stops it as cleanly as SIGTERM: the control
  // socket is removed (the default action killed it and left the socket).
  gw->signal(SIGHUP);
  EXPECT_EQ(gw->wait(30s), 0);
  EXPECT_FALSE(std::filesystem::exists(sock));
}

TEST(SetsE2e, AGatewayKilledDuringAReplaceRestartsWithTheSetAllOldOrAllNew) {
  const std::string state = GatewayEnv::dir() + "/state-crash";
  constexpr int kOld = 40000, kNew = 40000, kShared = 8000;
  // old: [0, kOld); new: [kOld - kShared, kOld - kShared + kNew)
  const std::string old_feed = write("old.cidr", addr_list(0, kOld));
  const std::string new_feed = write("new.cidr", addr_list(kOld - kShared, kOld - kShared + kNew));
  // How long a whole replace takes here (a loaded machine varies): the kills
  // land at fractions of it, most near the end, where the gateway applies
  // the batch and writes its journal transaction.
  std::chrono::milliseconds full{0};
  {
    Gateway g("crash-timing", state);
    ASSERT_TRUE(g.up()) << g.err();
    ASSERT_EQ(g.ctl({"load", "--format", "cidr", "--set", "feed", "--replace", old_feed}).status, 0);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(g.ctl({"load", "--format", "cidr", "--set", "feed", "--replace", new_feed}).status, 0);
    full = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    g.stop();
  }
  std::vector<std::chrono::milliseconds> delays;
  for (const int pct : {15, 30, 45, 60, 80}) delays.push_back(full * pct / 100);
  int saw_old = 0, saw_new = 0;
  for (std::size_t round = 0; round < delays.size(); ++round) {
    {
      // The set holds the old feed, acknowledged.
      Gateway g("crash-a" + std::to_string(round), state);
      ASSERT_TRUE(g.up()) << g.err();
      const Result r = g.ctl({"load", "--format", "cidr", "--set", "feed", "--replace", old_feed});
      ASSERT_EQ(r.status, 0) << r.err;
      // Replace it with the new feed and kill the gateway while that runs.
      Process load({GatewayEnv::ctl(), "-s", g.sock(), "load", "--format", "cidr", "--set", "feed", "--replace",
                    new_feed},
                   GatewayEnv::dir() + "/crash-load.out", GatewayEnv::dir() + "/crash-load.err");
      std::this_thread::sleep_for(delays[round]);
      g.proc().signal(SIGKILL);
      EXPECT_EQ(g.proc().wait(30s), 128 + SIGKILL);
      load.wait(30s);
    }
    Gateway g("crash-b" + std::to_string(round), state);
    ASSERT_TRUE(g.up()) << g.err();
    const Result info = g.ctl({"info"});
    const std::string old_only = "ip " + addr(0), new_only = "ip " + addr(kOld - kShared + kNew - 1);
    const bool is_old = info.out.find("sets.feed " + std::to_string(kOld) + "\n") != std::string::npos &&
                        g.ctl({"check", old_only}).status == 0 && g.ctl({"check", new_only}).status == 1;
    const bool is_new = info.out.find("sets.feed " + std::to_string(kNew) + "\n") != std::string::npos &&
                        g.ctl({"check", old_only}).status == 1 && g.ctl({"check", new_only}).status == 0;
    EXPECT_TRUE(is_old || is_new) << "round " << round << ": " << info.out;
    // Every rule of the one it is, and nothing of the other.
    const Result listed = g.ctl({"list", "--set", "feed"});
    const auto n = static_cast<int>(std::count(listed.out.begin(), listed.out.end(), '\n'));
    EXPECT_EQ(n, is_new ? kNew : kOld) << "round " << round;
    saw_old += is_old;
    saw_new += is_new;
    g.stop();
  }
  std::printf("[ crash    ] a replace takes %lld ms; %d kills: set all old %d times, all new %d times\n",
              static_cast<long long>(full.count()), static_cast<int>(delays.size()), saw_old, saw_new);
}

}  // namespace
}  // namespace cg::test

int main(int argc, char** argv) { return cg::test::gateway_test_main(argc, argv); }
