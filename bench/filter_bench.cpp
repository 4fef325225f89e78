// filter_bench: lookups and inserts of the lock-free cuckoo filter against DPDK
// rte_hash (lock-free reader mode), a lock-striped filter of the same layout and
// the same layout without concurrency control. See bench/README.md.
//
//   build-filter/bench/filter_bench [--slots N] [--load F] [--runs R]
//                                   [--lookups N] [--seed S] [--json PATH]
//
// One process, same keys for every structure. Lookups run on CPU 0, the churning
// writer (erase one key + insert another, full speed) on CPU 1. Each figure is
// the median of --runs runs, in millions of operations per second.
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuckoogate/baseline/locked_filter.hpp"
#include "cuckoogate/baseline/sequential_filter.hpp"
#include "cuckoogate/cuckoo_filter.hpp"

#if __has_include(<rte_hash.h>)
#define CG_BENCH_DPDK 1
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_lcore.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::size_t slots = std::size_t{4} << 20;
  double load = 0.95;
  int runs = 5;
  std::size_t lookups = std::size_t{1} << 22;  // per run
  std::uint64_t seed = 42;
  std::string json;
};

std::uint64_t splitmix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu % std::max(1, static_cast<int>(std::thread::hardware_concurrency())), &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// CPU time of the calling thread: the rate per CPU-second discounts the time the
// lookup thread was descheduled (this machine is shared), not cache effects.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double mops(std::size_t ops, Clock::duration d) {
  return static_cast<double>(ops) / std::chrono::duration<double>(d).count() / 1e6;
}

// The key sets, generated once, outside every timed region.
struct Keys {
  std::vector<std::uint64_t> stable;  // present all the time
  std::vector<std::uint64_t> pool;    // churn pool: half present at any time
  std::vector<std::uint64_t> absent;  // never inserted
  std::vector<std::uint64_t> mix[3];  // lookup streams at 0%, 50%, 100% hits
  std::vector<std::uint8_t> present[3];
  std::size_t churn_present = 0;
};

Keys make_keys(const Options& o, std::size_t capacity) {
  Keys k;
  std::uint64_t s = o.seed;
  const std::size_t fill = static_cast<std::size_t>(static_cast<double>(capacity) * o.load);
  k.churn_present = std::min<std::size_t>(65536, fill / 8);
  k.stable.resize(fill - k.churn_present);
  for (auto& x : k.stable) x = splitmix(s);
  k.pool.resize(2 * k.churn_present);
  for (auto& x : k.pool) x = splitmix(s);
  k.absent.resize(o.lookups);
  for (auto& x : k.absent) x = splitmix(s);
  const int pct[3] = {0, 50, 100};
  for (int m = 0; m < 3; ++m) {
    k.mix[m].resize(o.lookups);
    k.present[m].resize(o.lookups);
    for (std::size_t i = 0; i < o.lookups; ++i) {
      const bool hit = static_cast<int>(splitmix(s) % 100) < pct[m];
      k.present[m][i] = hit;
      k.mix[m][i] = hit ? k.stable[splitmix(s) % k.stable.size()] : k.absent[i];
    }
  }
  return k;
}

// Runs writer_step in a loop on CPU 1 while body() runs here; returns writer ops/s.
template <class Step, class Body>
double with_churn(Step&& writer_step, Body&& body) {
  std::atomic<bool> stop{false}, started{false};
  std::uint64_t steps = 0;
  Clock::duration wd{};
  std::thread w([&] {
    pin_to_cpu(1);
    started.store(true, std::memory_order_release);
    const auto t0 = Clock::now();
    std::uint64_t n = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      writer_step(n);
      ++n;
    }
    wd = Clock::now() - t0;
    steps = n;
  });
  while (!started.load(std::memory_order_acquire)) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  body();
  stop.store(true, std::memory_order_relaxed);
  w.join();
  return mops(steps, wd);
}

struct Results {
  std::map<std::string, double> v;
  std::uint64_t false_negatives = 0;
  void set(const std::string& k, double x) { v[k] = x; }
};

// Median bulk-lookup rate over o.runs runs of stream m; counts misses of present keys.
template <class F>
double time_bulk(const Options& o, const Keys& k, int m, F&& bulk, std::uint64_t* fn, double* per_cpu = nullptr) {
  std::vector<std::uint64_t> mask((o.lookups + 63) / 64);
  std::vector<double> r, rc;
  for (int run = 0; run < o.runs; ++run) {
    const double c0 = thread_cpu_seconds();
    const auto t0 = Clock::now();
    bulk(k.mix[m].data(), o.lookups, mask.data());
    r.push_back(mops(o.lookups, Clock::now() - t0));
    rc.push_back(static_cast<double>(o.lookups) / (thread_cpu_seconds() - c0) / 1e6);
    if (fn != nullptr)
      for (std::size_t i = 0; i < o.lookups; ++i)
        *fn += k.present[m][i] && ((mask[i / 64] >> (i % 64)) & 1) == 0;
  }
  if (per_cpu != nullptr) *per_cpu = median(rc);
  return median(r);
}

template <class F>
double time_single(const Options& o, const Keys& k, int m, F&& one, std::uint64_t* fn) {
  std::vector<double> r;
  for (int run = 0; run < o.runs; ++run) {
    std::uint64_t hits = 0, miss_present = 0;
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < o.lookups; ++i) {
      const bool h = one(k.mix[m][i]);
      hits += h;
      miss_present += (!h && k.present[m][i]) ? 1 : 0;
    }
    r.push_back(mops(o.lookups, Clock::now() - t0));
    if (fn != nullptr) *fn += miss_present;
    if (hits == ~0ull) std::puts("");  // keep the loop observable
  }
  return median(r);
}

// Churn over the pool: step n erases one present pool key and inserts one absent
// one, keeping the load constant. present[] guards against erasing a key whose
// insert failed (an erase of an absent key could remove another key's fingerprint).
struct Churn {
  const Keys& k;
  std::vector<std::uint8_t> present;
  explicit Churn(const Keys& keys) : k(keys), present(keys.pool.size(), 0) {
    std::fill(present.begin(), present.begin() + static_cast<std::ptrdiff_t>(k.churn_present), 1);
  }
  template <class Erase, class Insert>
  void step(std::uint64_t n, Erase&& erase, Insert&& insert) {
    const std::size_t out = n % k.pool.size(), in = (n + k.churn_present) % k.pool.size();
    if (present[out]) {
      erase(k.pool[out]);
      present[out] = 0;
    }
    if (!present[in]) present[in] = insert(k.pool[in]);
  }
};

void bench_cuckoo(const Options& o, const Keys& k, Results& res) {
  using Filter = cg::DefaultFilter;
  std::vector<double> ins;
  std::unique_ptr<Filter> f;
  std::uint64_t fails = 0;
  for (int run = 0; run < std::min(o.runs, 3); ++run) {
    f = Filter::create(o.slots, cg::heap_allocator(), o.seed);
    const auto t0 = Clock::now();
    for (std::uint64_t x : k.stable) fails += f->insert(x) != cg::InsertResult::kOk;
    for (std::size_t i = 0; i < k.churn_present; ++i) fails += f->insert(k.pool[i]) != cg::InsertResult::kOk;
    ins.push_back(mops(k.stable.size() + k.churn_present, Clock::now() - t0));
  }
  res.set("cuckoo_insert", median(ins));
  res.set("cuckoo_insert_failures", static_cast<double>(fails));
  const cg::FilterStats st = f->stats();
  res.set("load_factor", st.load_factor);
  res.set("bits_per_item", st.bits_per_item);
  res.set("slots", static_cast<double>(st.capacity_slots));
  res.set("cuckoo_kicks_during_fill", static_cast<double>(st.kicks));

  auto bulk = [&](const std::uint64_t* h, std::size_t n, std::uint64_t* m) { f->contains_bulk(h, n, m); };
  auto one = [&](std::uint64_t h) { return f->contains(h); };
  std::uint64_t* fn = &res.false_negatives;
  res.set("cuckoo_bulk_lookup_0hit", time_bulk(o, k, 0, bulk, fn));
  double cpu = 0;
  res.set("cuckoo_bulk_lookup", time_bulk(o, k, 1, bulk, fn, &cpu));
  res.set("cuckoo_bulk_lookup_per_cpu_second", cpu);
  res.set("cuckoo_bulk_lookup_100hit", time_bulk(o, k, 2, bulk, fn));
  res.set("cuckoo_lookup", time_single(o, k, 1, one, fn));

  // Measured false-positive rate over the absent keys.
  std::uint64_t fp = 0;
  for (std::uint64_t x : k.absent) fp += f->contains(x);
  res.set("fpr", static_cast<double>(fp) / static_cast<double>(k.absent.size()));

  Churn churn(k);
  cg::kcas::register_thread();
  double c0 = 0, c1 = 0, c2 = 0, cs = 0, c1cpu = 0;
  const cg::FilterStats before = f->stats();
  const double wr = with_churn(
      [&](std::uint64_t n) {
        churn.step(n, [&](std::uint64_t x) { f->erase(x); },
                   [&](std::uint64_t x) { return f->insert(x) == cg::InsertResult::kOk; });
      },
      [&] {
        c1 = time_bulk(o, k, 1, bulk, fn, &c1cpu);
        c0 = time_bulk(o, k, 0, bulk, fn);
        c2 = time_bulk(o, k, 2, bulk, fn);
        cs = time_single(o, k, 1, one, fn);
      });
  const cg::FilterStats after = f->stats();
  res.set("cuckoo_bulk_lookup_churn", c1);
  res.set("cuckoo_bulk_lookup_churn_per_cpu_second", c1cpu);
  res.set("cuckoo_bulk_lookup_churn_0hit", c0);
  res.set("cuckoo_bulk_lookup_churn_100hit", c2);
  res.set("cuckoo_lookup_churn", cs);
  res.set("cuckoo_churn_writer", wr);
  res.set("cuckoo_churn_kicks", static_cast<double>(after.kicks - before.kicks));
  res.set("cuckoo_churn_insert_failures", static_cast<double>(after.insert_failures - before.insert_failures));
}

void bench_sequential(const Options& o, const Keys& k, Results& res) {
  cg::baseline::SequentialFilter<12> f(o.slots);
  for (std::uint64_t x : k.stable) f.insert(x);
  for (std::size_t i = 0; i < k.churn_present; ++i) f.insert(k.pool[i]);
  auto bulk = [&](const std::uint64_t* h, std::size_t n, std::uint64_t* m) { f.contains_bulk(h, n, m); };
  res.set("sequential_bulk_lookup_0hit", time_bulk(o, k, 0, bulk, nullptr));
  res.set("sequential_bulk_lookup", time_bulk(o, k, 1, bulk, nullptr));
  res.set("sequential_bulk_lookup_100hit", time_bulk(o, k, 2, bulk, nullptr));
}

void bench_locked(const Options& o, const Keys& k, Results& res) {
  cg::baseline::LockedFilter<12> f(o.slots);
  for (std::uint64_t x : k.stable) f.insert(x);
  for (std::size_t i = 0; i < k.churn_present; ++i) f.insert(k.pool[i]);
  auto bulk = [&](const std::uint64_t* h, std::size_t n, std::uint64_t* m) { f.contains_bulk(h, n, m); };
  res.set("locked_lookup", time_bulk(o, k, 1, bulk, nullptr));
  Churn churn(k);
  double c = 0;
  const double wr = with_churn(
      [&](std::uint64_t n) {
        churn.step(n, [&](std::uint64_t x) { f.erase(x); }, [&](std::uint64_t x) { return f.insert(x); });
      },
      [&] { c = time_bulk(o, k, 1, bulk, nullptr); });
  res.set("locked_lookup_churn", c);
  res.set("locked_churn_writer", wr);
}

#if defined(CG_BENCH_DPDK)
// The keys are already uniform 64-bit hashes: rte_hash gets them folded to 32
// bits, as our filter gets them as they are.
std::uint32_t fold_hash(const void* key, std::uint32_t, std::uint32_t) {
  std::uint64_t x;
  std::memcpy(&x, key, sizeof(x));
  return static_cast<std::uint32_t>(x ^ (x >> 32));
}

rte_hash* make_rte_hash(std::size_t entries, int id) {
  char name[32];
  std::snprintf(name, sizeof(name), "fb%d", id);
  rte_hash_parameters p{};
  p.name = name;
  p.entries = static_cast<std::uint32_t>(entries);
  p.key_len = sizeof(std::uint64_t);
  p.hash_func = fold_hash;
  p.hash_func_init_val = 0;
  p.socket_id = 0;
  p.extra_flag = RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF;
  return rte_hash_create(&p);
}

bool bench_rte_hash(const Options& o, const Keys& k, Results& res) {
  std::vector<double> ins;
  rte_hash* h = nullptr;
  std::uint64_t fails = 0;
  for (int run = 0; run < std::min(o.runs, 3); ++run) {
    if (h != nullptr) rte_hash_free(h);
    h = make_rte_hash(o.slots, run);
    if (h == nullptr) {
      std::fprintf(stderr, "rte_hash_create failed: %s\n", rte_strerror(rte_errno));
      return false;
    }
    const auto t0 = Clock::now();
    for (const std::uint64_t& x : k.stable) fails += rte_hash_add_key(h, &x) < 0;
    for (std::size_t i = 0; i < k.churn_present; ++i) fails += rte_hash_add_key(h, &k.pool[i]) < 0;
    ins.push_back(mops(k.stable.size() + k.churn_present, Clock::now() - t0));
  }
  res.set("rte_hash_insert", median(ins));
  res.set("rte_hash_insert_failures", static_cast<double>(fails));

  // rte_hash_lookup_bulk takes key pointers; built outside the timed region.
  std::vector<const void*> ptrs[3];
  for (int m = 0; m < 3; ++m) {
    ptrs[m].resize(o.lookups);
    for (std::size_t i = 0; i < o.lookups; ++i) ptrs[m][i] = &k.mix[m][i];
  }
  auto bulk_of = [&](int m) {
    return [&, m](const std::uint64_t*, std::size_t n, std::uint64_t* mask) {
      std::int32_t pos[RTE_HASH_LOOKUP_BULK_MAX];
      for (std::size_t b = 0; b < n; b += RTE_HASH_LOOKUP_BULK_MAX) {
        const unsigned c = static_cast<unsigned>(std::min<std::size_t>(RTE_HASH_LOOKUP_BULK_MAX, n - b));
        rte_hash_lookup_bulk(h, &ptrs[m][b], c, pos);
        std::uint64_t bits = 0;
        for (unsigned j = 0; j < c; ++j) bits |= std::uint64_t{pos[j] >= 0} << j;
        mask[b / 64] = bits;
      }
    };
  };
  auto one = [&](std::uint64_t x) { return rte_hash_lookup(h, &x) >= 0; };
  res.set("rte_hash_bulk_lookup_0hit", time_bulk(o, k, 0, bulk_of(0), nullptr));
  res.set("rte_hash_bulk_lookup", time_bulk(o, k, 1, bulk_of(1), nullptr));
  res.set("rte_hash_bulk_lookup_100hit", time_bulk(o, k, 2, bulk_of(2), nullptr));
  res.set("rte_hash_lookup", time_single(o, k, 1, one, nullptr));

  // Churn: with RW_CONCURRENCY_LF a deleted key's slot is not freed by
  // rte_hash_del_key; the writer frees it at once (no RCU), which is only safe
  // here because readers never look up churn keys.
  Churn churn(k);
  double c = 0, cs = 0;
  const double wr = with_churn(
      [&](std::uint64_t n) {
        churn.step(
            n,
            [&](std::uint64_t x) {
              const std::int32_t pos = rte_hash_del_key(h, &x);
              if (pos >= 0) rte_hash_free_key_with_position(h, pos);
            },
            [&](std::uint64_t x) { return rte_hash_add_key(h, &x) >= 0; });
      },
      [&] {
        c = time_bulk(o, k, 1, bulk_of(1), nullptr);
        cs = time_single(o, k, 1, one, nullptr);
      });
  res.set("rte_hash_bulk_lookup_churn", c);
  res.set("rte_hash_lookup_churn", cs);
  res.set("rte_hash_churn_writer", wr);
  rte_hash_free(h);
  return true;
}
#endif

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--json" && (v = next())) o.json = v;
    else if (a == "--slots" && (v = next())) o.slots = std::strtoull(v, nullptr, 0);
    else if (a == "--load" && (v = next())) o.load = std::strtod(v, nullptr);
    else if (a == "--runs" && (v = next())) o.runs = std::max(1, std::atoi(v));
    else if (a == "--lookups" && (v = next())) o.lookups = std::strtoull(v, nullptr, 0);
    else if (a == "--seed" && (v = next())) o.seed = std::strtoull(v, nullptr, 0);
    else {
      std::fprintf(stderr,
                   "usage: %s [--slots N] [--load F] [--runs R] [--lookups N] [--seed S] [--json PATH]\n",
                   argv[0]);
      return false;
    }
  }
  o.lookups = std::max<std::size_t>(64, o.lookups / 64 * 64);
  return o.load > 0 && o.load < 1 && o.slots >= 1024;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) return 2;
#if defined(CG_NOT_RELEASE_BUILD)
  std::fprintf(stderr,
               "\n*** WARNING: filter_bench was built without optimisation (buildtype != release).\n"
               "*** Its numbers mean nothing. Use: meson setup build-filter && ninja -C build-filter\n\n");
#endif
  bool have_dpdk = false;
#if defined(CG_BENCH_DPDK)
  const std::string prefix = "--file-prefix=filter-bench-" + std::to_string(getpid());
  const char* eal_args[] = {"filter_bench", "--no-huge", "--no-pci", "--no-shconf", "-m", "1024",
                            prefix.c_str(), "-l", "0", "--log-level=lib.eal:error"};
  std::vector<char*> eal_argv;
  for (const char* s : eal_args) eal_argv.push_back(const_cast<char*>(s));
  if (rte_eal_init(static_cast<int>(eal_argv.size()), eal_argv.data()) < 0)
    std::fprintf(stderr, "rte_eal_init failed (%s): rte_hash is skipped\n", rte_strerror(rte_errno));
  else
    have_dpdk = true;
#endif
  pin_to_cpu(0);

  const std::size_t capacity = cg::DefaultFilter::create(o.slots)->capacity();
  o.slots = capacity;
  const Keys keys = make_keys(o, capacity);
  Results res;
  bench_cuckoo(o, keys, res);
  bench_sequential(o, keys, res);
  bench_locked(o, keys, res);
#if defined(CG_BENCH_DPDK)
  if (have_dpdk && !bench_rte_hash(o, keys, res)) have_dpdk = false;
#endif
  auto& v = res.v;
  v["false_negatives"] = static_cast<double>(res.false_negatives);
  auto ratio = [&](const char* a, const char* b) { return v.count(a) && v.count(b) && v[b] > 0 ? v[a] / v[b] : 0.0; };

  std::printf("filter_bench: %zu slots, load %.3f, %zu lookups per run, median of %d runs, hits 50%% unless "
              "noted, M ops/s\n",
              o.slots, v["load_factor"], o.lookups, o.runs);
  const char* rows[][2] = {
      {"cuckoo_bulk_lookup_0hit", "lock-free filter, bulk, 0% hits"},
      {"cuckoo_bulk_lookup", "lock-free filter, bulk"},
      {"cuckoo_bulk_lookup_100hit", "lock-free filter, bulk, 100% hits"},
      {"cuckoo_lookup", "lock-free filter, single"},
      {"cuckoo_bulk_lookup_churn_0hit", "lock-free filter, bulk, 0% hits, churn"},
      {"cuckoo_bulk_lookup_churn", "lock-free filter, bulk, churn"},
      {"cuckoo_bulk_lookup_churn_100hit", "lock-free filter, bulk, 100% hits, churn"},
      {"cuckoo_lookup_churn", "lock-free filter, single, churn"},
      {"cuckoo_bulk_lookup_per_cpu_second", "lock-free filter, bulk, per CPU-second"},
      {"cuckoo_bulk_lookup_churn_per_cpu_second", "lock-free filter, bulk, churn, per CPU-second"},
      {"cuckoo_churn_writer", "  churn writer (erase+insert pairs)"},
      {"sequential_bulk_lookup_0hit", "no-CC filter, bulk, 0% hits"},
      {"sequential_bulk_lookup", "no-CC filter, bulk"},
      {"sequential_bulk_lookup_100hit", "no-CC filter, bulk, 100% hits"},
      {"locked_lookup", "lock-striped filter, bulk"},
      {"locked_lookup_churn", "lock-striped filter, bulk, churn"},
      {"locked_churn_writer", "  churn writer (erase+insert pairs)"},
      {"rte_hash_bulk_lookup_0hit", "rte_hash LF, bulk, 0% hits"},
      {"rte_hash_bulk_lookup", "rte_hash LF, bulk"},
      {"rte_hash_bulk_lookup_100hit", "rte_hash LF, bulk, 100% hits"},
      {"rte_hash_lookup", "rte_hash LF, single"},
      {"rte_hash_bulk_lookup_churn", "rte_hash LF, bulk, churn"},
      {"rte_hash_lookup_churn", "rte_hash LF, single, churn"},
      {"rte_hash_churn_writer", "  churn writer (del+free+add pairs)"},
      {"cuckoo_insert", "lock-free filter, insert to load"},
      {"rte_hash_insert", "rte_hash LF, add to load"},
  };
  for (const auto& r : rows)
    if (v.count(r[0])) std::printf("  %-44s %8.2f   %s\n", r[1], v[r[0]], r[0]);
  std::printf("  fpr %.5f, bits/item %.2f, false negatives %llu, insert failures: filter %.0f, rte_hash %.0f\n",
              v["fpr"], v["bits_per_item"], static_cast<unsigned long long>(res.false_negatives),
              v["cuckoo_insert_failures"], v.count("rte_hash_insert_failures") ? v["rte_hash_insert_failures"] : -1.0);
  struct Target {
    const char* name;
    double got, want;
  } targets[] = {
      {"bulk vs rte_hash bulk", ratio("cuckoo_bulk_lookup", "rte_hash_bulk_lookup"), 2.0},
      {"bulk vs sequential ceiling", ratio("cuckoo_bulk_lookup", "sequential_bulk_lookup"), 0.9},
      {"bulk with churn vs without", ratio("cuckoo_bulk_lookup_churn", "cuckoo_bulk_lookup"), 0.85},
      {"  same, per CPU-second", ratio("cuckoo_bulk_lookup_churn_per_cpu_second", "cuckoo_bulk_lookup_per_cpu_second"), 0.85},
      {"churn: vs lock-striped filter", ratio("cuckoo_bulk_lookup_churn", "locked_lookup_churn"), 1.5},
      {"insert vs rte_hash add", ratio("cuckoo_insert", "rte_hash_insert"), 1.0},
  };
  nlohmann::json ratios;
  std::printf("targets:\n");
  for (const auto& t : targets) {
    std::printf("  %-32s %6.2fx (target >= %.2fx) %s\n", t.name, t.got, t.want,
                t.got == 0 ? "n/a" : (t.got >= t.want ? "met" : "MISSED"));
    ratios[t.name] = t.got;
  }
  if (res.false_negatives != 0) std::printf("  FALSE NEGATIVES: %llu\n", static_cast<unsigned long long>(res.false_negatives));
#if defined(CG_BENCH_DPDK)
  if (have_dpdk) {  // every rte_hash is gone by now
    const std::string dir = rte_eal_get_runtime_dir();
    rte_eal_cleanup();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);  // our own prefix: /var/run/dpdk/filter-bench-<pid>
  }
#endif

  if (!o.json.empty()) {
    nlohmann::json j;
    for (const auto& [key, x] : v) j[key] = x;
    j["slots"] = static_cast<std::uint64_t>(o.slots);
    j["false_negatives"] = res.false_negatives;
    j["runs"] = o.runs;
    j["lookups_per_run"] = static_cast<std::uint64_t>(o.lookups);
    j["hit_rate_of_headline_lookups"] = 0.5;
    j["rte_hash"] = have_dpdk;
    j["ratios"] = ratios;
#if defined(CG_NOT_RELEASE_BUILD)
    j["release_build"] = false;
#else
    j["release_build"] = true;
#endif
    j["cpus"] = std::thread::hardware_concurrency();
    std::ofstream out(o.json);
    out << j.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", o.json.c_str());
      return 1;
    }
  }
  return res.false_negatives == 0 ? 0 : 1;
}
