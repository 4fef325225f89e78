// Growth of the lookup tables (issue 12, item 2): the lookup cost and
// false-positive rate of a blocklist grown from a tiny capacity against one
// created at the final size, and the time of each rebuild.
//
//   growth_bench [RULES] [RUNS]      (EAL --no-huge; release build)
//
// Lookup = what a worker runs per key: the bulk filter lookup over 32 keys
// and the exact-set confirmation of every hit, half the keys present.
#include <rte_eal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "control/blocklist.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// Rule i (a host rule). Built by appending: GCC 12 warns (-Wrestrict, a
// false positive) on "literal" + std::string here.
std::string rule_text(std::size_t i) {
  std::string t("host h");
  t += std::to_string(i);
  t += ".example.net";
  return t;
}

// EAL leaves its runtime directory behind: remove it with the cleanup.
int finish(int rc) {
  const std::string dir = rte_eal_get_runtime_dir();
  rte_eal_cleanup();
  std::error_code ec;
  std::filesystem::remove(dir, ec);
  return rc;
}

struct Probe {
  std::vector<uint64_t> hash;
  std::vector<cg::Key128> key;
};

Probe probes(std::size_t rules, std::size_t n) {
  Probe p;
  for (std::size_t i = 0; i < n; ++i) {
    // Even: a present rule; odd: an absent name.
    const std::string text = rule_text(i % 2 == 0 ? (i * 7919) % rules : rules + i);  // odd: never added
    const std::string key = cg::rule_key(*cg::parse_rule(text).rule);
    p.hash.push_back(cg::key_hash(key.data(), key.size()));
    p.key.push_back(cg::key_hash128(key.data(), key.size()));
  }
  return p;
}

// ns per key (median of runs) and false positives (filter hits the exact set refuses).
std::pair<double, std::size_t> lookup(const cg::Blocklist& b, const Probe& p, int runs) {
  const cg::LookupTables& t = *b.tables().load(std::memory_order_acquire);
  std::vector<double> ns;
  std::size_t fp = 0, found = 0;
  for (int r = 0; r < runs; ++r) {
    fp = found = 0;
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i + 32 <= p.hash.size(); i += 32) {
      uint64_t mask[1];
      t.filter->contains_bulk(&p.hash[i], 32, mask);
      for (uint64_t bits = mask[0]; bits != 0; bits &= bits - 1) {
        const std::size_t j = i + static_cast<std::size_t>(__builtin_ctzll(bits));
        cg::RuleKind kind;
        uint32_t slot;
        if (t.exact->contains(p.key[j], &kind, &slot)) ++found;
        else ++fp;
      }
    }
    ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / double(p.hash.size()));
  }
  std::sort(ns.begin(), ns.end());
  if (found != p.hash.size() / 2) std::fprintf(stderr, "found %zu of %zu present keys\n", found, p.hash.size() / 2);
  return {ns[ns.size() / 2], fp};
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t rules = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000000;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 5;
  const char* eal[] = {"growth_bench", "--no-huge", "--no-pci", "--no-shconf", "-m", "2048", "-l", "0",
                       "--no-telemetry", "--log-level=lib.eal:error", "--file-prefix=growth-bench"};
  if (rte_eal_init(static_cast<int>(std::size(eal)), const_cast<char**>(eal)) < 0) return 1;
  std::vector<cg::Rule> all;
  for (std::size_t i = 0; i < rules; ++i) all.push_back(*cg::parse_rule(rule_text(i)).rule);
  const Probe p = probes(rules, 1u << 20);
  std::string err;
  std::size_t final_capacity = rules;
  for (const bool grown : {true, false}) {
    cg::Blocklist::Options o;
    o.capacity = grown ? 64 : final_capacity;  // the same table size for both
    o.name = grown ? "gb_grown" : "gb_sized";
    auto b = cg::Blocklist::create(o, &err);
    if (!b) {
      std::fprintf(stderr, "%s\n", err.c_str());
      return finish(1);
    }
    // Single adds (each growth copies every rule present), timed per growth.
    uint64_t seen = 0;
    for (std::size_t i = 0; i < rules; ++i) {
      if (const auto r = b->add(all[i]); r != cg::Blocklist::Result::kOk) {
        std::fprintf(stderr, "add %zu: result %d %s\n", i, static_cast<int>(r), b->last_error().c_str());
        return finish(1);
      }
      if (b->growths() != seen) {
        seen = b->growths();
        if (i >= 100000) std::printf("  growth at %zu rules -> capacity %zu: %.1f ms\n", i, b->capacity(), b->last_growth_ms());
      }
    }
    final_capacity = b->capacity();
    const auto [ns, fp] = lookup(*b, p, runs);
    const cg::FilterStats fs = b->filter().stats();
    std::printf("%s: rules %zu capacity %zu growths %llu filter slots %llu load %.3f: %.1f ns/key, "
                "false positives %zu of %zu absent (%.3f%%)\n",
                grown ? "grown from 64" : "created at size", rules, b->capacity(),
                static_cast<unsigned long long>(b->growths()), static_cast<unsigned long long>(fs.capacity_slots),
                fs.load_factor, ns, fp, p.hash.size() / 2, 100.0 * double(fp) / double(p.hash.size() / 2));
  }
  return finish(0);
}
