// main() for in-process DPDK tests: EAL without hugepages, PCI or shared
// config, its own --file-prefix (tests run in parallel), a scratch directory
// for the tests (*dir), and EAL's runtime directory removed afterwards.
// `extra`, if given, is called with the scratch directory before EAL starts
// and returns more EAL arguments (e.g. --vdev options naming files there).
#pragma once

#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace cg::test {

inline int run_eal_tests(int argc, char** argv, const std::string& name, std::string* dir,
                         const std::function<std::vector<std::string>(const std::string&)>& extra = {}) {
  testing::InitGoogleTest(&argc, argv);
  std::string tmpl = "/tmp/cg-" + name + "-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return 2;
  *dir = tmpl;
  const std::string prefix = "--file-prefix=cg-" + name + "-" + std::to_string(getpid());
  std::vector<std::string> args = {name, "--no-huge", "--no-pci", "--no-shconf", "-m", "512",
                                   "-l", "0", "--no-telemetry", "--log-level=lib.eal:error", prefix};
  if (extra) {
    const std::vector<std::string> more = extra(*dir);
    args.insert(args.end(), more.begin(), more.end());
  }
  std::vector<char*> eal_argv;
  for (auto& a : args) eal_argv.push_back(a.data());
  if (rte_eal_init(static_cast<int>(eal_argv.size()), eal_argv.data()) < 0) {
    std::fprintf(stderr, "rte_eal_init failed: %s\n", rte_strerror(rte_errno));
    return 1;
  }
  const int rc = RUN_ALL_TESTS();
  const std::string runtime_dir = rte_eal_get_runtime_dir();
  rte_eal_cleanup();
  std::error_code ec;
  std::filesystem::remove(runtime_dir, ec);  // EAL leaves its (empty) runtime directory
  if (ec) std::fprintf(stderr, "cannot remove %s: %s\n", runtime_dir.c_str(), ec.message().c_str());
  std::filesystem::remove_all(tmpl, ec);
  return rc;
}

}  // namespace cg::test
