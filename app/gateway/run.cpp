#include "gateway/run.hpp"

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>

#include "control/protocol.hpp"
#include "control/server.hpp"
#include "cuckoogate/reasm/stream.hpp"
#include "gateway/config.hpp"
#include "gateway/eal.hpp"
#include "gateway/engine.hpp"
#include "gateway/log.hpp"
#include "gateway/ports.hpp"
#include "gateway/rule_files.hpp"
#include "gateway/summary.hpp"
#include "sync/blocklist_sync.hpp"

namespace cg {
namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_stop_signal(int) { g_stop.store(true, std::memory_order_relaxed); }

bool resolve_port(const std::string& ref, uint16_t* port) {
  if (!ref.empty() && ref.find_first_not_of("0123456789") == std::string::npos) {
    unsigned long v = 0;
    const auto [end, ec] = std::from_chars(ref.data(), ref.data() + ref.size(), v);
    if (ec != std::errc() || end != ref.data() + ref.size()) return false;
    if (v >= RTE_MAX_ETHPORTS || !rte_eth_dev_is_valid_port(static_cast<uint16_t>(v))) return false;
    *port = static_cast<uint16_t>(v);
    return true;
  }
  return rte_eth_dev_get_port_by_name(ref.c_str(), port) == 0;
}

}  // namespace

int run_gateway(const RunOptions& o) {
  std::string err;
  // Before EAL is up: plain stderr, as for usage errors. After: rte_log.
  auto fail_early = [&](int code, const std::string& msg) {
    std::fprintf(stderr, "cuckoogate run: %s\n", msg.c_str());
    return code;
  };
  auto fail = [&](int code, const std::string& msg) {
    CG_LOG(ERR, gateway, "run: %s", msg.c_str());
    return code;
  };
  GatewayConfig cfg;
  if (!o.config.empty() && !load_config(o.config, cfg, &err)) return fail_early(2, err);
  if (!o.ctl.empty()) cfg.ctl = o.ctl;
  if (cfg.ctl.empty()) cfg.ctl = default_ctl_path();
  if (!o.state_dir.empty()) cfg.state_dir = o.state_dir;
  if (o.workers) cfg.workers = o.workers;
  if (o.verify) cfg.verify = *o.verify;
  cfg.rules.insert(cfg.rules.end(), o.rules.begin(), o.rules.end());
  if (!o.redis.empty()) cfg.sync.redis = o.redis;
  if (!o.gateway_id.empty()) cfg.sync.gateway_id = o.gateway_id;
  if (!cfg.sync.redis.empty()) {
    if (const sync::RedisUrlParse u = sync::parse_redis_url(cfg.sync.redis); !u.url)
      return fail_early(2, "--redis: " + u.error);
  }

  std::vector<SetRules> rules;
  if (!read_rule_files(cfg.rules, cfg.rule_feeds, rules, &err)) return fail_early(2, err);
  if (!cfg.sync.redis.empty() &&
      std::any_of(rules.begin(), rules.end(), [](const SetRules& s) { return !s.set.empty(); }))
    return fail_early(2, "[[rules]] set = ...: named sets are not shared through the Redis sync ([sync] redis)");

  std::vector<std::string> eal = o.eal.empty() ? cfg.eal : o.eal;
  const bool has_prefix = std::any_of(eal.begin(), eal.end(), [](const std::string& a) {
    return a.rfind("--file-prefix", 0) == 0;
  });
  if (!has_prefix) eal.push_back("--file-prefix=" + unique_file_prefix("cuckoogate"));
  if (!init_eal("cuckoogate", eal, &err)) return fail_early(1, err);

  int rc = 0;
  {
    // Port pairs: from the config, or EAL's ports in order (0<->1, 2<->3, ...).
    std::vector<std::pair<uint16_t, uint16_t>> pairs;
    if (!cfg.pairs.empty()) {
      for (std::size_t i = 0; i < cfg.pairs.size(); ++i) {
        const PairConfig& p = cfg.pairs[i];
        uint16_t a = 0, b = 0;
        const bool found_a = resolve_port(p.a, &a);
        if (!found_a || !resolve_port(p.b, &b)) {
          // Counted (and logged) while EAL is still up: after rte_eal_cleanup() there are none.
          const int code = fail(2, "port '" + (found_a ? p.b : p.a) + "' not found (EAL ports: " +
                                       std::to_string(rte_eth_dev_count_avail()) + ")");
          rte_eal_cleanup();
          return code;
        }
        // A port is in one pair, once: a second use would be configured
        // twice (DPDK's "Device or resource busy", naming no key).
        const auto used = [&](uint16_t q) {
          return std::any_of(pairs.begin(), pairs.end(), [q](const auto& ab) { return ab.first == q || ab.second == q; });
        };
        if (const bool first = a == b || used(a); first || used(b)) {
          const int code = fail(2, "pair[" + std::to_string(i) + "].ports: port " + std::to_string(first ? a : b) +
                                       " ('" + (first ? p.a : p.b) + "') is already paired; each port is in one pair");
          rte_eal_cleanup();
          return code;
        }
        pairs.emplace_back(a, b);
      }
    } else {
      std::vector<uint16_t> ports;
      uint16_t pid;
      RTE_ETH_FOREACH_DEV(pid) ports.push_back(pid);
      if (ports.empty() || ports.size() % 2 != 0) {
        const int code = fail(2, "found " + std::to_string(ports.size()) +
                                     " ports; without [[pair]] in a config the gateway needs an even, "
                                     "non-zero number of ports to pair in order");
        rte_eal_cleanup();
        return code;
      }
      for (std::size_t i = 0; i < ports.size(); i += 2) pairs.emplace_back(ports[i], ports[i + 1]);
    }
    // Two ports on one kernel interface (net_af_packet0,iface=X and
    // net_af_packet1,iface=X): every frame would leave where it came in, a
    // loop an outside check ran into unwarned.
    {
      std::vector<std::pair<std::string, uint16_t>> on;  // (iface, port)
      for (const auto& [a, b] : pairs)
        for (uint16_t p : {a, b})
          if (std::string f = port_iface(p); !f.empty()) on.emplace_back(std::move(f), p);
      std::sort(on.begin(), on.end());
      for (std::size_t k = 1; k < on.size(); ++k) {
        if (on[k].first != on[k - 1].first) continue;
        const int code = fail(2, "ports '" + port_name(on[k - 1].second) + "' and '" + port_name(on[k].second) +
                                     "' are both on interface " + on[k].first +
                                     ": each port needs an interface of its own (a frame would leave where it came in)");
        rte_eal_cleanup();
        return code;
      }
    }
    const unsigned workers = cfg.workers.value_or(std::max(1u, rte_lcore_count() - 1));
    // Queues per port: one per worker, as far as every paired device allows.
    uint16_t queues = static_cast<uint16_t>(workers);
    for (const auto& [a, b] : pairs) {
      for (uint16_t p : {a, b}) {
        rte_eth_dev_info info{};
        if (rte_eth_dev_info_get(p, &info) == 0)
          queues = std::min<uint16_t>(queues, std::min(info.max_rx_queues, info.max_tx_queues));
      }
    }
    if (queues == 0) queues = 1;
    if (queues < workers)
      CG_LOG(WARNING, gateway, "run: devices offer %u queues; %u workers will idle",
             static_cast<unsigned>(queues), workers - queues);

    const unsigned nports = static_cast<unsigned>(pairs.size() * 2);
    // + the fragments each worker may hold until their datagram is complete.
    const unsigned held = cfg.fragments.reassemble ? workers * cfg.fragments.fragments : 0;
    const unsigned mbufs = std::max(8191u, nports * queues * (cfg.rx_desc + cfg.tx_desc) + 4096) + held;
    rte_mempool* pool = rte_pktmbuf_pool_create("cg_pool", mbufs, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                                static_cast<int>(rte_socket_id()));
    Engine engine;
    EngineOptions eo;
    eo.workers = workers;
    eo.verify = cfg.verify;
    eo.drop_malformed = cfg.drop_malformed;
    eo.capacity = std::max(cfg.capacity, rules.size());
    eo.max_memory = cfg.max_memory;
    eo.state_dir = cfg.state_dir;
    eo.salvage = o.salvage;
    eo.flows = o.flows.value_or(cfg.flows_per_worker);
    eo.reject = o.reject.value_or(cfg.reject);
    eo.reject_nxdomain = o.reject_nxdomain.value_or(cfg.reject_nxdomain);
    eo.reject_rate = o.reject_rate.value_or(cfg.reject_rate);
    eo.fragments = cfg.fragments;
    eo.inspect_overflow_drop = cfg.inspect_overflow_drop;
    parse_quic_mode(cfg.quic, &eo.quic);  // validated by the config parser
    parse_checksum_mode(o.checksums.empty() ? cfg.checksums : o.checksums, &eo.checksums);  // both validated
    PortConfig pc;
    pc.rx_queues = pc.tx_queues = queues;
    pc.rx_desc = cfg.rx_desc;
    pc.tx_desc = cfg.tx_desc;
    pc.device_spreads = true;
    if (pool == nullptr) {
      rc = fail(1, "cannot allocate the mbuf pool (raise EAL -m)");
    } else if (!engine.init(eo, &err)) {
      rc = fail(1, err);
    }
    for (const auto& [a, b] : pairs) {
      if (rc == 0 && (!setup_port(a, pc, pool, &err) || !setup_port(b, pc, pool, &err))) rc = fail(1, err);
    }
    if (rc == 0) {
      for (const SetRules& s : rules) {
        const Blocklist::BatchResult br = engine.blocklist().add_batch(s.rules, s.set);
        if (br.result == Blocklist::Result::kFull) {
          rc = fail(2, "the rule files do not fit (" + engine.blocklist().last_error() + "): raise gateway.max_memory");
        } else if (br.result != Blocklist::Result::kOk) {
          rc = fail(1, "cannot journal the rule files: " + engine.blocklist().last_error());
        }
        if (rc != 0) break;
      }
    }
    // Before the control socket appears (a supervisor or a test takes it for
    // "up" and may stop the gateway at once; the first connection to Redis
    // can take a while): a stop signal then ends the start cleanly instead
    // of by the default action, which left the socket and EAL's runtime
    // directory behind (a sync test caught a SIGTERM in that window). A
    // closed terminal (or a 'reload' out of habit: there is none) stops the
    // gateway cleanly too; started under nohup (SIGHUP ignored), it stays
    // ignored. A signal before start() stops the engine right after it.
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
    if (std::signal(SIGHUP, on_stop_signal) == SIG_IGN) std::signal(SIGHUP, SIG_IGN);
    std::unique_ptr<CommandHandler> handler;  // outlives the server that calls it
    std::unique_ptr<ControlServer> server;
    std::unique_ptr<BlocklistSync> shared;    // [sync]: destroyed before the server
    if (rc == 0) {
      handler = std::make_unique<CommandHandler>(
          engine.blocklist(), with_sync_lines([&](std::string& s) { engine.stats_text(s); }, shared),
          with_sync_lines([&](std::string& s) { engine.info_text(s); }, shared));
      std::error_code ec;
      const std::filesystem::path dir = std::filesystem::path(cfg.ctl).parent_path();
      if (!dir.empty() && !std::filesystem::exists(dir, ec)) {
        std::filesystem::create_directories(dir, ec);
        ::chmod(dir.c_str(), 0750);
      }
      server = ControlServer::open(cfg.ctl, *handler, &err);
      if (!server) rc = fail(1, err);
      else server->set_idle_timeout(std::chrono::seconds(cfg.ctl_idle_timeout_s));
    }
    if (rc == 0 && !cfg.sync.redis.empty()) {
      shared = std::make_unique<BlocklistSync>(engine.blocklist(), sync_options(cfg.sync));
      shared->set_queue_offline(cfg.sync.queue_offline);
      // Added here above; shared when connected (all in the default set: named
      // ones were refused with [sync] before start).
      shared->set_startup_rules(rules.empty() ? std::vector<Rule>{} : std::move(rules.front().rules));
      shared->attach(*handler, *server);
      shared->stream().tick();  // connect and catch up before serving (or retry later)
    }
    if (rc == 0) {
      for (const auto& [a, b] : pairs) {
        for (uint16_t q = 0; q < queues; ++q) {
          // The pair's first port faces one side, its second the other
          // (reasm::Segment::side: docs/reassembly.md, "A fake that ends the inspection").
          engine.add_link(q % workers, {a, q, b, q, reasm::kSideA});
          engine.add_link(q % workers, {b, q, a, q, reasm::kSideB});
        }
      }
      if (!engine.start(&err)) {
        rc = fail(1, err);
      } else {
        // After start(): telemetry's thread reads the workers (their flow
        // tables), which start() creates.
        engine.register_telemetry();
        std::printf("cuckoogate: %zu rules, %u workers, %zu port pairs, control socket %s\n",
                    engine.blocklist().size(), workers, pairs.size(), cfg.ctl.c_str());
        std::fflush(stdout);
        while (!g_stop.load(std::memory_order_relaxed)) {
          const int tick = engine.control_tick();
          server->poll_once(shared ? std::min(tick, shared->stream().tick()) : tick);
          engine.check_frame_health();
        }
        const double secs = engine.seconds();
        engine.stop();
        shared.reset();
        server.reset();
        for (const auto& [a, b] : pairs) {
          close_port(a);
          close_port(b);
        }
        SummaryInfo si;
        si.title = "run: stopped";
        si.rules = engine.blocklist().size();
        si.seconds = secs;
        print_summary(stdout, si, engine.totals());
      }
    }
  }
  rte_eal_cleanup();
  return rc;
}

}  // namespace cg
