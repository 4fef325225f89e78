// What `run` and `replay` share: the QSBR variable, the blocklist, the
// worker lcores and their stats, and the text the control socket and DPDK
// telemetry serve. Lives on the main (control) lcore.
#pragma once

#include <rte_rcu_qsbr.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "control/blocklist.hpp"
#include "gateway/config.hpp"
#include "dataplane/stats.hpp"
#include "dataplane/worker.hpp"

namespace cg {

struct EngineOptions {
  unsigned workers = 1;
  bool verify = true;
  bool drop_malformed = false;
  std::size_t capacity = 1u << 20;  // rules
  std::size_t max_memory = 0;       // bytes the lookup tables may grow to; 0 = Blocklist's default
  uint64_t pps = 0;                 // replay pacing, 0 = as fast as possible
  bool filtering = true;            // false: forward without looking anything up
  std::string state_dir;            // durable rule state, empty = in memory
  bool salvage = false;             // start despite damaged state
  uint64_t flows = uint64_t{1} << 17;  // flow-table entries per worker; 0 = no flow table
  bool reject = false;              // action: reject instead of drop (docs/reject.md)
  bool reject_nxdomain = false;     // a rejected DNS query's answer: NXDOMAIN, not REFUSED
  uint32_t reject_rate = 1000;      // replies per second per worker (burst: a tenth of it)
  FragmentsConfig fragments;        // IP reassembly (docs/dataplane.md)
  bool inspect_overflow_drop = false;  // inspect_overflow = "drop" (docs/reassembly.md)
  QuicMode quic = QuicMode::kInspect;  // quic = "inspect" | "block" | "pass" (docs/quic.md)
  ChecksumMode checksums = ChecksumMode::kAuto;  // checksums = "auto" | "verify" | "off" (docs/reassembly.md)
};

class Engine {
 public:
  Engine() = default;
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // After rte_eal_init: needs one worker lcore per worker.
  bool init(const EngineOptions& o, std::string* err);
  Blocklist& blocklist() noexcept { return *blocklist_; }
  const Blocklist& blocklist() const noexcept { return *blocklist_; }
  const EngineOptions& options() const noexcept { return opts_; }

  void add_link(unsigned worker, const QueueLink& l) { links_[worker].push_back(l); }
  void set_drop_port(int port) noexcept { drop_port_ = port; }  // worker w uses tx queue w
  void set_reply_port(int port) noexcept { reply_port_ = port; }  // replay --reply; tx queue w
  void set_filtering(bool on) noexcept { opts_.filtering = on; }  // takes effect at start()

  bool start(std::string* err);  // launches the workers
  void stop();                   // asks them to stop and waits; idempotent
  bool running() const noexcept { return running_; }

  StatsSnapshot totals() const;
  StatsSnapshot worker_stats(unsigned w) const;
  double seconds() const;        // since start()

  // `key value` lines for the control socket's stats / info commands (control thread only).
  void stats_text(std::string& out) const;
  void info_text(std::string& out) const;
  // Control-loop housekeeping: expires due rules, compacts the journal,
  // publishes the rule count. Returns the ms until it wants to run again.
  int control_tick();
  // Mirrors the rule count for readers on other threads (telemetry).
  void publish_rule_count() noexcept {
    rules_.store(blocklist_->size(), std::memory_order_relaxed);
  }
  // Registers /cuckoogate/stats and /cuckoogate/info with DPDK telemetry.
  void register_telemetry();
  // Control lcore only: when a port's malformed or oversized frames climb
  // (at least kBadMin of them and 1% of what the port received since the
  // last look), logs a warning on cuckoogate.dataplane saying what it likely
  // means, at most once per kWarnEvery per port and kind. Looks at most once
  // per kLookEvery unless `now` (the end of a replay): call it from every
  // turn of the control loop.
  void check_frame_health(bool now = false);
  static constexpr std::chrono::seconds kWarnEvery{10};
  static constexpr std::chrono::seconds kLookEvery{1};
  static constexpr uint64_t kBadMin = 8;

 private:
  // start(): the per-link counters and the ports they are watched by.
  bool setup_link_stats(const std::vector<unsigned>& lcores, std::string* err);

  EngineOptions opts_;
  rte_rcu_qsbr* qsv_ = nullptr;
  std::unique_ptr<Blocklist> blocklist_;
  std::vector<std::vector<QueueLink>> links_;
  std::vector<std::unique_ptr<Worker>> workers_;
  WorkerStats* stats_ = nullptr;  // workers' blocks, rte_zmalloc'ed (cache aligned)
  std::vector<std::atomic<uint64_t>*> rule_hits_;  // per worker: one counter per rule slot
  std::size_t hit_slots_ = 0;  // entries of each rule_hits_ array (Blocklist::max_slots())
  std::vector<LinkStats*> link_stats_;  // per worker: one per link, rte_zmalloc'ed
  // One kind of bad frame on one rx port, for check_frame_health().
  struct Watch {
    uint64_t looked = 0;    // count at the last look
    uint64_t reported = 0;  // count at the last warning
    bool warned = false;
    std::chrono::steady_clock::time_point at;  // of the last warning
  };
  struct PortWatch {
    uint16_t port = 0;
    std::string name;   // "net_af_packet0 (iface veth1)"
    std::string iface;  // af_packet's kernel interface, "" if not af_packet
    uint16_t mtu = 1500;
    uint64_t rx_looked = 0;  // the port's ipackets at the last look
    Watch malformed, oversized;
  };
  std::vector<PortWatch> watch_;
  std::chrono::steady_clock::time_point next_look_{};
  std::vector<std::vector<std::size_t>> watch_of_link_;  // [worker][link] -> watch_ index
  int drop_port_ = -1;
  int reply_port_ = -1;
  std::atomic<bool> stop_{false};
  bool running_ = false;
  std::atomic<std::size_t> rules_{0};
  std::chrono::steady_clock::time_point started_;
  bool warned_read_only_ = false;  // control_tick said the journal turned read-only
};

}  // namespace cg
