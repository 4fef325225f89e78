// A fixture for the end-to-end tests that run `cuckoogate replay` on frames
// they build: per-test file names in the test binary's scratch directory, and
// one replay of `in` under `rules` returning its stats JSON. The packets it
// passed and dropped are in path("pass.pcap") and path("drop.pcap").
// Needs gateway_test_env.hpp and subprocess.hpp (tests/gateway).
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gateway_test_env.hpp"
#include "packet_builder.hpp"
#include "pcap_file.hpp"
#include "subprocess.hpp"

namespace cg::test {

class ReplayTest : public testing::Test {
 protected:
  // DIR/<test name>-<name>: distinct for every test of the binary.
  std::string path(const std::string& name) const {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    return GatewayEnv::dir() + "/" + info->name() + "-" + name;
  }
  // Replays `in` with `rules`; extra options appended. Returns the stats JSON.
  nlohmann::json replay(const std::vector<Bytes>& in, const std::string& rules,
                        std::vector<std::string> extra = {}) {
    write_pcap(path("in.pcap"), in);
    std::ofstream(path("r.rules")) << rules;
    std::vector<std::string> argv = {GatewayEnv::gateway(), "replay", "--rules", path("r.rules"),
                                     "--in", path("in.pcap"), "--out", path("pass.pcap"),
                                     "--drop", path("drop.pcap"), "--stats-json", path("s.json"), "--quiet"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const Result r = run(argv, GatewayEnv::dir());
    EXPECT_EQ(r.status, 0) << r.err;
    return nlohmann::json::parse(slurp(path("s.json")));
  }
  std::vector<Bytes> passed() const { return read_pcap(path("pass.pcap")); }
  std::vector<Bytes> dropped() const { return read_pcap(path("drop.pcap")); }
};

}  // namespace cg::test
