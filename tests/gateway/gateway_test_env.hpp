// Shared set-up for the gateway end-to-end tests: where the binaries are
// (passed by meson as arguments) and a scratch directory per test binary.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "subprocess.hpp"

namespace cg::test {

struct GatewayEnv {
  static std::string& gateway() { static std::string s; return s; }
  static std::string& ctl() { static std::string s; return s; }
  static std::string& dir() { static std::string s; return s; }
};

// Where EAL keeps a file prefix's runtime directory (<base>/<prefix>): what a
// gateway must not leave behind, and what a test cleans up after SIGKILL.
inline std::string eal_runtime_base() {
  if (getuid() == 0) return "/var/run/dpdk";
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  return std::string(xdg != nullptr ? xdg : "/tmp") + "/dpdk";
}

// main() for the gateway tests: argv[1] = cuckoogate, argv[2] = cuckoogatectl.
inline int gateway_test_main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s CUCKOOGATE CUCKOOGATECTL [gtest options]\n", argv[0]);
    return 2;
  }
  GatewayEnv::gateway() = argv[1];
  GatewayEnv::ctl() = argv[2];
  char tmpl[] = "/tmp/cg-gw-test-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 2;
  GatewayEnv::dir() = tmpl;
  // The gateways these tests start (and sometimes SIGKILL) keep their
  // scratch files in here too, removed with it.
  setenv("TMPDIR", tmpl, 1);
  const int rc = RUN_ALL_TESTS();
  std::error_code ec;
  if (rc == 0) std::filesystem::remove_all(tmpl, ec);  // kept on failure, for a look
  else std::fprintf(stderr, "test files kept in %s\n", tmpl);
  return rc;
}

// A fixture for the tests that talk to one `cuckoogate run` on net_null ports
// shared by the whole suite (start_null_gateway, control socket DIR/ctl.sock):
// ctl() runs cuckoogatectl against it.
class NullGatewaySuite : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    sock_ = GatewayEnv::dir() + "/ctl.sock";
    std::string err;
    gw_ = start_null_gateway(GatewayEnv::gateway(), sock_, GatewayEnv::dir(), &err);
    ASSERT_NE(gw_, nullptr) << err;
  }
  static void TearDownTestSuite() {
    const auto r = stop_gateway();
    if (r) {
      EXPECT_EQ(r->first, 0);
    }
  }
  // Stops the gateway with SIGINT: its exit status and what it printed
  // (nothing if it never started; SetUpTestSuite said why).
  static std::optional<std::pair<int, std::string>> stop_gateway() {
    if (gw_ == nullptr) return std::nullopt;
    gw_->signal(SIGINT);
    const int st = gw_->wait(std::chrono::seconds(30));
    std::string out = gw_->out();
    delete gw_;
    gw_ = nullptr;
    return std::make_pair(st, std::move(out));
  }
  // `cuckoogatectl -s SOCK args...`, stdin from `in`.
  static Result ctl(std::vector<std::string> args, const std::string& in = "/dev/null") {
    args.insert(args.begin(), {GatewayEnv::ctl(), "-s", sock_});
    return run(args, GatewayEnv::dir(), in);
  }
  static inline std::string sock_;
  static inline Process* gw_ = nullptr;
};

}  // namespace cg::test
