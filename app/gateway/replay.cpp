// `cuckoogate replay`: a pcap through the real data path.
//
// The input is served by a net_pcap vdev (one rx queue per worker; with
// several workers the capture is split by a symmetric address hash first, as
// RSS would on a NIC, so each flow stays on one queue and keeps its order).
// Passed packets leave through a second net_pcap vdev into PASS.pcap, dropped
// ones through a third into DROP.pcap. The workers run exactly the burst loop
// `run` uses; only the ports differ.
#include "gateway/replay.hpp"

#include <pcap/pcap.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "control/protocol.hpp"
#include "control/server.hpp"
#include "cuckoogate/keys/classify.hpp"
#include "gateway/eal.hpp"
#include "gateway/engine.hpp"
#include "gateway/log.hpp"
#include "gateway/ports.hpp"
#include "gateway/rule_files.hpp"
#include "gateway/summary.hpp"
#include "sync/blocklist_sync.hpp"

namespace cg {
namespace {

namespace fs = std::filesystem;

std::atomic<bool> g_interrupted{false};
extern "C" void on_signal(int) { g_interrupted.store(true, std::memory_order_relaxed); }

struct PcapCloser {
  void operator()(pcap_t* p) const { pcap_close(p); }
};
struct DumperCloser {
  void operator()(pcap_dumper_t* d) const { pcap_dump_close(d); }
};
using PcapPtr = std::unique_ptr<pcap_t, PcapCloser>;
using DumperPtr = std::unique_ptr<pcap_dumper_t, DumperCloser>;

PcapPtr open_read(const std::string& path, std::string* err) {
  char eb[PCAP_ERRBUF_SIZE] = {};
  PcapPtr p(pcap_open_offline(path.c_str(), eb));
  if (!p) *err = "cannot read " + path + ": " + eb;
  return p;
}

// Symmetric queue choice: XOR of the two address keys' hashes, so both
// directions of a conversation land on the same worker. Non-IP: queue 0.
unsigned queue_of(const uint8_t* data, std::size_t len, unsigned queues, PacketKeys& pk) {
  if (queues == 1) return 0;
  classify(data, len, pk);
  uint64_t h = 0;
  for (unsigned i = 0; i < pk.n; ++i)
    if (pk.key[i].kind == RuleKind::kIp) h ^= pk.key[i].hash;
  return static_cast<unsigned>(h % queues);
}

// Writes the per-queue input files (the capture repeated `loop` times) and
// returns the number of packets in the capture, or -1. With no output files
// it only validates and counts.
long split_input(const std::string& in, unsigned queues, unsigned loop,
                 const std::vector<std::string>& out, std::string* err) {
  long count = -1;
  std::vector<DumperPtr> dumpers;
  auto pk = std::make_unique<PacketKeys>();
  for (unsigned pass = 0; pass < loop; ++pass) {
    PcapPtr p = open_read(in, err);
    if (!p) return -1;
    if (pass == 0) {
      if (pcap_datalink(p.get()) != DLT_EN10MB) {
        *err = in + ": link type is not Ethernet (DLT_EN10MB)";
        return -1;
      }
      for (const std::string& o : out) {
        dumpers.emplace_back(pcap_dump_open(p.get(), o.c_str()));
        if (!dumpers.back()) {
          *err = "cannot write " + o + ": " + pcap_geterr(p.get());
          return -1;
        }
      }
    }
    long n = 0;
    pcap_pkthdr* h;
    const u_char* data;
    int rc;
    while ((rc = pcap_next_ex(p.get(), &h, &data)) == 1) {
      if (!dumpers.empty()) {
        const unsigned q = queue_of(data, h->caplen, queues, *pk);
        pcap_dump(reinterpret_cast<u_char*>(dumpers[q].get()), h, data);
      }
      ++n;
    }
    if (rc == -1) {
      *err = in + ": " + pcap_geterr(p.get());
      return -1;
    }
    count = n;
  }
  return count;
}

// Appends the packets of `parts` (in order) to a new capture at `path`.
bool merge(const std::vector<std::string>& parts, const std::string& path, std::string* err) {
  PcapPtr dead(pcap_open_dead(DLT_EN10MB, 65535));
  DumperPtr d(pcap_dump_open(dead.get(), path.c_str()));
  if (!d) {
    *err = "cannot write " + path + ": " + pcap_geterr(dead.get());
    return false;
  }
  for (const std::string& part : parts) {
    PcapPtr p = open_read(part, err);
    if (!p) return false;
    pcap_pkthdr* h;
    const u_char* data;
    while (pcap_next_ex(p.get(), &h, &data) == 1) pcap_dump(reinterpret_cast<u_char*>(d.get()), h, data);
  }
  return true;
}

std::string join_arg(const std::string& key, const std::vector<std::string>& files) {
  std::string s;
  for (const std::string& f : files) s += "," + key + "=" + f;
  return s;
}

// Which file a path names, for telling whether two options name the same one.
// An existing file is its device and inode, so hard links, symlinks, "./x"
// and "dir/../x" are all caught. A path that does not exist yet is its
// absolute, normalised form with symlinks resolved as far as they exist
// (weakly_canonical), so `--out a --drop ./a` is caught before either exists.
struct FileId {
  bool exists = false;
  bool shareable = false;  // a character device such as /dev/null: any number may write it
  dev_t dev = 0;
  ino_t ino = 0;
  std::string path;
};

FileId file_id(const std::string& p) {
  FileId id;
  struct stat st {};
  if (::stat(p.c_str(), &st) == 0) {
    id.exists = true;
    id.shareable = S_ISCHR(st.st_mode);
    id.dev = st.st_dev;
    id.ino = st.st_ino;
    return id;
  }
  std::error_code ec;
  fs::path q = fs::absolute(p, ec);
  // A dangling symlink names the file it will create: follow it.
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(q, ec)); ++hops) {
    const fs::path target = fs::read_symlink(q, ec);
    if (ec) break;
    q = target.is_absolute() ? target : q.parent_path() / target;
  }
  const fs::path c = fs::weakly_canonical(q, ec);
  id.path = (ec ? q.lexically_normal() : c).string();
  return id;
}

bool same_file(const FileId& a, const FileId& b) {
  if (a.exists != b.exists) return false;
  if (a.exists) return a.dev == b.dev && a.ino == b.ino && !a.shareable;
  return a.path == b.path;
}

// Refuses any two of the files replay reads and writes naming one file:
// `--in X --out X` would truncate the capture before it is read. Inputs may
// share a file with each other (reading twice is harmless), never with an
// output. Nothing has been opened for writing when this runs.
bool check_distinct_files(const ReplayOptions& o, std::string* err) {
  struct Named {
    std::string option, path;
    bool output;
  };
  std::vector<Named> files = {{"--in", o.in, false}, {"--out", o.out, true}};
  if (!o.drop.empty()) files.push_back({"--drop", o.drop, true});
  if (!o.reply.empty()) files.push_back({"--reply", o.reply, true});
  if (!o.stats_json.empty()) files.push_back({"--stats-json", o.stats_json, true});
  for (const std::string& r : o.rules) files.push_back({"--rules", r, false});
  std::vector<FileId> ids;
  for (const Named& f : files) ids.push_back(file_id(f.path));
  for (std::size_t i = 0; i < files.size(); ++i) {
    for (std::size_t j = i + 1; j < files.size(); ++j) {
      if (!files[i].output && !files[j].output) continue;
      if (!same_file(ids[i], ids[j])) continue;
      *err = files[i].option + " " + files[i].path + " and " + files[j].option + " " + files[j].path +
             " are the same file; every output needs a file of its own" +
             (files[i].output && files[j].output ? "" : " (writing it would destroy the input)");
      return false;
    }
  }
  return true;
}

// Removes the scratch directory whatever path replay() leaves by.
struct TempDir {
  std::string path;
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

}  // namespace

int replay(const ReplayOptions& o) {
  std::string err;
  // Before EAL is up: plain stderr, as for usage errors. After: rte_log.
  auto fail_early = [&](int code, const std::string& msg) {
    std::fprintf(stderr, "cuckoogate replay: %s\n", msg.c_str());
    return code;
  };
  auto fail = [&](int code, const std::string& msg) {
    CG_LOG(ERR, gateway, "replay: %s", msg.c_str());
    return code;
  };
  if (o.workers == 0 || o.workers > 64) return fail_early(2, "--workers must be between 1 and 64");
  if (o.loop == 0) return fail_early(2, "--loop must be at least 1");
  if (!o.redis.empty() && o.ctl.empty()) return fail_early(2, "--redis needs --ctl (changes come through the control socket)");
  if (!o.redis.empty()) {
    if (const sync::RedisUrlParse u = sync::parse_redis_url(o.redis); !u.url) return fail_early(2, "--redis: " + u.error);
  }
  if (o.pps != 0 && o.pps < o.workers)
    return fail_early(2, "--pps must be at least --workers (each worker paces its share)");
  if (!check_distinct_files(o, &err)) return fail_early(2, err);

  std::vector<Rule> rules;
  if (!read_rule_files(o.rules, rules, &err)) return fail_early(2, err);

  // Scratch files (the capture cut per worker, per pass) under $TMPDIR, as
  // Unix tools do, else /tmp. Removed on every way out but SIGKILL, so a
  // caller that may kill us can point TMPDIR at a directory of its own.
  TempDir tmp;
  {
    const char* env = std::getenv("TMPDIR");
    const std::string base = env != nullptr && *env != '\0' ? env : "/tmp";
    std::string tmpl = base + "/cuckoogate-replay-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr)
      return fail_early(1, "cannot create a temporary directory in " + base + ": " + std::strerror(errno));
    tmp.path = tmpl;
  }
  const unsigned q = o.workers;
  auto files = [&](const std::string& stem, unsigned n) {
    std::vector<std::string> v;
    for (unsigned i = 0; i < n; ++i) v.push_back(tmp.path + "/" + stem + std::to_string(i) + ".pcap");
    return v;
  };
  // Input queues: the capture itself when it can be used as is.
  std::vector<std::string> in_q;
  long per_pass = 0;
  if (q == 1 && o.loop == 1) {
    in_q = {o.in};
    per_pass = split_input(o.in, 1, 1, {}, &err);  // validates and counts
  } else {
    in_q = files("in", q);
    per_pass = split_input(o.in, q, o.loop, in_q, &err);
  }
  if (per_pass < 0) return fail_early(2, err);
  const uint64_t expected = static_cast<uint64_t>(per_pass) * o.loop;

  const std::string empty = tmp.path + "/empty.pcap";
  {  // an empty capture with the same link type: rx of the output ports
    PcapPtr dead(pcap_open_dead(DLT_EN10MB, 65535));
    DumperPtr d(pcap_dump_open(dead.get(), empty.c_str()));
    if (!d) return fail_early(1, "cannot write " + empty);
  }
  const std::vector<std::string> pass_q = q == 1 ? std::vector<std::string>{o.out} : files("pass", q);
  std::vector<std::string> drop_q, reply_q;
  if (!o.drop.empty()) drop_q = q == 1 ? std::vector<std::string>{o.drop} : files("drop", q);
  if (!o.reply.empty()) reply_q = q == 1 ? std::vector<std::string>{o.reply} : files("reply", q);

  // EAL: no hugepages, no PCI, private runtime files, lcores 0 (control) + workers.
  std::vector<std::string> eal = {"--no-huge", "--no-pci", "--no-shconf",
                                  "-m", std::to_string(o.memory_mb),
                                  "--lcores=" + float_lcores(q + 1),
                                  "--file-prefix=" + unique_file_prefix("cuckoogate-replay"),
                                  "--log-level=lib.eal:error", "--log-level=lib.telemetry:error",
                                  "--log-level=pmd.net.pcap:error"};
  eal.push_back("--vdev=net_pcap_in" + join_arg("rx_pcap", in_q) + join_arg("tx_pcap", files("rev", q)));
  eal.push_back("--vdev=net_pcap_pass" + join_arg("rx_pcap", std::vector<std::string>(q, empty)) +
                join_arg("tx_pcap", pass_q));
  if (!drop_q.empty())
    eal.push_back("--vdev=net_pcap_drop,rx_pcap=" + empty + join_arg("tx_pcap", drop_q));
  if (!reply_q.empty())
    eal.push_back("--vdev=net_pcap_reply,rx_pcap=" + empty + join_arg("tx_pcap", reply_q));
  eal.insert(eal.end(), o.eal_extra.begin(), o.eal_extra.end());
  if (!init_eal("cuckoogate", eal, &err)) return fail_early(1, err);

  int rc = 0;
  {
    uint16_t in_port = 0, pass_port = 0, drop_port = 0, reply_port = 0;
    if (rte_eth_dev_get_port_by_name("net_pcap_in", &in_port) != 0 ||
        rte_eth_dev_get_port_by_name("net_pcap_pass", &pass_port) != 0 ||
        (!drop_q.empty() && rte_eth_dev_get_port_by_name("net_pcap_drop", &drop_port) != 0) ||
        (!reply_q.empty() && rte_eth_dev_get_port_by_name("net_pcap_reply", &reply_port) != 0)) {
      const int code = fail(1, "net_pcap devices did not come up (is the net_pcap PMD installed?)");
      rte_eal_cleanup();
      return code;
    }
    constexpr uint16_t kDesc = 512;
    // + the fragments each worker may hold until their datagram is complete.
    const unsigned mbufs = 2 * q * kDesc * 2 + 4096 + (o.fragments.reassemble ? q * o.fragments.fragments : 0);
    rte_mempool* pool = rte_pktmbuf_pool_create("cg_replay_pool", mbufs, 256, 0,
                                                RTE_MBUF_DEFAULT_BUF_SIZE, static_cast<int>(rte_socket_id()));
    Engine engine;
    EngineOptions eo;
    eo.workers = q;
    eo.verify = o.verify;
    eo.drop_malformed = o.drop_malformed;
    eo.capacity = o.capacity != 0 ? o.capacity : std::max<std::size_t>(65536, rules.size() * 2);
    eo.pps = o.pps;
    eo.flows = o.flows;
    eo.reject = o.reject;
    eo.reject_nxdomain = o.reject_nxdomain;
    eo.reject_rate = o.reject_rate;
    eo.fragments = o.fragments;
    eo.inspect_overflow_drop = o.inspect_overflow_drop;
    parse_quic_mode(o.quic, &eo.quic);  // checked by the command line
    parse_checksum_mode(o.checksums, &eo.checksums);  // checked by the command line
    PortConfig pc;
    pc.rx_queues = pc.tx_queues = static_cast<uint16_t>(q);
    pc.rx_desc = pc.tx_desc = kDesc;
    PortConfig dc;
    dc.rx_queues = 1;
    dc.tx_queues = static_cast<uint16_t>(q);
    dc.rx_desc = dc.tx_desc = kDesc;
    if (pool == nullptr) {
      rc = fail(1, "cannot allocate the mbuf pool (raise -m)");
    } else if (!engine.init(eo, &err) || !setup_port(in_port, pc, pool, &err) ||
               !setup_port(pass_port, pc, pool, &err) ||
               (!drop_q.empty() && !setup_port(drop_port, dc, pool, &err)) ||
               (!reply_q.empty() && !setup_port(reply_port, dc, pool, &err))) {
      rc = fail(1, err);
    } else {
      const Blocklist::BatchResult br = engine.blocklist().add_batch(rules);
      if (br.result != Blocklist::Result::kOk) {
        rc = fail(2, "the rules do not fit: " + engine.blocklist().last_error() + " (raise --memory)");
      } else {
        for (unsigned w = 0; w < q; ++w) {
          const auto wq = static_cast<uint16_t>(w);
          engine.add_link(w, {in_port, wq, pass_port, wq});
          engine.add_link(w, {pass_port, wq, in_port, wq});
        }
        if (!drop_q.empty()) engine.set_drop_port(drop_port);
        if (!reply_q.empty()) engine.set_reply_port(reply_port);
        else engine.set_reply_port(kDiscardReplies);  // replies are discarded unless --reply
        std::unique_ptr<BlocklistSync> shared;  // --redis
        CommandHandler handler(engine.blocklist(),
                               with_sync_lines([&](std::string& s) { engine.stats_text(s); }, shared),
                               with_sync_lines([&](std::string& s) { engine.info_text(s); }, shared));
        std::unique_ptr<ControlServer> server;
        if (!o.ctl.empty()) {
          server = ControlServer::open(o.ctl, handler, &err);
          if (!server) rc = fail(1, err);
        }
        if (rc == 0 && server && !o.redis.empty()) {
          SyncConfig sc;
          sc.redis = o.redis;
          sc.gateway_id = o.gateway_id;
          sc.snapshot_interval_s = 0;  // a replay follows; it does not write snapshots
          shared = std::make_unique<BlocklistSync>(engine.blocklist(), sync_options(sc));
          shared->set_startup_rules(rules);  // as run does: --rules are shared once connected
          shared->attach(handler, *server);
          shared->stream().tick();  // connect and catch up before the first packet
        }
        if (rc == 0) {
          std::signal(SIGINT, on_signal);
          std::signal(SIGTERM, on_signal);
          if (std::signal(SIGHUP, on_signal) == SIG_IGN) std::signal(SIGHUP, SIG_IGN);  // as run: a clean stop
          if (!engine.start(&err)) {
            rc = fail(1, err);
          } else {
            engine.register_telemetry();  // after start(): it reads the workers' flow tables
            // Control loop: serve the socket until every input packet is handled.
            // A device that loses input (net_pcap drops a frame it cannot fit
            // in an mbuf) would leave rx short forever: no progress for 10 s
            // ends the replay with an error instead of hanging.
            uint64_t last_rx = 0;
            auto last_progress = std::chrono::steady_clock::now();
            bool stalled = false;
            while (engine.totals().rx < expected && !g_interrupted.load(std::memory_order_relaxed)) {
              if (server) {
                const int tick = std::min(2, engine.control_tick());
                server->poll_once(shared ? std::min(tick, shared->stream().tick()) : tick);
              } else {
                std::this_thread::sleep_for(std::chrono::microseconds(500));
              }
              engine.check_frame_health();
              const uint64_t rx = engine.totals().rx;
              const auto now = std::chrono::steady_clock::now();
              if (rx != last_rx) {
                last_rx = rx;
                last_progress = now;
              } else if (now - last_progress > std::chrono::seconds(10)) {
                stalled = true;
                break;
              }
            }
            if (stalled)
              rc = fail(1, "input stalled: " + std::to_string(last_rx) + " of " + std::to_string(expected) +
                               " packets arrived (frames larger than an mbuf?)");
            const double secs = engine.seconds();
            engine.stop();
            engine.check_frame_health(true);  // what arrived since the last look
            if (rc == 0 && g_interrupted.load(std::memory_order_relaxed)) rc = fail(130, "interrupted");
            shared.reset();
            server.reset();
            for (uint16_t p : {in_port, pass_port}) close_port(p);
            if (!drop_q.empty()) close_port(drop_port);
            if (!reply_q.empty()) close_port(reply_port);
            if (q > 1 && rc == 0) {
              if (!merge(pass_q, o.out, &err) || (!drop_q.empty() && !merge(drop_q, o.drop, &err)) ||
                  (!reply_q.empty() && !merge(reply_q, o.reply, &err)))
                rc = fail(1, err);
            }
            SummaryInfo si;
            si.title = "replay " + o.in;
            si.passed_to = o.out;
            si.dropped_to = o.drop;
            si.rules = engine.blocklist().size();
            si.seconds = secs;
            const StatsSnapshot s = engine.totals();
            if (!o.quiet) print_summary(stdout, si, s);
            if (!o.stats_json.empty() && !write_summary_json(o.stats_json, si, s, &err))
              rc = fail(1, err);
          }
        }
      }
    }
    // Engine (and its DPDK objects) is destroyed here, before EAL cleanup.
  }
  rte_eal_cleanup();
  return rc;
}

}  // namespace cg
