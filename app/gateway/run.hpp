// `cuckoogate run`: the inline gateway on NIC or vdev ports until SIGINT/SIGTERM.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace cg {

struct RunOptions {
  std::string config;                 // TOML file, "" = none
  std::string ctl;                    // overrides the config
  std::string state_dir;              // overrides the config
  std::vector<std::string> rules;     // added to the config's rule files
  std::optional<unsigned> workers;    // overrides the config
  std::optional<bool> verify;         // overrides the config
  bool salvage = false;               // start despite damaged rule state
  std::optional<uint64_t> flows;      // flow-table entries per worker; overrides the config
  std::optional<bool> reject;         // --action reject|drop; overrides the config
  std::optional<bool> reject_nxdomain;  // --reject-dns nxdomain|refused; overrides the config
  std::optional<uint32_t> reject_rate;  // --reject-rate; overrides the config
  std::string checksums;              // --checksums auto|verify|off; overrides the config
  std::string redis;                  // --redis URL: overrides [sync] redis
  std::string gateway_id;             // --gateway-id: overrides [sync] gateway_id
  std::vector<std::string> eal;       // after `--`; replaces the config's [eal] args
};

// Exit status: 0 clean stop, 1 runtime failure, 2 bad configuration or rules.
int run_gateway(const RunOptions& o);

}  // namespace cg
