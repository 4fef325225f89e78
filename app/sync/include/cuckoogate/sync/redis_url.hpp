// Redis connection URLs, as redis-cli and most clients spell them:
//   redis://[[user]:password@]host[:port][/db]     TCP (port 6379, db 0 by default)
//   redis://[::1]:6380/2                          IPv6 literal in brackets
//   unix://[[user]:password@]/path/to/redis.sock[?db=N]
//   rediss://...                                  TCP with TLS (as redis://; port 6379 by default)
// User and password may be percent-encoded. TLS is ours (tls_pipe.hpp):
// Debian 12's hiredis 0.14 has none (docs/sync.md, "TLS").
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cg::sync {

// TLS to a TCP Redis (rediss://, or [sync] tls = true). Empty paths: the
// system's CA store, no client certificate; an empty server_name: the URL's
// host (checked against the certificate, and sent as SNI unless an address).
struct TlsOptions {
  bool on = false;
  std::string ca_file, ca_dir;     // trust anchors for the server's certificate (PEM)
  std::string cert_file, key_file; // client certificate chain and key (PEM), both or neither
  std::string server_name;         // the name the certificate must carry
  bool operator==(const TlsOptions&) const = default;
};

struct RedisUrl {
  std::string host;         // TCP; empty when unix_path is set
  uint16_t port = 6379;
  std::string unix_path;    // Unix socket; empty for TCP
  int db = 0;               // SELECT after connecting when non-zero
  std::string user;         // AUTH user password (ACL); empty: AUTH password
  std::string password;     // empty: no AUTH
  TlsOptions tls;           // rediss:// sets tls.on; the rest comes from [sync]
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
