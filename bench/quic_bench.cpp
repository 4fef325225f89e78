// QUIC Initial benchmark: nanoseconds per client Initial decoded by
// cg::quic::Decoder (derive the keys from the DCID, remove header
// protection, AES-128-GCM-decrypt, walk the frames) for 1200-byte datagrams
// holding a ClientHello in CRYPTO frames. Datagrams are built before timing
// (tests/support/quic_initial_builder.hpp); each run walks 1024 of them.
//
//   meson setup build -Dbuildtype=release && ninja -C build bench/quic_bench
//   build/bench/quic_bench [--runs N] [--packets N]
// Defaults: 11 runs of 200,000 datagrams per case; the median is reported.
//
// Cases: `v1_new_flows`/`v2_new_flows`: every datagram has its own DCID, so
// the keys are derived each time (what a flow's first Initial costs);
// `v1_same_dcid`: one DCID, keys cached (a flow's second Initial);
// `derive_keys`: the key derivation alone.
//
// Sample output (release build, 2-vCPU VM shared with other builds and
// fuzzers, load average 12; docs/PERFORMANCE.md keeps the numbers of record):
//   case              median ns   min ns   max ns   (1200-byte datagrams, 21 runs of 100000)
//   v1_new_flows         5490.1   4746.2   6542.4
//   v2_new_flows         5032.0   4001.5   6603.1
//   v1_same_dcid         1919.3   1626.1   2193.4
//   derive_keys          2228.2   1990.2   2537.6
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuckoogate/quic/initial.hpp"
#include "quic_initial_builder.hpp"

namespace {

using namespace cg::test::quic;

constexpr std::size_t kDatagrams = 1024;

std::vector<Bytes> make(uint32_t version, bool same_dcid) {
  std::mt19937_64 rng(1);
  std::vector<Bytes> ds;
  for (std::size_t i = 0; i < kDatagrams; ++i) {
    InitialPacket p;
    p.version = version;
    p.dcid.resize(8);
    for (auto& b : p.dcid) b = static_cast<uint8_t>(same_dcid ? 0x42 : rng());
    p.scid = {1, 2, 3, 4, 5, 6, 7, 8};
    std::string sni = "host";
    sni += std::to_string(i);
    sni += ".example.com";
    // A ClientHello of ~560 bytes in 4-8 frames, then PADDING to 1200.
    const Bytes ch = client_hello(sni, 560, &rng);
    p.frames = split_crypto(ch, 1, rng, 8, true)[0];
    ds.push_back(datagram({p}));
  }
  return ds;
}

struct Result {
  double median, min, max;
};

template <class F>
Result time_runs(int runs, std::size_t packets, F&& body) {
  std::vector<double> ns;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < packets; ++i) body(i % kDatagrams);
    const auto t1 = std::chrono::steady_clock::now();
    ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(packets));
  }
  std::sort(ns.begin(), ns.end());
  return {ns[ns.size() / 2], ns.front(), ns.back()};
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 11;
  std::size_t packets = 200000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::max(1, std::atoi(argv[i + 1]));
    else if (std::strcmp(argv[i], "--packets") == 0) packets = std::max<std::size_t>(1, std::strtoull(argv[i + 1], nullptr, 10));
  }
#ifdef CG_NOT_RELEASE_BUILD
  std::printf("WARNING: not a release build; numbers are not representative\n");
#endif
  const char* err = nullptr;
  auto dec = cg::quic::Decoder::create(&err);
  if (!dec) {
    std::fprintf(stderr, "Decoder::create: %s\n", err);
    return 1;
  }
  std::vector<uint8_t> scratch(2048);
  cg::quic::Decoded out;
  std::size_t bad = 0, chunks = 0;
  auto decode_case = [&](const std::vector<Bytes>& ds) {
    return time_runs(runs, packets, [&](std::size_t i) {
      dec->decode(ds[i].data(), ds[i].size(), scratch.data(), scratch.size(), out);
      bad += out.status != cg::quic::Status::kOk;
      chunks += out.n_chunks;
    });
  };
  const auto v1 = make(cg::quic::kVersion1, false);
  const auto v2 = make(cg::quic::kVersion2, false);
  const auto same = make(cg::quic::kVersion1, true);
  std::printf("%-16s %10s %8s %8s   (%zu-byte datagrams, %d runs of %zu)\n", "case", "median ns", "min ns",
              "max ns", v1[0].size(), runs, packets);
  auto row = [](const char* name, Result r) {
    std::printf("%-16s %10.1f %8.1f %8.1f\n", name, r.median, r.min, r.max);
  };
  row("v1_new_flows", decode_case(v1));
  row("v2_new_flows", decode_case(v2));
  row("v1_same_dcid", decode_case(same));
  cg::quic::InitialKeys k{};
  row("derive_keys", time_runs(runs, packets, [&](std::size_t i) {
        const uint8_t* d = v1[i].data() + 6;  // the DCID
        (void)cg::quic::derive_client_initial_keys(cg::quic::kVersion1, d, 8, k);
        chunks += k.key[0] & 1;
      }));
  if (bad != 0) {
    std::fprintf(stderr, "%zu datagrams did not decode\n", bad);
    return 1;
  }
  std::printf("(%zu CRYPTO frames seen)\n", chunks);
  return 0;
}
