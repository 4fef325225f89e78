// gateway_bench: the gateway pipeline end to end, in one process and one run.
//
//   build/bench/gateway_bench [--rules N] [--seconds S] [--runs R] [--json PATH]
//
// 1. Packets per second of one worker: 64-byte TCP packets from a net_pcap vdev with
//    infinite_rx=1 into net_null, with N rules of all seven kinds loaded (so each packet's
//    six keys are looked up), filtering on vs the same pipeline with filtering off
//    (median of R runs each, alternating).
// 2. Add-to-drop latency: time from Blocklist::add returning (what the control socket
//    acknowledges) to the worker's first drop of the matching flow; p50/p99 of 200 adds.
// 3. Bulk load rate through the real CLI: `cuckoogatectl load` of N rules into a control
//    socket served by this process's control loop.
//
// Sample output and the recorded results: docs/PERFORMANCE.md.
#include <CLI/CLI.hpp>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "control/protocol.hpp"
#include "control/server.hpp"
#include "gateway/eal.hpp"
#include "gateway/engine.hpp"
#include "gateway/ports.hpp"
#include "gateway_inputs.hpp"
#include "pcap_file.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using cg::bench::median;

double measure_pps(cg::Engine& e, bool filtering, double seconds, std::string* err) {
  e.set_filtering(filtering);
  if (!e.start(err)) return -1;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // warm-up
  const uint64_t rx0 = e.totals().rx;
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const uint64_t rx1 = e.totals().rx;
  const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
  e.stop();
  return static_cast<double>(rx1 - rx0) / dt;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gateway_bench: pps with filtering on/off, add-to-drop latency, bulk load rate"};
  std::size_t nrules = 1000000;
  double seconds = 2.0;
  int runs = 3;
  std::string json_path, ctl_path = CG_CTL_PATH;
  app.add_option("--rules", nrules, "Rules loaded (default 1M)");
  app.add_option("--seconds", seconds, "Seconds per pps measurement");
  app.add_option("--runs", runs, "Runs per configuration (median reported)");
  app.add_option("--json", json_path, "Write results as JSON");
  app.add_option("--ctl-binary", ctl_path, "cuckoogatectl to drive the bulk load");
  CLI11_PARSE(app, argc, argv);
#ifdef CG_NOT_RELEASE_BUILD
  std::fprintf(stderr, "WARNING: not a release build; numbers are not representative\n");
#endif

  char tmpl[] = "/tmp/cg-gwbench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl;
  // 512 distinct flows of 64-byte TCP packets; none matches a loaded rule.
  constexpr uint32_t kFlows = 512;
  std::vector<cg::test::Bytes> frames;
  for (uint32_t i = 0; i < kFlows; ++i)
    frames.push_back(cg::bench::tcp64("172.16." + std::to_string(i >> 8) + "." + std::to_string(i & 255),
                                      "192.168.1.1", static_cast<uint16_t>(10000 + i), 80));
  cg::test::write_pcap(dir + "/in.pcap", frames);

  std::string err;
  const std::vector<std::string> eal = {
      "--no-huge", "--no-pci", "--no-shconf", "-m", "2048", "--lcores=" + cg::float_lcores(2),
      "--file-prefix=" + cg::unique_file_prefix("gateway-bench"), "--log-level=lib.eal:error",
      // net_null with no-rx: the worker polls it as `run` does, but it feeds no
      // generated packets into the pcap device (whose tx would write a file).
      "--vdev=net_pcap_bench,rx_pcap=" + dir + "/in.pcap,infinite_rx=1", "--vdev=net_null_bench,no-rx=1"};
  if (!cg::init_eal("gateway_bench", eal, &err)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  nlohmann::json out;
  {
    uint16_t in = 0, null = 0;
    rte_eth_dev_get_port_by_name("net_pcap_bench", &in);
    rte_eth_dev_get_port_by_name("net_null_bench", &null);
    rte_mempool* pool = rte_pktmbuf_pool_create("bench_pool", 16383, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                                static_cast<int>(rte_socket_id()));
    cg::PortConfig pc;
    if (pool == nullptr || !cg::setup_port(in, pc, pool, &err) || !cg::setup_port(null, pc, pool, &err)) {
      std::fprintf(stderr, "port set-up: %s\n", err.c_str());
      return 1;
    }
    cg::Engine e;
    cg::EngineOptions eo;
    eo.workers = 1;
    eo.capacity = nrules + 1000;
    if (!e.init(eo, &err)) {
      std::fprintf(stderr, "%s\n", err.c_str());
      return 1;
    }
    e.add_link(0, {in, 0, null, 0});
    e.add_link(0, {null, 0, in, 0});

    // Rules: every kind in equal shares (so every packet key is looked up),
    // none matching the traffic.
    std::vector<cg::Rule> rules;
    rules.reserve(nrules);
    {
      const std::string text = cg::bench::rule_mix(nrules);
      std::ofstream(dir + "/rules") << text;
      cg::RuleFileParse p = cg::parse_rules(text, false);
      rules = std::move(p.rules);
    }
    const auto tl = Clock::now();
    if (e.blocklist().add_batch(rules).result != cg::Blocklist::Result::kOk) {
      std::fprintf(stderr, "gateway_bench: cannot load %zu rules\n", nrules);
      return 1;
    }
    const double direct_load_s = std::chrono::duration<double>(Clock::now() - tl).count();
    e.publish_rule_count();

    // 1. pps, filtering on vs off, alternating runs.
    std::vector<double> on, off;
    for (int r = 0; r < runs; ++r) {
      on.push_back(measure_pps(e, true, seconds, &err));
      off.push_back(measure_pps(e, false, seconds, &err));
    }
    const double pps_on = median(on), pps_off = median(off);

    // 2. add -> first drop latency.
    e.set_filtering(true);
    if (!e.start(&err)) return 1;
    std::vector<double> lat_us;
    for (uint32_t i = 0; i < 200; ++i) {
      cg::Rule r = *cg::parse_rule("src 172.16." + std::to_string((i * 7) % kFlows >> 8) + "." +
                                   std::to_string((i * 7) % kFlows & 255)).rule;
      const uint64_t d0 = e.totals().dropped;
      e.blocklist().add(r);  // acknowledged here
      const auto t0 = Clock::now();
      while (e.totals().dropped == d0) {
        if (Clock::now() - t0 > std::chrono::seconds(2)) break;
      }
      lat_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      e.blocklist().del(r);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    e.stop();
    std::sort(lat_us.begin(), lat_us.end());
    const double p50 = lat_us[lat_us.size() / 2], p99 = lat_us[lat_us.size() * 99 / 100];

    // 3. bulk load through cuckoogatectl into a control socket served here.
    std::size_t flushed = 0;
    (void)e.blocklist().flush(&flushed);
    double ctl_load_s = -1;
    {
      cg::CommandHandler h(e.blocklist(), [](std::string&) {}, [](std::string&) {});
      const std::string sock = dir + "/ctl.sock";
      auto server = cg::ControlServer::open(sock, h, &err);
      if (server) {
        std::vector<std::string> args = {ctl_path, "-s", sock, "load", dir + "/rules"};
        std::vector<char*> av;
        for (auto& a : args) av.push_back(a.data());
        av.push_back(nullptr);
        pid_t pid;
        const auto t0 = Clock::now();
        if (posix_spawn(&pid, av[0], nullptr, nullptr, av.data(), environ) == 0) {
          int st = 0;
          while (waitpid(pid, &st, WNOHANG) == 0) server->poll_once(1);
          ctl_load_s = std::chrono::duration<double>(Clock::now() - t0).count();
          if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ctl_load_s = -1;
        }
      }
    }
    const double bulk_rate = ctl_load_s > 0 ? static_cast<double>(nrules) / ctl_load_s : 0;

    std::printf("gateway_bench: 1 worker, %zu rules, 64-byte TCP from net_pcap(infinite_rx) to net_null(no-rx)\n", nrules);
    std::printf("  %-34s %12.3f Mpps (median of %d)\n", "filtering on", pps_on / 1e6, runs);
    std::printf("  %-34s %12.3f Mpps (median of %d)\n", "filtering off", pps_off / 1e6, runs);
    std::printf("  %-34s %12.3f (target >= 0.75)\n", "on / off", pps_off > 0 ? pps_on / pps_off : 0);
    std::printf("  %-34s %9.1f us p50, %.1f us p99 (target p99 <= 1000)\n", "add -> first drop", p50, p99);
    std::printf("  %-34s %12.0f rules/s (%.3f s; in-process batch %.3f s)\n", "bulk load via cuckoogatectl",
                bulk_rate, ctl_load_s, direct_load_s);
    out = {{"pps_filter_on", pps_on},   {"pps_filter_off", pps_off},
           {"ratio", pps_off > 0 ? pps_on / pps_off : 0},
           {"rules", nrules},           {"add_to_drop_p50_us", p50},
           {"add_to_drop_p99_us", p99}, {"bulk_load_rules_per_s", bulk_rate},
           {"bulk_load_seconds", ctl_load_s}, {"inprocess_batch_seconds", direct_load_s}};
    cg::close_port(in);
    cg::close_port(null);
  }
  rte_eal_cleanup();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return 0;
}
