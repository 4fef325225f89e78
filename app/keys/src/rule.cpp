// Rule language: tokenising, parsing with line/column errors, canonical text.
#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <span>
#include <cstring>

#include "cuckoogate/keys/rule.hpp"
#include "encoding.hpp"

namespace cg {
namespace {

constexpr std::string_view kKindNames[kRuleKindCount] = {"flow", "src",     "dst", "ip",
                                                         "service", "url", "host"};

constexpr std::string_view kExpectKind = "rule kind (flow, src, dst, ip, service, url, host)";
constexpr std::string_view kExpectProto =
    "protocol (tcp, udp, sctp, icmp, icmpv6 or a number 0-255)";

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(detail::ascii_lower(static_cast<uint8_t>(c)));
  return r;
}

struct Token {
  std::string_view text;
  std::size_t col;  // 1-based column of the first byte
};

// Thrown inside the parser only; parse_rule turns it into a ParseError.
struct Fail {
  std::size_t col;
  std::string expected;
};

std::optional<uint8_t> proto_from_text(std::string_view t) {
  const std::string s = lower(t);
  if (s == "tcp") return kProtoTcp;
  if (s == "udp") return kProtoUdp;
  if (s == "sctp") return kProtoSctp;
  if (s == "icmp") return kProtoIcmp;
  if (s == "icmpv6") return kProtoIcmpv6;
  if (s.empty() || s.size() > 3) return std::nullopt;
  unsigned v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  if (v > 255) return std::nullopt;
  return static_cast<uint8_t>(v);
}

std::string proto_text(uint8_t p) {
  switch (p) {
    case kProtoTcp: return "tcp";
    case kProtoUdp: return "udp";
    case kProtoSctp: return "sctp";
    case kProtoIcmp: return "icmp";
    case kProtoIcmpv6: return "icmpv6";
    default: return std::to_string(p);
  }
}

uint16_t parse_port(std::string_view t, std::size_t col) {
  if (t.empty()) throw Fail{col, "port number after ':'"};
  uint32_t v = 0;
  for (char c : t) {
    if (c < '0' || c > '9') throw Fail{col, "port number 0-65535"};
    v = v * 10 + static_cast<uint32_t>(c - '0');
    if (v > 65535) throw Fail{col, "port number 0-65535"};
  }
  return static_cast<uint16_t>(v);
}

IpAddr parse_addr_or_fail(std::string_view t, std::size_t col, std::string_view what) {
  auto a = parse_address(t);
  if (!a) throw Fail{col, std::string(what)};
  return *a;
}

struct Endpoint {
  IpAddr addr;
  uint16_t port = 0;
};

// "a.b.c.d:port" / "[v6]:port" when with_port, else "a.b.c.d" / "v6" / "[v6]".
Endpoint parse_endpoint(const Token& tok, bool with_port, std::string_view role) {
  const std::string_view t = tok.text;
  // The "expected" texts are built only on failure (no allocation per rule).
  const auto addr_what = [&](std::string_view more) { return std::string(role) + " address" + std::string(more); };
  if (const std::size_t sl = t.find('/'); sl != std::string_view::npos)
    throw Fail{tok.col + sl, addr_what(" (prefixes only in src, dst and ip rules)")};
  Endpoint ep;
  if (t.front() == '[') {
    const std::size_t rb = t.find(']');
    if (rb == std::string_view::npos) throw Fail{tok.col, "']' after the IPv6 address"};
    ep.addr = parse_addr_or_fail(t.substr(1, rb - 1), tok.col + 1, "IPv6 address inside '[ ]'");
    if (ep.addr.family != 6) throw Fail{tok.col + 1, "IPv6 address inside '[ ]'"};
    const std::size_t after = rb + 1;
    if (!with_port) {
      if (after != t.size()) throw Fail{tok.col + after, "end of address (this protocol has no ports)"};
      return ep;
    }
    if (after == t.size()) throw Fail{tok.col + after, "':' and port number after the address"};
    if (t[after] != ':') throw Fail{tok.col + after, "':' and port number after the address"};
    ep.port = parse_port(t.substr(after + 1), tok.col + after + 1);
    return ep;
  }
  const std::size_t colons = static_cast<std::size_t>(std::count(t.begin(), t.end(), ':'));
  if (!with_port) {
    if (colons == 1) throw Fail{tok.col + t.find(':'), "end of address (this protocol has no ports)"};
    if (auto a = parse_address(t)) {
      ep.addr = *a;
      return ep;
    }
    // (A role that names the families already says it once.)
    throw Fail{tok.col, addr_what(role.starts_with("IPv4 or IPv6") ? "" : " (IPv4 or IPv6)")};
  }
  if (colons > 1) {
    throw Fail{tok.col, addr_what(" and port: a.b.c.d:port or [IPv6]:port")};
  }
  const std::size_t c = t.find(':');
  if (auto a = parse_address(t.substr(0, c))) {
    ep.addr = *a;
  } else {
    throw Fail{tok.col, addr_what(" and port: a.b.c.d:port or [IPv6]:port")};
  }
  if (c == std::string_view::npos) {
    throw Fail{tok.col + t.size(), "':' and port number after the address"};
  }
  ep.port = parse_port(t.substr(c + 1), tok.col + c + 1);
  return ep;
}

// "a.b.c.d", "v6", "[v6]", or a CIDR prefix "a.b.c.d/len", "v6/len",
// "[v6]/len". A full-length prefix is the address rule; a prefix with host
// bits set is refused with the canonical prefix in the error (as iproute2
// refuses "10.1.2.3/16").
void parse_address_rule(const Token& tok, Rule& r) {
  const std::size_t slash = tok.text.find('/');
  if (slash == std::string_view::npos) {
    r.addr = parse_endpoint(tok, false, "IPv4 or IPv6").addr;
    return;
  }
  const Token a{tok.text.substr(0, slash), tok.col};
  if (a.text.empty()) throw Fail{tok.col, "IPv4 or IPv6 address before '/'"};
  r.addr = parse_endpoint(a, false, "IPv4 or IPv6 network").addr;
  std::string_view lt = tok.text.substr(slash + 1);
  const std::size_t lcol = tok.col + slash + 1;
  const unsigned bits = address_bits(r.addr.family);
  const std::string expect_len = "prefix length 0-" + std::to_string(bits) + " after '/'";
  if (lt.empty()) throw Fail{lcol, expect_len};
  while (lt.size() > 1 && lt.front() == '0') lt.remove_prefix(1);  // leading zeros, any number of them
  if (lt.size() > 3) throw Fail{lcol, expect_len};
  unsigned len = 0;
  for (char c : lt) {
    if (c < '0' || c > '9') throw Fail{lcol, expect_len};
    len = len * 10 + static_cast<unsigned>(c - '0');
  }
  if (len > bits) throw Fail{lcol, expect_len};
  const IpAddr net = mask_address(r.addr, len);
  if (net != r.addr) {
    throw Fail{tok.col, "a prefix without host bits: " + format_address(net) + "/" + std::to_string(len) +
                            " (host bits are set in " + std::string(tok.text) + ")"};
  }
  if (len < bits) r.prefix_len = static_cast<uint8_t>(len);
}

bool host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

// Validates an already lower-cased, trailing-dot-stripped host name; returns
// the 0-based offset of the first bad byte or npos.
std::size_t check_host_name(std::string_view s) {
  std::size_t label = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '.') {
      if (label == 0) return i;
      label = 0;
      continue;
    }
    if (!host_char(s[i]) || ++label > 63) return i;
  }
  if (label == 0) return s.size();
  return std::string_view::npos;
}

constexpr std::string_view kExpectHost =
    "host name (letters, digits, '-' and '_' in dot-separated labels of at most 63)";

std::string parse_host(const Token& tok) {
  std::string s = lower(tok.text);
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s.empty()) throw Fail{tok.col, std::string(kExpectHost)};
  const std::size_t bad = check_host_name(s);
  if (bad != std::string_view::npos) throw Fail{tok.col + bad, std::string(kExpectHost)};
  if (s.size() > kMaxNameLen) throw Fail{tok.col, "host name of at most 253 bytes"};
  return s;
}

std::string parse_url(const Token& tok) {
  std::string_view t = tok.text;
  std::size_t col = tok.col;
  if (t.size() >= 7 && lower(t.substr(0, 7)) == "http://") {
    t.remove_prefix(7);
    col += 7;
  } else if (const std::size_t sch = t.find("://");
             sch != std::string_view::npos && sch < t.find_first_of("/?")) {
    throw Fail{col, "url without a scheme, or with http:// (host[:port]/path)"};
  }
  const std::size_t auth_end = std::min(t.find('/'), t.find('?'));
  const std::string_view auth = t.substr(0, std::min(auth_end, t.size()));
  std::string_view path = auth_end == std::string_view::npos ? std::string_view{} : t.substr(auth_end);
  if (auth.empty()) throw Fail{col, "host name in the url"};
  const auto* araw = reinterpret_cast<const uint8_t*>(auth.data());
  detail::AuthorityParts a;
  if (!detail::split_authority(araw, auth.size(), a)) {
    if (auth.front() == '[' && auth.find(']') == std::string_view::npos)
      throw Fail{col, "']' closing the IPv6 literal in the url"};
    const std::size_t rb = auth.front() == '[' ? auth.find(']') + 1 : 0;
    const std::size_t colon = auth.find(':', rb);
    if (colon != std::string_view::npos && colon > 0) throw Fail{col + colon + 1, "port number 0-65535 in the url"};
    throw Fail{col, "host name in the url"};
  }
  if (a.host_len > kMaxNameLen) throw Fail{col, "host name of at most 253 bytes in the url"};
  std::string canon(detail::authority_len(a), '\0');
  detail::write_authority(araw, a, reinterpret_cast<uint8_t*>(canon.data()));
  const std::string_view host = std::string_view(canon).substr(0, a.host_len);
  if (host.front() == '[') {
    auto v6 = parse_address(host.substr(1, host.size() - 2));
    if (!v6 || v6->family != 6) throw Fail{col + 1, "IPv6 address inside '[ ]' in the url"};
  } else {
    const std::size_t bad = check_host_name(host);
    if (bad != std::string_view::npos) throw Fail{col + bad, std::string(kExpectHost) + " in the url"};
  }
  // The path and query as traffic's are canonicalised (encoding.hpp).
  std::string p(path.size() + 1, '\0'), tmp(path.size() + 1, '\0');
  std::size_t query_at = 0;
  p.resize(detail::canonical_path(reinterpret_cast<const uint8_t*>(path.data()), path.size(),
                                  reinterpret_cast<uint8_t*>(p.data()), reinterpret_cast<uint8_t*>(tmp.data()),
                                  &query_at));
  std::string out = canon + p;
  if (out.size() > kMaxUrlLen) throw Fail{tok.col, "url of at most 2048 bytes"};
  return out;
}

Rule parse_tokens(std::span<const Token> tok, std::size_t end_col) {
  std::size_t i = 0;
  auto next = [&](std::string_view what) -> const Token& {
    if (i >= tok.size()) throw Fail{end_col, std::string(what)};
    return tok[i++];
  };
  const Token& kt = next(kExpectKind);
  const auto kind = kind_from_name(lower(kt.text));
  if (!kind) throw Fail{kt.col, std::string(kExpectKind)};
  Rule r;
  r.kind = *kind;
  switch (r.kind) {
    case RuleKind::kFlow: {
      const Token& pt = next(kExpectProto);
      const auto p = proto_from_text(pt.text);
      if (!p) throw Fail{pt.col, std::string(kExpectProto)};
      r.proto = *p;
      const bool ports = proto_has_ports(r.proto);
      const Token& st = next(ports ? "source address and port" : "source address");
      const Endpoint s = parse_endpoint(st, ports, "source");
      const Token& dt = next(ports ? "destination address and port" : "destination address");
      const Endpoint d = parse_endpoint(dt, ports, "destination");
      if (d.addr.family != s.addr.family) {
        throw Fail{dt.col, std::string("destination address of the same family as the source (IPv") +
                               (s.addr.family == 4 ? "4)" : "6)")};
      }
      r.src = s.addr;
      r.sport = s.port;
      r.dst = d.addr;
      r.dport = d.port;
      break;
    }
    case RuleKind::kSrc:
    case RuleKind::kDst:
    case RuleKind::kIp: {
      const Token& at = next("IPv4 or IPv6 address or prefix (address/length)");
      parse_address_rule(at, r);
      break;
    }
    case RuleKind::kService: {
      const Token& pt = next(kExpectProto);
      const auto p = proto_from_text(pt.text);
      if (!p) throw Fail{pt.col, std::string(kExpectProto)};
      r.proto = *p;
      const bool ports = proto_has_ports(r.proto);
      const Token& at = next(ports ? "destination address and port" : "destination address");
      const Endpoint d = parse_endpoint(at, ports, "destination");
      r.addr = d.addr;
      r.dport = d.port;
      break;
    }
    case RuleKind::kUrl:
      r.name = parse_url(next("url (host[:port]/path?query)"));
      break;
    case RuleKind::kHost:
      r.name = parse_host(next("host name"));
      break;
  }
  if (i < tok.size()) throw Fail{tok[i].col, "end of rule"};
  return r;
}

}  // namespace

std::string_view kind_name(RuleKind k) noexcept {
  const auto i = static_cast<std::size_t>(k);
  if (i < 1 || i > kRuleKindCount) return {};
  return kKindNames[i - 1];
}

std::optional<RuleKind> kind_from_name(std::string_view s) noexcept {
  for (std::size_t i = 0; i < kRuleKindCount; ++i) {
    if (kKindNames[i] == s) return static_cast<RuleKind>(i + 1);
  }
  return std::nullopt;
}

std::optional<RuleAction> rule_action_named(std::string_view word) noexcept {
  if (word == "drop") return RuleAction::kDrop;
  if (word == "reject") return RuleAction::kReject;
  return std::nullopt;
}

std::string_view rule_action_name(RuleAction a) noexcept {
  switch (a) {
    case RuleAction::kDrop: return "drop";
    case RuleAction::kReject: return "reject";
    default: return {};
  }
}

std::optional<IpAddr> parse_address(std::string_view text) {
  char buf[INET6_ADDRSTRLEN + 1];
  if (text.empty() || text.size() >= sizeof buf) return std::nullopt;
  IpAddr a;
  if (text.find(':') == std::string_view::npos) {
    // inet_pton(AF_INET)'s grammar, read in place (no copy, strlen and call
    // per address of a bulk load): exactly four dot-separated decimal parts
    // of 0-255, no leading zeros, nothing else. keys_rule_test checks it
    // against inet_pton.
    unsigned part = 0, value = 0, digits = 0;
    for (const char c : text) {
      if (c >= '0' && c <= '9') {
        if (digits > 0 && value == 0) return std::nullopt;  // a leading zero
        value = value * 10 + static_cast<unsigned>(c - '0');
        if (value > 255) return std::nullopt;
        ++digits;
      } else if (c == '.' && digits > 0 && part < 3) {
        a.bytes[part++] = static_cast<uint8_t>(value);
        value = digits = 0;
      } else {
        return std::nullopt;
      }
    }
    if (part != 3 || digits == 0) return std::nullopt;
    a.bytes[3] = static_cast<uint8_t>(value);
    a.family = 4;
  } else {
    if (text.find('\0') != std::string_view::npos) return std::nullopt;  // inet_pton would stop there
    std::memcpy(buf, text.data(), text.size());
    buf[text.size()] = '\0';
    if (inet_pton(AF_INET6, buf, a.bytes.data()) != 1) return std::nullopt;
    a.family = 6;
  }
  return a;
}

std::string format_address(const IpAddr& a) {
  char buf[INET6_ADDRSTRLEN];
  if (a.family == 4) return inet_ntop(AF_INET, a.bytes.data(), buf, sizeof buf);
  if (a.family == 6) return inet_ntop(AF_INET6, a.bytes.data(), buf, sizeof buf);
  return {};
}

std::string ParseError::message() const {
  return "line " + std::to_string(line) + ", column " + std::to_string(column) + ": expected " +
         expected;
}

RuleParse parse_rule(std::string_view text, std::size_t line) {
  const std::size_t hash = text.find('#');
  if (hash != std::string_view::npos) text = text.substr(0, hash);
  // No rule has more than 4 tokens, so the first kMaxTokens are all the
  // parser reads (a 5th and later ones only need to exist: "end of rule"
  // names the first surplus token). No allocation per line.
  constexpr std::size_t kMaxTokens = 8;
  std::array<Token, kMaxTokens> tok;
  std::size_t n_tok = 0;
  std::size_t end_col = 1;
  for (std::size_t i = 0; i < text.size();) {
    if (is_rule_space(text[i])) {
      ++i;
      continue;
    }
    const std::size_t b = i;
    while (i < text.size() && !is_rule_space(text[i])) ++i;
    if (n_tok < kMaxTokens) tok[n_tok++] = {text.substr(b, i - b), b + 1};
    end_col = i + 1;
  }
  RuleParse res;
  try {
    res.rule = parse_tokens(std::span<const Token>(tok.data(), n_tok), end_col);
  } catch (const Fail& f) {
    res.error = ParseError{line, f.col, f.expected};
  }
  return res;
}

namespace {

// Removes later repeats of a rule (same canonical key), keeping file order.
// Sorting (128-bit key hash, position) makes repeats neighbours; equal hashes
// are confirmed by comparing the keys, so a hash collision never drops a rule.
// Cheaper than a hash set of key strings (a node and a string per rule).
void drop_repeats(std::vector<Rule>& rules) {
  struct Entry {
    Key128 h;
    uint32_t at;
  };
  std::vector<Entry> e(rules.size());
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const std::string k = rule_key(rules[i]);
    e[i] = {key_hash128(k.data(), k.size()), static_cast<uint32_t>(i)};
  }
  std::sort(e.begin(), e.end(), [](const Entry& a, const Entry& b) {
    if (a.h.hi != b.h.hi) return a.h.hi < b.h.hi;
    if (a.h.lo != b.h.lo) return a.h.lo < b.h.lo;
    return a.at < b.at;
  });
  std::vector<bool> repeat(rules.size(), false);
  bool any = false;
  for (std::size_t i = 0; i < e.size();) {
    std::size_t j = i + 1;
    while (j < e.size() && e[j].h == e[i].h) ++j;
    // [i, j) share a hash, in file order: a rule whose key equals a kept
    // earlier one's is a repeat. Distinct keys in one group need a 128-bit
    // collision, so `kept` holds one key in practice (linear in the group).
    if (j - i > 1) {
      std::vector<std::string> kept{rule_key(rules[e[i].at])};
      for (std::size_t a = i + 1; a < j; ++a) {
        std::string k = rule_key(rules[e[a].at]);
        if (std::find(kept.begin(), kept.end(), k) != kept.end()) {
          repeat[e[a].at] = any = true;
        } else {
          kept.push_back(std::move(k));
        }
      }
    }
    i = j;
  }
  if (!any) return;
  std::size_t w = 0;
  for (std::size_t i = 0; i < rules.size(); ++i)
    if (!repeat[i]) {
      if (w != i) rules[w] = std::move(rules[i]);  // never a self-move: it empties the name
      ++w;
    }
  rules.resize(w);
}

}  // namespace

RuleFileParse parse_rules(std::string_view file_text, bool skip_bad) {
  RuleFileParse out;
  std::size_t line = 0;
  while (!file_text.empty()) {
    ++line;
    const std::size_t nl = file_text.find('\n');
    std::string_view l = file_text.substr(0, nl);
    file_text = nl == std::string_view::npos ? std::string_view{} : file_text.substr(nl + 1);
    const std::size_t hash = l.find('#');
    const std::string_view content = l.substr(0, hash);
    if (std::all_of(content.begin(), content.end(), is_rule_space)) continue;
    RuleParse p = parse_rule(l, line);
    if (!p.rule) {
      out.errors.push_back(std::move(p.error));
      continue;
    }
    out.rules.push_back(std::move(*p.rule));
  }
  if (!skip_bad && !out.errors.empty()) out.rules.clear();
  drop_repeats(out.rules);
  return out;
}

std::string format_rule(const Rule& r) {
  std::string s(kind_name(r.kind));
  auto endpoint = [&](const IpAddr& a, uint16_t port, bool with_port) {
    s += ' ';
    if (with_port && a.family == 6) {
      s += '[' + format_address(a) + "]:" + std::to_string(port);
    } else if (with_port) {
      s += format_address(a) + ':' + std::to_string(port);
    } else {
      s += format_address(a);
    }
  };
  switch (r.kind) {
    case RuleKind::kFlow:
      s += ' ' + proto_text(r.proto);
      endpoint(r.src, r.sport, proto_has_ports(r.proto));
      endpoint(r.dst, r.dport, proto_has_ports(r.proto));
      break;
    case RuleKind::kSrc:
    case RuleKind::kDst:
    case RuleKind::kIp:
      endpoint(r.addr, 0, false);
      if (r.prefix_len) s += '/' + std::to_string(*r.prefix_len);
      break;
    case RuleKind::kService:
      s += ' ' + proto_text(r.proto);
      endpoint(r.addr, r.dport, proto_has_ports(r.proto));
      break;
    case RuleKind::kUrl:
    case RuleKind::kHost:
      s += ' ' + r.name;
      break;
  }
  return s;
}

}  // namespace cg
