// The TOML configuration: the shipped examples parse, and every kind of bad
// file is an error that names the file and the key.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "gateway/config.hpp"
#include "scratch_files.hpp"

namespace cg {
namespace {

// A new file holding `text`, in a directory removed when the tests end.
std::string write(const std::string& text) {
  static test::ScratchDir dir;
  static int n = 0;
  return dir.write(std::to_string(n++) + ".toml", text);
}

TEST(Config, ShippedVdevExampleParses) {
  GatewayConfig c;
  std::string err;
  ASSERT_TRUE(load_config(CG_SOURCE_ROOT "/config/vdev.toml", c, &err)) << err;
  EXPECT_EQ(c.workers, 1u);
  EXPECT_TRUE(c.verify);
  EXPECT_FALSE(c.drop_malformed);
  ASSERT_EQ(c.pairs.size(), 1u);
  EXPECT_EQ(c.pairs[0].a, "net_null0");
  EXPECT_EQ(c.rules, std::vector<std::string>{"config/demo.rules"});
  EXPECT_FALSE(c.eal.empty());
}

TEST(Config, ShippedNicExampleParses) {
  GatewayConfig c;
  std::string err;
  ASSERT_TRUE(load_config(CG_SOURCE_ROOT "/config/nic.toml", c, &err)) << err;
  EXPECT_EQ(c.workers, 4u);
  EXPECT_EQ(c.capacity, 4194304u);
  EXPECT_EQ(c.state_dir, "/var/lib/cuckoogate");
  EXPECT_EQ(c.rx_desc, 2048);
}

TEST(Config, CapacityUpTo2To29) {
  GatewayConfig c;
  std::string err;
  ASSERT_TRUE(load_config(write("[gateway]\ncapacity = 536870912\n"), c, &err)) << err;
  EXPECT_EQ(c.capacity, 536870912u);
}

TEST(Config, EmptyFileGivesDefaults) {
  GatewayConfig c;
  std::string err;
  ASSERT_TRUE(load_config(write(""), c, &err)) << err;
  EXPECT_FALSE(c.workers.has_value());
  EXPECT_TRUE(c.verify);
  EXPECT_TRUE(c.pairs.empty());
}

TEST(Config, PortsMayBeNumbers) {
  GatewayConfig c;
  std::string err;
  ASSERT_TRUE(load_config(write("[[pair]]\nports = [0, 1]\n[[pair]]\nports = [\"a\", 3]\n"), c, &err)) << err;
  ASSERT_EQ(c.pairs.size(), 2u);
  EXPECT_EQ(c.pairs[0].b, "1");
  EXPECT_EQ(c.pairs[1].a, "a");
}

struct Bad { const char* text; const char* expect; };

class BadConfig : public testing::TestWithParam<Bad> {};

TEST_P(BadConfig, IsAnErrorNamingTheProblem) {
  GatewayConfig c;
  std::string err;
  const std::string path = write(GetParam().text);
  EXPECT_FALSE(load_config(path, c, &err));
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_NE(err.find(GetParam().expect), std::string::npos) << err;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadConfig,
    testing::Values(Bad{"[gateway]\nworkerz = 2\n", "unknown key 'workerz'"},
                    Bad{"[gateway]\nworkers = 0\n", "gateway.workers"},
                    Bad{"[gateway]\nworkers = \"two\"\n", "gateway.workers"},
                    // The exact set keeps a rule's hit-counter slot in 29 bits.
                    Bad{"[gateway]\ncapacity = 536870913\n", "gateway.capacity"},
                    Bad{"[gateway]\nverify = 1\n", "verify"},
                    Bad{"[gateway]\nmalformed = \"maybe\"\n", "malformed"},
                    Bad{"[gateway]\nrules = \"one.rules\"\n", "rules"},
                    Bad{"[eal]\nargs = [1, 2]\n", "eal.args"},
                    Bad{"[[pair]]\nports = [\"a\"]\n", "pair[0].ports"},
                    Bad{"[[pair]]\nport = [\"a\", \"b\"]\n", "unknown key 'port'"},
                    Bad{"[gateway\nworkers = 1\n", ":1:"},
                    Bad{"bogus = 1\n", "unknown key 'bogus'"},
                    // A NUL would cut a path or an EAL argument short at the C API.
                    Bad{"[gateway]\nrules = [\"ok.rules\", \"a.rules\\u0000b\"]\n", "gateway.rules: a string may not contain a NUL"},
                    Bad{"[gateway]\nctl = \"/tmp/s\\u0000\"\n", "gateway.ctl: a string may not contain a NUL"},
                    Bad{"[gateway]\nstate_dir = \"\\u0000\"\n", "gateway.state_dir: a string may not contain a NUL"},
                    // "" would read as "not given": the default socket, no state kept.
                    Bad{"[gateway]\nctl = \"\"\n", "gateway.ctl: an empty path"},
                    Bad{"[gateway]\nstate_dir = \"\"\n", "gateway.state_dir: an empty path"},
                    Bad{"[eal]\nargs = [\"-l\\u00000\"]\n", "eal.args: a string may not contain a NUL"},
                    Bad{"[[pair]]\nports = [\"a\\u0000\", \"b\"]\n", "pair[0].ports"},
                    Bad{"[[pair]]\nports = [0, 1]\n[[pair]]\nports = 3\n", "pair[1].ports"},
                    Bad{"pair = [1]\n", "pair[0]: expected a table"},
                    Bad{"[sync]\nstream = \"s\"\n", "sync: 'redis' (the server's URL) is required"},
                    Bad{"[sync]\nredis = \"unix:///r.sock\"\ntls = true\n", "sync: TLS is for TCP Redis URLs"},
                    Bad{"[sync]\nredis = \"rediss://h\"\ntls_cert = \"c.pem\"\n", "sync.tls_cert: a client certificate needs both tls_cert and tls_key"},
                    Bad{"[sync]\nredis = \"redis://h\"\ntls = \"yes\"\n", "sync.tls: expected true or false"},
                    Bad{"[sync]\nredis = \"redis://h:0\"\n", "sync.redis: redis URL port"},
                    Bad{"[sync]\nredis = \"redis://h\"\nredis_url = 1\n", "unknown key 'redis_url'"},
                    Bad{"[sync]\nredis = \"redis://h\"\nstream = \"\"\n", "sync.stream: expected 1 to 256"},
                    Bad{"[sync]\nredis = \"redis://h\"\ngateway_id = \"a\\tb\"\n", "sync.gateway_id: a control"},
                    Bad{"[sync]\nredis = \"redis://h\"\ntimeout_ms = 5\n", "sync.timeout_ms"},
                    Bad{"[sync]\nredis = \"redis://h\"\nwait_replicas = 17\n", "sync.wait_replicas"},
                    Bad{"[sync]\nredis = \"redis://h\"\noffline_writes = \"keep\"\n",
                        "sync.offline_writes: expected \"refuse\" or \"queue\""},
                    Bad{"[sync]\nredis = \"redis://h\"\ntls_ca = \"/etc/ca.pem\"\n",
                        "sync.tls_ca: TLS is off (use a rediss:// URL or tls = true)"},
                    Bad{"sync = 1\n", "'sync' must be a table"}));

// A directory, FIFO, device or oversized file is refused by load_config
// itself (the command line's check lets some of them through), promptly.
class ConfigFile : public testing::Test {
 protected:
  // load_config(path), failing the test if it does not return within 10 s.
  bool load(const std::string& path) {
    err_.clear();
    const auto r = test::returns_within(std::chrono::seconds(10), {path},
                                        [&] { return load_config(path, c_, &err_); });
    if (!r) ADD_FAILURE() << "load_config blocked for 10 s";
    return r.value_or(true);
  }

  GatewayConfig c_;
  test::ScratchDir dir_;
  std::string err_;
};

TEST_F(ConfigFile, DirectoryIsAnError) {
  EXPECT_FALSE(load(dir_.path()));
  EXPECT_EQ(err_, dir_.path() + ": is a directory");
}

TEST_F(ConfigFile, DevZeroIsAnErrorNotAnEmptyConfiguration) {
  EXPECT_FALSE(load("/dev/zero"));
  EXPECT_EQ(err_, "/dev/zero: not a regular file (a character device)");
}

TEST_F(ConfigFile, FifoIsAnErrorNotAHang) {
  const std::string fifo = dir_.fifo("gw.toml");
  EXPECT_FALSE(load(fifo));
  EXPECT_EQ(err_, fifo + ": not a regular file (a FIFO)");
}

TEST_F(ConfigFile, MissingFileIsAnError) {
  EXPECT_FALSE(load(dir_.path("none.toml")));
  EXPECT_EQ(err_, dir_.path("none.toml") + ": cannot open: No such file or directory");
}

TEST_F(ConfigFile, LargerThanTheLimitIsRefusedUnread) {
  const std::string big = dir_.sparse("big.toml", static_cast<off_t>(kMaxConfigFileBytes) + 1);
  EXPECT_FALSE(load(big));
  EXPECT_EQ(err_, big + ": larger than 1048576 bytes (1 MiB, the limit for a configuration file)");
}

TEST_F(ConfigFile, FileOfExactlyTheLimitIsRead) {
  const std::string head = "[gateway]\nworkers = 3\n#";
  const std::string path =
      dir_.write("full.toml", head + std::string(kMaxConfigFileBytes - head.size() - 1, 'x') + "\n");
  ASSERT_EQ(std::filesystem::file_size(path), kMaxConfigFileBytes);
  ASSERT_TRUE(load(path)) << err_;
  EXPECT_EQ(c_.workers, 3u);
}

TEST(ParseConfig, ReadsTextAndNamesTheGivenNameInErrors) {
  GatewayConfig c;
  std::string err;
  ASSERT_TRUE(parse_config("[gateway]\nworkers = 2\nrules = [\"a.rules\"]\n", "inline", c, &err)) << err;
  EXPECT_EQ(c.workers, 2u);
  EXPECT_EQ(c.rules, std::vector<std::string>{"a.rules"});
  EXPECT_FALSE(parse_config("[gateway]\nworkerz = 2\n", "inline", c, &err));
  EXPECT_EQ(err, "inline: gateway: unknown key 'workerz'");
  EXPECT_FALSE(parse_config("[gateway]\nworkers = = 2\n", "inline", c, &err));
  EXPECT_EQ(err.rfind("inline:2:", 0), 0u) << err;
}

TEST(ParseConfig, BinaryGarbageIsAnErrorNotAnException) {
  GatewayConfig c;
  std::string err;
  EXPECT_FALSE(parse_config(std::string_view("\0\xff\xfe[[\x80", 6), "bin", c, &err));
  EXPECT_EQ(err.rfind("bin:", 0), 0u) << err;
}

// toml++ has no depth limit for dotted keys and table headers: 100 KB of
// "a.a.a..." used to overflow the stack (SIGSEGV) of whoever loaded it.
TEST(ParseConfig, DeeplyDottedKeysAreRefusedNotACrash) {
  std::string dotted, header = "[", comment = "# ";
  for (int i = 0; i < 200000; ++i) {
    dotted += "a.";
    header += "a.";
    comment += "a.";
  }
  GatewayConfig c;
  std::string err;
  EXPECT_FALSE(parse_config(dotted + "a = 1\n", "deep", c, &err));
  EXPECT_EQ(err, "deep:1:130: more than 64 dots outside strings: keys nested this deep are not read");
  EXPECT_FALSE(parse_config("[gateway]\n" + header + "a]\n", "deep", c, &err));
  EXPECT_EQ(err.rfind("deep:2:131: more than 64 dots", 0), 0u) << err;
  // Dots in comments and strings are not keys.
  ASSERT_TRUE(parse_config(comment + "\n[gateway]\nrules = [\"" + comment + "\", '" + comment + "']\n" +
                               "ctl = \"\"\"\n" + comment + "\\\"\"\"\"\n",
                           "deep", c, &err))
      << err.substr(0, 200);
  EXPECT_EQ(c.rules.size(), 2u);
  EXPECT_EQ(c.ctl.back(), '"');
}

// toml++ 3.3.0 asks whether a raw non-ASCII character is whitespace in
// places where its answer is undefined behaviour (tomlplusplus#295): such
// characters are refused outside comments, and \uXXXX escapes say the same.
TEST(ParseConfig, RawNonAsciiIsRefusedOutsideComments) {
  GatewayConfig c;
  std::string err;
  for (const char* text : {"[gateway]\nrules = [\"/srv/r\xc3\xa8gles.rules\"]\n",
                           "[gateway]\nrules = ['\xce\xa2']\n",
                           "[[pair]]\nports = [0, \xce\xa2\n",
                           "[\"\xce\xa2\"]\n",
                           "x = \"\"\"\\\n  \xce\xa2\"\"\"\n",
                           "x = \"\\\xce\xa2\"\n"}) {
    EXPECT_FALSE(parse_config(text, "utf8", c, &err)) << text;
    EXPECT_NE(err.find("a non-ASCII character outside a comment (in a string, write it as \\uXXXX)"),
              std::string::npos)
        << err;
  }
  EXPECT_FALSE(parse_config("[gateway]\nrules = [\"\xc3\xa8\"]\n", "utf8", c, &err));
  EXPECT_EQ(err.rfind("utf8:2:11: ", 0), 0u) << err;
  // In comments, after a BOM, and escaped, all is well.
  c = {};
  ASSERT_TRUE(parse_config("\xEF\xBB\xBF# r\xc3\xa8gles \xce\xa2\n[gateway] # \xce\xa2\n"
                           "rules = [\"/srv/r\\u00e8gles.rules\"] # \xe2\x80\x83\n",
                           "utf8", c, &err))
      << err;
  EXPECT_EQ(c.rules, std::vector<std::string>{"/srv/r\xc3\xa8gles.rules"});
}

TEST(ParseConfig, DeeplyNestedArraysAreRefusedNotACrash) {
  GatewayConfig c;
  std::string err;
  EXPECT_FALSE(parse_config("x = " + std::string(100000, '['), "deep", c, &err));
  EXPECT_NE(err.find("nested"), std::string::npos) << err;
  EXPECT_FALSE(parse_config("x = " + std::string(100000, '{') , "deep", c, &err));
}

// [[rules]]: rule files in a feed format (issue 12, item 5).
TEST(ParseConfig, RuleFeedsTakeAPathAFormatAndForCidrAKind) {
  GatewayConfig c;
  std::string err;
  ASSERT_TRUE(parse_config("[[rules]]\npath = \"ads.hosts\"\nformat = \"hosts\"\n"
                           "[[rules]]\npath = \"drop.txt\"\nformat = \"cidr\"\nas = \"src\"\n"
                           "[[rules]]\npath = \"net.txt\"\nformat = \"cidr\"\n"
                           "[[rules]]\npath = \"plain.rules\"\nset = \"local-1\"\n",
                           "inline", c, &err)) << err;
  ASSERT_EQ(c.rule_feeds.size(), 4u);
  EXPECT_EQ(c.rule_feeds[0].set, "");  // the default set
  EXPECT_EQ(c.rule_feeds[3].set, "local-1");
  GatewayConfig named_default;
  ASSERT_TRUE(parse_config("[[rules]]\npath = \"a\"\nset = \"default\"\n", "inline", named_default, &err)) << err;
  EXPECT_EQ(named_default.rule_feeds[0].set, "");  // one group with the unnamed files, no sync refusal
  EXPECT_EQ(c.rule_feeds[0].path, "ads.hosts");
  EXPECT_EQ(c.rule_feeds[0].feed.format, feeds::Format::kHosts);
  EXPECT_EQ(c.rule_feeds[1].feed.format, feeds::Format::kCidr);
  EXPECT_EQ(c.rule_feeds[1].feed.cidr_kind, RuleKind::kSrc);
  EXPECT_EQ(c.rule_feeds[2].feed.cidr_kind, RuleKind::kIp);  // the default
  EXPECT_EQ(c.rule_feeds[3].feed.format, feeds::Format::kRules);
  const std::pair<const char*, const char*> bad[] = {
      {"[[rules]]\nformat = \"hosts\"\n", "inline: rules[0]: 'path' (the file) is required"},
      {"[[rules]]\npath = \"a\"\nformat = \"csv\"\n", "inline: rules[0].format: expected"},
      {"[[rules]]\npath = \"a\"\nformat = \"hosts\"\nas = \"src\"\n", "inline: rules[0].as: expected"},
      {"[[rules]]\npath = \"a\"\nformat = \"cidr\"\nas = \"host\"\n", "inline: rules[0].as: expected"},
      {"[[rules]]\npath = \"a\"\nfile = \"b\"\n", "unknown key 'file'"},
      {"rules = 3\n", "'rules' must be an array of tables"},
      {"[[rules]]\npath = \"a\\u0000b\"\n", "rules[0].path: a string may not contain a NUL"},
      {"[[rules]]\npath = \"\"\n", "rules[0].path: an empty path"},
      {"[[rules]]\npath = \"a\"\nset = \"Ads\"\n", "inline: rules[0].set: expected 1 to 64 of a-z"},
      {"[[rules]]\npath = \"a\"\nset = \"ads replace\"\n", "inline: rules[0].set: expected 1 to 64"},
      {"[[rules]]\npath = \"a\"\nset = \"\"\n", "inline: rules[0].set: expected"},
      {"[[rules]]\npath = \"a\"\nset = 3\n", "inline: rules[0].set"},
  };
  for (const auto& [text, expect] : bad) {
    GatewayConfig d;
    EXPECT_FALSE(parse_config(text, "inline", d, &err)) << text;
    EXPECT_NE(err.find(expect), std::string::npos) << text << " -> " << err;
  }
}

}  // namespace
}  // namespace cg

TEST(Config, SyncSectionIsReadWithDefaults) {
  cg::GatewayConfig c;
  std::string err;
  EXPECT_TRUE(c.sync.redis.empty());  // no [sync]: no sync
  ASSERT_TRUE(cg::parse_config("[sync]\nredis = \"unix:///run/redis.sock?db=2\"\n", "t.toml", c, &err)) << err;
  EXPECT_EQ(c.sync.redis, "unix:///run/redis.sock?db=2");
  EXPECT_EQ(c.sync.stream, "cuckoogate:rules");
  EXPECT_EQ(c.sync.snapshot_interval_s, 60u);
  EXPECT_EQ(c.sync.timeout_ms, 1000u);
  EXPECT_EQ(c.sync.wait_replicas, 0u);
  EXPECT_FALSE(c.sync.queue_offline);  // offline_writes = "refuse"
  cg::GatewayConfig d;
  ASSERT_TRUE(cg::parse_config("[sync]\nredis = \"redis://10.0.0.5:6380/1\"\nstream = \"bl\"\ngateway_id = \"edge-1\"\n"
                           "user = \"gw\"\npassword = \"pw\"\nsnapshot_interval = 0\ntimeout_ms = 250\n"
                           "wait_replicas = 1\noffline_writes = \"queue\"\n",
                           "t.toml", d, &err))
      << err;
  EXPECT_EQ(d.sync.stream, "bl");
  EXPECT_EQ(d.sync.gateway_id, "edge-1");
  EXPECT_EQ(d.sync.user, "gw");
  EXPECT_EQ(d.sync.password, "pw");
  EXPECT_EQ(d.sync.snapshot_interval_s, 0u);
  EXPECT_EQ(d.sync.timeout_ms, 250u);
  EXPECT_EQ(d.sync.wait_replicas, 1u);
  EXPECT_TRUE(d.sync.queue_offline);
}

TEST(Config, SyncTlsKeysAreRead) {
  cg::GatewayConfig c;
  std::string err;
  ASSERT_TRUE(cg::parse_config("[sync]\nredis = \"redis://r.example:6380\"\ntls = true\ntls_ca = \"/etc/ca.pem\"\n"
                               "tls_ca_dir = \"/etc/cas\"\ntls_cert = \"/etc/gw.pem\"\ntls_key = \"/etc/gw.key\"\n"
                               "tls_server_name = \"redis.internal\"\n",
                               "t.toml", c, &err))
      << err;
  EXPECT_TRUE(c.sync.tls);
  EXPECT_EQ(c.sync.tls_ca, "/etc/ca.pem");
  EXPECT_EQ(c.sync.tls_ca_dir, "/etc/cas");
  EXPECT_EQ(c.sync.tls_cert, "/etc/gw.pem");
  EXPECT_EQ(c.sync.tls_key, "/etc/gw.key");
  EXPECT_EQ(c.sync.tls_server_name, "redis.internal");
  cg::GatewayConfig d;  // rediss:// turns TLS on by itself
  ASSERT_TRUE(cg::parse_config("[sync]\nredis = \"rediss://r.example\"\ntls_ca = \"/etc/ca.pem\"\n", "t.toml", d, &err))
      << err;
  EXPECT_FALSE(d.sync.tls);
}

TEST(Config, ControlIdleTimeoutIsBounded) {
  cg::GatewayConfig c;
  std::string err;
  ASSERT_TRUE(cg::parse_config("[gateway]\nctl_idle_timeout = 5\n", "t.toml", c, &err)) << err;
  EXPECT_EQ(c.ctl_idle_timeout_s, 5u);
  cg::GatewayConfig d;
  EXPECT_EQ(d.ctl_idle_timeout_s, 30u);  // the default: at most 30 s, as the issue asks
  for (const char* bad : {"[gateway]\nctl_idle_timeout = 0\n", "[gateway]\nctl_idle_timeout = 3601\n",
                          "[gateway]\nctl_idle_timeout = \"30\"\n"}) {
    cg::GatewayConfig e;
    EXPECT_FALSE(cg::parse_config(bad, "t.toml", e, &err)) << bad;
    EXPECT_NE(err.find("ctl_idle_timeout"), std::string::npos) << err;
  }
}

TEST(Config, RejectDnsAnswerAndRateAreReadAndChecked) {
  cg::GatewayConfig d;
  EXPECT_FALSE(d.reject_nxdomain);  // REFUSED
  EXPECT_EQ(d.reject_rate, 1000u);
  cg::GatewayConfig c;
  std::string err;
  ASSERT_TRUE(cg::parse_config("[gateway]\naction = \"reject\"\nreject_dns = \"nxdomain\"\nreject_rate = 50\n",
                               "t.toml", c, &err))
      << err;
  EXPECT_TRUE(c.reject);
  EXPECT_TRUE(c.reject_nxdomain);
  EXPECT_EQ(c.reject_rate, 50u);
  for (const auto& [bad, key] : {std::pair{"[gateway]\nreject_dns = \"servfail\"\n", "reject_dns"},
                                 std::pair{"[gateway]\nreject_dns = 3\n", "reject_dns"},
                                 std::pair{"[gateway]\nreject_rate = 0\n", "reject_rate"},
                                 std::pair{"[gateway]\nreject_rate = 1000001\n", "reject_rate"}}) {
    cg::GatewayConfig e;
    EXPECT_FALSE(cg::parse_config(bad, "t.toml", e, &err)) << bad;
    EXPECT_NE(err.find(key), std::string::npos) << err;
  }
}

TEST(Config, MaxMemoryTakesBytesOrASuffixedString) {
  std::string err;
  const std::pair<const char*, std::size_t> good[] = {
      {"max_memory = \"2G\"", std::size_t{2} << 30}, {"max_memory = \"512M\"", std::size_t{512} << 20},
      {"max_memory = 1048576", std::size_t{1} << 20}, {"max_memory = \"1048576\"", std::size_t{1} << 20},
      {"max_memory = \"256G\"", std::size_t{256} << 30}};
  for (const auto& [text, bytes] : good) {
    cg::GatewayConfig c;
    ASSERT_TRUE(cg::parse_config(std::string("[gateway]\n") + text + "\n", "t.toml", c, &err)) << text << ": " << err;
    EXPECT_EQ(c.max_memory, bytes) << text;
  }
  EXPECT_EQ(cg::GatewayConfig{}.max_memory, 0u);  // default: the blocklist's own (4 GiB)
  for (const char* bad : {"max_memory = \"2X\"", "max_memory = \"G\"", "max_memory = \"1T\"", "max_memory = 1000",
                          "max_memory = \"-1G\"", "max_memory = \"2GB\"", "max_memory = -5", "max_memory = 1.5",
                          "max_memory = \"99999999999999999999K\""}) {
    cg::GatewayConfig c;
    EXPECT_FALSE(cg::parse_config(std::string("[gateway]\n") + bad + "\n", "t.toml", c, &err)) << bad;
    EXPECT_NE(err.find("max_memory"), std::string::npos) << err;
  }
}
