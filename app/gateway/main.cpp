// cuckoogate: the DPDK blocklist gateway.
//
//   cuckoogate run    [--config FILE] [--ctl PATH] [--state-dir DIR] [--rules FILE]... [--redis URL] [-- EAL options]
//   cuckoogate replay --rules FILE --in IN.pcap --out PASS.pcap [--drop DROP.pcap] [...]
//   cuckoogate [EAL options] -- run|replay [...]       (DPDK's convention, also accepted)
//
// Only this file exits; everything below returns status values.
#include <CLI/CLI.hpp>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "gateway/replay.hpp"
#include "gateway/run.hpp"

namespace {

// The command line split at `--` before CLI11 sees it: EAL arguments such as
// `--vdev 'net_pcap0,rx_pcap=x.pcap'` are never parsed as ours, whatever
// options precede them. Two orders, for every option:
//   cuckoogate run|replay [options] [-- EAL options]
//   cuckoogate [EAL options] -- run|replay [options] [-- more EAL options]
struct SplitArgs {
  std::vector<std::string> ours;  // argv[0], the command and its options
  std::vector<std::string> eal;
};

bool is_top_level_flag(const std::string& a) {
  return a == "-h" || a == "--help" || a == "--version";
}

// false: EAL options came first without the `--` that ends them (*err says so).
bool split_args(int argc, char** argv, SplitArgs& out, std::string* err) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  out.ours.assign(1, argv[0]);
  auto dashdash_from = [&](std::size_t from) {
    for (std::size_t i = from; i < args.size(); ++i)
      if (args[i] == "--") return i;
    return args.size();
  };
  std::size_t cmd = 0;  // where our part starts
  if (!args.empty() && args[0].size() > 1 && args[0][0] == '-' && !is_top_level_flag(args[0])) {
    const std::size_t d = dashdash_from(0);
    if (d == args.size()) {
      std::string given;
      for (const std::string& a : args) given += " " + a;
      *err = "cuckoogate: EAL options before the command must end with `--`:\n"
             "  cuckoogate [EAL options] -- run|replay [options]\n"
             "  cuckoogate run|replay [options] -- [EAL options]\n"
             "(given:" + given + ")";
      return false;
    }
    out.eal.assign(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(d));
    cmd = d + 1;
  }
  const std::size_t d = dashdash_from(cmd);
  out.ours.insert(out.ours.end(), args.begin() + static_cast<std::ptrdiff_t>(cmd),
                  args.begin() + static_cast<std::ptrdiff_t>(d));
  if (d < args.size())
    out.eal.insert(out.eal.end(), args.begin() + static_cast<std::ptrdiff_t>(d) + 1, args.end());
  return true;
}

// Arguments CLI11 did not recognise (kept as extras, in the order given): a
// clear message, with the `--` hint when they look like EAL options.
bool reject_extras(const std::string& command, const std::vector<std::string>& extras) {
  if (extras.empty()) return false;
  std::string list;
  bool options = false;
  for (const std::string& a : extras) {
    list += " " + a;
    options = options || (a.size() > 1 && a[0] == '-');
  }
  std::fprintf(stderr, "cuckoogate %s: unknown argument%s:%s\n", command.c_str(),
               extras.size() == 1 ? "" : "s", list.c_str());
  if (options)
    std::fprintf(stderr,
                 "EAL options go after `--`:    cuckoogate %s [options] --%s\n"
                 "or before the command:       cuckoogate%s -- %s [options]\n",
                 command.c_str(), list.c_str(), list.c_str(), command.c_str());
  std::fprintf(stderr, "Run with --help for more information.\n");
  return true;
}

// A path option given as "" would otherwise mean "not given" downstream
// (the default control socket, no state directory): refuse it instead.
const CLI::Validator kNonEmptyPath(
    [](const std::string& v) { return v.empty() ? std::string("an empty path") : std::string(); }, "PATH");

}  // namespace

int main(int argc, char** argv) {
  // A write to a peer that has gone (the Redis server of [sync], killed or
  // restarted, under hiredis' plain write()) must be an EPIPE error that the
  // sync handles as a lost connection, not a SIGPIPE that kills the gateway
  // silently. The control socket already sends with MSG_NOSIGNAL.
  std::signal(SIGPIPE, SIG_IGN);
  SplitArgs split;
  std::string split_err;
  if (!split_args(argc, argv, split, &split_err)) {
    std::fprintf(stderr, "%s\n", split_err.c_str());
    return 2;
  }
  CLI::App app{"cuckoogate " CUCKOOGATE_VERSION
               " - DPDK blocklist gateway: lock-free cuckoo filter, exact confirmation, runtime rules"};
  app.require_subcommand(1);
  app.set_version_flag("--version", CUCKOOGATE_VERSION);

  cg::RunOptions ro;
  std::string verify_mode;
  CLI::App* run = app.add_subcommand("run", "Forward between port pairs, dropping blocklisted traffic, "
                                            "until SIGINT, SIGTERM or SIGHUP");
  run->add_option("--config", ro.config, "TOML configuration (see config/README.md)")->check(CLI::ExistingFile);
  run->add_option("--ctl", ro.ctl, "Control socket path (default $CUCKOOGATE_CTL or "
                                    "/run/cuckoogate/cuckoogate.sock)")
      ->check(kNonEmptyPath);
  run->add_option("--state-dir", ro.state_dir, "Directory for durable rule state")->check(kNonEmptyPath);
  run->add_option("--redis", ro.redis, "Share the blocklist through this Redis (redis://host:port/db or "
                                       "unix:///path; overrides [sync] redis; docs/sync.md)");
  run->add_option("--gateway-id", ro.gateway_id, "This gateway's name in the shared log (default: host name)");
  run->add_option("--rules", ro.rules, "Rule file to load at start (repeatable)")->check(CLI::ExistingFile);
  unsigned run_workers = 0;
  run->add_option("--workers", run_workers, "Worker lcores (default: every EAL worker lcore)")
      ->check(CLI::Range(1, 128));
  bool run_verify = false, run_no_verify = false;
  run->add_flag("--verify", run_verify, "Confirm filter hits against the exact rule set (default)");
  run->add_flag("--no-verify", run_no_verify, "Pure-filter mode: a filter hit drops (false positives possible)");
  run->add_flag("--salvage", ro.salvage, "Start even if the rule state is damaged before its "
                                         "journal tail, keeping the valid part");
  uint64_t run_flows = 0;
  CLI::Option* run_flows_opt =
      run->add_option("--flows", run_flows, "Flow-table entries per worker, 0 to judge every packet alone "
                                            "(default: gateway.flows_per_worker, else 131072; 120 bytes each)")
          ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 31));
  std::string run_action;
  run->add_option("--action", run_action, "What a rule does to a blocked flow: drop (default) or reject "
                                          "(TCP resets, DNS REFUSED, ICMP prohibited; docs/reject.md)")
      ->check(CLI::IsMember({"drop", "reject"}));
  std::string run_checksums;
  run->add_option("--checksums", run_checksums, "Checksums of the segments inspectors read: auto (verify once "
                                                "a valid one is seen; default: gateway.checksums, else auto), "
                                                "verify or off (docs/reassembly.md)")
      ->check(CLI::IsMember({"auto", "verify", "off"}));
  std::string run_reject_dns;
  run->add_option("--reject-dns", run_reject_dns, "With --action reject: a blocked DNS query's answer, refused "
                                                  "or nxdomain (default: gateway.reject_dns, else refused)")
      ->check(CLI::IsMember({"refused", "nxdomain"}));
  uint32_t run_reject_rate = 0;
  CLI::Option* run_reject_rate_opt =
      run->add_option("--reject-rate", run_reject_rate, "With --action reject: replies per second per worker, "
                                                        "bursts of a tenth of it (default: gateway.reject_rate, else 1000)")
          ->check(CLI::Range(1u, cg::kMaxRejectRate));
  run->allow_extras();  // reported by reject_extras(), in order and with a hint
  run->footer("EAL options follow `--` (cuckoogate run [options] -- --vdev=net_null0 ...) or precede the\n"
              "command (cuckoogate [EAL options] -- run [options]); they replace the config's [eal] args.");

  cg::ReplayOptions po;
  CLI::App* rep = app.add_subcommand("replay", "Replay a pcap through the data path (DPDK net_pcap vdevs): "
                                               "passed and dropped packets to pcaps, a summary on stdout");
  rep->add_option("--rules", po.rules, "Rule file (repeatable)")->required()->check(CLI::ExistingFile);
  rep->add_option("--in", po.in, "Input capture (Ethernet pcap)")->required()->check(CLI::ExistingFile);
  rep->add_option("--out", po.out, "Where passed packets are written")->required();
  rep->add_option("--drop", po.drop, "Where dropped packets are written (default: freed)");
  rep->add_option("--workers", po.workers, "Worker lcores; 1 keeps the exact packet order, more keep "
                                           "the order within each flow")->check(CLI::Range(1, 64));
  rep->add_option("--ctl", po.ctl, "Open a control socket at PATH during the replay")->check(kNonEmptyPath);
  rep->add_option("--redis", po.redis, "With --ctl: share the blocklist through this Redis (docs/sync.md)");
  rep->add_option("--gateway-id", po.gateway_id, "This gateway's name in the shared log (default: host name)");
  rep->add_option("--stats-json", po.stats_json, "Write the summary as JSON to FILE");
  bool rep_verify = false, rep_no_verify = false;
  rep->add_flag("--verify", rep_verify, "Confirm filter hits against the exact rule set (default)");
  rep->add_flag("--no-verify", rep_no_verify, "Pure-filter mode: a filter hit drops");
  rep->add_option("--loop", po.loop, "Replay the capture N times")->check(CLI::Range(1u, 1000000u));
  double pps = 0;
  CLI::Option* pps_opt =
      rep->add_option("--pps", pps, "Pace the input to RATE packets per second, at least --workers "
                                    "(a positive number; omit the option for an unpaced replay)");
  std::string malformed = "pass";
  rep->add_option("--malformed", malformed, "Verdict for malformed packets that match no rule")
      ->check(CLI::IsMember({"pass", "drop"}));
  rep->add_option("--capacity", po.capacity, "Rules the blocklist is first built for; it grows past them "
                                             "(default: 2x the rule files, at least 65536)");
  rep->add_option("--memory", po.memory_mb, "EAL memory in MB (-m)")->check(CLI::Range(64u, 65536u));
  rep->add_flag("--quiet", po.quiet, "No summary on stdout");
  rep->add_option("--flows", po.flows, "Flow-table entries per worker, 0 to judge every packet alone "
                                       "(default 131072; 120 bytes each)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 31));
  std::string rep_action = "drop";
  rep->add_option("--action", rep_action, "drop (default) or reject blocked flows (docs/reject.md)")
      ->check(CLI::IsMember({"drop", "reject"}));
  std::string rep_reject_dns = "refused";
  rep->add_option("--reject-dns", rep_reject_dns, "With --action reject: a blocked DNS query's answer, refused "
                                                  "(default) or nxdomain")
      ->check(CLI::IsMember({"refused", "nxdomain"}));
  rep->add_option("--reject-rate", po.reject_rate, "With --action reject: replies per second per worker, "
                                                   "bursts of a tenth of it (default 1000)")
      ->check(CLI::Range(1u, cg::kMaxRejectRate));
  std::string rep_frags = "reassemble";
  rep->add_option("--fragments", rep_frags, "IP fragments: reassemble (default) and judge the datagram, or off "
                                            "(each judged alone; docs/dataplane.md)")
      ->check(CLI::IsMember({"reassemble", "off"}));
  rep->add_option("--frag-timeout", po.fragments.timeout_ms, "Drop an incomplete datagram this many ms after "
                                                             "its first fragment (default 5000)")
      ->check(CLI::Range(1u, 60000u));
  rep->add_option("--frag-datagrams", po.fragments.datagrams, "Datagrams collected at once per worker (default 1024)")
      ->check(CLI::Range(1u, 1u << 20));
  rep->add_option("--frag-held", po.fragments.fragments, "Fragments held at once per worker (default 4096)")
      ->check(CLI::Range(1u, 1u << 23));
  std::string rep_overflow = "pass";
  rep->add_option("--inspect-overflow", rep_overflow, "When a flow's reassembly budget runs out: pass "
                                                      "(default) or drop its client data (docs/reassembly.md)")
      ->check(CLI::IsMember({"pass", "drop"}));
  rep->add_option("--quic", po.quic, "QUIC (UDP 443): inspect (decrypt client Initials, judge the SNI; "
                                     "default), block (drop them: browsers fall back to TCP) or pass")
      ->check(CLI::IsMember({"inspect", "block", "pass"}));
  rep->add_option("--checksums", po.checksums, "Checksums of the segments inspectors read: auto (verify once "
                                               "a valid one is seen; default), verify or off (docs/reassembly.md)")
      ->check(CLI::IsMember({"auto", "verify", "off"}));
  rep->add_option("--reply", po.reply, "With --action reject: write every reply packet to this pcap "
                                       "(default: replies are discarded)");
  rep->allow_extras();
  rep->footer("Extra EAL options follow `--` (cuckoogate replay [options] -- --log-level=...) or precede\n"
              "the command. --in, --out, --drop, --stats-json and --rules must name different files.");

  std::vector<char*> cli_argv;
  for (std::string& a : split.ours) cli_argv.push_back(a.data());
  try {
    app.parse(static_cast<int>(cli_argv.size()), cli_argv.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help/--version: 0; bad usage: 2
  }

  if (run->parsed()) {
    if (reject_extras("run", run->remaining())) return 2;
    if (run_verify && run_no_verify) {
      std::fprintf(stderr, "cuckoogate run: --verify and --no-verify exclude each other\n");
      return 2;
    }
    if (run_verify || run_no_verify) ro.verify = run_verify;
    if (run_workers != 0) ro.workers = run_workers;
    if (run_flows_opt->count() != 0) ro.flows = run_flows;
    if (!run_action.empty()) ro.reject = run_action == "reject";
    if (!run_checksums.empty()) ro.checksums = run_checksums;
    if (!run_reject_dns.empty()) ro.reject_nxdomain = run_reject_dns == "nxdomain";
    if (run_reject_rate_opt->count() != 0) ro.reject_rate = run_reject_rate;
    ro.eal = split.eal;
    return cg::run_gateway(ro);
  }
  if (reject_extras("replay", rep->remaining())) return 2;
  if (pps_opt->count() != 0) {
    // Explicit rates only: 0, negative, NaN and infinity are refused rather
    // than read as "unpaced". 1e9 bounds the worker's pacing arithmetic.
    if (!std::isfinite(pps) || pps < 1 || pps > 1e9) {
      std::fprintf(stderr, "cuckoogate replay: --pps must be a packet rate from 1 to 1e9 (got %s); "
                           "omit it for an unpaced replay\n", pps_opt->results().at(0).c_str());
      return 2;
    }
    po.pps = static_cast<uint64_t>(std::llround(pps));
  }
  if (rep_verify && rep_no_verify) {
    std::fprintf(stderr, "cuckoogate replay: --verify and --no-verify exclude each other\n");
    return 2;
  }
  po.verify = !rep_no_verify;
  po.drop_malformed = malformed == "drop";
  po.reject = rep_action == "reject";
  po.reject_nxdomain = rep_reject_dns == "nxdomain";
  po.fragments.reassemble = rep_frags == "reassemble";
  po.inspect_overflow_drop = rep_overflow == "drop";
  // With --action drop, replies come only from rules added with
  // action=reject, which need the exact set's per-rule slots (--verify).
  if (!po.reply.empty() && !po.reject && !po.verify) {
    std::fprintf(stderr, "cuckoogate replay: --reply needs --action reject or per-rule actions, which need "
                         "--verify (--no-verify with --action drop sends no replies)\n");
    return 2;
  }
  po.eal_extra = split.eal;
  return cg::replay(po);
}
