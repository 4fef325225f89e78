// The gateway's TOML configuration (config/README.md documents every key).
// Parsed once at start-up; any error names the file, the key and the problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cuckoogate/feeds/feed.hpp"

namespace cg {

// Where `cuckoogatectl` and the gateway meet when no path is given:
// $CUCKOOGATE_CTL, else /run/cuckoogate/cuckoogate.sock.
std::string default_ctl_path();

struct PairConfig {
  std::string a, b;  // port names as EAL knows them (PCI address, vdev name) or indexes
};

// [sync]: one blocklist shared by many gateways through a Redis stream
// (docs/sync.md). Empty redis: no sync.
struct SyncConfig {
  std::string redis;                    // redis://host:port/db, rediss://..., unix:///path (validated)
  std::string stream = "cuckoogate:rules";
  std::string gateway_id;               // "" = the host name
  std::string user, password;           // override the URL's (ACL user, requirepass)
  unsigned snapshot_interval_s = 60;    // 0: this gateway never writes snapshots
  unsigned timeout_ms = 1000;           // connect and each Redis command
  unsigned wait_replicas = 0;           // > 0: WAIT for replicas before an OK
  bool queue_offline = false;           // offline_writes = "queue" (default "refuse")
  bool tls = false;                     // TLS with a redis:// URL too (rediss:// turns it on)
  std::string tls_ca, tls_ca_dir;       // CA file / directory for the server's certificate ("": the system's)
  std::string tls_cert, tls_key;        // client certificate and key (both or neither)
  std::string tls_server_name;          // "": the URL's host
};

// [[rules]]: a rule file or feed applied at start (docs/rules.md, "Feed formats").
struct RuleFeedConfig {
  std::string path;
  feeds::Options feed;  // format = "rules" | "hosts" | "domains" | "cidr", as = "src" | "dst" | "ip"
  std::string set;      // set = "NAME": the named set its rules join ("": default)
};

// [fragments]: IP reassembly in the workers (docs/dataplane.md, "IP fragments").
struct FragmentsConfig {
  bool reassemble = true;        // false: each fragment judged alone (the transport header may be missing)
  uint32_t datagrams = 1024;     // per worker, collected at once
  uint32_t fragments = 4096;     // per worker, original fragments held at once
  uint32_t timeout_ms = 5000;    // an incomplete datagram is dropped this long after its first fragment
};

struct GatewayConfig {
  std::vector<std::string> eal;         // [eal] args
  std::optional<unsigned> workers;      // default: every EAL worker lcore
  bool verify = true;
  bool drop_malformed = false;          // malformed = "pass" | "drop"
  std::size_t capacity = 1u << 20;      // rules at start; the tables grow past it
  std::size_t max_memory = 0;           // bytes the lookup tables may grow to; 0 = default (4 GiB)
  std::string ctl;                      // control socket path ("" = default)
  unsigned ctl_idle_timeout_s = 30;     // control clients idle this long are closed
  uint64_t flows_per_worker = uint64_t{1} << 17;  // flow-table entries; 0 = no flow table
  bool reject = false;                  // action = "drop" | "reject"
  bool reject_nxdomain = false;         // reject_dns = "refused" | "nxdomain"
  uint32_t reject_rate = 1000;          // reject replies per second per worker
  bool inspect_overflow_drop = false;   // inspect_overflow = "pass" | "drop"
  std::string quic = "inspect";         // quic = "inspect" | "block" | "pass"
  std::string checksums = "auto";       // checksums = "auto" | "verify" | "off"
  std::string state_dir;                // durable rule state ("" = none)
  std::vector<std::string> rules;       // rule files applied at start
  std::vector<RuleFeedConfig> rule_feeds;  // [[rules]]: files in a feed format, applied at start
  uint16_t rx_desc = 1024, tx_desc = 1024;
  std::vector<PairConfig> pairs;        // empty: pair EAL's ports in order
  SyncConfig sync;
  FragmentsConfig fragments;
};

// The largest configuration file read (1 MiB; the examples are ~2 KiB).
inline constexpr std::size_t kMaxConfigFileBytes = std::size_t{1} << 20;
// reject_rate's (and --reject-rate's) upper bound: replies per second per worker.
inline constexpr uint32_t kMaxRejectRate = 1000000;  // TokenBucket clamps past 10^6

// Loads `path`, which must be a regular file of at most kMaxConfigFileBytes
// (read_regular_file in gateway/file_read.hpp: a directory, FIFO or device is
// an error, never a hang), then parses it as parse_config does. False and
// *err ("FILE: is a directory", "FILE:LINE:COLUMN: ...", "FILE: gateway.x:
// ...") on any problem; `c` may then be partly filled.
bool load_config(const std::string& path, GatewayConfig& c, std::string* err);

// Parses TOML `text` into `c`; `name` (the file name) starts every error.
// Never throws: whatever the bytes, it returns true with `c` filled, or false
// with *err set. Strings that must reach C APIs (paths, EAL arguments, port
// names) may not contain NUL. Thread-safe: no shared state.
bool parse_config(std::string_view text, const std::string& name, GatewayConfig& c, std::string* err);

}  // namespace cg
