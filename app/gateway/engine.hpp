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
#include "dataplane/stats.hpp"
#include "dataplane/worker.hpp"

namespace cg {

struct EngineOptions {
  unsigned workers = 1;
  bool verify = true;
  bool drop_malformed = false;
  std::size_t capacity = 1u << 20;  // rules
  uint64_t pps = 0;                 // replay pacing, 0 = as fast as possible
  bool filtering = true;            // false: forward without looking anything up
  std::string state_dir;            // durable rule state, empty = in memory
  bool salvage = false;             // start despite damaged state
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
  const EngineOptions& options() const noexcept { return opts_; }

  void add_link(unsigned worker, const QueueLink& l) { links_[worker].push_back(l); }
  void set_drop_port(int port) noexcept { drop_port_ = port; }  // worker w uses tx queue w
  void set_filtering(bool on) noexcept { opts_.filtering = on; }  // takes effect at start()

  bool start(std::string* err);  // launches the workers
  void stop();                   // asks them to stop and waits; idempotent
  bool running() const noexcept { return running_; }

  StatsSnapshot totals() const;
  StatsSnapshot worker_stats(unsigned w) const;
  double seconds() const;        // since start()

  // `key value` lines for the control socket's stats / info commands.
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

 private:
  EngineOptions opts_;
  rte_rcu_qsbr* qsv_ = nullptr;
  std::unique_ptr<Blocklist> blocklist_;
  std::vector<std::vector<QueueLink>> links_;
  std::vector<std::unique_ptr<Worker>> workers_;
  WorkerStats* stats_ = nullptr;  // workers' blocks, rte_zmalloc'ed (cache aligned)
  std::vector<std::atomic<uint64_t>*> rule_hits_;  // per worker: one counter per rule slot
  int drop_port_ = -1;
  std::atomic<bool> stop_{false};
  bool running_ = false;
  std::atomic<std::size_t> rules_{0};
  std::chrono::steady_clock::time_point started_;
};

}  // namespace cg
