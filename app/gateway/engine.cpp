#include "gateway/engine.hpp"

#include "cuckoogate/kcas.hpp"

#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_telemetry.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <new>
#include <thread>

#include "gateway/log.hpp"
#include "gateway/ports.hpp"

namespace cg {
namespace {

// For the telemetry callbacks (no user data in 22.11), which run on DPDK's
// telemetry thread: the release store in Engine::register_telemetry and the
// loads below make a callback see a fully built Engine.
std::atomic<const Engine*> g_engine{nullptr};

// Telemetry callbacks in flight, so that ~Engine frees nothing one still
// reads (DPDK 22.11 has no way to unregister a command). A callback counts
// itself, then loads g_engine; the destructor takes g_engine away, then
// waits for the count to reach zero. Both pairs are a store then a load of
// the other variable, so both are seq_cst (a release/acquire pair allows
// each load to miss the other thread's store, on ARM as on x86's store
// buffer): either the callback sees nullptr, or the destructor sees it
// counted. The release decrement orders the callback's reads of the engine
// before the destructor's acquire (seq_cst) load that sees zero.
std::atomic<unsigned> g_callbacks{0};

class EngineRef {
 public:
  EngineRef() noexcept {
    g_callbacks.fetch_add(1, std::memory_order_seq_cst);
    e_ = g_engine.load(std::memory_order_seq_cst);
  }
  ~EngineRef() { g_callbacks.fetch_sub(1, std::memory_order_release); }
  EngineRef(const EngineRef&) = delete;
  EngineRef& operator=(const EngineRef&) = delete;
  const Engine* get() const noexcept { return e_; }

 private:
  const Engine* e_;
};

void line(std::string& out, const std::string& key, uint64_t v) {
  out += key;
  out += ' ';
  out += std::to_string(v);
  out += '\n';
}

void line(std::string& out, const std::string& key, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6f", v);
  out += key + ' ' + buf + '\n';
}

void add_flow_stats(StatsSnapshot& s, const flow::FlowStats& f) {
  s.flows_active += f.active;
  s.flows_created += f.created;
  s.flows_evicted += f.evicted;
  s.flows_expired += f.expired;
  s.flows_syn_deferred += f.syn_deferred;
  s.flows_reopened_in_burst += f.reopened_in_burst;
}

void snapshot_lines(std::string& out, const std::string& p, const StatsSnapshot& s) {
  line(out, p + "rx", s.rx);
  line(out, p + "passed", s.passed);
  line(out, p + "dropped", s.dropped);
  for (std::size_t k = 1; k <= kRuleKindCount; ++k)
    line(out, p + "dropped_by_kind." + std::string(kind_name(static_cast<RuleKind>(k))),
         s.dropped_by_kind[k]);
  line(out, p + "malformed", s.malformed);
  line(out, p + "malformed_dropped", s.malformed_dropped);
  line(out, p + "oversized", s.oversized);
  line(out, p + "keys", s.keys);
  line(out, p + "filter_hits", s.filter_hits);
  line(out, p + "confirmed_hits", s.confirmed_hits);
  line(out, p + "false_positives_avoided", s.fp_avoided);
  line(out, p + "tx_failed", s.tx_failed);
  line(out, p + "lookup_retries", s.lookup_retries);
  line(out, p + "flows.active", s.flows_active);
  line(out, p + "flows.created", s.flows_created);
  line(out, p + "flows.evicted", s.flows_evicted);
  line(out, p + "flows.expired", s.flows_expired);
  line(out, p + "flows.syn_deferred", s.flows_syn_deferred);
  line(out, p + "flows.reopened_in_burst", s.flows_reopened_in_burst);
  line(out, p + "flows.untracked", s.untracked);
  line(out, p + "flows.names_forgotten", s.names_forgotten);
  line(out, p + "cache.hits", s.cache_hits);
  line(out, p + "cache.misses", s.cache_misses);
  line(out, p + "flow_drops", s.flow_drops);
  line(out, p + "reassembly.started", s.reasm_started);
  line(out, p + "reassembly.completed", s.reasm_completed);
  line(out, p + "reassembly.overflow", s.inspect_overflow);
  line(out, p + "reassembly.conflicts", s.reasm_conflicts);
  line(out, p + "reassembly.dropped", s.inspect_dropped);
  line(out, p + "reassembly.bad_checksum", s.reasm_bad_checksum);
  line(out, p + "reassembly.not_taken", s.reasm_not_taken);
  line(out, p + "reassembly.fast_open_cut", s.reasm_fast_open_cut);
  line(out, p + "reassembly.refused", s.reasm_refused);
  line(out, p + "quic.initials", s.quic_initials);
  line(out, p + "quic.completed", s.quic_completed);
  line(out, p + "quic.failed", s.quic_failed);
  line(out, p + "quic.blocked", s.quic_blocked);
  line(out, p + "rejects.sent", s.rejects_sent);
  line(out, p + "rejects.limited", s.rejects_limited);
  line(out, p + "rejects.failed", s.rejects_failed);
  line(out, p + "frags.held", s.frags_held);
  line(out, p + "frags.reassembled", s.frags_reassembled);
  line(out, p + "frags.timeout", s.frags_timeout);
  line(out, p + "frags.overlap", s.frags_overlap);
  line(out, p + "frags.too_many", s.frags_too_many);
  line(out, p + "frags.failed", s.frags_failed);
  line(out, p + "frags.duplicate", s.frags_duplicate);
  line(out, p + "frags.dead", s.frags_dead);
  line(out, p + "frags.table_full", s.frags_table_full);
  line(out, p + "frags.unsupported", s.frags_unsupported);
}

int tel_stats(const char*, const char*, rte_tel_data* d) {
  const EngineRef ref;
  const Engine* e = ref.get();
  if (e == nullptr) return -1;
  const StatsSnapshot s = e->totals();
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_u64(d, "rx", s.rx);
  rte_tel_data_add_dict_u64(d, "passed", s.passed);
  rte_tel_data_add_dict_u64(d, "dropped", s.dropped);
  for (std::size_t k = 1; k <= kRuleKindCount; ++k) {
    const std::string name = "dropped_" + std::string(kind_name(static_cast<RuleKind>(k)));
    rte_tel_data_add_dict_u64(d, name.c_str(), s.dropped_by_kind[k]);
  }
  rte_tel_data_add_dict_u64(d, "malformed", s.malformed);
  rte_tel_data_add_dict_u64(d, "oversized", s.oversized);
  rte_tel_data_add_dict_u64(d, "filter_hits", s.filter_hits);
  rte_tel_data_add_dict_u64(d, "confirmed_hits", s.confirmed_hits);
  rte_tel_data_add_dict_u64(d, "false_positives_avoided", s.fp_avoided);
  rte_tel_data_add_dict_u64(d, "tx_failed", s.tx_failed);
  rte_tel_data_add_dict_u64(d, "flows_active", s.flows_active);
  rte_tel_data_add_dict_u64(d, "flows_created", s.flows_created);
  rte_tel_data_add_dict_u64(d, "flows_evicted", s.flows_evicted);
  rte_tel_data_add_dict_u64(d, "flows_expired", s.flows_expired);
  rte_tel_data_add_dict_u64(d, "flows_syn_deferred", s.flows_syn_deferred);
  rte_tel_data_add_dict_u64(d, "flows_reopened_in_burst", s.flows_reopened_in_burst);
  rte_tel_data_add_dict_u64(d, "flows_untracked", s.untracked);
  rte_tel_data_add_dict_u64(d, "flows_names_forgotten", s.names_forgotten);
  rte_tel_data_add_dict_u64(d, "cache_hits", s.cache_hits);
  rte_tel_data_add_dict_u64(d, "cache_misses", s.cache_misses);
  rte_tel_data_add_dict_u64(d, "flow_drops", s.flow_drops);
  rte_tel_data_add_dict_u64(d, "rejects_sent", s.rejects_sent);
  rte_tel_data_add_dict_u64(d, "rejects_limited", s.rejects_limited);
  rte_tel_data_add_dict_u64(d, "rejects_failed", s.rejects_failed);
  rte_tel_data_add_dict_u64(d, "frags_reassembled", s.frags_reassembled);
  rte_tel_data_add_dict_u64(d, "frags_timeout", s.frags_timeout);
  rte_tel_data_add_dict_u64(d, "frags_overlap", s.frags_overlap);
  rte_tel_data_add_dict_u64(d, "frags_table_full", s.frags_table_full);
  rte_tel_data_add_dict_u64(d, "frags_unsupported", s.frags_unsupported);
  return 0;
}

int tel_info(const char*, const char*, rte_tel_data* d) {
  const EngineRef ref;
  const Engine* e = ref.get();
  if (e == nullptr) return -1;
  std::string text;
  {
    // This thread is not the control thread: keep a growth from freeing the
    // tables info_text reads.
    const auto lock = e->blocklist().lock_tables();
    e->info_text(text);
  }
  e->blocklist().set_count_lines(text);  // as `info` has them: sets_default, ...
  rte_tel_data_start_dict(d);
  // info_text lines are `key value`; numeric values become u64, others strings.
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    const std::string l = text.substr(pos, nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    const std::size_t sp = l.find(' ');
    if (sp == std::string::npos) continue;
    // Telemetry names allow no '.': filter.slots -> filter_slots.
    std::string k = l.substr(0, sp);
    const std::string v = l.substr(sp + 1);
    for (char& ch : k) ch = ch == '.' ? '_' : ch;
    if (!v.empty() && v.find_first_not_of("0123456789") == std::string::npos)
      rte_tel_data_add_dict_u64(d, k.c_str(), std::stoull(v));
    else
      rte_tel_data_add_dict_string(d, k.c_str(), v.c_str());
  }
  return 0;
}

// The kernel interface behind an af_packet port (its `iface=` devarg), "" for
// any other driver.
std::string af_packet_iface(uint16_t port) {
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port, &info) != 0 || info.driver_name == nullptr ||
      std::string(info.driver_name) != "net_af_packet" || info.device == nullptr)
    return "";
  const rte_devargs* da = rte_dev_devargs(info.device);
  if (da == nullptr || da->args == nullptr) return "";
  const std::string args = da->args;
  for (std::size_t pos = 0; pos < args.size();) {
    const std::size_t end = std::min(args.find(',', pos), args.size());
    if (args.compare(pos, 6, "iface=") == 0) return args.substr(pos + 6, end - pos - 6);
    pos = end + 1;
  }
  return "";
}

}  // namespace

Engine::~Engine() {
  const Engine* self = this;
  g_engine.compare_exchange_strong(self, nullptr, std::memory_order_seq_cst);
  // A callback that loaded this engine before is still counted: wait for it
  // (a telemetry answer takes microseconds). See EngineRef. Also when the
  // exchange failed: another engine registered since may have replaced this
  // one after a callback loaded it (a review found it; the CAS's seq_cst
  // read of the newer pointer orders that callback's count before the load
  // below all the same).
  while (g_callbacks.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  stop();
  workers_.clear();
  blocklist_.reset();  // before the QSBR variable its exact set refers to
  for (auto* arr : rule_hits_) Blocklist::release_slot_array(arr, hit_slots_);
  for (auto* arr : link_stats_) rte_free(arr);
  rte_free(stats_);
  rte_free(qsv_);
}

bool Engine::init(const EngineOptions& o, std::string* err) {
  opts_ = o;
  if (o.workers == 0) {
    *err = "at least one worker is needed";
    return false;
  }
  if (rte_lcore_count() < o.workers + 1) {
    *err = "need " + std::to_string(o.workers + 1) + " lcores (1 control + " +
           std::to_string(o.workers) + " workers), EAL has " + std::to_string(rte_lcore_count()) +
           " (EAL option -l / --lcores)";
    return false;
  }
  // The control lcore is the filter's only writer: take its K-CAS descriptor
  // slot now, so the first rule change allocates nothing.
  if (!kcas::register_thread()) {
    *err = "cannot register the control thread with the filter's K-CAS";
    return false;
  }
  const int socket = static_cast<int>(rte_socket_id());
  const std::size_t qsz = rte_rcu_qsbr_get_memsize(o.workers);
  qsv_ = static_cast<rte_rcu_qsbr*>(rte_zmalloc_socket("cg_qsbr", qsz, RTE_CACHE_LINE_SIZE, socket));
  if (qsv_ == nullptr || rte_rcu_qsbr_init(qsv_, o.workers) != 0) {
    *err = "cannot allocate the RCU QSBR variable";
    return false;
  }
  Blocklist::Options bo;
  bo.capacity = o.capacity;
  bo.max_memory = o.max_memory;
  bo.socket = socket;
  bo.qsv = qsv_;
  bo.state_dir = o.state_dir;
  bo.salvage = o.salvage;
  bo.kind_keyed_addresses = !o.verify;  // the filter alone must tell src, dst and ip apart
  std::vector<std::string> notes;
  blocklist_ = Blocklist::create(bo, err, &notes);
  for (const std::string& n : notes) CG_LOG(WARNING, control, "state: %s", n.c_str());
  if (!blocklist_) return false;
  if (!o.state_dir.empty())
    CG_LOG(INFO, control, "restored %zu rules from %s", blocklist_->size(), o.state_dir.c_str());
  void* mem = rte_zmalloc_socket("cg_stats", sizeof(WorkerStats) * o.workers, RTE_CACHE_LINE_SIZE, socket);
  if (mem == nullptr) {
    *err = "cannot allocate worker stats";
    return false;
  }
  stats_ = static_cast<WorkerStats*>(mem);
  for (unsigned w = 0; w < o.workers; ++w) new (&stats_[w]) WorkerStats();
  // Per-rule hit counters: one array per worker (single writer each), summed
  // on read by the control side. Reserved for every slot the blocklist can
  // grow to (max_memory), committed page by page as slots come into use.
  hit_slots_ = blocklist_->max_slots();
  for (unsigned w = 0; w < o.workers; ++w) {
    std::atomic<uint64_t>* arr = Blocklist::reserve_slot_array(hit_slots_);
    if (arr == nullptr) {
      *err = "cannot reserve per-rule hit counters for " + std::to_string(hit_slots_) +
             " slots (lower gateway.max_memory)";
      return false;
    }
    rule_hits_.push_back(arr);
  }
  blocklist_->set_hit_reader([this](uint32_t slot) {
    uint64_t sum = 0;
    for (auto* arr : rule_hits_) sum += arr[slot].load(std::memory_order_relaxed);
    return sum;
  });
  links_.assign(o.workers, {});
  return true;
}

// Per-link bad-frame counters (one array per worker, on its socket) and the
// rx ports check_frame_health() reports them by.
bool Engine::setup_link_stats(const std::vector<unsigned>& lcores, std::string* err) {
  for (auto* arr : link_stats_) rte_free(arr);
  link_stats_.clear();
  watch_.clear();
  watch_of_link_.assign(opts_.workers, {});
  for (unsigned w = 0; w < opts_.workers; ++w) {
    const std::size_t n = std::max<std::size_t>(1, links_[w].size());
    void* mem = rte_zmalloc_socket("cg_link_stats", sizeof(LinkStats) * n, RTE_CACHE_LINE_SIZE,
                                   static_cast<int>(rte_lcore_to_socket_id(lcores[w])));
    if (mem == nullptr) {
      *err = "cannot allocate per-link counters";
      return false;
    }
    auto* arr = static_cast<LinkStats*>(mem);
    for (std::size_t i = 0; i < n; ++i) new (&arr[i]) LinkStats();
    link_stats_.push_back(arr);
    for (const QueueLink& l : links_[w]) {
      auto it = std::find_if(watch_.begin(), watch_.end(),
                             [&](const PortWatch& p) { return p.port == l.rx_port; });
      if (it == watch_.end()) {
        PortWatch p;
        p.port = l.rx_port;
        p.iface = af_packet_iface(l.rx_port);
        p.name = port_name(l.rx_port) + (p.iface.empty() ? "" : " (iface " + p.iface + ")");
        if (rte_eth_dev_get_mtu(l.rx_port, &p.mtu) != 0) p.mtu = 1500;
        watch_.push_back(std::move(p));
        it = watch_.end() - 1;
      }
      watch_of_link_[w].push_back(static_cast<std::size_t>(it - watch_.begin()));
    }
  }
  return true;
}

bool Engine::start(std::string* err) {
  unsigned w = 0;
  unsigned lcore;
  workers_.clear();
  stop_.store(false, std::memory_order_relaxed);
  std::vector<unsigned> lcores;
  RTE_LCORE_FOREACH_WORKER(lcore) {
    if (lcores.size() < opts_.workers) lcores.push_back(lcore);
  }
  if (!setup_link_stats(lcores, err)) return false;
  for (w = 0; w < opts_.workers; ++w) {
    WorkerConfig c;
    c.id = w;
    c.links = links_[w];
    c.drop_port = drop_port_;
    c.drop_queue = static_cast<uint16_t>(w);
    c.filtering = opts_.filtering;
    c.verify = opts_.verify;
    c.drop_malformed = opts_.drop_malformed;
    c.pps = opts_.pps / opts_.workers + (w < opts_.pps % opts_.workers ? 1 : 0);
    // The lookup tables only through `tables`: the first growth frees the
    // pair the blocklist started with (cfg.filter/exact stay null).
    c.tables = &blocklist_->tables();
    c.kind_mask = &blocklist_->kind_mask();
    c.prefixes = &blocklist_->prefixes();
    c.qsv = qsv_;
    c.stop = &stop_;
    c.stats = &stats_[w];
    c.rule_hits = rule_hits_[w];
    c.link_stats = link_stats_[w];
    c.flows = opts_.flows;
    c.generation = &blocklist_->generation();
    c.pass_generation = &blocklist_->pass_generation();
    c.slot_removed_at = blocklist_->slot_removed_at();
    c.reject = opts_.reject;
    // Per-rule actions need the exact set's slots (verify).
    c.rule_actions = opts_.verify ? blocklist_->slot_actions() : nullptr;
    c.reject_opts.dns_rcode = opts_.reject_nxdomain ? reject::DnsRcode::kNxDomain : reject::DnsRcode::kRefused;
    c.reject_rate = opts_.reject_rate;
    // At least 2: a TCP segment's reply is a RST to each end, two tokens at
    // once, which a bucket of 1 could never pay (no RST at rates below 20).
    c.reject_burst = std::max<uint32_t>(2, opts_.reject_rate / 10);
    c.frags = {opts_.fragments.reassemble, opts_.fragments.datagrams, opts_.fragments.fragments,
               opts_.fragments.timeout_ms};
    c.inspect_overflow_drop = opts_.inspect_overflow_drop;
    c.quic = opts_.quic;
    c.checksums = opts_.checksums;
    c.reply_port = reply_port_;
    auto wk = std::make_unique<Worker>();
    if (!wk->prepare(c, static_cast<int>(rte_lcore_to_socket_id(lcores[w])))) {
      *err = "cannot allocate worker memory (scratch, " + std::to_string(opts_.flows) +
             "-entry flow table, reply mbufs): raise EAL memory with -m or lower the flows per worker";
      return false;
    }
    workers_.push_back(std::move(wk));
  }
  started_ = std::chrono::steady_clock::now();
  running_ = true;  // so stop() waits for any worker launched before a failure
  for (w = 0; w < opts_.workers; ++w) {
    if (rte_eal_remote_launch(&Worker::main, workers_[w].get(), lcores[w]) != 0) {
      *err = "cannot launch worker on lcore " + std::to_string(lcores[w]);
      stop();
      return false;
    }
  }
  publish_rule_count();
  return true;
}

int Engine::control_tick() {
  const auto next = blocklist_->ms_to_next_expiry();
  std::size_t expired = 0;
  if (next && *next == 0) expired = blocklist_->expire_due();
  blocklist_->maybe_snapshot();
  if (!warned_read_only_ && blocklist_->store_read_only()) {
    warned_read_only_ = true;  // said once: every change is refused from now on, each with ERR 500
    CG_LOG(ERR, control, "the state directory's journal failed (%s): changes are refused until a restart",
           blocklist_->last_error().c_str());
  }
  publish_rule_count();
  const auto again = blocklist_->ms_to_next_expiry();
  // Due rules that could not be expired (the journal failed): retry at the
  // normal pace instead of spinning.
  if (again && *again == 0 && expired == 0) return 50;
  return again ? static_cast<int>(std::min<int64_t>(*again, 50)) : 50;
}

void Engine::check_frame_health(bool now_please) {
  if (watch_.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  if (!now_please && now < next_look_) return;
  next_look_ = now + kLookEvery;
  // Totals per port, summed over the workers' links (relaxed loads: each
  // counter is monotonic and only its own value matters, as for stats).
  std::vector<std::pair<uint64_t, uint64_t>> counts(watch_.size());
  for (std::size_t w = 0; w < watch_of_link_.size(); ++w) {
    for (std::size_t i = 0; i < watch_of_link_[w].size(); ++i) {
      const LinkStats& l = link_stats_[w][i];
      auto& [bad, big] = counts[watch_of_link_[w][i]];
      bad += l.malformed.load(std::memory_order_relaxed);
      big += l.oversized.load(std::memory_order_relaxed);
    }
  }
  // Climbing: enough bad frames since the last look, and a share of the
  // port's traffic that a few stray ones on a busy link never reach. Then at
  // most one warning per kWarnEvery, counting everything since the last one.
  auto due = [&](Watch& wt, uint64_t count, uint64_t rx_delta, std::string* when) -> uint64_t {
    const uint64_t delta = count - wt.looked;
    wt.looked = count;
    if (delta < kBadMin || delta * 100 < rx_delta) return 0;
    if (wt.warned && now - wt.at < kWarnEvery) return 0;
    char buf[64];
    if (wt.warned) {
      std::snprintf(buf, sizeof(buf), "in the last %.0f s",
                    std::chrono::duration<double>(now - wt.at).count());
      *when = buf;
    } else {
      *when = "since start";
    }
    const uint64_t n = count - wt.reported;
    wt.reported = count;
    wt.warned = true;
    wt.at = now;
    return n;
  };
  for (std::size_t i = 0; i < watch_.size(); ++i) {
    PortWatch& p = watch_[i];
    rte_eth_stats es{};
    uint64_t rx_delta = 0;
    if (rte_eth_stats_get(p.port, &es) == 0) {
      rx_delta = es.ipackets > p.rx_looked ? es.ipackets - p.rx_looked : 0;
      p.rx_looked = es.ipackets;
    }
    const bool afp = !p.iface.empty();
    const std::string iface = afp ? p.iface : "IFACE";
    std::string when;
    if (const uint64_t n = due(p.oversized, counts[i].second, rx_delta, &when); n != 0) {
      CG_LOG(WARNING, dataplane,
             "%s: %" PRIu64 " frames longer than its MTU %u allows, %s. %s GRO on the interface "
             "merging segments (cut to the ring's frame size, so malformed too): ethtool -K %s "
             "gro off%s",
             p.name.c_str(), n, static_cast<unsigned>(p.mtu), when.c_str(),
             afp ? "On this af_packet port that is" : "On an af_packet port that is", iface.c_str(),
             afp ? "" : "; on a NIC, LRO; else a peer with a larger MTU");
    }
    if (const uint64_t n = due(p.malformed, counts[i].first, rx_delta, &when); n != 0) {
      CG_LOG(WARNING, dataplane,
             "%s: %" PRIu64 " malformed frames (truncated or inconsistent headers), %s; "
             "malformed policy: %s. %s GRO on the interface, whose merged segments are cut to "
             "the ring's frame size: ethtool -K %s gro off",
             p.name.c_str(), n, when.c_str(), opts_.drop_malformed ? "drop" : "pass",
             afp ? "On this af_packet port that is usually" : "On an af_packet port that is usually",
             iface.c_str());
    }
  }
}

void Engine::stop() {
  // release: everything the control lcore did before is visible to a worker
  // that observes the flag (pairs with the worker's acquire load).
  stop_.store(true, std::memory_order_release);
  if (running_) rte_eal_mp_wait_lcore();
  running_ = false;
}

StatsSnapshot Engine::totals() const {
  StatsSnapshot s;
  for (unsigned w = 0; w < opts_.workers && stats_ != nullptr; ++w) s.add(stats_[w]);
  for (const auto& wk : workers_) add_flow_stats(s, wk->flow_stats());
  return s;
}

StatsSnapshot Engine::worker_stats(unsigned w) const {
  StatsSnapshot s;
  if (stats_ != nullptr && w < opts_.workers) s.add(stats_[w]);
  if (w < workers_.size()) add_flow_stats(s, workers_[w]->flow_stats());
  return s;
}

double Engine::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

void Engine::stats_text(std::string& out) const {
  snapshot_lines(out, "", totals());
  // The control thread's own count (stats/info are its commands): exact at
  // once, where rules_ (telemetry's copy) is refreshed once per control tick.
  line(out, "rules", static_cast<uint64_t>(blocklist_->size()));
  line(out, "filter_load", blocklist_->filter().stats().load_factor);
  line(out, "uptime_s", seconds());
  for (unsigned w = 0; w < opts_.workers; ++w)
    snapshot_lines(out, "worker." + std::to_string(w) + ".", worker_stats(w));
}

void Engine::info_text(std::string& out) const {
  const FilterStats f = blocklist_->filter().stats();
  out += "version " CUCKOOGATE_VERSION "\n";
  line(out, "rules", static_cast<uint64_t>(blocklist_->size()));  // as in stats_text
  line(out, "capacity", static_cast<uint64_t>(blocklist_->capacity()));
  line(out, "workers", static_cast<uint64_t>(opts_.workers));
  out += std::string("verify ") + (opts_.verify ? "true" : "false") + "\n";
  out += std::string("malformed ") + (opts_.drop_malformed ? "drop" : "pass") + "\n";
  out += std::string("action ") + (opts_.reject ? "reject" : "drop") + "\n";
  out += std::string("reject_dns ") + (opts_.reject_nxdomain ? "nxdomain" : "refused") + "\n";
  line(out, "reject_rate", uint64_t{opts_.reject_rate});
  out += std::string("inspect_overflow ") + (opts_.inspect_overflow_drop ? "drop" : "pass") + "\n";
  out += std::string("quic ") + quic_mode_name(opts_.quic) + "\n";
  out += std::string("checksums ") + checksum_mode_name(opts_.checksums) + "\n";
  line(out, "flows_per_worker", opts_.flows);
  out += std::string("store.read_only ") + (blocklist_->store_read_only() ? "true" : "false") + "\n";
  line(out, "store.compaction_failures", blocklist_->compaction_failures());
  out += "store.compaction_error " + (blocklist_->compaction_error().empty() ? std::string("-")
                                                                             : blocklist_->compaction_error()) + "\n";
  // One key per line and no key that is also another's prefix: `info --json`
  // nests keys on '.', so "fragments" beside "fragments.datagrams" cannot be.
  out += std::string("fragments.reassemble ") + (opts_.fragments.reassemble ? "true" : "false") + "\n";
  line(out, "fragments.datagrams", uint64_t{opts_.fragments.datagrams});
  line(out, "fragments.fragments", uint64_t{opts_.fragments.fragments});
  line(out, "fragments.timeout_ms", uint64_t{opts_.fragments.timeout_ms});
  line(out, "filter.slots", f.capacity_slots);
  line(out, "filter.items", f.items);
  line(out, "filter.load_factor", f.load_factor);
  line(out, "filter.fingerprint_bits", static_cast<uint64_t>(f.fingerprint_bits));
  line(out, "filter.bytes", f.bytes);
  line(out, "filter.bits_per_item", f.bits_per_item);
  line(out, "filter.kicks", f.kicks);
  line(out, "filter.insert_failures", f.insert_failures);
  line(out, "filter.kcas_retries", f.kcas_retries);
  line(out, "exact.capacity", static_cast<uint64_t>(blocklist_->exact().capacity()));
  line(out, "exact.bytes", static_cast<uint64_t>(blocklist_->exact().memory_bytes()));
  line(out, "max_memory", static_cast<uint64_t>(blocklist_->max_memory()));
  line(out, "tables.bytes", static_cast<uint64_t>(blocklist_->table_bytes()));
  line(out, "tables.growths", blocklist_->growths());
  line(out, "tables.last_growth_ms", blocklist_->last_growth_ms());
  // Bytes per structure (docs/PERFORMANCE.md, "Memory per rule"): the
  // tables as allocated, the store's estimated from its allocations, hit
  // counters: the blocklist's slot arrays as committed, plus an upper bound
  // for the workers' (8 bytes per slot handed out, per worker; a worker's
  // page is committed only once one of its rules is hit).
  const Blocklist::MemoryUse m = blocklist_->memory_use();
  const uint64_t hits = m.hits + blocklist_->slots_used() * sizeof(uint64_t) * rule_hits_.size();
  const uint64_t total = m.filter + m.exact + m.store + m.ttl + m.prefixes + hits;
  line(out, "memory.filter", static_cast<uint64_t>(m.filter));
  line(out, "memory.exact", static_cast<uint64_t>(m.exact));
  line(out, "memory.store", static_cast<uint64_t>(m.store));
  line(out, "memory.ttl", static_cast<uint64_t>(m.ttl));
  line(out, "memory.prefixes", static_cast<uint64_t>(m.prefixes));
  line(out, "memory.hits", hits);
  line(out, "memory.total", total);
  const auto n = static_cast<uint64_t>(blocklist_->size());
  line(out, "memory.bytes_per_rule", n == 0 ? 0 : total / n);
}

void Engine::register_telemetry() {
  g_engine.store(this, std::memory_order_release);
  rte_telemetry_register_cmd("/cuckoogate/stats", tel_stats,
                             "Gateway packet counters (totals). No parameters.");
  rte_telemetry_register_cmd("/cuckoogate/info", tel_info,
                             "Blocklist and filter: rules, capacity, load, memory. No parameters.");
}

}  // namespace cg
