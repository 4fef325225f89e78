// flow_bench: the per-worker flow table (app/flow) against DPDK's rte_hash
// doing the same job, in ns per packet for lookup-or-insert.
//
//   meson setup build-hc-full -Dbuildtype=release && ninja -C build-hc-full bench/flow_bench
//   build-hc-full/bench/flow_bench [--runs 5] [--table 65536] [--json PATH]
//
// Scenarios (keys and packet order generated before any timed region):
//   hits   512 long-lived TCP flows (handshake done before timing), packets in
//          random order and direction, table of --table entries: every packet
//          a hit, all in cache.
//   flood  every packet a new UDP flow: --flood (1 M) distinct 5-tuples into a
//          table of --table entries already full of other flows, so every
//          packet evicts. Also: the cost of each tenth of the stream (flat?)
//          and the process's resident memory before and after (constant?).
//   large  --large (262144) flows in a table of twice as many entries,
//          random order: hits whose buckets are mostly not in cache.
// Variants: cg track (one call per packet), cg burst (track_burst, 32), and
// with DPDK: rte_hash in single-writer mode (no concurrency flags),
// rte_hash_lookup_with_hash then rte_hash_add_key_with_hash on a miss, the
// per-flow record (stamp, reply bit, verdict fields) in an array indexed by
// the key's position; a full table evicts the oldest insertion (FIFO: rte_hash
// has no per-bucket age), by rte_hash_del_key_with_hash. "rte_hash bulk" does
// the lookups of a burst with rte_hash_lookup_with_hash_bulk. rte_hash gets
// RTE_HASH_EXTRA_FLAGS_EXT_TABLE so that it can be kept full at all; "2x" is
// rte_hash bulk sized for twice the flows it is allowed to hold (FIFO limit
// unchanged), so that inserts rarely need a cuckoo path search. Both tables hash
// with seeded XXH3 (rte_hash gets its low 32 bits). "harness" is the loop
// alone (copying each packet's key into the burst array): it is inside every
// other figure. Every figure is the median of --runs runs, in ns of the
// thread's CPU time per packet (wall-clock ns alongside: on a shared machine
// the CPU time leaves out the time the benchmark was descheduled).
//
// Sample output: see docs/dataplane.md, "Flow table".
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "cuckoogate/flow/flow_table.hpp"

#if __has_include(<rte_hash.h>)
#define CG_BENCH_DPDK 1
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_malloc.h>
#endif

namespace {

using cg::flow::FlowPacket;
using cg::flow::FlowTable;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kBurst = 32;
constexpr uint64_t kHz = 1'000'000'000;    // the fake clock counts nanoseconds
constexpr uint64_t kTicksPerBurst = 3200;  // 32 packets at 10 Mpps
constexpr uint64_t kSeed = 0x0123456789abcdefull;

struct Options {
  int runs = 5;
  uint64_t table = 65536;
  uint64_t hit_packets = uint64_t{4} << 20;
  uint64_t flood = uint64_t{1} << 20;
  uint64_t large = 262144;
  std::string json;
  std::string only;  // run only "scenario/variant" names containing this
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

long resident_kib() {
  std::ifstream f("/proc/self/statm");
  long size = 0, rss = 0;
  f >> size >> rss;
  return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

// Flow n's packet from its client (reply = false) or server, distinct for
// every n < 2^32: the client address is a bijection of n.
FlowPacket packet(uint32_t n, bool reply, uint8_t proto, uint8_t tcp_flags) {
  const uint32_t a = n * 2654435761u;  // odd multiplier: a bijection
  const uint8_t client[4] = {static_cast<uint8_t>(a >> 24), static_cast<uint8_t>(a >> 16),
                             static_cast<uint8_t>(a >> 8), static_cast<uint8_t>(a)};
  const uint8_t server[4] = {192, 0, 2, static_cast<uint8_t>(1 + n % 7)};
  const auto cport = static_cast<uint16_t>(1024 + (n >> 7) % 60000);
  cg::flow::FlowTuple t;
  t.src = reply ? server : client;
  t.dst = reply ? client : server;
  t.sport = reply ? 443 : cport;
  t.dport = reply ? cport : 443;
  t.proto = proto;
  t.family = 4;
  FlowPacket p{};
  p.side = cg::flow::make_flow_key(t, p.key);
  p.tcp_flags = tcp_flags;
  return p;
}

// A stream of packets as indices into a small array of distinct packets
// (hits, large) or the packets themselves (flood).
struct Stream {
  std::vector<FlowPacket> packets;  // distinct packets
  std::vector<uint32_t> order;      // empty: packets in order, once each
  uint64_t size() const { return order.empty() ? packets.size() : order.size(); }
  const FlowPacket& at(uint64_t i) const { return order.empty() ? packets[i] : packets[order[i]]; }
};

// Both directions of `flows` established TCP flows, `count` packets in random order.
Stream established(uint32_t flows, uint64_t count, uint32_t first, std::mt19937_64& rng) {
  Stream s;
  for (uint32_t n = 0; n < flows; ++n) {
    s.packets.push_back(packet(first + n, false, cg::flow::kProtoTcp, cg::flow::kTcpAck));
    s.packets.push_back(packet(first + n, true, cg::flow::kProtoTcp, cg::flow::kTcpAck));
  }
  s.order.resize(count);
  for (uint32_t& o : s.order) o = static_cast<uint32_t>(rng() % s.packets.size());
  return s;
}

// CPU time of this thread in ns: on a shared machine it leaves out the time
// the benchmark was descheduled (cache effects of the others stay in).
double cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

struct Timing {
  double cpu = 0, wall = 0;  // ns per packet
};

// One pass of `s` through `process` in bursts. Fills `tenths` (if non-null)
// with the CPU ns per packet of each tenth of the stream.
template <typename Process>
Timing run_stream(const Stream& s, Process&& process, std::vector<double>* tenths = nullptr) {
  FlowPacket burst[kBurst];
  uint64_t now = kHz;  // 1 s
  const uint64_t n = s.size();
  const uint64_t tenth = std::max<uint64_t>(kBurst, n / 10 / kBurst * kBurst);
  const auto w0 = Clock::now();
  const double c0 = cpu_ns();
  double mark = c0;
  for (uint64_t base = 0; base < n; base += kBurst) {
    const uint32_t c = static_cast<uint32_t>(std::min<uint64_t>(kBurst, n - base));
    for (uint32_t j = 0; j < c; ++j) burst[j] = s.at(base + j);
    process(burst, c, now);
    now += kTicksPerBurst;
    if (tenths != nullptr && (base + kBurst) % tenth == 0 && base + kBurst <= 10 * tenth) {
      const double t = cpu_ns();
      tenths->push_back((t - mark) / static_cast<double>(tenth));
      mark = t;
    }
  }
  Timing r;
  r.cpu = (cpu_ns() - c0) / static_cast<double>(n);
  r.wall =
      std::chrono::duration<double, std::nano>(Clock::now() - w0).count() / static_cast<double>(n);
  return r;
}

// A flow table behind one interface, so every scenario runs every variant.
struct Variant {
  std::string name;
  std::function<bool(uint64_t capacity)> reset;  // fresh, empty table
  std::function<void(FlowPacket*, uint32_t, uint64_t)> process;
  std::function<std::size_t()> memory;  // bytes
  std::function<uint64_t()> evictions;
};

// ---- cuckoogate's flow table ----------------------------------------------

struct CgTable {
  FlowTable::Ptr t;
  cg::flow::FlowResult out[kBurst];
  uint64_t sink = 0;  // keeps the results alive for the optimiser

  bool reset(uint64_t capacity) {
    cg::flow::FlowTableConfig c;
    c.capacity = capacity;
    c.ticks_per_second = kHz;
    c.seed = kSeed;
    t.reset();
    t = FlowTable::create(c);
    return t != nullptr;
  }
  void single(FlowPacket* p, uint32_t n, uint64_t now) {
    for (uint32_t j = 0; j < n; ++j) {
      const cg::flow::FlowResult r = t->track(p[j].key, p[j].side, p[j].tcp_flags, now);
      r.entry->generation = now;  // what the worker does: touch the verdict fields
      sink += static_cast<uint64_t>(r.dir);
    }
  }
  void burst(FlowPacket* p, uint32_t n, uint64_t now) {
    t->track_burst(p, n, now, out);
    for (uint32_t j = 0; j < n; ++j) {
      if (out[j].entry != nullptr) out[j].entry->generation = now;
      sink += static_cast<uint64_t>(out[j].dir);
    }
  }
};

Variant cg_variant(CgTable& cg, bool burst) {
  Variant v;
  v.name = burst ? "cg burst" : "cg track";
  v.reset = [&cg](uint64_t cap) { return cg.reset(cap); };
  if (burst)
    v.process = [&cg](FlowPacket* p, uint32_t n, uint64_t now) { cg.burst(p, n, now); };
  else
    v.process = [&cg](FlowPacket* p, uint32_t n, uint64_t now) { cg.single(p, n, now); };
  v.memory = [&cg] { return cg.t->memory_bytes(); };
  v.evictions = [&cg] { return cg.t->stats().evicted; };
  return v;
}

// ---- rte_hash doing the same job --------------------------------------------

#if defined(CG_BENCH_DPDK)
// What the flow table keeps per flow besides the key, for rte_hash.
struct Record {
  uint32_t stamp;
  uint32_t sig;  // the key's hash, for rte_hash_del_key_with_hash
  uint8_t bits;  // initiator side, replied
  uint8_t pad[7];
  uint64_t generation;
  uint32_t next_seq[2];
  uint32_t rule_slot;
  uint8_t verdict, rule_kind, inspect, flags;
};
static_assert(sizeof(Record) == 40);

struct RteTable {
  static constexpr uint32_t kExpiryUnits = 30 * (kHz >> 19);  // 30 s in 2^19-ns units
  rte_hash* h = nullptr;
  std::vector<Record> rec;
  std::vector<int32_t> fifo;  // positions, oldest insertion first (ring)
  std::size_t head = 0, count = 0, capacity = 0;
  std::size_t hash_bytes = 0;
  uint64_t evicted = 0, sink = 0;
  int generation = 0;
  uint32_t headroom = 1;  // rte_hash sized for headroom * capacity entries

  ~RteTable() {
    if (h != nullptr) rte_hash_free(h);
  }
  static std::size_t heap_bytes() {
    rte_malloc_socket_stats st{};
    rte_malloc_get_socket_stats(0, &st);
    return st.heap_allocsz_bytes;
  }
  bool reset(uint64_t capacity) {
    if (h != nullptr) rte_hash_free(h);
    const std::string name = "flow_bench_" + std::to_string(generation++);
    rte_hash_parameters p{};
    p.name = name.c_str();
    p.entries = static_cast<uint32_t>(capacity * headroom);
    p.key_len = sizeof(cg::flow::FlowKey);
    p.hash_func = xxh3_sig;  // the calls pass the hash; get_key_with_position uses it
    p.socket_id = 0;
    // Single writer, no reader concurrency. Extendable buckets: without them
    // a cuckoo table cannot be kept 100 % full (an add after a delete elsewhere
    // searches cuckoo paths for microseconds and often fails).
    p.extra_flag = RTE_HASH_EXTRA_FLAGS_EXT_TABLE;
    const std::size_t before = heap_bytes();
    h = rte_hash_create(&p);
    if (h == nullptr) {
      std::fprintf(stderr, "rte_hash_create: %s\n", rte_strerror(rte_errno));
      return false;
    }
    hash_bytes = heap_bytes() - before;
    rec.assign(capacity * headroom + 64, Record{});  // indexed by position
    fifo.assign(capacity + 64, -1);
    head = count = 0;
    this->capacity = capacity;
    evicted = 0;
    return true;
  }
  static uint32_t xxh3_sig(const void* key, uint32_t len, uint32_t) {
    return static_cast<uint32_t>(XXH3_64bits_withSeed(key, len, kSeed));
  }
  static uint32_t sig_of(const cg::flow::FlowKey& k) { return xxh3_sig(&k, sizeof k, 0); }
  void hit(int32_t pos, const FlowPacket& p, uint64_t now) {
    Record& r = rec[static_cast<std::size_t>(pos)];
    const uint32_t t = static_cast<uint32_t>(now >> 19);
    if (t - r.stamp > kExpiryUnits) r.generation = 0;  // the lazy expiry check
    if ((static_cast<uint8_t>(p.side) ^ (r.bits & 1)) != 0) r.bits |= 2;
    r.stamp = t;
    r.generation = now;
    sink += r.bits;
  }
  // Deletes the oldest insertion. rte_hash_get_key_with_position checks the
  // position by a lookup with the table's hash function: hence xxh3_sig.
  void evict_oldest() {
    const int32_t victim = fifo[head];
    head = (head + 1) % fifo.size();
    --count;
    void* key = nullptr;
    if (victim >= 0 && rte_hash_get_key_with_position(h, victim, &key) == 0 &&
        rte_hash_del_key_with_hash(h, key, rec[static_cast<std::size_t>(victim)].sig) >= 0)
      ++evicted;
  }
  void insert(const FlowPacket& p, uint32_t sig, uint64_t now) {
    // Full: make room first (a failed add costs a whole cuckoo path search).
    if (count >= capacity) evict_oldest();
    int32_t pos = rte_hash_add_key_with_hash(h, &p.key, sig);
    for (int attempt = 0; attempt < 4 && pos < 0 && count > 0; ++attempt) {
      evict_oldest();  // no cuckoo path before full: room in another bucket
      pos = rte_hash_add_key_with_hash(h, &p.key, sig);
    }
    if (pos < 0) return;
    Record& r = rec[static_cast<std::size_t>(pos)];
    r = Record{};
    r.stamp = static_cast<uint32_t>(now >> 19);
    r.sig = sig;
    r.bits = static_cast<uint8_t>(p.side);
    r.generation = now;
    fifo[(head + count) % fifo.size()] = pos;
    ++count;
  }
  void single(FlowPacket* p, uint32_t n, uint64_t now) {
    for (uint32_t j = 0; j < n; ++j) {
      const uint32_t sig = sig_of(p[j].key);
      const int32_t pos = rte_hash_lookup_with_hash(h, &p[j].key, sig);
      if (pos >= 0)
        hit(pos, p[j], now);
      else
        insert(p[j], sig, now);
    }
  }
  void bulk(FlowPacket* p, uint32_t n, uint64_t now) {
    const void* keys[kBurst];
    hash_sig_t sigs[kBurst];
    int32_t pos[kBurst];
    for (uint32_t j = 0; j < n; ++j) {
      keys[j] = &p[j].key;
      sigs[j] = sig_of(p[j].key);
    }
    rte_hash_lookup_with_hash_bulk(h, keys, sigs, n, pos);
    for (uint32_t j = 0; j < n; ++j) {
      if (pos[j] >= 0) {
        hit(pos[j], p[j], now);
        continue;
      }
      // A packet earlier in this burst may have inserted the same flow.
      const int32_t again = rte_hash_lookup_with_hash(h, &p[j].key, sigs[j]);
      if (again >= 0)
        hit(again, p[j], now);
      else
        insert(p[j], sigs[j], now);
    }
  }
};

Variant rte_variant(RteTable& rt, bool bulk, uint32_t headroom) {
  Variant v;
  v.name = bulk ? "rte_hash bulk" : "rte_hash";
  if (headroom != 1) v.name += " " + std::to_string(headroom) + "x";
  v.reset = [&rt, headroom](uint64_t cap) {
    rt.headroom = headroom;
    return rt.reset(cap);
  };
  if (bulk)
    v.process = [&rt](FlowPacket* p, uint32_t n, uint64_t now) { rt.bulk(p, n, now); };
  else
    v.process = [&rt](FlowPacket* p, uint32_t n, uint64_t now) { rt.single(p, n, now); };
  v.memory = [&rt] { return rt.hash_bytes + rt.rec.size() * sizeof(Record) + rt.fifo.size() * 4; };
  v.evictions = [&rt] { return rt.evicted; };
  return v;
}
#endif

Variant harness_variant() {
  Variant v;
  v.name = "harness";
  v.reset = [](uint64_t) { return true; };
  v.process = [](FlowPacket*, uint32_t, uint64_t) {};
  v.memory = [] { return std::size_t{0}; };
  v.evictions = [] { return uint64_t{0}; };
  return v;
}

struct Row {
  std::string scenario, variant;
  double ns = 0, wall_ns = 0;
  double bytes_per_entry = 0;
  double tenth_min = 0, tenth_max = 0;
  long rss_growth_kib = 0;
  uint64_t evictions = 0;
};

void print_row(const Row& r) {
  std::printf("  %-6s %-14s %8.2f ns/pkt (wall %7.2f)  %6.1f B/entry", r.scenario.c_str(),
              r.variant.c_str(), r.ns, r.wall_ns, r.bytes_per_entry);
  if (r.scenario == "flood" && r.variant != "harness")
    std::printf("  tenths %.1f..%.1f ns  rss +%ld KiB  evictions %llu", r.tenth_min, r.tenth_max,
                r.rss_growth_kib, static_cast<unsigned long long>(r.evictions));
  std::printf("\n");
  std::fflush(stdout);
}

// Runs `v` over `timed` --runs times, each on a fresh table of `capacity`
// filled with `warm` first (untimed).
Row measure(const Options& o, const char* scenario, Variant& v, uint64_t capacity,
            const Stream& warm, const Stream& timed) {
  Row row;
  row.scenario = scenario;
  row.variant = v.name;
  if ((row.scenario + "/" + row.variant).find(o.only) == std::string::npos) return row;
  std::vector<double> ns, wall, tmin, tmax;
  std::vector<long> growth;
  for (int run = 0; run < o.runs; ++run) {
    if (!v.reset(capacity)) return row;
    run_stream(warm, v.process);
    const uint64_t ev0 = v.evictions();
    std::vector<double> tenths;
    const long rss0 = resident_kib();
    const Timing t = run_stream(timed, v.process, &tenths);
    ns.push_back(t.cpu);
    wall.push_back(t.wall);
    growth.push_back(resident_kib() - rss0);
    row.evictions = v.evictions() - ev0;
    if (!tenths.empty()) {
      tmin.push_back(*std::min_element(tenths.begin(), tenths.end()));
      tmax.push_back(*std::max_element(tenths.begin(), tenths.end()));
    }
  }
  row.ns = median(ns);
  row.wall_ns = median(wall);
  row.tenth_min = median(tmin);
  row.tenth_max = median(tmax);
  row.rss_growth_kib = *std::max_element(growth.begin(), growth.end());
  row.bytes_per_entry = static_cast<double>(v.memory()) / static_cast<double>(capacity);
  print_row(row);
  return row;
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--runs" && (v = next()))
      o.runs = std::max(1, std::atoi(v));
    else if (a == "--table" && (v = next()))
      o.table = std::strtoull(v, nullptr, 0);
    else if (a == "--hit-packets" && (v = next()))
      o.hit_packets = std::strtoull(v, nullptr, 0);
    else if (a == "--flood" && (v = next()))
      o.flood = std::strtoull(v, nullptr, 0);
    else if (a == "--large" && (v = next()))
      o.large = std::strtoull(v, nullptr, 0);
    else if (a == "--json" && (v = next()))
      o.json = v;
    else if (a == "--only" && (v = next()))
      o.only = v;
    else {
      std::fprintf(stderr,
                   "usage: %s [--runs R] [--table N] [--hit-packets N] [--flood N] [--large N] "
                   "[--json PATH] [--only SCENARIO/VARIANT]\n",
                   argv[0]);
      return false;
    }
  }
  // The table must be a power of two (both tables then have exactly this capacity).
  return o.table >= 1024 && (o.table & (o.table - 1)) == 0 && o.flood >= 1024 && o.large >= 1024;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) return 2;
#if defined(CG_NOT_RELEASE_BUILD)
  std::fprintf(stderr,
               "\n*** WARNING: flow_bench was built without optimisation (buildtype != release).\n"
               "*** Its numbers mean nothing. Use: meson setup -Dbuildtype=release ...\n\n");
#endif
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(std::max(0, sched_getcpu()), &set);
  sched_setaffinity(0, sizeof set, &set);

  bool have_dpdk = false;
#if defined(CG_BENCH_DPDK)
  const std::string prefix = "flow-bench-" + std::to_string(getpid());
  const std::string prefix_arg = "--file-prefix=" + prefix;
  const char* eal_args[] = {
      "flow_bench", "--no-huge", "--no-pci",         "--no-shconf",
      "-m",         "512",       prefix_arg.c_str(), "--log-level=lib.eal:error"};
  std::vector<char*> eal_argv;
  for (const char* s : eal_args) eal_argv.push_back(const_cast<char*>(s));
  if (rte_eal_init(static_cast<int>(eal_argv.size()), eal_argv.data()) < 0)
    std::fprintf(stderr, "rte_eal_init failed (%s): rte_hash is skipped\n",
                 rte_strerror(rte_errno));
  else
    have_dpdk = true;
  sched_setaffinity(0, sizeof set, &set);  // EAL pinned us to its first lcore; keep ours
#endif

  std::mt19937_64 rng(42);
  // hits: 512 flows; warm-up = their handshakes.
  Stream hits = established(512, o.hit_packets, 0, rng);
  Stream hits_warm;
  for (uint32_t n = 0; n < 512; ++n) {
    hits_warm.packets.push_back(packet(n, false, cg::flow::kProtoTcp, cg::flow::kTcpSyn));
    hits_warm.packets.push_back(
        packet(n, true, cg::flow::kProtoTcp, cg::flow::kTcpSyn | cg::flow::kTcpAck));
  }
  // flood: fill the table with other flows first, then o.flood new ones.
  Stream flood_warm, flood;
  for (uint64_t n = 0; n < o.table; ++n)
    flood_warm.packets.push_back(packet(static_cast<uint32_t>(n), false, cg::flow::kProtoUdp, 0));
  for (uint64_t n = 0; n < o.flood; ++n)
    flood.packets.push_back(
        packet(static_cast<uint32_t>(o.table + n), false, cg::flow::kProtoUdp, 0));
  // large: o.large flows in a table of 2 * o.large (rounded to a power of two).
  uint64_t large_cap = 1;
  while (large_cap < 2 * o.large) large_cap <<= 1;
  const uint32_t large_first = static_cast<uint32_t>(o.table + o.flood);
  Stream large = established(static_cast<uint32_t>(o.large), o.hit_packets, large_first, rng);
  Stream large_warm;
  for (uint32_t n = 0; n < o.large; ++n) {
    large_warm.packets.push_back(
        packet(large_first + n, false, cg::flow::kProtoTcp, cg::flow::kTcpSyn));
    large_warm.packets.push_back(
        packet(large_first + n, true, cg::flow::kProtoTcp, cg::flow::kTcpSyn | cg::flow::kTcpAck));
  }

  std::printf(
      "flow_bench: median of %d runs; hits: 512 flows, %llu packets, table %llu; "
      "flood: %llu new flows, table %llu (full); large: %llu flows, table %llu\n",
      o.runs, static_cast<unsigned long long>(o.hit_packets),
      static_cast<unsigned long long>(o.table), static_cast<unsigned long long>(o.flood),
      static_cast<unsigned long long>(o.table), static_cast<unsigned long long>(o.large),
      static_cast<unsigned long long>(large_cap));

  CgTable cg;
  std::vector<Variant> variants = {harness_variant(), cg_variant(cg, false), cg_variant(cg, true)};
#if defined(CG_BENCH_DPDK)
  RteTable rt;
  if (have_dpdk) {
    variants.push_back(rte_variant(rt, false, 1));
    variants.push_back(rte_variant(rt, true, 1));
    variants.push_back(rte_variant(rt, true, 2));
  }
#endif
  std::vector<Row> rows;
  for (Variant& v : variants) rows.push_back(measure(o, "hits", v, o.table, hits_warm, hits));
  for (Variant& v : variants) rows.push_back(measure(o, "flood", v, o.table, flood_warm, flood));
  for (Variant& v : variants) rows.push_back(measure(o, "large", v, large_cap, large_warm, large));
  std::printf("(sink %llu)\n", static_cast<unsigned long long>(cg.sink));

#if defined(CG_BENCH_DPDK)
  if (have_dpdk) {
    rte_hash_free(rt.h);  // before EAL goes
    rt.h = nullptr;
    const std::string dir = rte_eal_get_runtime_dir();
    rte_eal_cleanup();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);  // our own prefix: /var/run/dpdk/flow-bench-<pid>
  }
#endif

  if (!o.json.empty()) {
    nlohmann::json j;
    j["runs"] = o.runs;
    j["release_build"] =
#if defined(CG_NOT_RELEASE_BUILD)
        false;
#else
        true;
#endif
    j["rte_hash"] = have_dpdk;
    for (const Row& r : rows) {
      if (r.ns == 0) continue;  // not run (--only)
      nlohmann::json& x = j[r.scenario][r.variant];
      x["ns_per_packet"] = r.ns;
      x["wall_ns_per_packet"] = r.wall_ns;
      x["bytes_per_entry"] = r.bytes_per_entry;
      if (r.scenario == "flood") {
        x["tenth_ns_min"] = r.tenth_min;
        x["tenth_ns_max"] = r.tenth_max;
        x["rss_growth_kib"] = r.rss_growth_kib;
        x["evictions"] = r.evictions;
      }
    }
    std::ofstream(o.json) << j.dump(2) << "\n";
  }
  return 0;
}
