// Classification benchmark: nanoseconds per packet for classify() on the
// packet shapes the data path sees, from a 64-byte TCP segment (the line-rate
// case: six keys, six XXH3 hashes) to HTTP, TLS and DNS packets that also
// yield url/host keys. Frames are built before timing; each timed run walks
// 1024 distinct frames of one shape into a burst of 32 PacketKeys, as a
// worker does; the median of the runs is reported.
//
//   meson setup build -Dbuildtype=release && ninja -C build bench/classify_bench
//   build/bench/classify_bench [--runs N] [--packets N] [--json PATH]
// Defaults: 11 runs of 1,000,000 packets per case; --json writes the table.
//
// Sample output (release build, 2-vCPU VM under load; docs/rules.md keeps
// the numbers of record):
//   case               bytes keys  median ns   min ns   max ns    Mpps
//   tcp4_64               60    6       64.9     44.5    107.7    15.4
//   udp6_vlan            130    6       68.8     63.2     88.3    14.5
//   tcp4_fragment       1054    4       42.1     35.2     62.8    23.8
//   http_get             377   11      239.3    217.8    328.4     4.2
//   tls_client_hello     179   10      123.4     89.4    221.2     8.1
//   dns_query             82   10      134.0    116.0    216.1     7.5
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "../tests/support/packet_builder.hpp"
#include "cuckoogate/keys/classify.hpp"

namespace {

using cg::test::Bytes;
using cg::test::Packet;

constexpr std::size_t kFramesPerCase = 1024;
constexpr std::size_t kBurst = 32;

struct Case {
  std::string name;
  std::vector<Bytes> frames;
};

std::string v4(unsigned i, unsigned net) {
  return std::to_string(net) + "." + std::to_string((i >> 8) & 0xff) + "." +
         std::to_string(i & 0xff) + ".1";
}

Bytes pad64(Bytes f) {
  if (f.size() < 60) f.resize(60, 0);  // minimum Ethernet frame without FCS
  return f;
}

std::vector<Case> make_cases() {
  std::vector<Case> cases;
  auto add = [&](const char* name, auto make) {
    Case c{name, {}};
    for (unsigned i = 0; i < kFramesPerCase; ++i) c.frames.push_back(make(i));
    cases.push_back(std::move(c));
  };
  add("tcp4_64", [](unsigned i) {
    return pad64(Packet().ipv4(v4(i, 10), v4(i * 7, 172)).tcp(static_cast<uint16_t>(1024 + i), 443).frame());
  });
  add("udp6_vlan", [](unsigned i) {
    return Packet().vlan(10).ipv6("2001:db8::" + std::to_string(i % 9000 + 1), "2001:db8:1::53")
        .udp(static_cast<uint16_t>(1024 + i), 4789).payload(std::string(64, 'u')).frame();
  });
  add("tcp4_fragment", [](unsigned i) {
    return Packet().ipv4(v4(i, 10), v4(i, 192)).fragment(185, false).tcp(1, 2)
        .payload(std::string(1000, 'f')).frame();
  });
  add("http_get", [](unsigned i) {
    return Packet().ipv4(v4(i, 10), v4(i, 93)).tcp(static_cast<uint16_t>(1024 + i), 80)
        .payload("GET /articles/" + std::to_string(i) +
                 "/index.html?ref=home HTTP/1.1\r\n"
                 "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0\r\n"
                 "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n"
                 "Accept-Language: en-US,en;q=0.5\r\nAccept-Encoding: gzip, deflate\r\n"
                 "Host: www" + std::to_string(i % 10) + ".news.example.com\r\n"
                 "Connection: keep-alive\r\n\r\n")
        .frame();
  });
  add("tls_client_hello", [](unsigned i) {
    return Packet().ipv4(v4(i, 10), v4(i, 151)).tcp(static_cast<uint16_t>(1024 + i), 443)
        .payload(cg::test::tls_client_hello("api" + std::to_string(i % 10) + ".cdn.example.net"))
        .frame();
  });
  add("dns_query", [](unsigned i) {
    return Packet().ipv4(v4(i, 10), "192.0.2.53").udp(static_cast<uint16_t>(1024 + i), 53)
        .payload(cg::test::dns_query("host" + std::to_string(i % 100) + ".mail.example.org"))
        .frame();
  });
  return cases;
}

struct Result {
  std::string name;
  std::size_t bytes = 0;
  unsigned keys = 0;
  double median_ns = 0, min_ns = 0, max_ns = 0;
};

Result run_case(const Case& c, unsigned runs, std::size_t packets, cg::PacketKeys* burst) {
  Result r{c.name, c.frames[0].size(), 0, 0, 0, 0};
  cg::classify(c.frames[0].data(), c.frames[0].size(), burst[0]);
  r.keys = burst[0].n;
  uint64_t sink = 0;
  std::vector<double> ns;
  for (unsigned run = 0; run < runs + 1; ++run) {  // run 0 warms caches
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t p = 0; p < packets; ++p) {
      const Bytes& f = c.frames[p % kFramesPerCase];
      cg::PacketKeys& k = burst[p % kBurst];
      cg::classify(f.data(), f.size(), k);
      sink += k.n != 0 ? k.key[k.n - 1].hash : 0;
    }
    const auto t1 = std::chrono::steady_clock::now();
    if (run > 0) ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / packets);
  }
  if (sink == 42) std::puts("");  // keeps the loop observable
  std::sort(ns.begin(), ns.end());
  r.median_ns = ns[ns.size() / 2];
  r.min_ns = ns.front();
  r.max_ns = ns.back();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  unsigned runs = 11;
  std::size_t packets = 1'000'000;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (a == "--runs" && i + 1 < argc) {
      runs = static_cast<unsigned>(std::max(1, std::atoi(argv[++i])));
    } else if (a == "--packets" && i + 1 < argc) {
      packets = static_cast<std::size_t>(std::max(1000L, std::atol(argv[++i])));
    } else {
      std::fprintf(stderr, "usage: %s [--runs N] [--packets N] [--json PATH]\n", argv[0]);
      return 2;
    }
  }
#ifdef CG_NOT_RELEASE_BUILD
  const bool release = false;
  std::fprintf(stderr,
               "WARNING: not a release build: numbers are not representative "
               "(meson setup -Dbuildtype=release)\n");
#else
  const bool release = true;
#endif
  const std::vector<Case> cases = make_cases();
  auto burst = std::make_unique<cg::PacketKeys[]>(kBurst);
  std::printf("%-18s %5s %4s %10s %8s %8s %7s\n", "case", "bytes", "keys", "median ns", "min ns",
              "max ns", "Mpps");
  nlohmann::json out;
  out["benchmark"] = "classify";
  out["release_build"] = release;
  out["runs"] = runs;
  out["packets_per_run"] = packets;
  out["cases"] = nlohmann::json::array();
  for (const Case& c : cases) {
    const Result r = run_case(c, runs, packets, burst.get());
    std::printf("%-18s %5zu %4u %10.1f %8.1f %8.1f %7.1f\n", r.name.c_str(), r.bytes, r.keys,
                r.median_ns, r.min_ns, r.max_ns, 1000.0 / r.median_ns);
    out["cases"].push_back({{"name", r.name},
                            {"frame_bytes", r.bytes},
                            {"keys", r.keys},
                            {"median_ns", r.median_ns},
                            {"min_ns", r.min_ns},
                            {"max_ns", r.max_ns},
                            {"mpps", 1000.0 / r.median_ns}});
  }
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << out.dump(2) << '\n';
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return 0;
}
