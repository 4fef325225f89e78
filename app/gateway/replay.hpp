// `cuckoogate replay`: pcap in, passed and dropped pcaps out, through the
// same data path as `run` (DPDK net_pcap vdevs, EAL set up internally).
#pragma once

#include <cstdint>

#include "gateway/config.hpp"
#include <string>
#include <vector>

namespace cg {

struct ReplayOptions {
  std::vector<std::string> rules;  // rule files, all-or-nothing
  std::string in, out, drop;       // drop empty: dropped packets are freed
  unsigned workers = 1;
  std::string ctl;                 // control socket path, empty = none
  std::string stats_json;
  bool verify = true;
  bool drop_malformed = false;
  unsigned loop = 1;               // replay the capture this many times
  uint64_t pps = 0;                // pace the input, 0 = as fast as possible
  std::size_t capacity = 0;        // rules the blocklist can hold, 0 = auto
  unsigned memory_mb = 512;        // EAL -m
  bool quiet = false;
  uint64_t flows = uint64_t{1} << 17;  // flow-table entries per worker (0 = none)
  bool reject = false;             // --action reject
  bool reject_nxdomain = false;    // --reject-dns nxdomain
  uint32_t reject_rate = 1000;     // --reject-rate
  FragmentsConfig fragments;       // --fragments, --frag-*: as [fragments]
  bool inspect_overflow_drop = false;  // --inspect-overflow drop
  std::string quic = "inspect";        // --quic inspect|block|pass
  std::string checksums = "auto";      // --checksums auto|verify|off
  std::string reply;               // reject replies to this pcap (empty: discarded)
  std::string redis;               // --redis URL: share the blocklist (docs/sync.md)
  std::string gateway_id;          // --gateway-id (default: the host name)
  std::vector<std::string> eal_extra;  // after `--`
};

// Exit status: 0 done, 1 runtime failure, 2 bad input (options, rules, pcap).
int replay(const ReplayOptions& o);

}  // namespace cg
