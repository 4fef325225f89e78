// sync_bench: the Redis sync's propagation latency, sustained rate and
// catch-up rate, against a private redis-server (Unix socket, AOF with the
// chosen fsync policy) that it starts and kills itself.
//
//   build/bench/sync_bench [--samples 2000] [--seconds 3] [--backlog 200000] [--fsync everysec|always]
//                          [--catchup-runs 5] [--tls 1]
//
// --tls 1: the same over TLS (rediss:// to a --tls-port on loopback, client
// certificates, certificates made in the temporary directory); the catch-up
// also reports the process's CPU, which includes the TLS pipe's threads.
//
// 1. latency: gateway A publishes one add at a time (XADD, then reading the
//    stream up to it: what an OK waits for); gateway B, following in its own
//    thread with XREAD BLOCK, stamps the moment it applied the entry. The
//    latency is B's stamp minus the moment A started the publish; p50/p99.
// 2. sustained: A publishes groups of 100 adds (a group commit) for --seconds;
//    changes per second acknowledged by A, and B's lag at the end.
// 3. catch-up: a new gateway C reads the whole stream (--backlog entries) from
//    the start; entries applied per second, --catchup-runs times (each run a
//    fresh C), and their median; also per second of the catching-up thread's
//    CPU time (less sensitive to other load on a shared machine).
// The applier is an in-memory set keyed by the canonical rule (the cost of
// the gateway's Blocklist::apply is in control_bench); what is measured is
// Redis, hiredis, entry decoding and rule parsing. Sample output is in
// docs/PERFORMANCE.md ("Redis sync").
#include <poll.h>
#include <stdlib.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cuckoogate/sync/stream_sync.hpp"
#include "redis_server.hpp"
#include "test_certs.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using cg::sync::Entry;
using cg::sync::EntryOp;
using cg::sync::StreamId;

struct SetApplier : cg::sync::Applier {
  std::unordered_set<std::string> rules;
  std::unordered_map<uint64_t, Clock::time_point>* stamps = nullptr;  // by entry seq number, or null
  std::mutex* mu = nullptr;
  bool apply(std::span<const cg::sync::Received> in, std::string*) override {
    const auto now = Clock::now();
    for (const auto& r : in) {
      if (r.entry == nullptr) continue;
      for (const auto& c : r.entry->changes) {
        std::string k = cg::format_rule(c.rule);
        if (c.del) rules.erase(k);
        else rules.insert(std::move(k));
      }
      if (stamps != nullptr) {
        std::lock_guard l(*mu);
        (*stamps)[r.id.ms * 1000000 + r.id.seq] = now;
      }
    }
    return true;
  }
  bool replace_all(const std::vector<cg::sync::EntryChange>&, StreamId, std::string*) override { return true; }
  void dump(std::vector<cg::sync::EntryChange>*) const override {}
};

Entry add(int i) {
  Entry e;
  e.op = EntryOp::kAdd;
  const std::string text = "src 10." + std::to_string((i >> 16) & 255) + "." + std::to_string((i >> 8) & 255) +
                           "." + std::to_string(i & 255);
  e.changes.push_back({false, *cg::parse_rule(text).rule, 0});
  return e;
}

cg::sync::TlsOptions g_tls;  // --tls: the CA and client certificate

cg::sync::SyncOptions options(const std::string& url, const std::string& id) {
  cg::sync::SyncOptions o;
  o.url = *cg::sync::parse_redis_url(url).url;
  if (o.url.tls.on) o.url.tls = g_tls;
  o.gateway_id = id;
  o.snapshot_every = std::chrono::milliseconds(0);
  o.block = std::chrono::milliseconds(100);
  return o;
}

// Serves a follower until stop.
void follow(cg::sync::StreamSync& s, std::atomic<bool>& stop) {
  while (!stop.load(std::memory_order_relaxed)) {
    s.tick();
    pollfd p{s.fd(), POLLIN, 0};
    if (::poll(&p, 1, 20) > 0 && p.fd >= 0) s.on_readable();
  }
}

// CPU time of the calling thread (user + system): on a shared machine, what
// the catch-up itself costs, whatever else runs.
double thread_cpu_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double process_cpu_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  int samples = 2000, seconds = 3, backlog = 200000, catchup_runs = 5;
  std::string fsync = "everysec";
  bool tls = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--samples") samples = std::atoi(argv[i + 1]);
    else if (a == "--seconds") seconds = std::atoi(argv[i + 1]);
    else if (a == "--backlog") backlog = std::atoi(argv[i + 1]);
    else if (a == "--fsync") fsync = argv[i + 1];
    else if (a == "--catchup-runs") catchup_runs = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--tls") tls = std::atoi(argv[i + 1]) != 0;
  }
#ifdef CG_NOT_RELEASE_BUILD
  std::printf("WARNING: not a release build; numbers are not representative\n");
#endif
  char tmpl[] = "/tmp/cg_sync_bench_XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return 1;
  int rc = 0;
  {
    const std::string dir = tmpl;
    std::vector<std::string> extra;
    std::string url_tls;
    if (tls) {
      cg::test::TestCert ca("bench CA", nullptr, "", 1), server("localhost", &ca, "IP:127.0.0.1", 2),
          client("bench", &ca, "", 3);
      ca.write(dir, "ca");
      server.write(dir, "server");
      client.write(dir, "client");
      const uint16_t port = cg::test::free_tcp_port();
      extra = {"--tls-port", std::to_string(port), "--tls-cert-file", dir + "/server.pem", "--tls-key-file",
               dir + "/server.key", "--tls-ca-cert-file", dir + "/ca.pem"};
      url_tls = "rediss://127.0.0.1:" + std::to_string(port);
      g_tls = {true, dir + "/ca.pem", "", dir + "/client.pem", dir + "/client.key", ""};
    }
    cg::test::RedisServer redis(dir, extra);
    redis.cli({"CONFIG", "SET", "appendfsync", fsync});
    const std::string url = tls ? url_tls : redis.url();
    std::printf("redis-server on %s, appendonly yes, appendfsync %s\n", tls ? "a TLS port (rediss://)" : "a Unix socket",
                fsync.c_str());

    // 1. Latency A -> B.
    std::unordered_map<uint64_t, Clock::time_point> stamps;
    std::mutex mu;
    SetApplier aa, ab;
    ab.stamps = &stamps;
    ab.mu = &mu;
    cg::sync::StreamSync a(options(url, "a"), aa, {});
    {
      cg::sync::StreamSync b(options(url, "b"), ab, {});
      a.tick();
      b.tick();
      std::atomic<bool> stop{false};
      std::thread tb(follow, std::ref(b), std::ref(stop));
      std::vector<std::pair<StreamId, Clock::time_point>> sent;
      std::vector<double> ack_us;
      std::string err;
      for (int i = 0; i < samples; ++i) {
        const std::vector<Entry> e = {add(i)};
        std::vector<StreamId> ids;
        const auto t0 = Clock::now();
        if (!a.publish(e, &ids, &err)) {
          std::fprintf(stderr, "publish: %s\n", err.c_str());
          rc = 1;
          break;
        }
        ack_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        sent.emplace_back(ids[0], t0);
        std::this_thread::sleep_for(std::chrono::microseconds(500));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      stop = true;
      tb.join();
      std::vector<double> lat_ms;
      {
        std::lock_guard l(mu);
        for (const auto& [id, t0] : sent) {
          const auto it = stamps.find(id.ms * 1000000 + id.seq);
          if (it != stamps.end()) lat_ms.push_back(std::chrono::duration<double, std::milli>(it->second - t0).count());
        }
      }
      std::printf("latency A->B: %zu of %zu seen; p50 %.3f ms, p99 %.3f ms, max %.3f ms\n", lat_ms.size(),
                  sent.size(), pct(lat_ms, 0.5), pct(lat_ms, 0.99), pct(lat_ms, 1.0));
      std::printf("A's OK (XADD + read to it): p50 %.1f us, p99 %.1f us\n", pct(ack_us, 0.5), pct(ack_us, 0.99));
    }

    // 2. Sustained: groups of 100.
    {
      SetApplier ab2;
      cg::sync::StreamSync b(options(url, "b2"), ab2, a.stats().last_applied);
      b.tick();
      std::atomic<bool> stop{false};
      std::thread tb(follow, std::ref(b), std::ref(stop));
      std::vector<Entry> group;
      for (int i = 0; i < 100; ++i) group.push_back(add(i));
      std::string err;
      std::vector<StreamId> ids;
      uint64_t n = 0;
      const auto t0 = Clock::now();
      while (Clock::now() - t0 < std::chrono::seconds(seconds)) {
        if (!a.publish(group, &ids, &err)) {
          std::fprintf(stderr, "publish: %s\n", err.c_str());
          rc = 1;
          break;
        }
        n += group.size();
      }
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      const auto until = Clock::now() + std::chrono::seconds(10);
      while (b.stats().last_applied < ids.back() && Clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const double follow_secs = std::chrono::duration<double>(Clock::now() - t0).count();
      stop = true;
      tb.join();
      std::printf("sustained: %.0f changes/s acknowledged by A (groups of 100, %llu in %.1f s); "
                  "B applied them all %.0f ms after A's last\n",
                  static_cast<double>(n) / secs, static_cast<unsigned long long>(n), secs, (follow_secs - secs) * 1e3);
    }

    // 3. Catch-up of a new gateway.
    {
      // Top the stream up to the backlog with large pipelines.
      std::string err;
      std::vector<StreamId> ids;
      const long long have = std::atoll(redis.cli({"XLEN", "cuckoogate:rules"}).c_str());
      std::vector<Entry> group;
      for (int i = 0; i < 1000; ++i) group.push_back(add(i));
      for (long long k = have; k < backlog; k += 1000) {
        if (!a.publish(group, &ids, &err)) {
          std::fprintf(stderr, "publish: %s\n", err.c_str());
          return 1;
        }
      }
      const long long total = std::atoll(redis.cli({"XLEN", "cuckoogate:rules"}).c_str());
      std::vector<double> rates, cpu_rates, pcpu_per_m;
      for (int run = 0; run < catchup_runs; ++run) {
        SetApplier ac;
        cg::sync::StreamSync c(options(url, "c"), ac, {});
        const double cpu0 = thread_cpu_s(), pcpu0 = process_cpu_s();
        const auto t0 = Clock::now();
        c.tick();  // connect: reads the whole stream before it returns
        const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
        const double cpu = thread_cpu_s() - cpu0, pcpu = process_cpu_s() - pcpu0;
        pcpu_per_m.push_back(pcpu * 1e6 / static_cast<double>(c.stats().applied));
        rates.push_back(static_cast<double>(c.stats().applied) / secs);
        cpu_rates.push_back(static_cast<double>(c.stats().applied) / cpu);
        std::printf("catch-up: %llu entries in %.3f s = %.0f entries/s (connect included); "
                    "%.3f s of this thread's CPU = %.0f entries per CPU second\n",
                    static_cast<unsigned long long>(c.stats().applied), secs, rates.back(), cpu, cpu_rates.back());
        if (static_cast<long long>(c.stats().applied) != total) rc = 1;
      }
      std::printf("catch-up: median of %d runs %.0f entries/s, %.0f entries per CPU second of the gateway thread, "
                  "%.3f CPU s per million entries of the process (TLS pipe included)\n",
                  catchup_runs, pct(rates, 0.5), pct(cpu_rates, 0.5), pct(pcpu_per_m, 0.5));
    }
  }
  std::filesystem::remove_all(tmpl);
  return rc;
}
