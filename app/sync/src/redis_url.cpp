#include "cuckoogate/sync/redis_url.hpp"

#include <charconv>

namespace cg::sync {
namespace {

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding of the user and password; false on a broken escape.
bool unescape(std::string_view in, std::string* out) {
  out->clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int h = hex(in[i + 1]), l = hex(in[i + 2]);
    if (h < 0 || l < 0) return false;
    out->push_back(static_cast<char>(h * 16 + l));
    i += 2;
  }
  return true;
}

template <class T>
bool number(std::string_view s, T max, T* v) {
  if (s.empty() || s.size() > 10) return false;
  uint64_t x = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (ec != std::errc() || end != s.data() + s.size() || x > static_cast<uint64_t>(max)) return false;
  *v = static_cast<T>(x);
  return true;
}

bool has_ctl(std::string_view s) {
  for (const char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  return false;
}

RedisUrlParse bad(std::string why) { return {std::nullopt, std::move(why)}; }

}  // namespace

RedisUrlParse parse_redis_url(std::string_view text) {
  if (has_ctl(text)) return bad("redis URL holds a control character");
  const std::size_t colon = text.find("://");
  if (colon == std::string_view::npos)
    return bad("redis URL '" + std::string(text) + "' has no scheme (redis://host:port/db or unix:///path)");
  const std::string_view scheme = text.substr(0, colon);
  std::string_view rest = text.substr(colon + 3);
  if (scheme != "redis" && scheme != "rediss" && scheme != "unix")
    return bad("redis URL scheme '" + std::string(scheme) + "' is not redis, rediss or unix");
  RedisUrl u;
  u.tls.on = scheme == "rediss";
  // Credentials: everything before the last '@' of the authority (for unix:
  // before the path's leading '/').
  const std::size_t auth_end = scheme == "unix" ? rest.find('/') : rest.find_first_of("/?");
  const std::string_view authority = rest.substr(0, auth_end);
  const std::size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    const std::string_view cred = authority.substr(0, at);
    const std::size_t c = cred.find(':');
    if (c == std::string_view::npos) {
      // redis://secret@host: a lone word is the password (as redis-cli reads it).
      if (!unescape(cred, &u.password)) return bad("redis URL: broken %-escape in the password");
    } else if (!unescape(cred.substr(0, c), &u.user) || !unescape(cred.substr(c + 1), &u.password)) {
      return bad("redis URL: broken %-escape in the user or password");
    }
    rest.remove_prefix(at + 1);
  }
  std::string_view query;
  if (const std::size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  if (scheme == "unix") {
    if (rest.empty() || rest.front() != '/') return bad("unix redis URL needs an absolute path: unix:///run/redis.sock");
    u.unix_path.assign(rest);
    if (u.unix_path.size() > 107) return bad("unix redis socket path is longer than 107 bytes");
  } else {
    std::string_view hostport = rest.substr(0, rest.find('/'));
    std::string_view path = rest.substr(hostport.size());
    std::string_view port;
    if (!hostport.empty() && hostport.front() == '[') {
      const std::size_t close = hostport.find(']');
      if (close == std::string_view::npos) return bad("redis URL: '[' of an IPv6 address is not closed");
      u.host.assign(hostport.substr(1, close - 1));
      const std::string_view after = hostport.substr(close + 1);
      if (!after.empty() && after.front() != ':') return bad("redis URL: junk after the IPv6 address");
      if (!after.empty()) port = after.substr(1);
      if (after.size() == 1) return bad("redis URL: empty port");
    } else {
      const std::size_t c = hostport.find(':');
      u.host.assign(hostport.substr(0, c));
      if (c != std::string_view::npos) {
        port = hostport.substr(c + 1);
        if (port.empty()) return bad("redis URL: empty port");
      }
    }
    if (u.host.empty()) return bad("redis URL has no host: redis://127.0.0.1:6379/0");
    if (!port.empty() && (!number<uint16_t>(port, 65535, &u.port) || u.port == 0))
      return bad("redis URL port '" + std::string(port) + "' is not 1..65535");
    if (path.size() > 1 && !number<int>(path.substr(1), 1 << 20, &u.db))
      return bad("redis URL database '" + std::string(path.substr(1)) + "' is not a number");
  }
  while (!query.empty()) {
    const std::string_view kv = query.substr(0, query.find('&'));
    query.remove_prefix(std::min(query.size(), kv.size() + 1));
    if (kv.rfind("db=", 0) == 0) {
      if (!number<int>(kv.substr(3), 1 << 20, &u.db)) return bad("redis URL: db= is not a number");
    } else if (!kv.empty()) {
      return bad("redis URL: unknown parameter '" + std::string(kv) + "' (only db=)");
    }
  }
  return {std::move(u), {}};
}

std::string describe(const RedisUrl& u) {
  std::string s = !u.unix_path.empty() ? "unix://" : u.tls.on ? "rediss://" : "redis://";
  if (!u.user.empty()) s += u.user + "@";
  else if (!u.password.empty()) s += "***@";
  if (!u.unix_path.empty()) {
    s += u.unix_path;
    if (u.db != 0) {
      s += "?db=";
      s += std::to_string(u.db);
    }
    return s;
  }
  // Appended piece by piece: "lit" + std::string trips GCC 12's -Wrestrict
  // false positive, an error with -Werror (CI).
  const bool v6 = u.host.find(':') != std::string::npos;
  if (v6) s += '[';
  s += u.host;
  if (v6) s += ']';
  s += ':';
  s += std::to_string(u.port);
  s += '/';
  s += std::to_string(u.db);
  return s;
}

}  // namespace cg::sync
