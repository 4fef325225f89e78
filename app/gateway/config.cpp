#include "gateway/config.hpp"

#include <charconv>
#include <cstdlib>
#include <exception>
#include <toml++/toml.h>

#include "control/request.hpp"
#include "cuckoogate/sync/redis_url.hpp"
#include "gateway/file_read.hpp"

namespace cg {

std::string default_ctl_path() {
  const char* env = std::getenv("CUCKOOGATE_CTL");
  return env != nullptr && *env != '\0' ? env : "/run/cuckoogate/cuckoogate.sock";
}

namespace {

// Two kinds of text make toml++ 3.3.0 (Debian 12's) misbehave, so they are
// refused before it sees them:
//  - It recurses once per part of a dotted key or table header ("a.b.c")
//    with no limit of its own (TOML_MAX_NESTED_VALUES bounds only nested
//    arrays and inline tables): a 100 KB line "a.a.a. ... = 1" overflows the
//    stack. No key here has more than two parts, so a line with more than
//    kMaxKeyDots dots outside strings and comments is refused (an upper bound
//    on the parts of its keys; dots in numbers count too, and no value here
//    is a float).
//  - Asked whether a raw non-ASCII character is whitespace (between tokens,
//    in a key, after a backslash in a """string"""), it reaches
//    __builtin_unreachable() for most of them (U+00A1 and up; upstream
//    marzer/tomlplusplus#295): undefined behaviour. Raw non-ASCII is
//    therefore allowed in comments only; a string can still hold any
//    character as a \uXXXX escape, which toml++ decodes without asking.
constexpr std::size_t kMaxKeyDots = 64;

// False and *err ("NAME:LINE:COLUMN: ...") for the first place breaking
// either rule above. The scan follows TOML's rules for where strings and
// comments start and end; on text that is not TOML it may lose track, but
// toml++ then fails on that text before the difference matters.
bool screen_text(std::string_view t, const std::string& name, std::string* err) {
  enum class In { kCode, kComment, kBasic, kLiteral, kMultiBasic, kMultiLiteral };
  In in = In::kCode;
  std::size_t line = 1, line_start = 0, dots = 0;
  auto fail = [&](std::size_t i, const std::string& why) {
    *err = name + ":" + std::to_string(line) + ":" + std::to_string(i - line_start + 1) + ": " + why;
    return false;
  };
  auto three = [&](std::size_t i, char q) { return t.substr(i, 3) == std::string(3, q); };
  // At i, the first of three closing quotes q: skips them and up to two more
  // (TOML's """a"""" is the string a" and its delimiter).
  auto close_multi = [&](std::size_t& i, char q) {
    i += 2;
    for (int extra = 0; extra < 2 && i + 1 < t.size() && t[i + 1] == q; ++extra) ++i;
  };
  const std::size_t bom = t.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;  // toml++ skips a UTF-8 BOM
  for (std::size_t i = bom; i < t.size(); ++i) {
    const char ch = t[i];
    if (ch == '\n') {
      ++line;
      line_start = i + 1;
      dots = 0;
      // A comment ends here; a one-line string too (toml++ then fails on it).
      if (in == In::kComment || in == In::kBasic || in == In::kLiteral) in = In::kCode;
      continue;
    }
    if (static_cast<unsigned char>(ch) >= 0x80 && in != In::kComment)
      return fail(i, "a non-ASCII character outside a comment (in a string, write it as \\uXXXX)");
    switch (in) {
      case In::kCode:
        if (ch == '#') {
          in = In::kComment;
        } else if (ch == '"' || ch == '\'') {
          const bool multi = three(i, ch);
          in = ch == '"' ? (multi ? In::kMultiBasic : In::kBasic) : (multi ? In::kMultiLiteral : In::kLiteral);
          if (multi) i += 2;
        } else if (ch == '.' && ++dots > kMaxKeyDots) {
          return fail(i, "more than " + std::to_string(kMaxKeyDots) +
                             " dots outside strings: keys nested this deep are not read");
        }
        break;
      case In::kComment:
        break;
      case In::kBasic:
      case In::kMultiBasic:
        // An escaped character (maybe a quote) is skipped, unless it is a line
        // break or non-ASCII: those are looked at on the next round.
        if (ch == '\\' && i + 1 < t.size() && t[i + 1] != '\n' && static_cast<unsigned char>(t[i + 1]) < 0x80) {
          ++i;
        } else if (ch == '"' && in == In::kBasic) {
          in = In::kCode;
        } else if (ch == '"' && three(i, '"')) {
          in = In::kCode;
          close_multi(i, '"');
        }
        break;
      case In::kLiteral:
      case In::kMultiLiteral:
        if (ch == '\'' && in == In::kLiteral) {
          in = In::kCode;
        } else if (ch == '\'' && three(i, '\'')) {
          in = In::kCode;
          close_multi(i, '\'');
        }
        break;
    }
  }
  return true;
}

// Known keys per table: an unknown key is an error (a typo must not be ignored).
bool check_keys(const toml::table& t, std::initializer_list<std::string_view> known,
                const std::string& where, std::string* err) {
  for (const auto& [k, v] : t) {
    bool ok = false;
    for (std::string_view n : known) ok = ok || k.str() == n;
    if (!ok) {
      *err = where + ": unknown key '" + std::string(k.str()) + "'";
      return false;
    }
  }
  return true;
}

// A string value bound for a C API (a path, an EAL argument): an embedded NUL
// (TOML allows "\u0000") would silently cut it short there, so it is refused.
bool c_string(const toml::node& n, std::string& out, const std::string& where, std::string* err) {
  const std::string* s = n.is_string() ? &n.as_string()->get() : nullptr;
  if (s == nullptr) {
    *err = where + ": expected a string";
    return false;
  }
  if (s->find('\0') != std::string::npos) {
    *err = where + ": a string may not contain a NUL character";
    return false;
  }
  out = *s;
  return true;
}

// A path: a string, and not "" (which would read as "not given").
bool c_path(const toml::node& n, std::string& out, const std::string& where, std::string* err) {
  if (!c_string(n, out, where, err)) return false;
  if (out.empty()) {
    *err = where + ": an empty path (leave the key out for the default)";
    return false;
  }
  return true;
}

bool string_list(const toml::node* n, std::vector<std::string>& out, const std::string& where,
                 std::string* err) {
  if (n == nullptr) return true;
  const toml::array* a = n->as_array();
  if (a == nullptr) {
    *err = where + ": expected an array of strings";
    return false;
  }
  for (const auto& e : *a) {
    if (!e.is_string()) {
      *err = where + ": expected an array of strings";
      return false;
    }
    std::string v;
    if (!c_string(e, v, where, err)) return false;
    out.push_back(std::move(v));
  }
  return true;
}

// gateway.max_memory: bytes, as an integer or a string of digits with an
// optional binary suffix K, M, G or T ("2G" = 2^31); 1 MiB to 256 GiB.
bool memory_size(const toml::table& t, const char* key, std::size_t& out, const std::string& where,
                 std::string* err) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return true;
  constexpr uint64_t kMin = uint64_t{1} << 20, kMax = uint64_t{256} << 30;
  uint64_t v = 0;  // 0: not a valid size
  if (const auto i = n->value<int64_t>(); n->is_integer() && i && *i > 0) {
    v = static_cast<uint64_t>(*i);
  } else if (const auto s = n->value<std::string>(); n->is_string() && s) {
    const char* end = s->data() + s->size();
    uint64_t num = 0;
    const auto [p, ec] = std::from_chars(s->data(), end, num);
    const std::string_view suffix(p, static_cast<std::size_t>(end - p));
    const std::size_t found = suffix.size() == 1 ? std::string_view("KMGT").find(suffix[0]) : 0;
    const std::size_t unit = suffix.empty() ? 0 : found + 1;  // 1 = K ... 4 = T
    if (ec == std::errc() && p != s->data() && suffix.size() <= 1 && found != std::string_view::npos &&
        num <= (kMax >> (10 * unit)))
      v = num << (10 * unit);
  }
  if (v < kMin || v > kMax) {
    *err = where + "." + key + ": expected bytes from 1M to 256G (an integer, or a string like \"512M\" or \"2G\")";
    return false;
  }
  out = static_cast<std::size_t>(v);
  return true;
}

template <class T>
bool integer(const toml::table& t, const char* key, T lo, T hi, T& out, const std::string& where,
             std::string* err) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return true;
  auto v = n->value<int64_t>();
  if (!n->is_integer() || !v || *v < static_cast<int64_t>(lo) || *v > static_cast<int64_t>(hi)) {
    *err = where + "." + key + ": expected an integer from " + std::to_string(lo) + " to " +
           std::to_string(hi);
    return false;
  }
  out = static_cast<T>(*v);
  return true;
}

// A port by name or number; "" for anything else (or a name with a NUL).
std::string port_ref(const toml::node& n) {
  if (n.is_integer()) return std::to_string(n.as_integer()->get());
  if (n.is_string() && n.as_string()->get().find('\0') == std::string::npos) return n.as_string()->get();
  return {};
}

// A string that is not empty, holds no control character and is at most max bytes.
bool plain_string(const toml::table& t, const char* key, std::size_t max, std::string& out,
                  const std::string& where, std::string* err) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return true;
  std::string v;
  if (!c_string(*n, v, where + "." + key, err)) return false;
  for (const char ch : v) {
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) {
      *err = where + "." + key + ": a control character is not allowed";
      return false;
    }
  }
  if (v.empty() || v.size() > max) {
    *err = where + "." + key + ": expected 1 to " + std::to_string(max) + " characters";
    return false;
  }
  out = std::move(v);
  return true;
}

bool read_sync(const toml::table& t, const std::string& w, SyncConfig& c, std::string* err) {
  if (!check_keys(t, {"redis", "stream", "gateway_id", "user", "password", "snapshot_interval",
                      "timeout_ms", "wait_replicas", "offline_writes", "tls", "tls_ca", "tls_ca_dir",
                      "tls_cert", "tls_key", "tls_server_name"}, w, err))
    return false;
  // TLS (docs/sync.md, "TLS"): on with rediss:// or tls = true; the tls_* keys need it on.
  if (const toml::node* v = t.get("tls")) {
    if (!v->is_boolean()) {
      *err = w + ".tls: expected true or false";
      return false;
    }
    c.tls = *v->value<bool>();
  }
  if (!plain_string(t, "tls_ca", 4096, c.tls_ca, w, err) || !plain_string(t, "tls_ca_dir", 4096, c.tls_ca_dir, w, err) ||
      !plain_string(t, "tls_cert", 4096, c.tls_cert, w, err) || !plain_string(t, "tls_key", 4096, c.tls_key, w, err) ||
      !plain_string(t, "tls_server_name", 253, c.tls_server_name, w, err))
    return false;
  if (c.tls_cert.empty() != c.tls_key.empty()) {
    *err = w + (c.tls_cert.empty() ? ".tls_key" : ".tls_cert") + ": a client certificate needs both tls_cert and tls_key";
    return false;
  }
  std::string offline = "refuse";
  if (!plain_string(t, "offline_writes", 16, offline, w, err)) return false;
  if (offline != "refuse" && offline != "queue") {
    *err = w + ".offline_writes: expected \"refuse\" or \"queue\", got \"" + offline + "\"";
    return false;
  }
  c.queue_offline = offline == "queue";
  if (!plain_string(t, "redis", 1024, c.redis, w, err) || !plain_string(t, "stream", 256, c.stream, w, err) ||
      !plain_string(t, "gateway_id", 128, c.gateway_id, w, err) || !plain_string(t, "user", 256, c.user, w, err) ||
      !plain_string(t, "password", 1024, c.password, w, err))
    return false;
  if (!integer(t, "snapshot_interval", 0u, 86400u, c.snapshot_interval_s, w, err) ||
      !integer(t, "timeout_ms", 10u, 60000u, c.timeout_ms, w, err) ||
      !integer(t, "wait_replicas", 0u, 16u, c.wait_replicas, w, err))
    return false;
  if (c.redis.empty()) {
    *err = w + ": 'redis' (the server's URL) is required in [sync]";
    return false;
  }
  const sync::RedisUrlParse u = sync::parse_redis_url(c.redis);
  if (!u.url) {
    *err = w + ".redis: " + u.error;
    return false;
  }
  const bool tls_on = c.tls || u.url->tls.on;
  if (tls_on && !u.url->unix_path.empty()) {
    *err = w + ": TLS is for TCP Redis URLs, not a Unix socket";
    return false;
  }
  for (const auto& [k, v] : {std::pair<const char*, const std::string*>{"tls_ca", &c.tls_ca}, {"tls_ca_dir", &c.tls_ca_dir},
                             {"tls_cert", &c.tls_cert}, {"tls_server_name", &c.tls_server_name}}) {
    if (!tls_on && !v->empty()) {
      *err = w + "." + k + ": TLS is off (use a rediss:// URL or tls = true)";
      return false;
    }
  }
  return true;
}

// [[rules]] path = "...", format = "hosts", as = "src": rule files in a feed format.
bool read_rule_feeds(const toml::node* n, const std::string& path, std::vector<RuleFeedConfig>& out,
                     std::string* err) {
  if (n == nullptr) return true;
  const toml::array* a = n->as_array();
  if (a == nullptr) {
    *err = path + ": 'rules' must be an array of tables ([[rules]] path = ..., format = ...)";
    return false;
  }
  for (std::size_t i = 0; i < a->size(); ++i) {
    const std::string w = path + ": rules[" + std::to_string(i) + "]";
    const toml::table* t = (*a)[i].as_table();
    if (t == nullptr) {
      *err = w + ": expected a table";
      return false;
    }
    if (!check_keys(*t, {"path", "format", "as", "set"}, w, err)) return false;
    RuleFeedConfig f;
    const toml::node* pn = t->get("path");
    if (pn == nullptr) {
      *err = w + ": 'path' (the file) is required";
      return false;
    }
    if (!c_path(*pn, f.path, w + ".path", err)) return false;
    std::string format = "rules", as;
    if (!plain_string(*t, "format", 16, format, w, err) || !plain_string(*t, "as", 16, as, w, err)) return false;
    const auto fmt = feeds::format_from_name(format);
    if (!fmt) {
      *err = w + ".format: expected \"rules\", \"hosts\", \"domains\" or \"cidr\"";
      return false;
    }
    f.feed.format = *fmt;
    if (!as.empty()) {
      const auto kind = feeds::cidr_kind_from_name(as);
      if (*fmt != feeds::Format::kCidr || !kind) {
        *err = w + ".as: expected \"src\", \"dst\" or \"ip\", with format = \"cidr\" only";
        return false;
      }
      f.feed.cidr_kind = *kind;
    }
    if (!plain_string(*t, "set", 256, f.set, w, err)) return false;
    if (t->get("set") != nullptr && !valid_set_name(f.set)) {
      *err = w + ".set: " + set_name_expected();
      return false;
    }
    if (f.set == "default") f.set.clear();  // the default set is "" throughout
    out.push_back(std::move(f));
  }
  return true;
}

bool read_fragments(const toml::table& t, const std::string& w, FragmentsConfig& c, std::string* err) {
  if (!check_keys(t, {"reassemble", "datagrams", "fragments", "timeout_ms"}, w, err)) return false;
  if (const toml::node* v = t.get("reassemble")) {
    if (!v->is_boolean()) {
      *err = w + ".reassemble: expected true or false";
      return false;
    }
    c.reassemble = *v->value<bool>();
  }
  return integer(t, "datagrams", 1u, 1u << 20, c.datagrams, w, err) &&
         integer(t, "fragments", 1u, 1u << 23, c.fragments, w, err) &&
         integer(t, "timeout_ms", 1u, 60000u, c.timeout_ms, w, err);
}

// The keys of a parsed document; `path` names the file in errors.
bool read_root(const toml::table& root, const std::string& path, GatewayConfig& c, std::string* err) {
  if (!check_keys(root, {"eal", "gateway", "pair", "sync", "rules", "fragments"}, path, err)) return false;
  if (const toml::table* t = root["fragments"].as_table()) {
    if (!read_fragments(*t, path + ": fragments", c.fragments, err)) return false;
  } else if (root.contains("fragments")) {
    *err = path + ": 'fragments' must be a table";
    return false;
  }
  if (!read_rule_feeds(root.get("rules"), path, c.rule_feeds, err)) return false;
  if (const toml::table* t = root["sync"].as_table()) {
    if (!read_sync(*t, path + ": sync", c.sync, err)) return false;
  } else if (root.contains("sync")) {
    *err = path + ": 'sync' must be a table";
    return false;
  }
  if (const toml::table* eal = root["eal"].as_table()) {
    if (!check_keys(*eal, {"args"}, path + ": [eal]", err)) return false;
    if (!string_list(eal->get("args"), c.eal, path + ": eal.args", err)) return false;
  } else if (root.contains("eal")) {
    *err = path + ": 'eal' must be a table";
    return false;
  }
  if (const toml::table* g = root["gateway"].as_table()) {
    const std::string w = path + ": gateway";
    if (!check_keys(*g, {"workers", "verify", "malformed", "capacity", "max_memory", "ctl", "ctl_idle_timeout",
                         "state_dir", "rules", "rx_desc", "tx_desc", "flows_per_worker", "action",
                         "inspect_overflow", "quic", "checksums", "reject_dns", "reject_rate"}, w, err))
      return false;
    unsigned workers = 0;
    if (g->contains("workers")) {
      if (!integer(*g, "workers", 1u, 128u, workers, w, err)) return false;
      c.workers = workers;
    }
    if (const toml::node* v = g->get("verify")) {
      if (!v->is_boolean()) {
        *err = w + ".verify: expected true or false";
        return false;
      }
      c.verify = *v->value<bool>();
    }
    if (const toml::node* m = g->get("malformed")) {
      const auto s = m->value<std::string>();
      if (!s || (*s != "pass" && *s != "drop")) {
        *err = w + ".malformed: expected \"pass\" or \"drop\"";
        return false;
      }
      c.drop_malformed = *s == "drop";
    }
    // The exact set stores a rule's hit-counter slot in 29 bits (ExactSet::kMaxSlots).
    if (!integer(*g, "capacity", std::size_t{1}, std::size_t{536870912}, c.capacity, w, err)) return false;
    if (!memory_size(*g, "max_memory", c.max_memory, w, err)) return false;
    if (!integer(*g, "rx_desc", uint16_t{64}, uint16_t{32768}, c.rx_desc, w, err)) return false;
    if (!integer(*g, "tx_desc", uint16_t{64}, uint16_t{32768}, c.tx_desc, w, err)) return false;
    if (const toml::node* s = g->get("ctl"); s != nullptr && !c_path(*s, c.ctl, w + ".ctl", err))
      return false;
    if (!integer(*g, "ctl_idle_timeout", 1u, 3600u, c.ctl_idle_timeout_s, w, err)) return false;
    if (!integer(*g, "flows_per_worker", uint64_t{0}, uint64_t{1} << 31, c.flows_per_worker, w, err))
      return false;
    if (const toml::node* a = g->get("action")) {
      const auto s = a->value<std::string>();
      if (!s || (*s != "drop" && *s != "reject")) {
        *err = w + ".action: expected \"drop\" or \"reject\"";
        return false;
      }
      c.reject = *s == "reject";
    }
    if (const toml::node* a = g->get("reject_dns")) {
      const auto s = a->value<std::string>();
      if (!s || (*s != "refused" && *s != "nxdomain")) {
        *err = w + ".reject_dns: expected \"refused\" or \"nxdomain\"";
        return false;
      }
      c.reject_nxdomain = *s == "nxdomain";
    }
    if (!integer(*g, "reject_rate", 1u, kMaxRejectRate, c.reject_rate, w, err)) return false;
    if (const toml::node* a = g->get("inspect_overflow")) {
      const auto s = a->value<std::string>();
      if (!s || (*s != "pass" && *s != "drop")) {
        *err = w + ".inspect_overflow: expected \"pass\" or \"drop\"";
        return false;
      }
      c.inspect_overflow_drop = *s == "drop";
    }
    if (const toml::node* a = g->get("quic")) {
      const auto s = a->value<std::string>();
      if (!s || (*s != "inspect" && *s != "block" && *s != "pass")) {
        *err = w + ".quic: expected \"inspect\", \"block\" or \"pass\"";
        return false;
      }
      c.quic = *s;
    }
    if (const toml::node* a = g->get("checksums")) {
      const auto s = a->value<std::string>();
      if (!s || (*s != "auto" && *s != "verify" && *s != "off")) {
        *err = w + ".checksums: expected \"auto\", \"verify\" or \"off\"";
        return false;
      }
      c.checksums = *s;
    }
    if (const toml::node* s = g->get("state_dir");
        s != nullptr && !c_path(*s, c.state_dir, w + ".state_dir", err))
      return false;
    if (!string_list(g->get("rules"), c.rules, w + ".rules", err)) return false;
  } else if (root.contains("gateway")) {
    *err = path + ": 'gateway' must be a table";
    return false;
  }
  if (const toml::node* pn = root.get("pair")) {
    const toml::array* pairs = pn->as_array();
    if (pairs == nullptr) {
      *err = path + ": 'pair' must be an array of tables ([[pair]])";
      return false;
    }
    for (std::size_t i = 0; i < pairs->size(); ++i) {
      const std::string w = path + ": pair[" + std::to_string(i) + "]";
      const toml::table* t = (*pairs)[i].as_table();
      if (t == nullptr) {
        *err = w + ": expected a table";
        return false;
      }
      if (!check_keys(*t, {"ports"}, w, err)) return false;
      const toml::array* ports = (*t)["ports"].as_array();
      if (ports == nullptr || ports->size() != 2 || port_ref((*ports)[0]).empty() ||
          port_ref((*ports)[1]).empty()) {
        *err = w + ".ports: expected two port names or numbers";
        return false;
      }
      c.pairs.push_back({port_ref((*ports)[0]), port_ref((*ports)[1])});
    }
  }
  return true;
}

}  // namespace

bool parse_config(std::string_view text, const std::string& name, GatewayConfig& c, std::string* err) {
  // toml++ reports a syntax error by throwing; nothing else it is asked here
  // should throw, but whatever does (std::bad_alloc) becomes an error too,
  // since a file named as the configuration can hold any bytes.
  if (!screen_text(text, name, err)) return false;
  try {
    const toml::table root = toml::parse(text, name);
    return read_root(root, name, c, err);
  } catch (const toml::parse_error& e) {
    const auto& src = e.source();
    *err = name + ":" + std::to_string(src.begin.line) + ":" + std::to_string(src.begin.column) +
           ": " + std::string(e.description());
  } catch (const std::exception& e) {
    *err = name + ": cannot parse: " + e.what();
  }
  return false;
}

bool load_config(const std::string& path, GatewayConfig& c, std::string* err) {
  std::string text;
  if (!read_regular_file(path, "configuration file", kMaxConfigFileBytes, text, err)) return false;
  return parse_config(text, path, c, err);
}

}  // namespace cg
