// `cuckoogatectl load --format hosts|domains|cidr [--as KIND] [--skip-bad]`
// against a running gateway (issue 12, items 5 and 7): every format end to
// end, errors that name the file and line and load nothing, --skip-bad, and
// progress on a terminal only.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gateway_test_env.hpp"
#include "subprocess.hpp"

namespace cg::test {
namespace {

using namespace std::chrono_literals;

class Feeds : public NullGatewaySuite {
 protected:
  bool present(const std::string& rule) { return ctl({"check", rule}).status == 0; }
  static std::string write(const std::string& name, const std::string& text) {
    const std::string path = GatewayEnv::dir() + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
};

TEST_F(Feeds, HostsFileBecomesHostRulesWithoutTheMachinesOwnNames) {
  const std::string f = write("ads.hosts",
                              "# ad servers\r\n"
                              "127.0.0.1 localhost\r\n"
                              "::1 localhost ip6-localhost ip6-loopback\n"
                              "255.255.255.255 broadcasthost\n"
                              "0.0.0.0 ads.hosts.test # banner\n"
                              "0.0.0.0 a.hosts.test B.Hosts.Test\n");
  Result r = ctl({"load", "--format", "hosts", f});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("loaded 3 added 3"), std::string::npos) << r.out;
  EXPECT_TRUE(present("host ads.hosts.test"));
  EXPECT_TRUE(present("host b.hosts.test"));
  EXPECT_FALSE(present("host localhost"));
  EXPECT_FALSE(present("host ip6-localhost"));
  EXPECT_EQ(ctl({"list", "host", "localhost"}).out, "");
  EXPECT_EQ(r.err, "");  // not a terminal: no progress, nothing on stderr
}

// A feed loaded without --format is refused as a rule file; the error names
// the format its first rule line reads as (an operator loading a hosts file
// got "expected rule kind" and no hint).
TEST_F(Feeds, AFeedLoadedAsRulesGetsAFormatHint) {
  const std::pair<const char*, const char*> cases[] = {
      {"# ads\n127.0.0.1 localhost\n0.0.0.0 hint.hosts.test\n", "--format hosts"},
      {"; drop\n192.0.2.0/24 ; SBL1\n", "--format cidr"},
      {"hint.domains.test\n", "--format domains"}};
  for (const auto& [text, hint] : cases) {
    const Result r = ctl({"load", write("hint.txt", text)});
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("expected rule kind"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(hint), std::string::npos) << r.err;
  }
  const Result plain = ctl({"load", write("bad.rules", "src 192.0.2.1\nsrc nonsense here\n")});
  EXPECT_EQ(plain.status, 2);
  EXPECT_EQ(plain.err.find("--format"), std::string::npos) << plain.err;  // a rule file's own error: no hint
}

TEST_F(Feeds, DomainListFromStdin) {
  const std::string f = write("list.domains", "# trackers\nt1.domains.test\n\nT2.Domains.Test.  # x\n");
  Result r = ctl({"load", "--format", "domains", "-"}, f);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("added 2"), std::string::npos) << r.out;
  EXPECT_TRUE(present("host t2.domains.test"));
}

// A file saved with a UTF-8 byte-order mark loads as without one, whether
// cuckoogatectl parses it (hosts) or sends it as it is (rules).
TEST_F(Feeds, AByteOrderMarkBeforeLineOneIsSkipped) {
  const std::string h = write("bom.hosts", "\xEF\xBB\xBF" "0.0.0.0 bom.hosts.test\n");
  Result r = ctl({"load", "--format", "hosts", h});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(present("host bom.hosts.test"));
  const std::string f = write("bom.rules", "\xEF\xBB\xBF" "src 192.0.2.95\n");
  r = ctl({"load", f});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(present("src 192.0.2.95"));
}

// A pipe that delivers slowly: each rule that is ready goes out before
// cuckoogatectl waits for more, so a gateway whose idle timeout (2 s here) is
// shorter than the whole load but longer than every pause takes it all; a
// pipe silent for longer ends with the gateway's own reason, not EPIPE. The
// same for `load` and for `add --file -`.
TEST(SlowPipe, RulesGoOutBeforeWaitingAndASilentPipeEndsWithTheGatewaysReason) {
  const std::string dir = GatewayEnv::dir();
  const std::string conf = dir + "/idle2.toml";
  std::ofstream(conf) << "[gateway]\nctl_idle_timeout = 2\n";
  const std::string sock = dir + "/idle2.sock";
  std::string err;
  Process* gw = start_null_gateway(GatewayEnv::gateway(), sock, dir, &err, {"--config", conf}, "idle2");
  ASSERT_NE(gw, nullptr) << err;
  const std::string ctl = GatewayEnv::ctl() + " -s " + sock;
  Result r = run({"/bin/sh", "-c",
                  "(echo 198.51.100.1; sleep 1; echo 198.51.100.2; sleep 1; echo 198.51.100.3; sleep 1; "
                  "echo 198.51.100.4) | " + ctl + " load --format cidr -"},
                 dir);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("added 4"), std::string::npos) << r.out << r.err;
  r = run({"/bin/sh", "-c", "(sleep 4; echo 198.51.100.9) | " + ctl + " load --format cidr -"}, dir);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("ERR 408 idle timeout"), std::string::npos) << r.err;
  EXPECT_EQ(run({GatewayEnv::ctl(), "-s", sock, "check", "ip 198.51.100.9"}, dir).status, 1);
  // `add --file -` restores a `list` the same way (one batch of adds).
  r = run({"/bin/sh", "-c",
           "(echo 'src 198.51.100.21'; sleep 1; echo 'dst 198.51.100.22 ttl=3600'; sleep 1; "
           "echo 'src 198.51.100.23 action=reject'; sleep 1; echo 'src 198.51.100.24') | " + ctl + " add --file -"},
          dir);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("added 4"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(run({GatewayEnv::ctl(), "-s", sock, "check", "src 198.51.100.24"}, dir).status, 0);
  r = run({"/bin/sh", "-c", "(sleep 4; echo 'src 198.51.100.29') | " + ctl + " add --file -"}, dir);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("ERR 408 idle timeout"), std::string::npos) << r.err;
  EXPECT_EQ(run({GatewayEnv::ctl(), "-s", sock, "check", "src 198.51.100.29"}, dir).status, 1);
  gw->signal(SIGINT);
  EXPECT_EQ(gw->wait(std::chrono::seconds(30)), 0);
  delete gw;
}

TEST_F(Feeds, CidrListsBecomeIpRulesOrTheKindAsks) {
  const std::string f = write("drop.txt", "; Spamhaus DROP List\n198.18.0.7 ; SBL1\n# FireHOL\n2001:db8::77\n");
  Result r = ctl({"load", "--format", "cidr", f});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(present("ip 198.18.0.7"));
  EXPECT_TRUE(present("ip 2001:db8::77"));
  EXPECT_FALSE(present("src 198.18.0.7"));
  r = ctl({"load", "--format", "cidr", "--as", "src", f});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(present("src 198.18.0.7"));
  r = ctl({"load", "--format", "cidr", "--as", "dst", f});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(present("dst 2001:db8::77"));
  // Prefixes, as Spamhaus DROP and FireHOL netsets list them (rule language: `ip ADDR/LEN`).
  const std::string p = write("drop-prefixes.txt", "; DROP\n198.18.0.0/15 ; SBL2\n2001:db8:100::/40\n");
  r = ctl({"load", "--format", "cidr", p});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(present("ip 198.18.0.0/15"));
  EXPECT_TRUE(present("ip 2001:db8:100::/40"));
  // Host bits are refused by the rule language; the error points at the feed's line.
  const std::string h = write("hostbits.txt", "# x\n198.51.100.1/24 ; SBL3\n");
  r = ctl({"load", "--format", "cidr", h});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("hostbits.txt:2:1: expected a prefix without host bits"), std::string::npos) << r.err;
  // --as only means something for cidr; an unknown format or kind is bad usage.
  EXPECT_EQ(ctl({"load", "--format", "hosts", "--as", "src", f}).status, 2);
  EXPECT_EQ(ctl({"load", "--format", "csv", f}).status, 2);
  EXPECT_EQ(ctl({"load", "--format", "cidr", "--as", "host", f}).status, 2);
}

TEST_F(Feeds, ABadLineNamesFileAndLineAndLoadsNothing) {
  const std::string f = write("bad.hosts", "0.0.0.0 good1.bad.test\n0.0.0.0 good2.bad.test\nads.bad.test\n");
  Result r = ctl({"load", "--format", "hosts", f});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("bad.hosts:3:1: expected IP address"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nothing loaded"), std::string::npos) << r.err;
  EXPECT_FALSE(present("host good1.bad.test"));  // sent before the bad line, never applied
  const std::string c = write("bad.cidr", "192.0.2.90\n192.0.2.91 extra\n");
  r = ctl({"load", "--format", "cidr", c});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("bad.cidr:2:12: expected end of line"), std::string::npos) << r.err;
  EXPECT_FALSE(present("ip 192.0.2.90"));
  // A rule file goes to the gateway as it is, which parses it: its errors
  // name the file too, not only the line.
  const std::string g = write("bad.rules", "src 192.0.2.92\nbogus line\n");
  r = ctl({"load", g});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("nothing applied: " + g + ":2:1: expected rule kind"), std::string::npos) << r.err;
  EXPECT_FALSE(present("src 192.0.2.92"));
  const std::string h = write("long.rules", "src 192.0.2.93\nhost " + std::string(300, 'a') + ".test\n");
  r = ctl({"load", h});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("nothing applied: " + h + ":2:"), std::string::npos) << r.err;
}

TEST_F(Feeds, SkipBadLoadsTheGoodLinesCountsAndShowsTheFirstBadOnes) {
  std::string text;
  for (int i = 0; i < 7; ++i) text += "bad name " + std::to_string(i) + "\n";
  text += "ok1.skip.test\nok2.skip.test\n";
  const std::string f = write("skip.domains", text);
  Result r = ctl({"load", "--format", "domains", "--skip-bad", f});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("added 2"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("skip.domains:1:5: expected end of line"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("skip.domains:5:"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("skip.domains:6:"), std::string::npos) << r.err;  // only the first five shown
  EXPECT_NE(r.err.find("skipped 7 bad lines"), std::string::npos) << r.err;
  EXPECT_TRUE(present("host ok2.skip.test"));
  // The rule language takes --skip-bad too.
  const std::string g = write("skip.rules", "src 192.0.2.95\nsrc nonsense\n");
  r = ctl({"load", "--skip-bad", g});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("skip.rules:2:5: expected"), std::string::npos) << r.err;
  EXPECT_TRUE(present("src 192.0.2.95"));
}

// Runs `cuckoogatectl load --format domains -` with stdout and stderr on a
// pseudo-terminal and stdin from a pipe fed `batches` batches of `per` names
// `pause` apart; returns what the terminal showed.
std::string load_on_terminal(const std::string& sock, int batches, int per, std::chrono::milliseconds pause,
                             int* status) {
  int in[2];
  if (::pipe(in) != 0) return "<pipe failed>";
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::close(in[0]);
    ::close(in[1]);
    ::execl(GatewayEnv::ctl().c_str(), GatewayEnv::ctl().c_str(), "-s", sock.c_str(), "load", "--format",
            "domains", "-", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(in[0]);
  std::string shown;
  std::thread reader([&] {
    char buf[4096];
    for (ssize_t n; (n = ::read(master, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR);)
      if (n > 0) shown.append(buf, static_cast<std::size_t>(n));
  });
  for (int b = 0; b < batches; ++b) {
    std::string chunk;
    for (int i = 0; i < per; ++i) {  // appends: GCC 12's -Wrestrict misfires on "lit" + std::string
      chunk += 'n';
      chunk += std::to_string(b * per + i);
      chunk += ".tty.test\n";
    }
    for (std::size_t off = 0; off < chunk.size();) {
      const ssize_t n = ::write(in[1], chunk.data() + off, chunk.size() - off);
      if (n <= 0) break;
      off += static_cast<std::size_t>(n);
    }
    std::this_thread::sleep_for(pause);
  }
  ::close(in[1]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  reader.join();  // the terminal reads EIO once the child is gone
  ::close(master);
  return shown;
}

TEST_F(Feeds, ProgressOnATerminalForLoadsOverASecond) {
  int status = -1;
  const std::string shown = load_on_terminal(sock_, 8, 4096, 250ms, &status);
  EXPECT_EQ(status, 0) << shown;
  EXPECT_NE(shown.find("rules/s"), std::string::npos) << shown;
  EXPECT_NE(shown.find("loaded 32768 rules in"), std::string::npos) << shown;
  EXPECT_NE(shown.find("added 32768"), std::string::npos) << shown;
  // A quick load on a terminal shows no progress at all.
  const std::string quick = load_on_terminal(sock_, 1, 10, 0ms, &status);
  EXPECT_EQ(status, 0) << quick;
  EXPECT_EQ(quick.find("rules/s"), std::string::npos) << quick;
  EXPECT_EQ(quick.find("loading"), std::string::npos) << quick;
  EXPECT_EQ(ctl({"flush", "host"}).status, 0);
}

}  // namespace
}  // namespace cg::test

int main(int argc, char** argv) { return cg::test::gateway_test_main(argc, argv); }
