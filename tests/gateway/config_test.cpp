// The TOML configuration: the shipped examples parse, and every kind of bad
// file is an error that names the file and the key.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "gateway/config.hpp"

namespace cg {
namespace {

std::string write(const std::string& text) {
  static int n = 0;
  const std::string path = "/tmp/cg-config-test-" + std::to_string(getpid()) + "-" + std::to_string(n++) + ".toml";
  std::ofstream(path) << text;
  return path;
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
                    Bad{"[gateway]\nverify = 1\n", "verify"},
                    Bad{"[gateway]\nmalformed = \"maybe\"\n", "malformed"},
                    Bad{"[gateway]\nrules = \"one.rules\"\n", "rules"},
                    Bad{"[eal]\nargs = [1, 2]\n", "eal.args"},
                    Bad{"[[pair]]\nports = [\"a\"]\n", "pair[0].ports"},
                    Bad{"[[pair]]\nport = [\"a\", \"b\"]\n", "unknown key 'port'"},
                    Bad{"[gateway\nworkers = 1\n", ":1:"},
                    Bad{"bogus = 1\n", "unknown key 'bogus'"}));

}  // namespace
}  // namespace cg
