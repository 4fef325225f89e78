// End-to-end: rule files and the configuration that are not regular files of
// sane size stop `cuckoogate replay` and `cuckoogate run` with exit status 2
// and one clear line, before EAL starts: no std::bad_alloc abort on
// /dev/zero, no hang on a FIFO, no directory read as an empty blocklist
// (issue 9, item 3). Each kind of bad file is tried through each way a file
// reaches the gateway.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "gateway_test_env.hpp"
#include "pcap_file.hpp"
#include "scratch_files.hpp"
#include "subprocess.hpp"

namespace cg::test {
namespace {

// Long enough for a loaded machine, far shorter than a hang or reading
// /dev/zero until memory runs out.
constexpr std::chrono::seconds kPrompt{30};

// How the file under test reaches the gateway.
enum class Via { kReplayRules, kConfigRules, kConfig };

struct Route {
  Via via;
  const char* name;
  off_t limit;       // bytes
  const char* kind;  // as the size error names it
};

// gtest names a failing case's parameter by this, not by its bytes.
void PrintTo(const Route& r, std::ostream* os) { *os << r.name; }

const Route kRoutes[] = {
    {Via::kReplayRules, "ReplayRules", off_t{1} << 30, "1 GiB, the limit for a rule file"},
    {Via::kConfigRules, "ConfigRules", off_t{1} << 30, "1 GiB, the limit for a rule file"},
    {Via::kConfig, "Config", off_t{1} << 20, "1 MiB, the limit for a configuration file"},
};

class BadInputFile : public testing::TestWithParam<Route> {
 protected:
  void SetUp() override { write_pcap(dir_.path("in.pcap"), {}); }

  // Starts the gateway with `file` where the route puts it. `run` gets EAL
  // arguments that EAL refuses: if the refusal under test did not come
  // first, nothing starts (exit 1, and no gateway is left running).
  Result start(const std::string& file) const {
    std::vector<std::string> argv;
    switch (GetParam().via) {
      case Via::kReplayRules:
        argv = {GatewayEnv::gateway(), "replay", "--rules", file, "--in", dir_.path("in.pcap"),
                "--out", dir_.path("out.pcap"), "--quiet"};
        break;
      case Via::kConfigRules:
        argv = {GatewayEnv::gateway(), "run", "--config",
                dir_.write("gw.toml", "[gateway]\nrules = [\"" + file + "\"]\n")};
        break;
      case Via::kConfig:
        argv = {GatewayEnv::gateway(), "run", "--config", file};
        break;
    }
    if (GetParam().via != Via::kReplayRules)
      argv.insert(argv.end(), {"--ctl", dir_.path("ctl.sock"), "--", "--no-such-eal-option"});
    return run(argv, dir_.path(), "/dev/null", kPrompt);
  }
  // Exit status 2 with `message` on stderr, no abort, no output capture.
  void expect_refused(const Result& r, const std::string& message) const {
    EXPECT_NE(r.status, -1) << "still running after " << kPrompt.count() << " s";
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("bad_alloc"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir_.path("out.pcap")));
  }

  ScratchDir dir_;
};

TEST_P(BadInputFile, DevZeroIsRefusedNotReadUntilMemoryRunsOut) {
  expect_refused(start("/dev/zero"), "/dev/zero: not a regular file (a character device)");
}

TEST_P(BadInputFile, FifoIsRefusedNotWaitedFor) {
  const std::string f = dir_.fifo("input.fifo");
  expect_refused(start(f), f + ": not a regular file (a FIFO)");
}

TEST_P(BadInputFile, DirectoryIsRefusedNotReadAsEmpty) {
  // On the command line, CLI11 already refuses a directory in its own words.
  const std::string d = dir_.path("input.d");
  std::filesystem::create_directories(d);
  expect_refused(start(d), GetParam().via == Via::kConfigRules ? d + ": is a directory" : "directory");
}

TEST_P(BadInputFile, FileOverTheLimitIsRefusedUnread) {
  const std::string big = dir_.sparse("input.big", GetParam().limit + 1);
  expect_refused(start(big), big + ": larger than " + std::to_string(GetParam().limit) + " bytes (" +
                                 GetParam().kind + ")");
}

INSTANTIATE_TEST_SUITE_P(Routes, BadInputFile, testing::ValuesIn(kRoutes),
                         [](const testing::TestParamInfo<Route>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace cg::test

int main(int argc, char** argv) { return cg::test::gateway_test_main(argc, argv); }
