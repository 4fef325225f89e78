// End-to-end: `cuckoogate replay` on captures and rule sets the tests build,
// asserting both output captures packet for packet and the JSON counters.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gateway_test_env.hpp"
#include "packet_builder.hpp"
#include "pcap_file.hpp"
#include "subprocess.hpp"

namespace cg::test {
namespace {

struct Case {
  std::string what;
  Bytes frame;
  std::string drop_kind;  // "" = must pass
};

std::string http(const std::string& request_line, const std::string& host_header) {
  std::string s = request_line + "\r\n";
  if (!host_header.empty()) s += host_header + "\r\n";
  return s + "Accept: */*\r\n\r\n";
}

const char* kRules = R"(# every rule kind
flow tcp 10.0.0.1:1234 10.0.0.2:80
flow udp [2001:db8::1]:53 [2001:db8::2]:5353
flow icmp 10.9.0.1 10.9.0.2
src 192.0.2.7
dst 2001:db8::7
ip 198.51.100.9
service tcp 203.0.113.5:443
url example.com/path/page?x=1
url shop.example.com:8080/cart
host example.org
)";

std::vector<Case> cases() {
  std::vector<Case> v;
  auto add = [&](std::string what, Packet p, std::string kind) {
    v.push_back({std::move(what), p.frame(), std::move(kind)});
  };
  // flow
  add("flow v4 exact", Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1234, 80), "flow");
  add("flow v4 reverse direction", Packet().ipv4("10.0.0.2", "10.0.0.1").tcp(80, 1234), "");
  add("flow v4 other sport", Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1235, 80), "");
  add("flow v4 udp instead of tcp", Packet().ipv4("10.0.0.1", "10.0.0.2").udp(1234, 80), "");
  add("flow v6 in VLAN", Packet().vlan(42).ipv6("2001:db8::1", "2001:db8::2").udp(53, 5353), "flow");
  add("flow v6 in QinQ", Packet().vlan(1, 0x88a8).vlan(2).ipv6("2001:db8::1", "2001:db8::2").udp(53, 5353), "flow");
  add("flow icmp", Packet().ipv4("10.9.0.1", "10.9.0.2").icmp(), "flow");
  add("flow icmp other dst", Packet().ipv4("10.9.0.1", "10.9.0.3").icmp(), "");
  // src / dst / ip
  add("src v4", Packet().ipv4("192.0.2.7", "10.1.1.1").udp(1, 2), "src");
  add("src as dst does not match", Packet().ipv4("10.1.1.1", "192.0.2.7").udp(1, 2), "");
  add("src v4 with options", Packet().ipv4("192.0.2.7", "10.1.1.1").ipv4_options({0x94, 0x04, 0, 0}).tcp(5, 6), "src");
  add("dst v6 behind extension headers",
      Packet().ipv6("2001:db8::99", "2001:db8::7").ipv6_ext(0).ipv6_ext(60).tcp(7, 8), "dst");
  add("dst v6 as src does not match", Packet().ipv6("2001:db8::7", "2001:db8::99").tcp(7, 8), "");
  add("ip as src", Packet().ipv4("198.51.100.9", "10.1.1.2").tcp(9, 10), "ip");
  add("ip as dst", Packet().ipv4("10.1.1.2", "198.51.100.9").tcp(10, 9), "ip");
  // service
  add("service", Packet().ipv4("10.2.2.2", "203.0.113.5").tcp(5555, 443), "service");
  add("service other port", Packet().ipv4("10.2.2.2", "203.0.113.5").tcp(5555, 444), "");
  add("service udp", Packet().ipv4("10.2.2.2", "203.0.113.5").udp(5555, 443), "");
  add("service reply direction", Packet().ipv4("203.0.113.5", "10.2.2.2").tcp(443, 5555), "");
  // url
  add("url origin form, mixed-case Host",
      Packet().ipv4("10.3.3.3", "10.4.4.4").tcp(40000, 80).payload(http("GET /path/page?x=1 HTTP/1.1", "hOsT: Example.COM")), "url");
  add("url Host with :80",
      Packet().ipv4("10.3.3.3", "10.4.4.4").tcp(40001, 80).payload(http("POST /path/page?x=1 HTTP/1.0", "Host: example.com:80")), "url");
  add("url absolute form",
      Packet().ipv4("10.3.3.3", "10.4.4.4").tcp(40002, 3128).payload(http("GET http://EXAMPLE.com/path/page?x=1 HTTP/1.1", "Host: other.net")), "url");
  add("url other port kept",
      Packet().ipv4("10.3.3.3", "10.4.4.4").tcp(40003, 8080).payload(http("GET /cart HTTP/1.1", "Host: shop.example.com:8080")), "url");
  add("url query differs",
      Packet().ipv4("10.3.3.3", "10.4.4.4").tcp(40004, 80).payload(http("GET /path/page?x=2 HTTP/1.1", "Host: example.com")), "");
  // Any token is a method, as servers read it (the Host is read even when
  // the method is refused): these are the url rule's request.
  add("url: GETX method",
      Packet().ipv4("10.3.3.3", "10.4.4.4").tcp(40005, 80).payload(http("GETX /path/page?x=1 HTTP/1.1", "Host: example.com")), "url");
  add("url: lower-case get",
      Packet().ipv4("10.3.3.3", "10.4.4.4").tcp(40006, 80).payload(http("get /path/page?x=1 HTTP/1.1", "Host: example.com")), "url");
  // Python's http.server serves HTTP/0.9 and reads its header lines (nginx
  // serves it without them): judged (docs/rules.md, "Python's request line").
  add("url: HTTP/0.9 request line",
      Packet().ipv4("10.3.3.3", "10.4.4.4").tcp(40007, 80).payload(http("GET /path/page?x=1", "Host: example.com")), "url");
  add("HTTP response",
      Packet().ipv4("10.4.4.4", "10.3.3.3").tcp(80, 40000).payload("HTTP/1.1 200 OK\r\nHost: example.org\r\n\r\n"), "");
  // host
  add("host: HTTP Host subdomain",
      Packet().ipv4("10.5.5.5", "10.6.6.6").tcp(40010, 80).payload(http("GET / HTTP/1.1", "Host: WWW.Example.ORG")), "host");
  add("host: DNS query subdomain",
      Packet().ipv4("10.5.5.5", "10.6.6.53").udp(40011, 53).payload(dns_query("a.b.example.org")), "host");
  add("host: DNS query exact with trailing label case",
      Packet().ipv6("2001:db8::5", "2001:db8::53").udp(40012, 53).payload(dns_query("EXAMPLE.org")), "host");
  add("host: DNS response passes",
      Packet().ipv4("10.6.6.53", "10.5.5.5").udp(53, 40011).payload(dns_query("a.b.example.org", true)), "");
  add("host: look-alike badexample.org",
      Packet().ipv4("10.5.5.5", "10.6.6.53").udp(40013, 53).payload(dns_query("badexample.org")), "");
  add("host: TLS SNI",
      Packet().ipv4("10.5.5.5", "10.6.6.7").tcp(40014, 443).payload(tls_client_hello("login.example.org")), "host");
  add("host: TLS without SNI",
      Packet().ipv4("10.5.5.5", "10.6.6.7").tcp(40015, 443).payload(tls_client_hello("")), "");
  // fragments
  add("first fragment of a blocked flow",
      Packet().ipv4("10.0.0.1", "10.0.0.2").fragment(0, true).tcp(1234, 80), "flow");
  add("non-first fragment of a blocked flow passes",
      Packet().ipv4("10.0.0.1", "10.0.0.2").fragment(100, false).proto(6).payload("continued"), "");
  add("non-first fragment from a blocked source",
      Packet().ipv4("192.0.2.7", "10.1.1.1").fragment(100, false).proto(17).payload("continued"), "src");
  add("non-first v6 fragment of a blocked flow passes",
      Packet().ipv6("2001:db8::1", "2001:db8::2").fragment(50, false).proto(17).payload("rest"), "");
  // not IP
  add("ARP", Packet().eth_type(0x0806).payload(std::string(28, '\0')), "");
  return v;
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = GatewayEnv::dir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

nlohmann::json read_json(const std::string& path) {
  return nlohmann::json::parse(slurp(path));
}

class Replay : public testing::Test {
 protected:
  std::string path(const std::string& name) const {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    return GatewayEnv::dir() + "/" + info->name() + "-" + name;
  }
};

TEST_F(Replay, EveryRuleKindAndEncapsulationGivesTheExpectedVerdict) {
  const auto cs = cases();
  std::vector<Bytes> in, want_pass, want_drop;
  std::map<std::string, int> want_kind;
  for (const auto& c : cs) {
    in.push_back(c.frame);
    (c.drop_kind.empty() ? want_pass : want_drop).push_back(c.frame);
    if (!c.drop_kind.empty()) ++want_kind[c.drop_kind];
  }
  write_pcap(path("in.pcap"), in);
  const std::string rules = write_file("kinds.rules", kRules);
  // Every case is judged on its own packet: --flows 0. (Several cases share a
  // 5-tuple in opposite directions, e.g. a DNS query and its response; with
  // flows, the response of a blocked query is dropped with it: flow_test.)
  // Likewise --fragments off: each lone fragment case is classified as it is
  // (reassembled, they would wait for the rest of their datagram: frag_test).
  const Result r = run({GatewayEnv::gateway(), "replay", "--rules", rules, "--in", path("in.pcap"),
                        "--out", path("pass.pcap"), "--drop", path("drop.pcap"), "--stats-json",
                        path("stats.json"), "--flows", "0", "--fragments", "off"},
                       GatewayEnv::dir());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("packets in"), std::string::npos) << r.out;

  const auto got_pass = read_pcap(path("pass.pcap"));
  const auto got_drop = read_pcap(path("drop.pcap"));
  // Packet for packet, in order; on mismatch name the case.
  auto name_of = [&](const Bytes& f) {
    for (const auto& c : cs)
      if (c.frame == f) return c.what;
    return std::string("?");
  };
  ASSERT_EQ(got_pass.size(), want_pass.size());
  for (std::size_t i = 0; i < want_pass.size(); ++i)
    EXPECT_EQ(got_pass[i], want_pass[i]) << "passed #" << i << " is '" << name_of(got_pass[i])
                                         << "', expected '" << name_of(want_pass[i]) << "'";
  ASSERT_EQ(got_drop.size(), want_drop.size());
  for (std::size_t i = 0; i < want_drop.size(); ++i)
    EXPECT_EQ(got_drop[i], want_drop[i]) << "dropped #" << i << " is '" << name_of(got_drop[i])
                                         << "', expected '" << name_of(want_drop[i]) << "'";

  const auto j = read_json(path("stats.json"));
  EXPECT_EQ(j["rx"], in.size());
  EXPECT_EQ(j["passed"], want_pass.size());
  EXPECT_EQ(j["dropped"], want_drop.size());
  for (const char* k : {"flow", "src", "dst", "ip", "service", "url", "host"})
    EXPECT_EQ(j["dropped_by_kind"][k], want_kind[k]) << k;
  EXPECT_EQ(j["malformed"], 0);
}

TEST_F(Replay, MalformedPacketsPassByDefaultAndDropOnRequest) {
  Bytes cut_ip = Packet().ipv4("10.7.7.7", "10.8.8.8").tcp(1, 2).frame();
  cut_ip.resize(14 + 10);  // IPv4 header cut short
  Bytes cut_tcp = Packet().ipv4("10.7.7.7", "10.8.8.8").tcp(1, 2).frame();
  cut_tcp.resize(14 + 20 + 6);  // TCP header cut short
  Bytes cut_blocked = Packet().ipv4("192.0.2.7", "10.8.8.8").tcp(1, 2).frame();
  cut_blocked.resize(14 + 20 + 6);  // addresses valid: the src rule still applies
  const Bytes good = Packet().ipv4("10.7.7.7", "10.8.8.8").tcp(1, 2).frame();
  write_pcap(path("in.pcap"), {cut_ip, good, cut_tcp, cut_blocked});
  const std::string rules = write_file("malformed.rules", "src 192.0.2.7\n");

  Result r = run({GatewayEnv::gateway(), "replay", "--rules", rules, "--in", path("in.pcap"), "--out",
                  path("pass.pcap"), "--drop", path("drop.pcap"), "--stats-json", path("a.json")},
                 GatewayEnv::dir());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_pcap(path("pass.pcap")), (std::vector<Bytes>{cut_ip, good, cut_tcp}));
  EXPECT_EQ(read_pcap(path("drop.pcap")), (std::vector<Bytes>{cut_blocked}));
  auto j = read_json(path("a.json"));
  EXPECT_EQ(j["malformed"], 3);
  EXPECT_EQ(j["dropped_by_kind"]["src"], 1);

  r = run({GatewayEnv::gateway(), "replay", "--rules", rules, "--in", path("in.pcap"), "--out",
           path("pass2.pcap"), "--drop", path("drop2.pcap"), "--malformed", "drop", "--stats-json",
           path("b.json")},
          GatewayEnv::dir());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_pcap(path("pass2.pcap")), (std::vector<Bytes>{good}));
  EXPECT_EQ(read_pcap(path("drop2.pcap")), (std::vector<Bytes>{cut_ip, cut_tcp, cut_blocked}));
  j = read_json(path("b.json"));
  EXPECT_EQ(j["malformed"], 3);
  EXPECT_EQ(j["dropped"], 3);
}

TEST_F(Replay, SeveralWorkersKeepEveryFlowInOrder) {
  // 16 flows, 40 packets each, interleaved; payload = "flow:seq".
  std::vector<Bytes> in;
  for (int seq = 0; seq < 40; ++seq)
    for (int f = 0; f < 16; ++f)
      in.push_back(Packet().ipv4("10.10.0." + std::to_string(f + 1), "10.20.0." + std::to_string(f % 5 + 1))
                       .udp(static_cast<uint16_t>(1000 + f), 53)
                       .payload(std::to_string(f) + ":" + std::to_string(seq)).frame());
  // Block flow 3 entirely (its source).
  const std::string rules = write_file("flows.rules", "src 10.10.0.4\n");
  write_pcap(path("in.pcap"), in);
  const Result r = run({GatewayEnv::gateway(), "replay", "--workers", "2", "--rules", rules, "--in",
                        path("in.pcap"), "--out", path("pass.pcap"), "--drop", path("drop.pcap")},
                       GatewayEnv::dir());
  ASSERT_EQ(r.status, 0) << r.err;
  const auto pass = read_pcap(path("pass.pcap"));
  const auto drop = read_pcap(path("drop.pcap"));
  EXPECT_EQ(pass.size(), 15u * 40);
  EXPECT_EQ(drop.size(), 40u);
  // Within each flow the sequence numbers must come out 0, 1, 2, ...
  std::map<std::string, int> next;
  auto check = [&](const std::vector<Bytes>& frames) {
    for (const auto& f : frames) {
      const std::string payload(f.begin() + 14 + 20 + 8, f.end());
      const auto colon = payload.find(':');
      const std::string flow = payload.substr(0, colon);
      EXPECT_EQ(std::stoi(payload.substr(colon + 1)), next[flow]++) << "flow " << flow;
    }
  };
  check(pass);
  check(drop);
  EXPECT_EQ(next.size(), 16u);
}

TEST_F(Replay, LoopReplaysTheCaptureNTimes) {
  const Bytes a = Packet().ipv4("192.0.2.7", "10.1.1.1").udp(1, 2).frame();
  const Bytes b = Packet().ipv4("10.1.1.1", "10.1.1.2").udp(1, 2).frame();
  write_pcap(path("in.pcap"), {a, b});
  const std::string rules = write_file("loop.rules", "src 192.0.2.7\n");
  const Result r = run({GatewayEnv::gateway(), "replay", "--rules", rules, "--in", path("in.pcap"),
                        "--out", path("pass.pcap"), "--loop", "50", "--stats-json", path("s.json")},
                       GatewayEnv::dir());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_pcap(path("pass.pcap")), std::vector<Bytes>(50, b));
  const auto j = read_json(path("s.json"));
  EXPECT_EQ(j["rx"], 100);
  EXPECT_EQ(j["dropped_by_kind"]["src"], 50);
}

// replay's scratch directory goes under $TMPDIR (here: one of the test's),
// where whoever set it can remove it even after a SIGKILL, which no
// process survives to clean up after.
TEST_F(Replay, ScratchFilesGoUnderTmpdir) {
  using namespace std::chrono_literals;
  const Bytes a = Packet().ipv4("192.0.2.7", "10.1.1.1").udp(1, 2).frame();
  write_pcap(path("in.pcap"), {a});
  const std::string tmpdir = path("tmp");
  std::filesystem::create_directories(tmpdir);
  const std::string old = std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR") : "";
  setenv("TMPDIR", tmpdir.c_str(), 1);
  const std::string sock = GatewayEnv::dir() + "/sg.sock";
  const std::string rules = write_file("tmpdir.rules", "src 192.0.2.99\n");
  Process gw({GatewayEnv::gateway(), "replay", "--rules", rules, "--in", path("in.pcap"), "--out", path("pass.pcap"),
              "--ctl", sock,
              "--loop", "5000", "--pps", "500"},
             path("gw.out"), path("gw.err"));
  setenv("TMPDIR", old.c_str(), 1);
  ASSERT_TRUE(wait_for_socket(sock, 20s)) << gw.err();
  std::vector<std::string> scratch;
  for (const auto& e : std::filesystem::directory_iterator(tmpdir)) scratch.push_back(e.path().filename());
  ASSERT_EQ(scratch.size(), 1u);
  EXPECT_EQ(scratch[0].rfind("cuckoogate-replay-", 0), 0u) << scratch[0];
  gw.signal(SIGINT);
  EXPECT_EQ(gw.wait(30s), 130) << gw.err();
  EXPECT_TRUE(std::filesystem::is_empty(tmpdir));  // removed on the way out
}

TEST_F(Replay, PureFilterModeDropsOnFilterHits) {
  const Bytes a = Packet().ipv4("192.0.2.7", "10.1.1.1").udp(1, 2).frame();
  const Bytes b = Packet().ipv4("10.1.1.1", "10.1.1.2").udp(1, 2).frame();
  write_pcap(path("in.pcap"), {a, b});
  const std::string rules = write_file("nv.rules", "src 192.0.2.7\n");
  const Result r = run({GatewayEnv::gateway(), "replay", "--no-verify", "--rules", rules, "--in",
                        path("in.pcap"), "--out", path("pass.pcap"), "--stats-json", path("s.json")},
                       GatewayEnv::dir());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_pcap(path("pass.pcap")), std::vector<Bytes>{b});
  const auto j = read_json(path("s.json"));
  EXPECT_EQ(j["dropped_by_kind"]["src"], 1);
  EXPECT_EQ(j["false_positives_avoided"], 0);
}

// With verify, the src, dst and ip keys of one address share one filter
// probe (key_hash leaves the kind out) and the exact set tells the kinds
// apart; without, each kind has its own filter entry. Either way a rule of
// one kind neither matches another kind's key of its address nor hides it.
TEST_F(Replay, AddressRulesOfOneAddressAreToldApartByKind) {
  const std::string rules = write_file("addr.rules",
                                       "dst 192.0.2.50\n"
                                       "src 192.0.2.99\n"   // makes src keys probed: only ip matches below
                                       "ip 198.51.100.60\n"
                                       "src 203.0.113.70\nip 203.0.113.70\n"
                                       "ip 2001:db8::60\nsrc 2001:db8::99\n");
  const std::vector<Case> v = {
      {"from a dst-only address", Packet().ipv4("192.0.2.50", "10.1.1.1").udp(1, 2).frame(), ""},
      {"to a dst-only address", Packet().ipv4("10.1.1.1", "192.0.2.50").udp(1, 2).frame(), "dst"},
      {"to itself, dst rule", Packet().ipv4("192.0.2.50", "192.0.2.50").udp(1, 2).frame(), "dst"},
      {"ip behind a probed src key", Packet().ipv4("198.51.100.60", "10.1.1.1").udp(1, 2).frame(), "ip"},
      {"ip as dst", Packet().ipv4("10.1.1.1", "198.51.100.60").tcp(1, 2).frame(), "ip"},
      {"src and ip rules: src, the smaller kind", Packet().ipv4("203.0.113.70", "10.1.1.1").udp(1, 2).frame(), "src"},
      {"src and ip rules, as dst: ip", Packet().ipv4("10.1.1.1", "203.0.113.70").udp(1, 2).frame(), "ip"},
      {"v6 ip behind a probed src key", Packet().ipv6("2001:db8::60", "2001:db8::1").udp(1, 2).frame(), "ip"},
      {"v6 unrelated", Packet().ipv6("2001:db8::61", "2001:db8::1").udp(1, 2).frame(), ""},
  };
  std::vector<Bytes> in, want_pass;
  std::map<std::string, int> want_kind;
  for (const Case& c : v) {
    in.push_back(c.frame);
    if (c.drop_kind.empty()) {
      want_pass.push_back(c.frame);
    } else {
      ++want_kind[c.drop_kind];
    }
  }
  write_pcap(path("in.pcap"), in);
  for (const char* mode : {"--verify", "--no-verify"}) {
    SCOPED_TRACE(mode);
    const Result r = run({GatewayEnv::gateway(), "replay", mode, "--rules", rules, "--in", path("in.pcap"),
                          "--out", path("pass.pcap"), "--stats-json", path("s.json")},
                         GatewayEnv::dir());
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(read_pcap(path("pass.pcap")), want_pass);
    const auto j = read_json(path("s.json"));
    for (const char* kind : {"src", "dst", "ip"})
      EXPECT_EQ(j["dropped_by_kind"][kind], want_kind[kind]) << kind;
  }
}

TEST_F(Replay, BadRuleFileIsRejectedWithLineAndColumnAndNothingRuns) {
  write_pcap(path("in.pcap"), {Packet().ipv4("10.1.1.1", "10.1.1.2").udp(1, 2).frame()});
  const std::string rules = write_file("bad.rules", "src 192.0.2.7\n# fine\nsrc 300.1.1.1\n");
  const Result r = run({GatewayEnv::gateway(), "replay", "--rules", rules, "--in", path("in.pcap"),
                        "--out", path("pass.pcap")},
                       GatewayEnv::dir());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("bad.rules:3:5"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(path("pass.pcap")));
}

TEST_F(Replay, UsageErrorsAreReportedNotCrashed) {
  Result r = run({GatewayEnv::gateway(), "replay", "--rules", "/nonexistent.rules", "--in",
                  "/nonexistent.pcap", "--out", path("x.pcap")},
                 GatewayEnv::dir());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("nonexistent"), std::string::npos) << r.err;
  r = run({GatewayEnv::gateway(), "replay", "--workers", "0", "--rules", "/dev/null", "--in",
           "/dev/null", "--out", path("z.pcap")},
          GatewayEnv::dir());
  EXPECT_EQ(r.status, 2);  // bad usage
  r = run({GatewayEnv::gateway(), "replay", "--help"}, GatewayEnv::dir());
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("--stats-json"), std::string::npos);
  // A file that is not a pcap.
  const std::string junk = write_file("junk.pcap", "this is not a capture");
  const std::string rules = write_file("ok.rules", "src 192.0.2.7\n");
  r = run({GatewayEnv::gateway(), "replay", "--rules", rules, "--in", junk, "--out", path("y.pcap")},
          GatewayEnv::dir());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("junk.pcap"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace cg::test

int main(int argc, char** argv) { return cg::test::gateway_test_main(argc, argv); }
