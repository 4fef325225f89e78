// CIDR prefix rules end to end through the cuckoogate binary: a replay with
// addresses inside, on both edges of and just outside each prefix (IPv4 and
// IPv6; src, dst and ip), nested prefixes and an exact rule inside a prefix
// with their hit counters, and prefixes added and deleted through the
// control socket while a looping replay runs: no miss after the add, no drop
// after the del.
#include <gtest/gtest.h>

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

Bytes v4(const char* src, const char* dst) { return Packet().ipv4(src, dst).udp(1111, 2222).payload("x").frame(); }
Bytes v6(const char* src, const char* dst) { return Packet().ipv6(src, dst).udp(1111, 2222).payload("x").frame(); }

constexpr const char* kRules =
    "src 10.99.0.0/24\n"
    "dst 192.0.2.128/25\n"
    "ip 198.51.100.0/31\n"
    "src 2001:db8:aa::/48\n"
    "dst 2001:db8:bb::/127\n"
    "ip 2001:db8:cc::/64\n"
    "ip ::ffff:203.0.113.0/120\n";

TEST(PrefixReplay, InsideEdgesAndOutsideOfEveryPrefix) {
  struct Case {
    const char* what;
    Bytes frame;
    bool drop;
  };
  const char* o4 = "172.16.0.1";  // outside every v4 prefix
  const char* o6 = "2001:db8:ffff::1";
  const std::vector<Case> cases = {
      {"src v4 first", v4("10.99.0.0", o4), true},
      {"src v4 inside", v4("10.99.0.42", o4), true},
      {"src v4 last", v4("10.99.0.255", o4), true},
      {"src v4 below", v4("10.98.255.255", o4), false},
      {"src v4 above", v4("10.99.1.0", o4), false},
      {"src v4 prefix as destination", v4(o4, "10.99.0.42"), false},
      {"dst v4 first", v4(o4, "192.0.2.128"), true},
      {"dst v4 last", v4(o4, "192.0.2.255"), true},
      {"dst v4 below", v4(o4, "192.0.2.127"), false},
      {"dst v4 above", v4(o4, "192.0.3.0"), false},
      {"dst v4 prefix as source", v4("192.0.2.200", o4), false},
      {"ip v4 /31 first as source", v4("198.51.100.0", o4), true},
      {"ip v4 /31 last as destination", v4(o4, "198.51.100.1"), true},
      {"ip v4 /31 below", v4("198.51.99.255", o4), false},
      {"ip v4 /31 above", v4(o4, "198.51.100.2"), false},
      {"src v6 first", v6("2001:db8:aa::", o6), true},
      {"src v6 last", v6("2001:db8:aa:ffff:ffff:ffff:ffff:ffff", o6), true},
      {"src v6 below", v6("2001:db8:a9:ffff:ffff:ffff:ffff:ffff", o6), false},
      {"src v6 above", v6("2001:db8:ab::", o6), false},
      {"src v6 prefix as destination", v6(o6, "2001:db8:aa::1"), false},
      {"dst v6 /127 first", v6(o6, "2001:db8:bb::"), true},
      {"dst v6 /127 last", v6(o6, "2001:db8:bb::1"), true},
      {"dst v6 /127 above", v6(o6, "2001:db8:bb::2"), false},
      {"dst v6 /127 below", v6(o6, "2001:db8:ba:ffff:ffff:ffff:ffff:ffff"), false},
      {"ip v6 /64 as source", v6("2001:db8:cc::ffff:ffff:ffff:ffff", o6), true},
      {"ip v6 /64 as destination", v6(o6, "2001:db8:cc::"), true},
      {"ip v6 /64 above", v6("2001:db8:cc:1::", o6), false},
      {"ip v4-mapped prefix, v6 packet", v6("::ffff:203.0.113.9", o6), true},
      {"ip v4-mapped prefix, v4 packet", v4("203.0.113.9", o4), false},
  };
  std::vector<Bytes> in, want_pass, want_drop;
  for (const Case& c : cases) {
    in.push_back(c.frame);
    (c.drop ? want_drop : want_pass).push_back(c.frame);
  }
  write_pcap(path("in.pcap"), in);
  std::ofstream(path("p.rules")) << kRules;
  const Result r = run({GatewayEnv::gateway(), "replay", "--rules", path("p.rules"), "--in", path("in.pcap"),
                        "--out", path("pass.pcap"), "--drop", path("drop.pcap"), "--flows", "0"},
                       GatewayEnv::dir());
  ASSERT_EQ(r.status, 0) << r.err;
  auto name_of = [&](const Bytes& f) {
    for (const Case& c : cases)
      if (c.frame == f) return std::string(c.what);
    return std::string("?");
  };
  const auto got_pass = read_pcap(path("pass.pcap"));
  const auto got_drop = read_pcap(path("drop.pcap"));
  for (const auto& f : got_drop)
    EXPECT_NE(std::find(want_drop.begin(), want_drop.end(), f), want_drop.end()) << "dropped: " << name_of(f);
  for (const auto& f : got_pass)
    EXPECT_NE(std::find(want_pass.begin(), want_pass.end(), f), want_pass.end()) << "passed: " << name_of(f);
  EXPECT_EQ(got_pass, want_pass);
  EXPECT_EQ(got_drop, want_drop);
}

TEST(PrefixRuntime, NestedAndExactCountTheirOwnHitsAndAddDelTakeEffectAtOnce) {
  // One packet per rule that should count it: inside the /16 (and the /8),
  // inside the /8 only, the exact address (inside both prefixes).
  const Bytes in16 = v4("10.1.7.7", "172.16.0.1");
  const Bytes in8 = v4("10.2.7.7", "172.16.0.1");
  const Bytes exact = v4("10.1.2.3", "172.16.0.1");
  // Covered by the prefixes added at run time only.
  const Bytes late4 = v4("172.16.9.9", "192.0.2.200");
  const Bytes late6 = v6("2001:db8:77::5", "2001:db8::1");
  write_pcap(path("in.pcap"), repeated({in16, in8, exact, late4, late6}, 100));  // x100: --loop reads the file each pass
  std::ofstream(path("p.rules")) << "src 10.0.0.0/8\nsrc 10.1.0.0/16\nsrc 10.1.2.3\n";
  const std::string sock = GatewayEnv::dir() + "/pr.sock";  // short: sun_path holds 108 bytes
  Process gw({GatewayEnv::gateway(), "replay", "--rules", path("p.rules"), "--in", path("in.pcap"), "--out",
              path("pass.pcap"), "--drop", path("drop.pcap"), "--ctl", sock, "--loop", "1000", "--pps", "20000"},
             path("gw.out"), path("gw.err"));
  ASSERT_TRUE(wait_for_socket(sock, 20s)) << gw.err();
  CtlClient c(sock);
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.wait_stats([](auto s) { return s["rx"] > 1000; })) << gw.err();

  // Hits: each rule counts its own packet only, once per copy of the five
  // frames; were the covering /8 counted for all three, it would have ~3x.
  // The counters are read one after another while the replay goes on: each
  // may have gained one per copy of the five frames that went through in
  // the meantime (under ASan that was 4-6 copies once, over a fixed margin of 2).
  {
    const uint64_t rx0 = c.stats().at("rx");
    const auto h = c.ask_multi("hits src");
    const uint64_t during = (c.stats().at("rx") - rx0) / 5 + 2;
    ASSERT_EQ(h.size(), 3u);
    EXPECT_EQ(h[0].rfind("src 10.0.0.0/8 hits=", 0), 0u) << h[0];
    EXPECT_EQ(h[1].rfind("src 10.1.0.0/16 hits=", 0), 0u) << h[1];
    EXPECT_EQ(h[2].rfind("src 10.1.2.3 hits=", 0), 0u) << h[2];
    std::vector<uint64_t> n;
    for (const auto& l : h) n.push_back(std::stoull(l.substr(l.find("hits=") + 5)));
    EXPECT_GE(n[0], 150u);
    for (uint64_t v : n) {
      EXPECT_LE(v, n[0] + during) << h[0] << " / " << h[1] << " / " << h[2];
      EXPECT_GE(v + during, n[0]) << h[0] << " / " << h[1] << " / " << h[2];
    }
  }
  EXPECT_EQ(c.ask_multi("list src"), (std::vector<std::string>{"src 10.0.0.0/8", "src 10.1.0.0/16", "src 10.1.2.3"}));
  EXPECT_EQ(c.ask("check src 10.1.0.0/16"), "OK present");
  EXPECT_EQ(c.ask("check src 10.1.0.0/17"), "OK absent");
  EXPECT_EQ(c.ask("add src 10.1.2.3/16").rfind("ERR 400", 0), 0u);  // host bits: refused
  EXPECT_EQ(c.ask("del src 10.0.0.0/9").rfind("ERR 404", 0), 0u);  // deleted exactly or not at all

  // Before the add, the late packets pass.
  const auto s0 = c.stats();
  ASSERT_TRUE(c.wait_stats([&](auto s) { return s["rx"] > s0.at("rx") + 500; }));
  EXPECT_EQ(c.stats()["dropped_by_kind.dst"], 0u);
  EXPECT_EQ(c.stats()["dropped_by_kind.ip"], 0u);

  // Add: from the answer on (plus the burst in flight), every packet drops.
  EXPECT_EQ(c.ask("add dst 192.0.2.128/25"), "OK added");
  EXPECT_EQ(c.ask("add ip 2001:db8:77::/48"), "OK added");
  ASSERT_TRUE(c.wait_bursts_in_flight());
  const auto s1 = c.stats();
  ASSERT_TRUE(c.wait_stats([&](auto s) { return s["rx"] > s1.at("rx") + 1000; }));
  const auto s2 = c.stats();
  EXPECT_EQ(s2.at("passed"), s1.at("passed")) << "a packet passed after the add";
  EXPECT_GT(s2.at("dropped_by_kind.dst"), s1.at("dropped_by_kind.dst"));
  EXPECT_GT(s2.at("dropped_by_kind.ip"), s1.at("dropped_by_kind.ip"));

  // Del: from the answer on, the late packets pass again, the others still drop.
  EXPECT_EQ(c.ask("del dst 192.0.2.128/25"), "OK deleted");
  EXPECT_EQ(c.ask("del ip 2001:db8:77::/48"), "OK deleted");
  ASSERT_TRUE(c.wait_bursts_in_flight());
  const auto s3 = c.stats();
  ASSERT_TRUE(c.wait_stats([&](auto s) { return s["rx"] > s3.at("rx") + 1000; }));
  const auto s4 = c.stats();
  EXPECT_EQ(s4.at("dropped_by_kind.dst"), s3.at("dropped_by_kind.dst")) << "a drop after the del";
  EXPECT_EQ(s4.at("dropped_by_kind.ip"), s3.at("dropped_by_kind.ip")) << "a drop after the del";
  EXPECT_GT(s4.at("passed"), s3.at("passed"));
  EXPECT_GT(s4.at("dropped_by_kind.src"), s3.at("dropped_by_kind.src"));

  gw.signal(SIGINT);
  EXPECT_EQ(gw.wait(30s), 130) << gw.err();
  // Only the late packets ever passed.
  for (const auto& f : read_pcap(path("pass.pcap"))) EXPECT_TRUE(f == late4 || f == late6);
}

}  // namespace
}  // namespace cg::test

int main(int argc, char** argv) { return cg::test::gateway_test_main(argc, argv); }
