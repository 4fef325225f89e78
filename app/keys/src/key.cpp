// Canonical key encoding of rules, listing-order keys and the key hashes.
#include <xxhash.h>

#include <cstring>

#include "cuckoogate/keys/classify.hpp"
#include "cuckoogate/keys/rule.hpp"
#include "encoding.hpp"

namespace cg {

IpAddr mask_address(const IpAddr& a, unsigned len) noexcept {
  IpAddr m = a;
  for (std::size_t i = 0; i < m.bytes.size(); ++i) {
    const unsigned from = static_cast<unsigned>(i) * 8;  // first bit of byte i
    if (len <= from) {
      m.bytes[i] = 0;
    } else if (len < from + 8) {
      m.bytes[i] = static_cast<uint8_t>(m.bytes[i] & (0xff00u >> (len - from)));
    }
  }
  return m;
}

// [kind][family | 0x80][len][the first ceil(len / 8) address bytes, host bits
// clear]. Never the length of an exact address key (2 + 4 or 2 + 16 bytes)
// with the same second byte, so the two encodings cannot collide.
std::size_t encode_prefix_key(uint8_t* out, RuleKind kind, uint8_t family, const uint8_t* addr,
                              unsigned len) noexcept {
  out[0] = static_cast<uint8_t>(kind);
  out[1] = static_cast<uint8_t>(family | kPrefixFamilyBit);
  out[2] = static_cast<uint8_t>(len);
  const unsigned whole = len / 8, rest = len % 8;
  std::memcpy(out + 3, addr, whole);
  if (rest == 0) return 3 + whole;
  out[3 + whole] = static_cast<uint8_t>(addr[whole] & (0xff00u >> rest));
  return 4 + whole;
}

namespace {

// rule_key() of the kinds with a fixed-size binary key (not url, host) into
// buf (kFlowKeyMax bytes); returns its length.
std::size_t encode_binary_key(const Rule& r, uint8_t* buf) noexcept {
  static_assert(kPrefixKeyMax <= kFlowKeyMax);
  std::size_t n = 0;
  switch (r.kind) {
    case RuleKind::kFlow:
      n = detail::encode_flow_key(buf, r.src.family, r.proto, r.src.bytes.data(), r.sport,
                                  r.dst.bytes.data(), r.dport);
      break;
    case RuleKind::kSrc:
    case RuleKind::kDst:
    case RuleKind::kIp:
      n = r.prefix_len ? encode_prefix_key(buf, r.kind, r.addr.family, r.addr.bytes.data(), *r.prefix_len)
                       : detail::encode_addr_key(buf, r.kind, r.addr.family, r.addr.bytes.data());
      break;
    case RuleKind::kService:
      n = detail::encode_service_key(buf, r.addr.family, r.proto, r.addr.bytes.data(), r.dport);
      break;
    case RuleKind::kUrl:
    case RuleKind::kHost: break;  // names: rule_key
  }
  return n;
}

}  // namespace

std::string rule_key(const Rule& r) {
  switch (r.kind) {
    case RuleKind::kUrl: {
      std::string s(1, static_cast<char>(RuleKind::kUrl));
      return s + r.name;
    }
    case RuleKind::kHost: {
      std::string s(1, static_cast<char>(RuleKind::kHost));
      for (char c : r.name) s += c == '.' ? static_cast<char>(detail::kHostSep) : c;
      return s;
    }
    default: break;
  }
  uint8_t buf[kFlowKeyMax];
  const std::size_t n = encode_binary_key(r, buf);
  return std::string(reinterpret_cast<const char*>(buf), n);
}

std::optional<Rule> rule_from_key(const void* data, std::size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (len < 2 || p[0] < 1 || p[0] > kRuleKindCount) return std::nullopt;
  Rule r;
  r.kind = static_cast<RuleKind>(p[0]);
  auto addr = [&](std::size_t at, uint8_t family, IpAddr& a) {
    a.family = family;
    std::memcpy(a.bytes.data(), p + at, a.size());
  };
  auto be16 = [&](std::size_t at) { return static_cast<uint16_t>((p[at] << 8) | p[at + 1]); };
  const uint8_t fam = p[1];
  const std::size_t an = fam == 4 ? 4 : 16;
  const bool family_ok = fam == 4 || fam == 6;
  switch (r.kind) {
    case RuleKind::kFlow:
      if (!family_ok || len != 3 + 2 * (an + 2)) return std::nullopt;
      r.proto = p[2];
      addr(3, fam, r.src);
      r.sport = be16(3 + an);
      addr(5 + an, fam, r.dst);
      r.dport = be16(5 + 2 * an);
      if (!proto_has_ports(r.proto) && (r.sport != 0 || r.dport != 0)) return std::nullopt;
      break;
    case RuleKind::kSrc:
    case RuleKind::kDst:
    case RuleKind::kIp:
      if ((fam & kPrefixFamilyBit) != 0) {  // a prefix: [kind][family|0x80][len][ceil(len/8) bytes]
        const auto pf = static_cast<uint8_t>(fam & ~kPrefixFamilyBit);
        if ((pf != 4 && pf != 6) || len < 3 || p[2] >= address_bits(pf) || len != 3 + (p[2] + 7u) / 8)
          return std::nullopt;
        r.addr.family = pf;
        std::memcpy(r.addr.bytes.data(), p + 3, len - 3);
        if (mask_address(r.addr, p[2]) != r.addr) return std::nullopt;  // host bits set
        r.prefix_len = p[2];
        break;
      }
      if (!family_ok || len != 2 + an) return std::nullopt;
      addr(2, fam, r.addr);
      break;
    case RuleKind::kService:
      if (!family_ok || len != 5 + an) return std::nullopt;
      r.proto = p[2];
      addr(3, fam, r.addr);
      r.dport = be16(3 + an);
      if (!proto_has_ports(r.proto) && r.dport != 0) return std::nullopt;
      break;
    case RuleKind::kUrl:
      r.name.assign(reinterpret_cast<const char*>(p + 1), len - 1);
      break;
    case RuleKind::kHost:
      for (std::size_t i = 1; i < len; ++i)
        r.name += p[i] == detail::kHostSep ? '.' : static_cast<char>(p[i]);
      break;
  }
  return r;
}

std::string rule_order_key(const Rule& r) {
  std::string s;
  append_rule_order_key(r, &s);
  return s;
}

void append_rule_order_key(const Rule& r, std::string* out) {
  std::string& s = *out;
  s += static_cast<char>(r.kind);
  auto addr = [&](const IpAddr& a) {
    s += static_cast<char>(a.family);
    s.append(reinterpret_cast<const char*>(a.bytes.data()), a.size());
  };
  auto be16 = [&](uint16_t v) {
    s += static_cast<char>(v >> 8);
    s += static_cast<char>(v & 0xff);
  };
  switch (r.kind) {
    case RuleKind::kFlow:
      addr(r.src);
      s.append(reinterpret_cast<const char*>(r.dst.bytes.data()), r.dst.size());
      s += static_cast<char>(r.proto);
      be16(r.sport);
      be16(r.dport);
      break;
    case RuleKind::kSrc:
    case RuleKind::kDst:
    case RuleKind::kIp:
      // A prefix lists after the address rule of its network address and
      // before the longer prefixes there: 10.0.0.0, 10.0.0.0/8, 10.0.0.0/16.
      addr(r.addr);
      if (r.prefix_len) s += static_cast<char>(*r.prefix_len);
      break;
    case RuleKind::kService:
      addr(r.addr);
      s += static_cast<char>(r.proto);
      be16(r.dport);
      break;
    case RuleKind::kUrl:
      s += r.name;
      break;
    case RuleKind::kHost: {
      // Labels from the top-level domain down, each followed by '\0', which
      // sorts below every name byte: a domain lists right before its
      // subdomains, and "example" before "example-x".
      std::string_view n = r.name;
      while (!n.empty()) {
        const std::size_t dot = n.rfind('.');
        const std::size_t b = dot == std::string_view::npos ? 0 : dot + 1;
        s.append(n.substr(b));
        s += '\0';
        n = dot == std::string_view::npos ? std::string_view{} : n.substr(0, dot);
      }
      break;
    }
  }
}

std::optional<Rule> rule_from_order_key(std::string_view key) {
  const auto* p = reinterpret_cast<const uint8_t*>(key.data());
  const std::size_t len = key.size();
  if (len < 1 || p[0] < 1 || p[0] > kRuleKindCount) return std::nullopt;
  Rule r;
  r.kind = static_cast<RuleKind>(p[0]);
  std::size_t at = 1;
  // [family][4 or 16 address bytes]; false when they are not there.
  auto addr = [&](IpAddr& a) {
    if (at >= len || (p[at] != 4 && p[at] != 6)) return false;
    a.family = p[at++];
    if (len - at < a.size()) return false;
    std::memcpy(a.bytes.data(), p + at, a.size());
    at += a.size();
    return true;
  };
  auto be16 = [&](uint16_t& v) {
    if (len - at < 2) return false;
    v = static_cast<uint16_t>((p[at] << 8) | p[at + 1]);
    at += 2;
    return true;
  };
  switch (r.kind) {
    case RuleKind::kFlow:
      if (!addr(r.src) || len - at < r.src.size() + 5) return std::nullopt;
      r.dst.family = r.src.family;
      std::memcpy(r.dst.bytes.data(), p + at, r.dst.size());
      at += r.dst.size();
      r.proto = p[at++];
      if (!be16(r.sport) || !be16(r.dport)) return std::nullopt;
      if (!proto_has_ports(r.proto) && (r.sport != 0 || r.dport != 0)) return std::nullopt;
      break;
    case RuleKind::kSrc:
    case RuleKind::kDst:
    case RuleKind::kIp:
      if (!addr(r.addr)) return std::nullopt;
      if (at < len) {  // a prefix: one length byte, shorter than the address, no host bit set
        const uint8_t pl = p[at++];
        if (pl >= address_bits(r.addr.family) || mask_address(r.addr, pl) != r.addr) return std::nullopt;
        r.prefix_len = pl;
      }
      break;
    case RuleKind::kService:
      if (!addr(r.addr) || at >= len) return std::nullopt;
      r.proto = p[at++];
      if (!be16(r.dport)) return std::nullopt;
      if (!proto_has_ports(r.proto) && r.dport != 0) return std::nullopt;
      break;
    case RuleKind::kUrl:
      r.name.assign(key.substr(1));
      at = len;
      break;
    case RuleKind::kHost: {
      // Labels from the top-level domain down, each ended by '\0': rebuilt
      // front to back by prepending. An empty label, a '.' inside one or a
      // missing end is not a key rule_order_key makes.
      std::string_view rest = key.substr(1);
      if (rest.empty()) return std::nullopt;
      r.name.reserve(rest.size() - 1);
      while (!rest.empty()) {
        const std::size_t z = rest.find('\0');
        if (z == 0 || z == std::string_view::npos || rest.substr(0, z).find('.') != std::string_view::npos)
          return std::nullopt;
        if (!r.name.empty()) r.name.insert(0, 1, '.');
        r.name.insert(0, rest.substr(0, z));
        rest.remove_prefix(z + 1);
      }
      at = len;
      break;
    }
  }
  if (at != len) return std::nullopt;
  return r;
}

bool rule_key_of_order_key(std::string_view order, std::string* out) {
  if (order.empty()) return false;
  switch (static_cast<RuleKind>(order[0])) {
    case RuleKind::kUrl:  // [kind][the url]: both keys are these bytes
      out->assign(order);
      return true;
    case RuleKind::kHost: {
      // [kind] then labels from the top-level domain down, each ended by
      // '\0' -> [kind] then the labels from the first down to the top-level
      // domain, joined by kHostSep: the labels are written back to front.
      // Refused like rule_from_order_key: no label, an empty label, a '.'
      // inside one, or a missing end.
      std::string_view rest = order.substr(1);
      if (rest.empty()) return false;
      out->assign(order.size() - 1, '\0');
      (*out)[0] = static_cast<char>(RuleKind::kHost);
      std::size_t end = out->size();  // the next label ends here
      while (!rest.empty()) {
        const std::size_t z = rest.find('\0');
        if (z == 0 || z == std::string_view::npos || rest.substr(0, z).find('.') != std::string_view::npos)
          return false;
        end -= z;
        std::memcpy(out->data() + end, rest.data(), z);
        rest.remove_prefix(z + 1);
        if (!rest.empty()) (*out)[--end] = static_cast<char>(detail::kHostSep);
      }
      return true;
    }
    default: {
      const std::optional<Rule> r = rule_from_order_key(order);  // binary kinds: no name, no allocation
      if (!r) return false;
      uint8_t buf[kFlowKeyMax];
      out->assign(reinterpret_cast<const char*>(buf), encode_binary_key(*r, buf));
      return true;
    }
  }
}

uint64_t key_hash(const void* data, std::size_t len) noexcept {
  const auto* p = static_cast<const uint8_t*>(data);
  if (is_shared_address_key(data, len)) return detail::address_hash(p + 1, len - 1);
  return XXH3_64bits(data, len);
}

Key128 key_hash128(const void* data, std::size_t len) noexcept {
  const XXH128_hash_t h = XXH3_128bits(data, len);
  return Key128{h.low64, h.high64};
}

}  // namespace cg
