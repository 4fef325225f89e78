// cuckoogate: the DPDK blocklist gateway.
//
//   cuckoogate run    [--config FILE] [--ctl PATH] [--state-dir DIR] [--rules FILE]... [-- EAL options]
//   cuckoogate replay --rules FILE --in IN.pcap --out PASS.pcap [--drop DROP.pcap] [...]
//   cuckoogate [EAL options] -- run|replay [...]       (DPDK's convention, also accepted)
//
// Only this file exits; everything below returns status values.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "gateway/replay.hpp"
#include "gateway/run.hpp"

namespace {

// DPDK's own convention, `cuckoogate [EAL options] -- run|replay [options]`, is
// accepted besides `cuckoogate run|replay [options] [-- EAL options]`: options
// before a `--` that precedes the command are EAL options.
std::vector<std::string> split_leading_eal(int& argc, char**& argv, std::vector<char*>& rest) {
  std::vector<std::string> eal;
  if (argc < 3 || argv[1][0] != '-') return eal;
  const std::string first = argv[1];
  if (first == "-h" || first == "--help" || first == "--version") return eal;
  int dashdash = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      dashdash = i;
      break;
    }
  }
  if (dashdash < 0) return eal;
  for (int i = 1; i < dashdash; ++i) eal.emplace_back(argv[i]);
  rest.assign(argv, argv + 1);
  rest.insert(rest.end(), argv + dashdash + 1, argv + argc);
  rest.push_back(nullptr);
  argc = static_cast<int>(rest.size()) - 1;
  argv = rest.data();
  return eal;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest;
  const std::vector<std::string> leading_eal = split_leading_eal(argc, argv, rest);
  CLI::App app{"cuckoogate " CUCKOOGATE_VERSION
               " - DPDK blocklist gateway: lock-free cuckoo filter, exact confirmation, runtime rules"};
  app.require_subcommand(1);
  app.set_version_flag("--version", CUCKOOGATE_VERSION);

  cg::RunOptions ro;
  std::string verify_mode;
  CLI::App* run = app.add_subcommand("run", "Forward between port pairs, dropping blocklisted traffic, "
                                            "until SIGINT/SIGTERM");
  run->add_option("--config", ro.config, "TOML configuration (see config/README.md)")->check(CLI::ExistingFile);
  run->add_option("--ctl", ro.ctl, "Control socket path (default $CUCKOOGATE_CTL or "
                                    "/run/cuckoogate/cuckoogate.sock)");
  run->add_option("--state-dir", ro.state_dir, "Directory for durable rule state");
  run->add_option("--rules", ro.rules, "Rule file to load at start (repeatable)")->check(CLI::ExistingFile);
  unsigned run_workers = 0;
  run->add_option("--workers", run_workers, "Worker lcores (default: every EAL worker lcore)")
      ->check(CLI::Range(1, 128));
  bool run_verify = false, run_no_verify = false;
  run->add_flag("--verify", run_verify, "Confirm filter hits against the exact rule set (default)");
  run->add_flag("--no-verify", run_no_verify, "Pure-filter mode: a filter hit drops (false positives possible)");
  run->add_flag("--salvage", ro.salvage, "Start even if the rule state is damaged before its "
                                         "journal tail, keeping the valid part");
  run->add_option("eal", ro.eal, "EAL options, after --");

  cg::ReplayOptions po;
  CLI::App* rep = app.add_subcommand("replay", "Replay a pcap through the data path (DPDK net_pcap vdevs): "
                                               "passed and dropped packets to pcaps, a summary on stdout");
  rep->add_option("--rules", po.rules, "Rule file (repeatable)")->required()->check(CLI::ExistingFile);
  rep->add_option("--in", po.in, "Input capture (Ethernet pcap)")->required()->check(CLI::ExistingFile);
  rep->add_option("--out", po.out, "Where passed packets are written")->required();
  rep->add_option("--drop", po.drop, "Where dropped packets are written (default: freed)");
  rep->add_option("--workers", po.workers, "Worker lcores; 1 keeps the exact packet order, more keep "
                                           "the order within each flow")->check(CLI::Range(1, 64));
  rep->add_option("--ctl", po.ctl, "Open a control socket at PATH during the replay");
  rep->add_option("--stats-json", po.stats_json, "Write the summary as JSON to FILE");
  bool rep_verify = false, rep_no_verify = false;
  rep->add_flag("--verify", rep_verify, "Confirm filter hits against the exact rule set (default)");
  rep->add_flag("--no-verify", rep_no_verify, "Pure-filter mode: a filter hit drops");
  rep->add_option("--loop", po.loop, "Replay the capture N times")->check(CLI::Range(1u, 1000000u));
  rep->add_option("--pps", po.pps, "Pace the input to RATE packets per second (0 = unpaced)");
  std::string malformed = "pass";
  rep->add_option("--malformed", malformed, "Verdict for malformed packets that match no rule")
      ->check(CLI::IsMember({"pass", "drop"}));
  rep->add_option("--capacity", po.capacity, "Rules the blocklist can hold (default: 2x the rule files, "
                                             "at least 65536)");
  rep->add_option("--memory", po.memory_mb, "EAL memory in MB (-m)")->check(CLI::Range(64u, 65536u));
  rep->add_flag("--quiet", po.quiet, "No summary on stdout");
  rep->add_option("eal", po.eal_extra, "Extra EAL options, after --");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help/--version: 0; bad usage: 2
  }

  if (run->parsed()) {
    if (run_verify && run_no_verify) {
      std::fprintf(stderr, "cuckoogate run: --verify and --no-verify exclude each other\n");
      return 2;
    }
    if (run_verify || run_no_verify) ro.verify = run_verify;
    if (run_workers != 0) ro.workers = run_workers;
    ro.eal.insert(ro.eal.begin(), leading_eal.begin(), leading_eal.end());
    return cg::run_gateway(ro);
  }
  if (rep_verify && rep_no_verify) {
    std::fprintf(stderr, "cuckoogate replay: --verify and --no-verify exclude each other\n");
    return 2;
  }
  po.verify = !rep_no_verify;
  po.drop_malformed = malformed == "drop";
  po.eal_extra.insert(po.eal_extra.begin(), leading_eal.begin(), leading_eal.end());
  return cg::replay(po);
}
