// The gateway's TOML configuration (config/README.md documents every key).
// Parsed once at start-up; any error names the file, the key and the problem.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cg {

// Where `cuckoogatectl` and the gateway meet when no path is given:
// $CUCKOOGATE_CTL, else /run/cuckoogate/cuckoogate.sock.
std::string default_ctl_path();

struct PairConfig {
  std::string a, b;  // port names as EAL knows them (PCI address, vdev name) or indexes
};

struct GatewayConfig {
  std::vector<std::string> eal;         // [eal] args
  std::optional<unsigned> workers;      // default: every EAL worker lcore
  bool verify = true;
  bool drop_malformed = false;          // malformed = "pass" | "drop"
  std::size_t capacity = 1u << 20;      // rules
  std::string ctl;                      // control socket path ("" = default)
  std::string state_dir;                // durable rule state ("" = none)
  std::vector<std::string> rules;       // rule files applied at start
  uint16_t rx_desc = 1024, tx_desc = 1024;
  std::vector<PairConfig> pairs;        // empty: pair EAL's ports in order
};

// Loads `path`; false and *err ("FILE: key 'x': ...") on any problem.
bool load_config(const std::string& path, GatewayConfig& c, std::string* err);

}  // namespace cg
