// pipeline_bench: the gateway's data path against plain io forwarding, one
// worker, in one run and on the same virtual devices (issue 10, item 6).
//
//   build/bench/pipeline_bench [--runs 3] [--seconds 2] [--rules 1000000] [--json PATH]
//       [--syn-flows 1048576] [--churn-rate 1000] [--flows 131072] [--testpmd PATH|none]
//       [--only io,steady,...] [--lcores 0-1]
//
// Devices: rx from net_pcap with infinite_rx=1 (the capture is held in mbufs
// and copied out on every rx), tx to net_null with no-rx=1 (frees what it is
// given, generates nothing), so no scenario pays for a pcap file writer. The
// worker polls both ports, as `cuckoogate run` does. EAL: --no-huge --no-pci
// --no-shconf, lcore 0 control (this thread), lcore 1 the one worker.
//
// Scenarios (every figure is packets per second over --seconds after a
// --warmup; --runs rounds; a ratio is taken within a round, then the median
// over the rounds). Each round builds one Engine at a time (the blocklist's
// DPDK objects have fixed names), loads --rules rules of all seven kinds (none
// matching the traffic) and measures:
//   512-flow capture (64-byte TCP, long-lived flows):
//     testpmd_io      dpdk-testpmd --forward-mode=io on the same kind of devices
//                     and capture, -l 0-1, a separate process: a cross-check
//     io              no flow table, no classification, no fragment stage
//                     (set_filtering(false)): the same burst loop and ports,
//                     the ceiling
//     steady_noflows  no flow table (run --flows 0): every packet classified
//     io_flowtable    io with a --flows table allocated: the worker's idle
//                     expiry sweep runs whenever a polled queue is empty
//     steady          the flow table on (--flows entries, run's default)
//     churn           steady while this (control) thread adds --churn-rate
//                     rules per second and deletes as many, through the
//                     Blocklist API, evenly spaced; every change bumps the
//                     generation and so sends every flow back to classification
//   new-flow capture (--syn-flows distinct SYNs, each packet a new 5-tuple;
//   net_pcap copies out of a ring of that many mbufs, hence its own io):
//     io_syn, new_flows_noflows   no flow table
//     new_flows       the table full and evicting; resident memory before and
//                     after the timed window
//   first-flight capture (--mix-flows connections of realistic first flights:
//   TLS with a 1.8 KB post-quantum ClientHello in two segments, HTTP GET,
//   DNS over UDP, QUIC v1 with its ClientHello over two Initials; each with
//   its handshake and an answer), against a flow table of a quarter as many
//   entries, so that every connection is a new flow on every pass:
//     io_mix          no flow table, no classification
//     first_flights   flows on, everything inspected (reassembly, QUIC
//                     decryption); reported in packets/s and connections/s
// Each scenario also reports its verdict-cache hit ratio, flows created and
// evicted, and the worker thread's CPU share (below 1: descheduled).
//
// Sample output and the recorded results: docs/PERFORMANCE.md ("Pipeline").
#include <fcntl.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gateway/eal.hpp"
#include "gateway/engine.hpp"
#include "gateway/ports.hpp"
#include "first_flights.hpp"
#include "gateway_inputs.hpp"
#include "pcap_file.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using cg::bench::median;

struct Options {
  std::size_t rules = 1000000;
  double seconds = 2.0;
  double warmup = 0.5;
  int runs = 3;
  uint32_t syn_flows = 1u << 20;
  uint32_t mix_flows = 8192;  // connections in the first-flight capture
  double churn_rate = 1000;
  uint64_t flows = uint64_t{1} << 17;  // cuckoogate run's default (gateway.flows_per_worker)
  std::string testpmd = "dpdk-testpmd";
  std::string only;
  std::string lcores = "0-1";
  unsigned mem_mb = 0;  // EAL -m; 0 = computed
  std::string json;
};

// The ratios the issue sets: scenario / io forwarding on the same devices.
struct Target {
  const char* scenario;
  const char* baseline;
  double min;
};
constexpr Target kTargets[] = {{"steady", "io", 0.6},
                               {"new_flows", "io_syn", 0.25},
                               {"first_flights", "io_mix", 0.0},
                               {"churn", "io", 0.5},
                               // No target, for comparison: the per-packet path,
                               {"steady_noflows", "io", 0.0},
                               {"new_flows_noflows", "io_syn", 0.0},
                               // what the churn alone costs, what the idle expiry sweep costs.
                               {"churn", "steady", 0.0},
                               {"io_flowtable", "io", 0.0}};

double load1() {
  double l = -1;
  std::ifstream("/proc/loadavg") >> l;
  return l;
}

long rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// The thread of an EAL worker lcore ("rte-worker-N" in 22.11), for its CPU time.
long worker_tid(unsigned lcore) {
  const std::string want = "rte-worker-" + std::to_string(lcore);
  std::error_code ec;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::string comm;
    std::ifstream(t.path() / "comm") >> comm;
    if (comm == want) return std::stol(t.path().filename().string());
  }
  return -1;
}

// utime + stime of a thread of this process, in seconds.
double thread_cpu_s(long tid) {
  if (tid < 0) return 0;
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::size_t rp = s.rfind(')');
  if (rp == std::string::npos) return 0;
  std::istringstream in(s.substr(rp + 2));
  std::string field;
  unsigned long ut = 0, st = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {  // fields 14 and 15: utime, stime
    if (i == 14) ut = std::stoul(field);
    if (i == 15) st = std::stoul(field);
  }
  return static_cast<double>(ut + st) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// EAL's runtime directory of a DPDK process we started (the same rule as
// EAL's: /var/run/dpdk for root, else $XDG_RUNTIME_DIR/dpdk or /tmp/dpdk).
void remove_runtime_dir(const std::string& prefix) {
  std::string base = "/var/run/dpdk";
  if (getuid() != 0) {
    const char* x = std::getenv("XDG_RUNTIME_DIR");
    base = std::string(x != nullptr ? x : "/tmp") + "/dpdk";
  }
  std::error_code ec;
  std::filesystem::remove_all(base + "/" + prefix, ec);
}

// Adds and deletes rules at a fixed rate from a pool of 2W rules disjoint from
// the loaded ones (and from the traffic), W present at any time: even changes
// add the pool's next rule, odd ones delete the rule added W adds before it.
class Churn {
 public:
  explicit Churn(std::vector<cg::Rule> pool) : pool_(std::move(pool)), w_(pool_.size() / 2) {}
  bool preload(cg::Blocklist& b) {  // a fresh blocklist; present before step 0: pool[W, 2W)
    step_ = 0;
    const std::vector<cg::Rule> half(pool_.begin() + static_cast<std::ptrdiff_t>(w_), pool_.end());
    return b.add_batch(half).result == cg::Blocklist::Result::kOk;
  }
  struct Result {
    uint64_t adds = 0, dels = 0, failures = 0;
    double seconds = 0;
  };
  // Changes evenly spaced at 2 * rate per second for `seconds`.
  Result run(cg::Blocklist& b, double rate, double seconds) {
    Result r;
    const auto period =
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(0.5 / rate));
    const auto t0 = Clock::now(), end = t0 + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(seconds));
    auto next = t0;
    while (Clock::now() < end) {
      const std::size_t i = step_ / 2 % pool_.size();
      if (step_ % 2 == 0) {
        r.failures += b.add(pool_[i]) != cg::Blocklist::Result::kOk;
        ++r.adds;
      } else {
        r.failures += b.del(pool_[(i + w_) % pool_.size()]) != cg::Blocklist::Result::kOk;
        ++r.dels;
      }
      ++step_;
      next += period;
      std::this_thread::sleep_until(next);
    }
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return r;
  }

 private:
  std::vector<cg::Rule> pool_;
  std::size_t w_;
  uint64_t step_ = 0;
};

// One timed window of one scenario.
struct Sample {
  double pps = 0, load1 = 0, worker_cpu = 0;
  long rss_before_kib = 0, rss_after_kib = 0;
  cg::StatsSnapshot d;  // counters over the window (flows_active: at its end)
  Churn::Result churn;
};

struct Pair {
  uint16_t in, out;
};

// Ports net_pcap_<name> and net_null_<name> started with one queue each and a
// pool of `mbufs` mbufs of `room` bytes (net_pcap's infinite_rx keeps the whole
// capture in it).
bool setup_pair(const std::string& name, uint32_t mbufs, uint16_t room, int socket, Pair* p,
                std::string* err) {
  if (rte_eth_dev_get_port_by_name(("net_pcap_" + name).c_str(), &p->in) != 0 ||
      rte_eth_dev_get_port_by_name(("net_null_" + name).c_str(), &p->out) != 0) {
    *err = "no " + name + " vdevs";
    return false;
  }
  rte_mempool* pool =
      rte_pktmbuf_pool_create(("bench_" + name).c_str(), mbufs, 256, 0, room, socket);
  if (pool == nullptr) {
    *err = name + ": no mbuf pool of " + std::to_string(mbufs) + " (raise --mem)";
    return false;
  }
  const cg::PortConfig pc;
  return cg::setup_port(p->in, pc, pool, err) && cg::setup_port(p->out, pc, pool, err);
}

// A whole gateway for one scenario family: one worker polling in->out and
// out->in, the rules loaded.
std::unique_ptr<cg::Engine> make_engine(const Options& o, uint64_t flows, Pair p,
                                        const std::vector<cg::Rule>& rules, std::string* err) {
  auto e = std::make_unique<cg::Engine>();
  cg::EngineOptions eo;
  eo.workers = 1;
  eo.flows = flows;
  eo.capacity = o.rules + 2 * static_cast<std::size_t>(o.churn_rate) + 1000;
  if (!e->init(eo, err)) return nullptr;
  e->add_link(0, {p.in, 0, p.out, 0});
  e->add_link(0, {p.out, 0, p.in, 0});
  if (e->blocklist().add_batch(rules).result != cg::Blocklist::Result::kOk) {
    *err = "cannot load " + std::to_string(rules.size()) + " rules";
    return nullptr;
  }
  e->publish_rule_count();
  return e;
}

cg::StatsSnapshot minus(const cg::StatsSnapshot& b, const cg::StatsSnapshot& a) {
  cg::StatsSnapshot d = b;
  d.rx -= a.rx;
  d.dropped -= a.dropped;
  d.keys -= a.keys;
  d.cache_hits -= a.cache_hits;
  d.cache_misses -= a.cache_misses;
  d.untracked -= a.untracked;
  d.flows_created -= a.flows_created;
  d.flows_evicted -= a.flows_evicted;
  d.tx_failed -= a.tx_failed;
  return d;
}

bool measure(cg::Engine& e, bool filtering, const Options& o, Churn* churn, long tid, Sample* s,
             std::string* err) {
  e.set_filtering(filtering);
  s->load1 = load1();
  if (!e.start(err)) return false;
  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup));
  const cg::StatsSnapshot a = e.totals();
  s->rss_before_kib = rss_kib();
  const double c0 = thread_cpu_s(tid);
  const auto t0 = Clock::now();
  if (churn != nullptr)
    s->churn = churn->run(e.blocklist(), o.churn_rate, o.seconds);
  else
    std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  const cg::StatsSnapshot b = e.totals();
  const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
  s->worker_cpu = (thread_cpu_s(tid) - c0) / dt;
  s->rss_after_kib = rss_kib();
  e.stop();
  s->d = minus(b, a);
  s->pps = static_cast<double>(s->d.rx) / dt;
  return true;
}

// dpdk-testpmd --forward-mode=io on the same kind of devices, the same capture
// and lcores; port 0's Rx-pps as testpmd prints it every second, median of the
// samples after the first full second. 0 if it cannot be run.
double testpmd_pps(const Options& o, const std::string& pcap, const std::string& dir, int run,
                   double* load, std::string* why) {
  const std::string prefix =
      "pipeline-bench-testpmd-" + std::to_string(getpid()) + "-" + std::to_string(run);
  const std::string out = dir + "/testpmd-" + std::to_string(run) + ".out";
  std::vector<std::string> args = {o.testpmd,
                                   "--no-huge",
                                   "--no-pci",
                                   "--no-shconf",
                                   "-m",
                                   "512",
                                   "-l",
                                   o.lcores,
                                   "--file-prefix=" + prefix,
                                   "--log-level=lib.eal:error",
                                   "--vdev=net_pcap_tp,rx_pcap=" + pcap + ",infinite_rx=1",
                                   "--vdev=net_null_tp,no-rx=1",
                                   "--",
                                   "--forward-mode=io",
                                   "--nb-cores=1",
                                   "--stats-period=1",
                                   "--total-num-mbufs=16384"};
  std::vector<char*> av;
  for (auto& a : args) av.push_back(a.data());
  av.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = 0;
  *load = load1();
  const int rc = posix_spawnp(&pid, av[0], &fa, nullptr, av.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    *why = o.testpmd + ": " + std::strerror(rc);
    return 0;
  }
  // Blocks "NIC statistics for port N" ... "Rx-pps: X"; port 0 is the pcap.
  auto samples = [&] {
    std::ifstream in(out);
    std::string line;
    int port = -1;
    std::vector<double> v;
    while (std::getline(in, line)) {
      if (const auto p = line.find("NIC statistics for port "); p != std::string::npos)
        port = std::atoi(line.c_str() + p + 24);
      if (const auto p = line.find("Rx-pps:"); p != std::string::npos && port == 0)
        v.push_back(std::atof(line.c_str() + p + 7));
    }
    return v;
  };
  // The first display has no rate (nothing to compare with), the second
  // covers start-up; then one sample per timed second. testpmd's display
  // period is longer than --stats-period: count samples, do not sleep.
  const std::size_t need = 2 + static_cast<std::size_t>(std::max(1.0, o.seconds + 0.5));
  const auto give_up =
      Clock::now() + std::chrono::seconds(30) +
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(2 * o.seconds));
  int st = 0;
  bool exited = false;
  while (samples().size() < need && Clock::now() < give_up) {
    if (waitpid(pid, &st, WNOHANG) == pid) {
      exited = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!exited) {
    kill(pid, SIGINT);
    waitpid(pid, &st, 0);
  }
  remove_runtime_dir(prefix);
  std::vector<double> v = samples();
  if (v.size() < 3) {
    *why =
        "dpdk-testpmd printed " + std::to_string(v.size()) + " rate samples (output: " + out + ")";
    return 0;
  }
  v.erase(v.begin(), v.begin() + 2);
  return median(v);
}

std::vector<cg::Rule> parse(const std::string& text) {
  return cg::parse_rules(text, false).rules;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "pipeline_bench: the data path against io forwarding on the same vdevs (issue 10, item 6)"};
  Options o;
  app.add_option("--rules", o.rules, "Rules loaded, all seven kinds, none matching (default 1M)");
  app.add_option("--seconds", o.seconds, "Timed seconds per measurement (default 2)");
  app.add_option("--warmup", o.warmup, "Seconds before each timed window (default 0.5)");
  app.add_option("--runs", o.runs, "Rounds; every figure is the median over them (default 3)");
  app.add_option("--syn-flows", o.syn_flows,
                 "Distinct SYNs in the new-flow capture (default 1048576)");
  app.add_option("--mix-flows", o.mix_flows,
                 "Connections in the first-flight capture (default 8192, a quarter of each kind)");
  app.add_option("--churn-rate", o.churn_rate,
                 "Rules added and rules deleted per second under churn (1000)");
  app.add_option("--flows", o.flows,
                 "Flow-table entries of the flow-on scenarios (default 131072, as run)");
  app.add_option("--testpmd", o.testpmd,
                 "dpdk-testpmd to cross-check io forwarding, 'none' to skip");
  app.add_option("--only", o.only,
                 "Comma-separated scenarios to run (io, testpmd_io, io_flowtable, steady, churn, "
                 "steady_noflows, io_syn, new_flows, new_flows_noflows, io_mix, first_flights) and "
                 "their baselines");
  app.add_option("--lcores", o.lcores, "EAL -l: control lcore, then the worker (default 0-1)");
  app.add_option("--mem", o.mem_mb,
                 "EAL -m in MB (default: enough for the captures and the rules)");
  app.add_option("--json", o.json, "Write every figure as JSON");
  CLI11_PARSE(app, argc, argv);
  if (o.syn_flows > (1u << 22)) {  // distinct sources within 100.64.0.0/10
    std::fprintf(stderr, "pipeline_bench: --syn-flows is at most 4194304\n");
    return 2;
  }
  if (o.runs < 1 || o.seconds <= 0 || o.churn_rate <= 0 || o.syn_flows == 0 || o.mix_flows < 4 ||
      o.mix_flows > (1u << 18)) {
    std::fprintf(stderr,
                 "pipeline_bench: --runs, --seconds, --churn-rate and --syn-flows must be positive, "
                 "--mix-flows 4 .. 262144\n");
    return 2;
  }
  bool release = true;
#ifdef CG_NOT_RELEASE_BUILD
  release = false;
  std::fprintf(stderr, "WARNING: not a release build; numbers are not representative\n");
#endif
  const std::vector<std::string> all = {"io",     "testpmd_io", "io_flowtable",
                                        "steady", "churn",      "steady_noflows",
                                        "io_syn", "new_flows",  "new_flows_noflows",
                                        "io_mix", "first_flights"};
  std::set<std::string> want(all.begin(), all.end());
  if (!o.only.empty()) {
    want.clear();
    std::istringstream in(o.only);
    for (std::string s; std::getline(in, s, ',');) {
      if (std::find(all.begin(), all.end(), s) == all.end()) {
        std::fprintf(stderr, "pipeline_bench: unknown scenario '%s'\n", s.c_str());
        return 2;
      }
      want.insert(s);
    }
  }
  auto on = [&](const char* s) { return want.count(s) != 0; };
  // Every ratio needs its baseline.
  for (const char* s : {"io_flowtable", "steady", "churn", "steady_noflows"})
    if (on(s)) want.insert("io");
  for (const char* s : {"new_flows", "new_flows_noflows"})
    if (on(s)) want.insert("io_syn");
  if (on("churn")) want.insert("steady");
  if (o.testpmd == "none") want.erase("testpmd_io");
  const bool need_syn = on("io_syn") || on("new_flows") || on("new_flows_noflows");
  if (on("first_flights")) want.insert("io_mix");
  const bool need_mix = on("io_mix") || on("first_flights");
  std::size_t mix_packets = 0;

  char tmpl[] = "/tmp/cg-pipebench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl;
  struct RemoveAtExit {  // the captures (the new-flow one is ~80 MB), on every return
    std::string path;
    ~RemoveAtExit() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } remove_dir{dir};
  // Inputs, outside every timed region. Steady: 512 flows, as gateway_bench.
  {
    std::vector<cg::test::Bytes> frames;
    for (uint32_t i = 0; i < 512; ++i)
      frames.push_back(
          cg::bench::tcp64("172.16." + std::to_string(i >> 8) + "." + std::to_string(i & 255),
                           "192.168.1.1", static_cast<uint16_t>(10000 + i), 80));
    cg::test::write_pcap(dir + "/steady.pcap", frames);
  }
  if (need_syn) {  // every packet a new 5-tuple: sources from 100.64.0.0/10
    std::vector<cg::test::Bytes> frames;
    frames.reserve(o.syn_flows);
    for (uint32_t i = 0; i < o.syn_flows; ++i) {
      const uint32_t a = (100u << 24 | 64u << 16) + i;
      frames.push_back(cg::bench::tcp64(
          std::to_string(a >> 24) + "." + std::to_string(a >> 16 & 255) + "." +
              std::to_string(a >> 8 & 255) + "." + std::to_string(a & 255),
          "192.168.1.1", static_cast<uint16_t>(1024 + uint64_t{i} * 7919 % 64000), 80, 0x02));
    }
    cg::test::write_pcap(dir + "/syn.pcap", frames);
  }
  if (need_mix) {
    const std::vector<cg::test::Bytes> frames = cg::bench::first_flights(o.mix_flows);
    mix_packets = frames.size();
    cg::test::write_pcap(dir + "/mix.pcap", frames);
  }
  const std::vector<cg::Rule> rules = parse(cg::bench::rule_mix(o.rules));
  const std::size_t w = static_cast<std::size_t>(o.churn_rate);
  Churn churn(parse(cg::bench::rule_mix(2 * w, "c", 11)));
  if (rules.size() != o.rules) {
    std::fprintf(stderr, "pipeline_bench: generated rules did not parse\n");
    return 1;
  }

  // SYN mbufs: the capture is held in the pool (one mbuf per packet), so
  // small ones: 128 bytes of data room after the headroom.
  const uint32_t syn_mbufs = need_syn ? o.syn_flows + 16384 : 0;
  const uint16_t syn_room = RTE_PKTMBUF_HEADROOM + 128;
  if (o.mem_mb == 0) {
    const std::size_t syn_bytes =
        static_cast<std::size_t>(syn_mbufs) * (sizeof(rte_mbuf) + syn_room + 128);
    const std::size_t mix_bytes = (mix_packets + 16384) * (sizeof(rte_mbuf) + RTE_MBUF_DEFAULT_BUF_SIZE + 128);
    o.mem_mb = static_cast<unsigned>(1024 + (o.rules * 400 >> 20) + (syn_bytes >> 20) + (mix_bytes >> 20));
  }
  std::string err;
  std::vector<std::string> eal = {
      "--no-huge",
      "--no-pci",
      "--no-shconf",
      "-m",
      std::to_string(o.mem_mb),
      "-l",
      o.lcores,
      "--file-prefix=" + cg::unique_file_prefix("pipeline-bench"),
      "--log-level=lib.eal:error",
      "--vdev=net_pcap_steady,rx_pcap=" + dir + "/steady.pcap,infinite_rx=1",
      "--vdev=net_null_steady,no-rx=1"};
  if (need_syn) {
    eal.push_back("--vdev=net_pcap_syn,rx_pcap=" + dir + "/syn.pcap,infinite_rx=1");
    eal.push_back("--vdev=net_null_syn,no-rx=1");
  }
  if (need_mix) {
    eal.push_back("--vdev=net_pcap_mix,rx_pcap=" + dir + "/mix.pcap,infinite_rx=1");
    eal.push_back("--vdev=net_null_mix,no-rx=1");
  }
  std::printf(
      "pipeline_bench: 1 worker, %zu rules, 64-byte TCP from net_pcap(infinite_rx) to "
      "net_null(no-rx), EAL -l %s -m %u, median of %d runs of %.1f s\n",
      o.rules, o.lcores.c_str(), o.mem_mb, o.runs, o.seconds);
  std::fflush(stdout);
  if (!cg::init_eal("pipeline_bench", eal, &err)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  int rc = 0;
  nlohmann::json out;
  {
    std::map<std::string, std::vector<Sample>> res;
    std::vector<double> tp, tp_load;
    std::string tp_why;
    Pair steady{}, syn{}, mix{};
    const int socket = static_cast<int>(rte_socket_id());
    if (!setup_pair("steady", 16383, RTE_MBUF_DEFAULT_BUF_SIZE, socket, &steady, &err) ||
        (need_syn && !setup_pair("syn", syn_mbufs, syn_room, socket, &syn, &err)) ||
        (need_mix && !setup_pair("mix", static_cast<uint32_t>(mix_packets + 16384), RTE_MBUF_DEFAULT_BUF_SIZE,
                                 socket, &mix, &err))) {
      std::fprintf(stderr, "pipeline_bench: %s\n", err.c_str());
      rte_eal_cleanup();
      return 1;
    }
    const unsigned worker_lcore = rte_get_next_lcore(rte_get_main_lcore(), 1, 0);
    // One gateway at a time (a blocklist's DPDK objects have fixed names):
    // every round builds each block's Engine afresh (rules loaded), measures
    // its scenarios and destroys it, so a ratio compares figures of one round.
    // The io baselines run on Engines without a flow table: with one, the
    // worker sweeps it for expired flows whenever a polled queue is empty,
    // which is not io forwarding (io_flowtable measures exactly that).
    struct Step {
      const char* name;
      bool filtering;
      bool churn;
    };
    struct Block {
      uint64_t flows;
      Pair ports;
      std::vector<Step> steps;
    };
    const std::vector<Block> blocks = {
        {0, steady, {{"io", false, false}, {"steady_noflows", true, false}}},
        {o.flows,
         steady,
         {{"io_flowtable", false, false}, {"steady", true, false}, {"churn", true, true}}},
        {0, syn, {{"io_syn", false, false}, {"new_flows_noflows", true, false}}},
        {o.flows, syn, {{"new_flows", true, false}}},
        {0, mix, {{"io_mix", false, false}}},
        // A quarter as many entries as connections: each is a new flow on every pass.
        {std::max<uint64_t>(o.mix_flows / 4, 64), mix, {{"first_flights", true, false}}}};
    const long tid = worker_tid(worker_lcore);
    for (int r = 0; rc == 0 && r < o.runs; ++r) {
      if (on("testpmd_io")) {  // first in the round, beside the io loop it checks
        std::fprintf(stderr, "run %d/%d: testpmd_io\n", r + 1, o.runs);
        double l = 0;
        const double pps = testpmd_pps(o, dir + "/steady.pcap", dir, r, &l, &tp_why);
        if (pps <= 0) {
          std::fprintf(stderr, "pipeline_bench: testpmd cross-check skipped: %s\n", tp_why.c_str());
          want.erase("testpmd_io");
        } else {
          tp.push_back(pps);
          tp_load.push_back(l);
        }
      }
      for (const Block& b : blocks) {
        if (rc != 0) break;
        if (std::none_of(b.steps.begin(), b.steps.end(), [&](const Step& s) { return on(s.name); }))
          continue;
        const auto tl = Clock::now();
        std::unique_ptr<cg::Engine> e = make_engine(o, b.flows, b.ports, rules, &err);
        if (e && on("churn") && b.flows != 0 && b.ports.in == steady.in &&
            !churn.preload(e->blocklist()))
          err = "cannot preload the churn rules";
        if (!e || !err.empty()) {
          std::fprintf(stderr, "pipeline_bench: %s\n", err.c_str());
          rc = 1;
          break;
        }
        std::fprintf(
            stderr, "run %d/%d: %zu rules loaded in %.1f s (flows %llu), resident %ld MiB\n", r + 1,
            o.runs, e->blocklist().size(), std::chrono::duration<double>(Clock::now() - tl).count(),
            static_cast<unsigned long long>(b.flows), rss_kib() >> 10);
        for (const Step& s : b.steps) {
          if (!on(s.name)) continue;
          std::fprintf(stderr, "run %d/%d: %s\n", r + 1, o.runs, s.name);
          Sample smp;
          if (!measure(*e, s.filtering, o, s.churn ? &churn : nullptr, tid, &smp, &err)) {
            std::fprintf(stderr, "pipeline_bench: %s: %s\n", s.name, err.c_str());
            rc = 1;
            break;
          }
          res[s.name].push_back(smp);
        }
      }
    }

    // Report.
    auto mpps = [](const std::vector<Sample>& v) {
      std::vector<double> x;
      for (const Sample& s : v) x.push_back(s.pps / 1e6);
      return x;
    };
    std::vector<double> loads;
    for (const auto& [name, v] : res)
      for (const Sample& s : v) loads.push_back(s.load1);
    loads.insert(loads.end(), tp_load.begin(), tp_load.end());
    std::sort(loads.begin(), loads.end());
    out = {{"release_build", release},
           {"rules", o.rules},
           {"seconds", o.seconds},
           {"warmup", o.warmup},
           {"runs", o.runs},
           {"lcores", o.lcores},
           {"syn_flows", o.syn_flows},
           {"flows_per_worker", o.flows},
           {"churn_rate", o.churn_rate},
           {"cpus", std::thread::hardware_concurrency()}};
    if (!loads.empty())
      out["load1"] = {{"min", loads.front()}, {"median", median(loads)}, {"max", loads.back()}};
    std::printf("  %-44s %8s %8s  %s\n", "scenario", "Mpps", "/CPU-s", "runs: Mpps (load average)");
    // /CPU-s: per second of the worker thread's CPU time (wall clock in Mpps).
    auto row = [&](const std::string& label, const std::vector<double>& v,
                   const std::vector<double>& l, double per_cpu) {
      if (per_cpu > 0)
        std::printf("  %-44s %8.3f %8.3f  ", label.c_str(), median(v), per_cpu);
      else
        std::printf("  %-44s %8.3f %8s  ", label.c_str(), median(v), "-");
      for (std::size_t i = 0; i < v.size(); ++i)
        std::printf("%s%.2f (%.1f)", i ? ", " : "", v[i], l[i]);
      std::printf("\n");
    };
    const std::map<std::string, std::string> label = {
        {"io", "io forwarding (512 flows, no classification)"},
        {"steady", "steady state, flows on"},
        {"churn", "under churn, flows on"},
        {"io_flowtable", "io forwarding, flow table allocated"},
        {"steady_noflows", "steady state, --flows 0 (per-packet path)"},
        {"io_syn", "io forwarding (new-flow capture)"},
        {"new_flows", "new flows only, flows on"},
        {"new_flows_noflows", "new flows only, --flows 0 (per-packet path)"},
        {"io_mix", "io forwarding (first-flight capture)"},
        {"first_flights", "TLS/HTTP/DNS/QUIC first flights, new flows"}};
    std::vector<Step> steps;
    for (const char* name : {"io", "io_flowtable", "steady", "churn", "steady_noflows", "io_syn",
                             "new_flows", "new_flows_noflows", "io_mix", "first_flights"})
      for (const Block& b : blocks)
        for (const Step& s : b.steps)
          if (std::string(s.name) == name) steps.push_back(s);
    for (const Step& s : steps) {
      auto it = res.find(s.name);
      if (it == res.end()) continue;
      std::vector<double> l, cpu, hit, per_cpu;
      nlohmann::json j;
      for (const Sample& x : it->second) {
        l.push_back(x.load1);
        cpu.push_back(x.worker_cpu);
        per_cpu.push_back(x.worker_cpu > 0 ? x.pps / 1e6 / x.worker_cpu : 0);
        const uint64_t tracked = x.d.cache_hits + x.d.cache_misses;
        hit.push_back(tracked ? static_cast<double>(x.d.cache_hits) / static_cast<double>(tracked)
                              : 0);
        nlohmann::json rj = {{"mpps", x.pps / 1e6},
                             {"load1", x.load1},
                             {"mpps_per_cpu_second", per_cpu.back()},
                             {"worker_cpu", x.worker_cpu},
                             {"rss_before_kib", x.rss_before_kib},
                             {"rss_after_kib", x.rss_after_kib},
                             {"cache_hits", x.d.cache_hits},
                             {"cache_misses", x.d.cache_misses},
                             {"untracked", x.d.untracked},
                             {"flows_created", x.d.flows_created},
                             {"flows_evicted", x.d.flows_evicted},
                             {"flows_active", x.d.flows_active},
                             {"dropped", x.d.dropped},
                             {"tx_failed", x.d.tx_failed}};
        if (s.churn)
          rj["churn"] = {{"adds", x.churn.adds},
                         {"dels", x.churn.dels},
                         {"failures", x.churn.failures},
                         {"changes_per_s",
                          static_cast<double>(x.churn.adds + x.churn.dels) / x.churn.seconds}};
        j["runs"].push_back(rj);
      }
      j["mpps"] = median(mpps(it->second));
      j["worker_cpu"] = median(cpu);
      j["mpps_per_cpu_second"] = median(per_cpu);
      if (s.filtering && std::string(s.name).find("noflows") == std::string::npos)
        j["cache_hit_ratio"] = median(hit);
      out["scenarios"][s.name] = j;
      row(label.at(s.name), mpps(it->second), l, median(per_cpu));
      if (s.churn) {
        std::vector<double> rate;
        for (const Sample& x : it->second)
          rate.push_back(static_cast<double>(x.churn.adds + x.churn.dels) / x.churn.seconds);
        std::printf("  %-44s %8.0f %8s  changes/s (adds + deletes), cache hit ratio %.3f\n", "",
                    median(rate), "", median(hit));
      } else if (s.filtering && std::string(s.name).find("noflows") == std::string::npos) {
        std::printf("  %-44s %8s %8s  cache hit ratio %.3f, worker CPU share %.2f\n", "", "", "",
                    median(hit), median(cpu));
      }
    }
    if (!tp.empty()) {
      std::vector<double> v;
      for (double x : tp) v.push_back(x / 1e6);
      row("dpdk-testpmd --forward-mode=io (cross-check)", v, tp_load, 0);
      out["scenarios"]["testpmd_io"] = {{"mpps", median(v)}, {"runs", v}, {"load1", tp_load}};
    } else if (!tp_why.empty()) {
      out["scenarios"]["testpmd_io"] = {{"skipped", tp_why}};
    }
    if (auto it = res.find("new_flows"); it != res.end()) {
      std::vector<double> before, after, growth, created;
      for (const Sample& x : it->second) {
        before.push_back(static_cast<double>(x.rss_before_kib));
        after.push_back(static_cast<double>(x.rss_after_kib));
        growth.push_back(static_cast<double>(x.rss_after_kib - x.rss_before_kib));
        created.push_back(static_cast<double>(x.d.flows_created) / o.seconds / 1e6);
      }
      std::printf(
          "  new flows: resident %.1f MiB before, %.1f MiB after the window (max growth %+.0f "
          "KiB), "
          "%.2f M flows created/s, %llu active at the end\n",
          median(before) / 1024, median(after) / 1024,
          *std::max_element(growth.begin(), growth.end()), median(created),
          static_cast<unsigned long long>(it->second.back().d.flows_active));
      out["memory"] = {{"rss_before_kib", before},
                       {"rss_after_kib", after},
                       {"rss_growth_kib_max", *std::max_element(growth.begin(), growth.end())}};
    }
    std::printf(
        "targets (ratio to io forwarding on the same devices, median of per-run ratios):\n");
    for (const Target& t : kTargets) {
      auto a = res.find(t.scenario), b = res.find(t.baseline);
      if (a == res.end() || b == res.end()) continue;
      std::vector<double> ratios, per_cpu;
      for (std::size_t i = 0; i < a->second.size() && i < b->second.size(); ++i) {
        const Sample &x = a->second[i], &y = b->second[i];
        ratios.push_back(y.pps > 0 ? x.pps / y.pps : 0);
        per_cpu.push_back(
            y.pps > 0 && x.worker_cpu > 0 ? (x.pps / x.worker_cpu) / (y.pps / y.worker_cpu) : 0);
      }
      const double m = median(ratios);
      nlohmann::json rj = {{"median", m},
                           {"runs", ratios},
                           {"baseline", t.baseline},
                           {"per_cpu_second", median(per_cpu)}};
      std::printf("  %-17s / %-14s %6.3f  (", t.scenario, t.baseline, m);
      for (std::size_t i = 0; i < ratios.size(); ++i)
        std::printf("%s%.3f", i ? ", " : "", ratios[i]);
      std::printf("; per CPU-s %.3f)", median(per_cpu));
      if (t.min > 0) {
        rj["target"] = t.min;
        rj["met"] = m >= t.min;
        std::printf("  target >= %.2f  %s\n", t.min, m >= t.min ? "met" : "MISSED");
      } else {
        std::printf("  no target (for comparison)\n");
      }
      out["ratios"]
         [std::string(t.scenario) + (std::string(t.baseline) == "steady" ? "_vs_steady" : "")] = rj;
    }
    if (auto a = res.find("new_flows"), b = res.find("io"); a != res.end() && b != res.end()) {
      std::vector<double> ratios;
      for (std::size_t i = 0; i < a->second.size() && i < b->second.size(); ++i)
        ratios.push_back(b->second[i].pps > 0 ? a->second[i].pps / b->second[i].pps : 0);
      std::printf("  %-17s / %-14s %6.3f  (the 512-flow capture's io, for reference)\n",
                  "new_flows", "io", median(ratios));
      out["ratios"]["new_flows_vs_io"] = {{"median", median(ratios)}, {"runs", ratios}};
    }
    if (auto a = res.find("first_flights"); a != res.end() && mix_packets != 0) {
      // Connections per second: the capture's packets per connection.
      std::vector<double> x = mpps(a->second);
      const double per_conn = static_cast<double>(mix_packets) / o.mix_flows;
      for (double& v : x) v = v * 1e6 / per_conn;
      std::printf("  first_flights: %.0f connections/s (%.2f packets each, %u connections)\n", median(x),
                  per_conn, o.mix_flows);
      out["scenarios"]["first_flights"]["connections_per_s"] = median(x);
      out["scenarios"]["first_flights"]["packets_per_connection"] = per_conn;
    }
    if (!tp.empty()) {
      if (auto b = res.find("io"); b != res.end()) {
        std::printf("  %-17s / %-14s %6.3f  (our io loop against testpmd's)\n", "io", "testpmd",
                    median(mpps(b->second)) / (median(tp) / 1e6));
        out["ratios"]["io_vs_testpmd"] = median(mpps(b->second)) / (median(tp) / 1e6);
      }
    }
    for (uint16_t p : {steady.in, steady.out}) cg::close_port(p);
    if (need_syn)
      for (uint16_t p : {syn.in, syn.out}) cg::close_port(p);
  }
  rte_eal_cleanup();
  if (!o.json.empty()) std::ofstream(o.json) << out.dump(2) << "\n";
  return rc;
}
