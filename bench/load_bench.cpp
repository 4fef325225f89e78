// load_bench: the DPDK-free stages of a bulk load, in process (issue 12, items 3 and 4).
//
// N mixed rules (all seven kinds, the mix of gateway_bench) as rule text, then per run, each
// stage timed on its own:
//   parse_lines   parse_rule() of every line (what the gateway does per `load` line)
//   parse_rules   parse_rules() of the whole text (rule files: parse + de-duplication)
//   keys          rule_order_key() + rule_key() of every rule (the Blocklist's per-rule
//                 keys before the store; the store keeps no text: docs/store.md)
//   store_add     RuleStore::add_batch() of all of them into a fresh durable state directory
//                 (journal written and fsync'ed once), the ordered store's whole cost
// and the store's resident memory: RSS after the batch (inputs freed) minus RSS before,
// divided by N. Medians over --runs.
//
//   build/bench/load_bench [--rules N] [--runs R] [--dir DIR]
// DIR must be on the disk being measured (default: a directory under /var/tmp).
#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cuckoogate/keys/rule.hpp"
#include "cuckoogate/store/rule_store.hpp"

namespace {

using clk = std::chrono::steady_clock;

double since(clk::time_point t) { return std::chrono::duration<double>(clk::now() - t).count(); }

// CPU seconds of this thread: on a shared machine, "slow" apart from "descheduled".
double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The same mix as bench/gateway_inputs.hpp's rule_mix (that header needs DPDK test support).
std::string rule_mix(std::size_t n) {
  auto a = [](uint32_t i) {
    return "10." + std::to_string((i >> 16) & 255) + "." + std::to_string((i >> 8) & 255) + "." +
           std::to_string(i & 255);
  };
  std::string text;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t j = i / 7;
    switch (i % 7) {
      case 0: text += "src " + a(j); break;
      case 1: text += "dst " + a(j); break;
      case 2: text += "ip " + a(j); break;
      case 3: text += "flow tcp " + a(j) + ":1000 " + a(j + 1) + ":80"; break;
      case 4: text += "service tcp " + a(j) + ":443"; break;
      case 5: text += "host h" + std::to_string(j) + ".example.net"; break;
      default: text += "url example.org/p/" + std::to_string(j); break;
    }
    text += '\n';
  }
  return text;
}

long rss_kib() {
  std::ifstream f("/proc/self/statm");
  long size = 0, resident = 0;
  f >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = 1000000;
  int runs = 3;
  std::string dir = "/var/tmp/cg_load_bench_" + std::to_string(getpid());
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rules" && i + 1 < argc) {
      n = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else {
      std::fprintf(stderr, "usage: load_bench [--rules N] [--runs R] [--dir DIR]\n");
      return 2;
    }
  }
#ifndef NDEBUG
  std::fprintf(stderr, "load_bench: WARNING: not a release build, the numbers mean little\n");
#endif
  const std::string text = rule_mix(n);
  std::vector<double> t_lines, t_file, t_keys, t_store, c_store, per_rule;
  for (int r = 0; r < runs; ++r) {
    malloc_trim(0);
    const long rss0 = rss_kib();  // before this run's inputs: the store's bytes are what stays
    std::vector<cg::Rule> rules;
    rules.reserve(n);
    auto t = clk::now();
    for (std::size_t pos = 0, line = 1; pos < text.size(); ++line) {
      const std::size_t nl = text.find('\n', pos);
      cg::RuleParse p = cg::parse_rule(std::string_view(text).substr(pos, nl - pos), line);
      if (!p.rule) {
        std::fprintf(stderr, "load_bench: %s\n", p.error.message().c_str());
        return 1;
      }
      rules.push_back(std::move(*p.rule));
      pos = nl + 1;
    }
    t_lines.push_back(since(t));

    t = clk::now();
    const std::size_t file_rules = cg::parse_rules(text, false).rules.size();
    t_file.push_back(since(t));
    if (file_rules != n) {
      std::fprintf(stderr, "load_bench: parse_rules kept %zu of %zu rules\n", file_rules, n);
      return 1;
    }

    t = clk::now();
    std::vector<std::string> orders(n);
    std::size_t key_bytes = 0;
    for (std::size_t i = 0; i < n; ++i) {
      orders[i] = cg::rule_order_key(rules[i]);
      key_bytes += cg::rule_key(rules[i]).size();
    }
    t_keys.push_back(since(t));

    std::filesystem::remove_all(dir);
    std::unique_ptr<cg::store::RuleStore> st;
    cg::store::RuleStore::Options so;
    so.state_dir = dir;
    if (!cg::store::RuleStore::open(so, &st).ok()) {
      std::fprintf(stderr, "load_bench: cannot open a store in %s\n", dir.c_str());
      return 1;
    }
    {
      std::vector<cg::store::RuleStore::AddRequest> reqs;
      reqs.reserve(n);
      for (std::size_t i = 0; i < n; ++i) reqs.push_back({orders[i], {}, 0, {}});  // as the gateway: no text
      std::vector<cg::store::Errc> res;
      t = clk::now();
      const double c0 = cpu_now();
      const cg::store::Status s = st->add_batch(reqs, &res);
      t_store.push_back(since(t));
      c_store.push_back(cpu_now() - c0);
      if (!s.ok() || st->size() != n) {
        std::fprintf(stderr, "load_bench: add_batch: %s, %zu rules\n", s.to_string().c_str(), st->size());
        return 1;
      }
    }
    std::vector<std::string>().swap(orders);
    std::vector<cg::Rule>().swap(rules);
    st->reclaim();
    malloc_trim(0);
    per_rule.push_back(static_cast<double>(rss_kib() - rss0) * 1024.0 / static_cast<double>(n));
    std::printf("run %d: parse_lines %.3f s, parse_rules %.3f s, keys %.3f s, store_add %.3f s (%.3f s CPU), store %.0f B/rule"
                " (binary keys avg %.1f B)\n",
                r + 1, t_lines.back(), t_file.back(), t_keys.back(), t_store.back(), c_store.back(), per_rule.back(),
                static_cast<double>(key_bytes) / static_cast<double>(n));
    st.reset();
    std::filesystem::remove_all(dir);
  }
  const double nn = static_cast<double>(n);
  std::printf("load_bench: %zu mixed rules, median of %d runs\n", n, runs);
  std::printf("  parse_rule per line   %8.3f s  %10.0f rules/s\n", median(t_lines), nn / median(t_lines));
  std::printf("  parse_rules (file)    %8.3f s  %10.0f rules/s\n", median(t_file), nn / median(t_file));
  std::printf("  order key, key        %8.3f s  %10.0f rules/s\n", median(t_keys), nn / median(t_keys));
  std::printf("  store add_batch       %8.3f s  %10.0f rules/s  (%.3f CPU s: %.0f rules per CPU s)\n", median(t_store),
              nn / median(t_store), median(c_store), nn / median(c_store));
  std::printf("  store resident        %8.0f B/rule\n", median(per_rule));
  return 0;
}
