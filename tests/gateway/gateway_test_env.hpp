// Shared set-up for the gateway end-to-end tests: where the binaries are
// (passed by meson as arguments) and a scratch directory per test binary.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

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
  const int rc = RUN_ALL_TESTS();
  std::error_code ec;
  if (rc == 0) std::filesystem::remove_all(tmpl, ec);  // kept on failure, for a look
  else std::fprintf(stderr, "test files kept in %s\n", tmpl);
  return rc;
}

}  // namespace cg::test
