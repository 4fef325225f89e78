// Growth end to end (issue 12, item 2): a looping replay started with
// --capacity 64 gets 100x that many rules through the control socket while
// its workers judge every packet (no flow table): every packet of a present
// rule keeps dropping through every growth of the tables (exact and prefix
// rules, IPv4 and IPv6), no other packet drops, no add is refused, and
// `info` reports the growths, the table bytes and max_memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
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

std::string path(const std::string& name) {
  const auto* info = testing::UnitTest::GetInstance()->current_test_info();
  return GatewayEnv::dir() + "/" + info->name() + "-" + name;
}

std::map<std::string, std::string> info(CtlClient& c, const char* verb) {
  std::map<std::string, std::string> m;
  for (const std::string& l : c.ask_multi(verb)) {
    const auto sp = l.find(' ');
    if (sp != std::string::npos) m[l.substr(0, sp)] = l.substr(sp + 1);
  }
  return m;
}

uint64_t num(const std::map<std::string, std::string>& m, const std::string& k) {
  const auto it = m.find(k);
  return it == m.end() ? 0 : std::stoull(it->second);
}

TEST(GrowthReplay, EveryPresentRuleKeepsDroppingFromCapacity64To100x) {
  std::vector<Bytes> blocked, clean;
  std::string rules;
  for (int i = 0; i < 16; ++i) {
    const std::string a = "10.77.0." + std::to_string(i + 1);
    rules += "src " + a + "\n";
    blocked.push_back(Packet().ipv4(a.c_str(), "192.0.2.1").udp(1000, 53).payload("b").frame());
    const std::string o = "172.16.0." + std::to_string(i + 1);
    clean.push_back(Packet().ipv4(o.c_str(), "192.0.2.1").udp(1000, 53).payload("c").frame());
  }
  rules += "src 2001:db8:77::/48\n";  // probed in the filter: must follow it through growth
  for (int i = 0; i < 8; ++i) {
    const std::string a = "2001:db8:77::" + std::to_string(i + 1);
    blocked.push_back(Packet().ipv6(a.c_str(), "2001:db8::1").udp(1000, 53).payload("b").frame());
    const std::string o = "2001:db8:78::" + std::to_string(i + 1);
    clean.push_back(Packet().ipv6(o.c_str(), "2001:db8::1").udp(1000, 53).payload("c").frame());
  }
  std::vector<Bytes> in;
  for (std::size_t i = 0; i < std::max(blocked.size(), clean.size()); ++i) {
    if (i < blocked.size()) in.push_back(blocked[i]);
    if (i < clean.size()) in.push_back(clean[i]);
  }
  write_pcap(path("in.pcap"), in);
  std::ofstream(path("g.rules")) << rules;
  const std::string sock = GatewayEnv::dir() + "/gr.sock";
  Process gw({GatewayEnv::gateway(), "replay", "--rules", path("g.rules"), "--in", path("in.pcap"), "--out",
              path("pass.pcap"), "--drop", path("drop.pcap"), "--ctl", sock, "--capacity", "64", "--flows", "0",
              "--loop", "20000", "--pps", "20000"},
             path("gw.out"), path("gw.err"));
  ASSERT_TRUE(wait_for_socket(sock, 20s)) << gw.err();
  CtlClient c(sock);
  ASSERT_TRUE(c.connected());
  EXPECT_EQ(num(info(c, "info"), "capacity"), 64u);

  // 100x the capacity, in rounds, so that the looping replay runs through
  // every growth; a rule of every kind the workers look up in the tables.
  const int total = 6400;
  for (int i = 0; i < total; ++i) {
    std::string rule;
    switch (i % 4) {
      case 0: rule = "host g" + std::to_string(i) + ".example"; break;
      case 1: rule = "dst 198.18." + std::to_string(i >> 8) + "." + std::to_string(i & 255); break;
      case 2: rule = "src 2001:db8:" + std::to_string(1000 + i) + "::/48"; break;
      default: rule = "src 100.64." + std::to_string(i >> 8) + "." + std::to_string(i & 255); break;
    }
    ASSERT_EQ(c.ask("add " + rule), "OK added") << rule;
    if (i % 800 == 0) std::this_thread::sleep_for(30ms);  // packets between growths
  }
  const auto inf = info(c, "info");
  EXPECT_GE(num(inf, "tables.growths"), 6u);
  EXPECT_GE(num(inf, "capacity"), 6400u);
  EXPECT_GT(num(inf, "tables.bytes"), 0u);
  EXPECT_EQ(num(inf, "max_memory"), uint64_t{4} << 30);  // the default
  EXPECT_EQ(num(info(c, "stats"), "rules"), 6400u + 17u);
  // Some traffic after the last growth too.
  const uint64_t rx = num(info(c, "stats"), "rx");
  const auto end = std::chrono::steady_clock::now() + 15s;
  while (num(info(c, "stats"), "rx") < rx + 2000 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(10ms);

  gw.signal(SIGINT);
  EXPECT_EQ(gw.wait(30s), 130) << gw.err();
  const auto got_pass = read_pcap(path("pass.pcap"));
  const auto got_drop = read_pcap(path("drop.pcap"));
  std::size_t wrong_pass = 0, wrong_drop = 0;
  for (const auto& f : got_pass) wrong_pass += std::find(clean.begin(), clean.end(), f) == clean.end();
  for (const auto& f : got_drop) wrong_drop += std::find(blocked.begin(), blocked.end(), f) == blocked.end();
  EXPECT_EQ(wrong_pass, 0u) << "blocked packets passed (of " << got_pass.size() << ")";
  EXPECT_EQ(wrong_drop, 0u) << "other packets dropped (of " << got_drop.size() << ")";
  EXPECT_GT(got_pass.size(), 2000u);
  EXPECT_GT(got_drop.size(), 2000u);
}

}  // namespace
}  // namespace cg::test

int main(int argc, char** argv) { return cg::test::gateway_test_main(argc, argv); }
