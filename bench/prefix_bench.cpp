// prefix_bench: the cost of CIDR prefix rules on the data path (issue 12,
// item 1) against exact address rules, and against DPDK's rte_lpm/rte_lpm6
// as the alternative structures (their lookup cost and their memory).
//
// In one process (EAL for the blocklist's memory): R src rules, either exact
// addresses or prefixes spread over L lengths (/24 down for IPv4, /64, /48,
// /32, ... for IPv6); 1024 classified UDP packets, half of them from inside
// a rule. Timed (per packet, bursts of 32, inputs classified outside the
// timed region):
//   exact   the worker's step 2 for src keys: bulk filter lookup + exact-set
//           confirmation of the hits
//   prefixes  PrefixTables::lookup, what the workers run for prefix rules:
//             its rte_lpm table for IPv4, the probe of each length in use
//             for IPv6 (keys scanned, confirmations included)
//   rte_lpm   rte_lpm_lookup_bulk / rte_lpm6_lookup_bulk_func alone, of the
//             source addresses, in a table holding the same prefixes: the
//             floor for IPv4, and what an rte_lpm6 design would cost for IPv6
// Median of --runs runs of --passes passes over the packets.
//
//   build/bench/prefix_bench [--rules R] [--runs N] [--passes P]
//
// Sample (2 shared cores, load average ~10; docs/PERFORMANCE.md, "CIDR rules"):
//   family lengths  structure  ns/packet  extra MiB
//   v4     exact    exact           20.9          -
//   v4     14       prefixes        10.4          -
//   v4     14       rte_lpm          1.4       68.2
//   v6     3        prefixes       192.0          -
//   v6     3        rte_lpm6         2.5      144.5
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lpm.h>
#include <rte_lpm6.h>
#include <rte_malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "control/blocklist.hpp"
#include "cuckoogate/keys/classify.hpp"
#include "cuckoogate/prefix/dir24.hpp"
#include "packet_builder.hpp"

namespace {

using clk = std::chrono::steady_clock;
using namespace cg;

constexpr std::size_t kPackets = 1024;
constexpr unsigned kB = 32;

struct Opts {
  std::size_t rules = 10000;
  int runs = 5;
  int passes = 200;
};

std::string addr_text(uint8_t family, const uint8_t* b) {
  IpAddr a;
  a.family = family;
  std::memcpy(a.bytes.data(), b, family == 4 ? 4 : 16);
  return format_address(a);
}

std::size_t heap_used() {
  rte_malloc_socket_stats s{};
  rte_malloc_get_socket_stats(0, &s);
  return s.heap_allocsz_bytes;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Input {
  std::vector<PacketKeys> keys = std::vector<PacketKeys>(kPackets);  // contiguous, as a worker's scratch
};

// The lengths used for L lengths: IPv4 /24, /23, ...; IPv6 /64, /48, /32,
// then /56, /40, /60, ... (common allocation sizes first).
std::vector<unsigned> lengths(uint8_t family, unsigned l) {
  std::vector<unsigned> v;
  if (family == 4) {
    for (unsigned i = 0; i < l; ++i) v.push_back(24 - i);
  } else {
    const unsigned order[] = {64, 48, 32, 56, 40, 60, 44, 36, 52, 28, 62, 46, 34, 58, 42, 50};
    for (unsigned i = 0; i < l; ++i) v.push_back(order[i % 16] - (i / 16));
  }
  return v;
}

struct Case {
  uint8_t family;
  unsigned nlen;  // 0: exact address rules
};

void run_case(const Opts& o, const Case& c, int instance) {
  std::mt19937_64 rng(12345 + instance);
  const std::size_t asz = c.family == 4 ? 4 : 16;
  const std::vector<unsigned> lens = lengths(c.family, std::max(1u, c.nlen));
  // Rules: R networks (or addresses), random, under 2001:db8::/16 style
  // leading bytes for IPv6 so the lengths are meaningful.
  struct Net { std::array<uint8_t, 16> a{}; unsigned len; };
  std::vector<Net> nets;
  for (std::size_t i = 0; i < o.rules; ++i) {
    Net n;
    for (std::size_t b = 0; b < asz; ++b) n.a[b] = static_cast<uint8_t>(rng());
    n.len = c.nlen == 0 ? static_cast<unsigned>(asz * 8) : lens[i % lens.size()];
    IpAddr m;
    m.family = c.family;
    m.bytes = n.a;
    n.a = mask_address(m, n.len).bytes;
    nets.push_back(n);
  }
  Blocklist::Options bo;
  bo.capacity = o.rules * 2 + 1024;
  bo.name = "pb" + std::to_string(instance);
  std::string err;
  auto bl = Blocklist::create(bo, &err);
  if (!bl) {
    std::fprintf(stderr, "blocklist: %s\n", err.c_str());
    std::exit(1);
  }
  std::vector<Rule> rules;
  for (const Net& n : nets) {
    std::string t = "src ";  // appends: GCC 12's -Wrestrict misfires on "lit" + std::string
    t += addr_text(c.family, n.a.data());
    if (n.len < asz * 8) {
      t += '/';
      t += std::to_string(n.len);
    }
    rules.push_back(*parse_rule(t).rule);
  }
  if (bl->add_batch(rules).result != Blocklist::Result::kOk) {
    std::fprintf(stderr, "add_batch failed\n");
    std::exit(1);
  }

  // Packets: even ones from inside a rule (host bits random), odd ones random.
  Input in;
  for (std::size_t p = 0; p < kPackets; ++p) {
    std::array<uint8_t, 16> s{};
    for (std::size_t b = 0; b < asz; ++b) s[b] = static_cast<uint8_t>(rng());
    if (p % 2 == 0) {
      const Net& n = nets[rng() % nets.size()];
      for (std::size_t b = 0; b < asz; ++b) {
        const unsigned from = static_cast<unsigned>(b) * 8;
        const uint8_t keep = n.len >= from + 8 ? 0xff : n.len <= from ? 0 : static_cast<uint8_t>(0xff00u >> (n.len - from));
        s[b] = static_cast<uint8_t>((n.a[b] & keep) | (s[b] & ~keep));
      }
    }
    const std::string st = addr_text(c.family, s.data());
    const test::Bytes f = c.family == 4 ? test::Packet().ipv4(st, "192.0.2.1").udp(1, 2).frame()
                                        : test::Packet().ipv6(st, "2001:db8::1").udp(1, 2).frame();
    classify(f.data(), f.size(), in.keys[p]);
  }

  // The timed structures.
  const GatewayFilter& filter = bl->filter();
  const ExactSet& exact = bl->exact();
  const uint32_t kinds = bl->kind_mask().load();
  uint64_t sink = 0;
  auto time_it = [&](auto&& burst) {
    std::vector<double> ns;
    for (int r = 0; r < o.runs; ++r) {
      const auto t0 = clk::now();
      for (int p = 0; p < o.passes; ++p)
        for (std::size_t b = 0; b < kPackets; b += kB) burst(b);
      const double dt = std::chrono::duration<double, std::nano>(clk::now() - t0).count();
      ns.push_back(dt / (static_cast<double>(o.passes) * kPackets));
    }
    return median(ns);
  };
  const char* fam = c.family == 4 ? "v4" : "v6";
  if (c.nlen == 0) {
    // The worker's steps 1-2 for the burst's keys of kinds with rules.
    const double t = time_it([&](std::size_t b) {
      uint64_t hashes[kB * 4];
      uint16_t owner[kB * 4], slot[kB * 4];
      uint64_t mask[(kB * 4 + 63) / 64];
      std::size_t nk = 0;
      for (unsigned i = 0; i < kB; ++i) {
        const PacketKeys& pk = in.keys[b + i];
        for (unsigned k = 0; k < pk.n; ++k) {
          if (((kinds >> static_cast<unsigned>(pk.key[k].kind)) & 1u) == 0) continue;
          hashes[nk] = pk.key[k].hash;
          owner[nk] = static_cast<uint16_t>(i);
          slot[nk++] = static_cast<uint16_t>(k);
        }
      }
      filter.contains_bulk(hashes, nk, mask);
      for (std::size_t w = 0; w < (nk + 63) / 64; ++w)
        for (uint64_t bits = mask[w]; bits != 0; bits &= bits - 1) {
          const std::size_t j = w * 64 + static_cast<std::size_t>(__builtin_ctzll(bits));
          const PacketKeys& pk = in.keys[b + owner[j]];
          RuleKind kind;
          uint32_t s;
          sink += exact.contains(key_hash128(pk.key_bytes(slot[j]), pk.key[slot[j]].len), &kind, &s);
        }
    });
    std::printf("%-6s %-8s %-10s %9.1f %10s\n", fam, "exact", "exact", t, "-");
    return;
  }
  const PrefixTables& pt = bl->prefixes();
  const double tp = time_it([&](std::size_t b) {
    bool cls[kB];
    PrefixHit hits[kB];
    std::fill(cls, cls + kB, true);
    pt.lookup(&in.keys[b], cls, kB, true, hits);
    for (unsigned i = 0; i < kB; ++i) sink += hits[i].kind;
  });
  std::printf("%-6s %-8u %-10s %9.1f %10s\n", fam, c.nlen, "prefixes", tp, "-");

  // The same prefixes in DPDK's LPM (one table: the src kind alone).
  const std::size_t h0 = heap_used();
  const std::string name = "pbl" + std::to_string(instance);
  if (c.family == 4) {
    rte_lpm_config lc{};
    lc.max_rules = static_cast<uint32_t>(o.rules * 2);
    lc.number_tbl8s = 1u << 12;
    rte_lpm* lpm = rte_lpm_create(name.c_str(), 0, &lc);
    if (lpm == nullptr) {
      std::fprintf(stderr, "rte_lpm_create: %s\n", rte_strerror(rte_errno));
      return;
    }
    const auto a0 = clk::now();
    for (std::size_t i = 0; i < nets.size(); ++i) {
      uint32_t ip;
      std::memcpy(&ip, nets[i].a.data(), 4);
      rte_lpm_add(lpm, __builtin_bswap32(ip), static_cast<uint8_t>(nets[i].len), static_cast<uint32_t>(i));
    }
    const double lpm_add_ms = std::chrono::duration<double, std::milli>(clk::now() - a0).count();
    const std::size_t lpm_bytes = heap_used() - h0;
    const double tl = time_it([&](std::size_t b) {
      uint32_t ips[kB], hops[kB];
      for (unsigned i = 0; i < kB; ++i) {
        const PacketKeys& pk = in.keys[b + i];  // the src key's address, as a worker would read it
        uint32_t ip;
        std::memcpy(&ip, pk.key_bytes(1) + 2, 4);
        ips[i] = __builtin_bswap32(ip);
      }
      rte_lpm_lookup_bulk(lpm, ips, hops, kB);
      for (unsigned i = 0; i < kB; ++i) sink += hops[i] >> 31;
    });
    std::printf("%-6s %-8u %-10s %9.1f %10.1f\n", fam, c.nlen, "rte_lpm", tl, lpm_bytes / 1048576.0);
    rte_lpm_free(lpm);
    // The same in our Dir24 alone (what PrefixTables holds for IPv4).
    std::string derr;
    auto d = prefix::Dir24::create({}, &derr);
    if (d == nullptr) {
      std::fprintf(stderr, "Dir24: %s\n", derr.c_str());
      return;
    }
    const auto d0 = clk::now();
    for (std::size_t i = 0; i < nets.size(); ++i) {
      uint32_t ip;
      std::memcpy(&ip, nets[i].a.data(), 4);
      (void)d->add(__builtin_bswap32(ip), nets[i].len, static_cast<uint32_t>(i));  // duplicates: kExists
    }
    const double dir_add_ms = std::chrono::duration<double, std::milli>(clk::now() - d0).count();
    const double td = time_it([&](std::size_t b) {
      uint32_t ips[kB], es[kB];
      for (unsigned i = 0; i < kB; ++i) {
        uint32_t ip;
        std::memcpy(&ip, in.keys[b + i].key_bytes(1) + 2, 4);
        ips[i] = __builtin_bswap32(ip);
      }
      d->lookup_bulk(ips, es, kB);
      for (unsigned i = 0; i < kB; ++i) sink += prefix::Dir24::depth(es[i]) != 0;
    });
    std::printf("%-6s %-8u %-10s %9.1f %10.1f\n", fam, c.nlen, "dir24", td, d->memory().total() / 1048576.0);
    std::printf("       adding the %zu prefixes: rte_lpm %.1f ms, dir24 %.1f ms\n", nets.size(), lpm_add_ms,
                dir_add_ms);
  } else {
    rte_lpm6_config lc{};
    lc.max_rules = static_cast<uint32_t>(o.rules * 2);
    lc.number_tbl8s = static_cast<uint32_t>(std::min<std::size_t>(o.rules * 8, 1u << 20));
    rte_lpm6* lpm = rte_lpm6_create(name.c_str(), 0, &lc);
    if (lpm == nullptr) {
      std::fprintf(stderr, "rte_lpm6_create: %s\n", rte_strerror(rte_errno));
      return;
    }
    for (std::size_t i = 0; i < nets.size(); ++i)
      rte_lpm6_add(lpm, nets[i].a.data(), static_cast<uint8_t>(nets[i].len), static_cast<uint32_t>(i));
    const std::size_t lpm_bytes = heap_used() - h0;
    const double tl = time_it([&](std::size_t b) {
      uint8_t ips[kB][16];
      int32_t hops[kB];
      for (unsigned i = 0; i < kB; ++i) std::memcpy(ips[i], in.keys[b + i].key_bytes(1) + 2, 16);
      rte_lpm6_lookup_bulk_func(lpm, ips, hops, kB);
      for (unsigned i = 0; i < kB; ++i) sink += hops[i] >= 0;
    });
    std::printf("%-6s %-8u %-10s %9.1f %10.1f\n", fam, c.nlen, "rte_lpm6", tl, lpm_bytes / 1048576.0);
    rte_lpm6_free(lpm);
  }
  if (sink == 42) std::printf(" ");
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto num = [&] { return i + 1 < argc ? std::strtoull(argv[++i], nullptr, 10) : 0ull; };
    if (a == "--rules") o.rules = num();
    else if (a == "--runs") o.runs = static_cast<int>(num());
    else if (a == "--passes") o.passes = static_cast<int>(num());
    else {
      std::fprintf(stderr, "usage: prefix_bench [--rules R] [--runs N] [--passes P]\n");
      return 2;
    }
  }
  if (o.rules == 0 || o.runs <= 0 || o.passes <= 0) return 2;
#ifndef NDEBUG
  std::fprintf(stderr, "prefix_bench: a debug build; numbers are not meaningful\n");
#endif
  const std::string prefix = "--file-prefix=cg-prefix-bench-" + std::to_string(getpid());
  std::vector<std::string> args = {"prefix_bench", "--no-huge", "--no-pci", "--no-shconf", "-m", "1536",
                                   "-l", "0", "--no-telemetry", "--log-level=lib.eal:error", prefix};
  std::vector<char*> eargv;
  for (auto& a : args) eargv.push_back(a.data());
  if (rte_eal_init(static_cast<int>(eargv.size()), eargv.data()) < 0) {
    std::fprintf(stderr, "rte_eal_init: %s\n", rte_strerror(rte_errno));
    return 1;
  }
  std::printf("%zu src rules, %zu packets (half inside a rule), bursts of %u; median of %d runs\n", o.rules,
              kPackets, kB, o.runs);
  // extra MiB: the EAL heap a separate LPM table takes for these rules.
  std::printf("%-6s %-8s %-10s %9s %10s\n", "family", "lengths", "structure", "ns/packet", "extra MiB");
  const Case cases[] = {{4, 0}, {4, 1}, {4, 4}, {4, 14}, {4, 24}, {6, 0}, {6, 1}, {6, 3}, {6, 8}};
  int instance = 0;
  for (const Case& c : cases) run_case(o, c, ++instance);
  const std::string runtime_dir = rte_eal_get_runtime_dir();
  rte_eal_cleanup();
  std::error_code ec;
  std::filesystem::remove(runtime_dir, ec);
  return 0;
}
