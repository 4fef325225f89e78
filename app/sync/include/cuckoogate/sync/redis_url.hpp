// Redis connection URLs, as redis-cli and most clients spell them:
//   redis://[[user]:password@]host[:port][/db]     TCP (port 6379, db 0 by default)
//   redis://[::1]:6380/2                          IPv6 literal in brackets
//   unix://[[user]:password@]/path/to/redis.sock[?db=N]
// User and password may be percent-encoded. `rediss://` (TLS) is refused with
// a clear message: Debian 12's hiredis 0.14 has no TLS (docs/sync.md).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cg::sync {

struct RedisUrl {
  std::string host;         // TCP; empty when unix_path is set
  uint16_t port = 6379;
  std::string unix_path;    // Unix socket; empty for TCP
  int db = 0;               // SELECT after connecting when non-zero
  std::string user;         // AUTH user password (ACL); empty: AUTH password
  std::string password;     // empty: no AUTH
  bool operator==(const RedisUrl&) const = default;
};

struct RedisUrlParse {
  std::optional<RedisUrl> url;  // empty => error says why
  std::string error;
};

RedisUrlParse parse_redis_url(std::string_view text);
// The URL without its password (for logs and `info`).
std::string describe(const RedisUrl& u);

}  // namespace cg::sync
