// Internal: the key encodings and the url-authority canonicalisation, written
// once and used by both rule_key() (control plane) and classify() (data
// path), so the two cannot drift apart. Allocation-free, bounds-checked by
// the caller-provided capacities.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <xxhash.h>

#include "cuckoogate/keys/rule.hpp"

namespace cg::detail {

// Host-key separator: a host key is its kind byte followed by the name with
// every '.' written as this byte, so each parent domain's key is a suffix of
// the child's key (docs/rules.md).
inline constexpr uint8_t kHostSep = static_cast<uint8_t>(RuleKind::kHost);

inline uint8_t ascii_lower(uint8_t c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<uint8_t>(c + 32) : c;
}

// ---- URL path and query canonicalisation (docs/rules.md, "url") ----------
// The same for rules and traffic (RFC 3986 §6.2.2 plus what servers do):
// percent-encoded unreserved characters decoded and other escapes' hex
// upper-cased (path and query); in the path, repeated slashes merged and dot
// segments removed (§5.2.4; ".." never climbs above the root); the query kept
// as it is otherwise. The result always starts with '/'. `in` is the path and
// query as sent (starting with '/' or '?', or empty), without the fragment.
// out and tmp need n + 1 bytes each; never longer than that. *query_at: the
// index of '?' in out, or the returned length when there is no query.

inline int hex_value(uint8_t c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  c = ascii_lower(c);
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

inline bool is_unreserved(uint8_t c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

// Percent-normalises in[0, n) into out; returns the length written (<= n).
// Idempotent: normalising the output again changes nothing. So an escaped
// hex digit that would complete an escape behind a stray '%' (one that
// starts no escape: "%%30f", "%4%31") stays encoded; decoded, it would make
// "%0f" or "%41", which a second pass would decode again. A rule's key then
// survives its own text (format_rule, parse_rule), and a rule and the
// traffic it names, both normalised once, still meet.
// What servers such as nginx decode in a path besides the unreserved
// characters before they match it (RFC 3986's sub-delims, ':', '@', '/'):
// never '%', '?', '#' or what cannot stand raw in a url.
inline bool is_server_decoded(uint8_t c) noexcept {
  return c == '!' || c == '$' || c == '&' || c == '\'' || c == '(' || c == ')' || c == '*' || c == '+' ||
         c == ',' || c == ';' || c == '=' || c == ':' || c == '@' || c == '/';
}

// `wide`: also decode is_server_decoded() characters (the traffic's second
// url form; rules are never written in it).
template <bool wide = false>
inline std::size_t normalise_escapes(const uint8_t* in, std::size_t n, uint8_t* out) noexcept {
  constexpr char kHex[] = "0123456789ABCDEF";
  std::size_t o = 0;
  std::size_t stray = SIZE_MAX;  // where in out the last stray '%' is
  for (std::size_t i = 0; i < n; ++i) {
    const int h = in[i] == '%' && i + 2 < n ? hex_value(in[i + 1]) : -1;
    const int l = h >= 0 ? hex_value(in[i + 2]) : -1;
    if (l < 0) {  // not an escape (or a broken one): as it is
      if (in[i] == '%') stray = o;
      out[o++] = in[i];
      continue;
    }
    const auto c = static_cast<uint8_t>(h << 4 | l);
    // Whether c, written at o, would be the first or second hex digit after
    // a stray '%' (the first: out[o - 1] is that '%'; the second: the one
    // before is, and out[o - 1] is a hex digit).
    const bool completes = hex_value(c) >= 0 && stray != SIZE_MAX &&
                           (o == stray + 1 || (o == stray + 2 && hex_value(out[o - 1]) >= 0));
    if ((is_unreserved(c) || (wide && is_server_decoded(c))) && !completes) {
      out[o++] = c;
    } else {
      out[o++] = '%';
      out[o++] = static_cast<uint8_t>(kHex[h]);
      out[o++] = static_cast<uint8_t>(kHex[l]);
    }
    i += 2;
  }
  return o;
}

// `wide`: the path as a server that decodes every escape of a character
// that may stand raw in it reads it (is_server_decoded: "/a%2F..%2Fb" is
// "/b" there); the query as in the plain form.
template <bool wide = false>
inline std::size_t canonical_path(const uint8_t* in, std::size_t n, uint8_t* out, uint8_t* tmp,
                                  std::size_t* query_at) noexcept {
  std::size_t q = 0;
  while (q < n && in[q] != '?') ++q;
  const std::size_t plen = normalise_escapes<wide>(in, q, tmp);
  // Segments of the decoded path; out always ends in '/' while building.
  std::size_t o = 0;
  out[o++] = '/';
  bool trailing = plen == 0 || tmp[plen - 1] == '/';
  std::size_t i = 0;
  while (i < plen) {
    if (tmp[i] == '/') {
      ++i;
      continue;  // empty segments: repeated slashes merge
    }
    std::size_t e = i;
    while (e < plen && tmp[e] != '/') ++e;
    const std::size_t len = e - i;
    const bool last = e >= plen;
    if (len == 1 && tmp[i] == '.') {
      trailing = trailing || last;
    } else if (len == 2 && tmp[i] == '.' && tmp[i + 1] == '.') {
      if (o > 1) {  // drop the last segment (out ends "/seg/")
        --o;
        while (o > 0 && out[o - 1] != '/') --o;
      }
      trailing = trailing || last;
    } else {
      std::memcpy(out + o, tmp + i, len);
      o += len;
      out[o++] = '/';
      if (last) trailing = tmp[plen - 1] == '/';
    }
    i = e;
  }
  if (!trailing && o > 1) --o;  // the last segment had no slash after it
  *query_at = o;
  if (q < n) o += normalise_escapes(in + q, n - q, out + o);
  return o;
}

inline void put_be16(uint8_t* p, uint16_t v) noexcept {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}

// Copies an address with a compile-time size (plain moves, no memcpy call).
inline void put_addr(uint8_t* p, uint8_t family, const uint8_t* addr) noexcept {
  if (family == 4) {
    std::memcpy(p, addr, 4);
  } else {
    std::memcpy(p, addr, 16);
  }
}

// The IPv4 encodings are assembled in registers and written with one store
// (8 or 16 bytes, which may run up to 7 bytes past the key: callers leave
// that room). XXH3 then reads them back with loads that each lie inside that
// single store, so the CPU forwards them from the store buffer; a key written
// byte by byte would make those loads wait for the stores to reach the cache.
#if defined(__SSE2__)
inline constexpr bool kWideStores = std::endian::native == std::endian::little;
#else
inline constexpr bool kWideStores = false;
#endif
inline constexpr std::size_t kEncodeSlack = 7;

inline uint32_t load32(const uint8_t* p) noexcept {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline void store16(uint8_t* out, uint64_t lo, uint64_t hi) noexcept {
#if defined(__SSE2__)
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                   _mm_set_epi64x(static_cast<long long>(hi), static_cast<long long>(lo)));
#else
  std::memcpy(out, &lo, 8);
  std::memcpy(out + 8, &hi, 8);
#endif
}

// [kind][family 4|6][address 4|16]
inline std::size_t encode_addr_key(uint8_t* out, RuleKind kind, uint8_t family,
                                   const uint8_t* addr) noexcept {
  if (kWideStores && family == 4) {
    const uint64_t v = static_cast<uint64_t>(kind) | (uint64_t{4} << 8) |
                       (static_cast<uint64_t>(load32(addr)) << 16);
    std::memcpy(out, &v, 8);
    return 6;
  }
  const std::size_t n = family == 4 ? 4 : 16;
  out[0] = static_cast<uint8_t>(kind);
  out[1] = family;
  put_addr(out + 2, family, addr);
  return 2 + n;
}

// key_hash() of an address key, from its bytes after the kind ([family]
// [address], n = 5 or 17): one value for the src, dst and ip keys of one
// address. Its own seed keeps it apart from whole-encoding hashes.
inline constexpr uint64_t kAddressSeed = 0x61646472'6b657973ULL;  // "addrkeys"
inline uint64_t address_hash(const uint8_t* family_addr, std::size_t n) noexcept {
  return XXH3_64bits_withSeed(family_addr, n, kAddressSeed);
}

// [1][family][proto][src][sport be16][dst][dport be16]
inline std::size_t encode_flow_key(uint8_t* out, uint8_t family, uint8_t proto,
                                   const uint8_t* src, uint16_t sport, const uint8_t* dst,
                                   uint16_t dport) noexcept {
  if (kWideStores && family == 4) {  // 15 bytes
    const uint64_t lo = static_cast<uint64_t>(RuleKind::kFlow) | (uint64_t{4} << 8) |
                        (uint64_t{proto} << 16) | (static_cast<uint64_t>(load32(src)) << 24) |
                        (uint64_t{static_cast<uint8_t>(sport >> 8)} << 56);
    const uint64_t hi = uint64_t{static_cast<uint8_t>(sport)} |
                        (static_cast<uint64_t>(load32(dst)) << 8) |
                        (uint64_t{static_cast<uint8_t>(dport >> 8)} << 40) |
                        (uint64_t{static_cast<uint8_t>(dport)} << 48);
    store16(out, lo, hi);
    return 15;
  }
  const std::size_t n = family == 4 ? 4 : 16;
  uint8_t* p = out;
  *p++ = static_cast<uint8_t>(RuleKind::kFlow);
  *p++ = family;
  *p++ = proto;
  put_addr(p, family, src);
  p += n;
  put_be16(p, sport);
  p += 2;
  put_addr(p, family, dst);
  p += n;
  put_be16(p, dport);
  p += 2;
  return static_cast<std::size_t>(p - out);
}

// [5][family][proto][dst][dport be16]
inline std::size_t encode_service_key(uint8_t* out, uint8_t family, uint8_t proto,
                                      const uint8_t* dst, uint16_t dport) noexcept {
  if (kWideStores && family == 4) {  // 9 bytes
    const uint64_t lo = static_cast<uint64_t>(RuleKind::kService) | (uint64_t{4} << 8) |
                        (uint64_t{proto} << 16) | (static_cast<uint64_t>(load32(dst)) << 24) |
                        (uint64_t{static_cast<uint8_t>(dport >> 8)} << 56);
    store16(out, lo, uint64_t{static_cast<uint8_t>(dport)});
    return 9;
  }
  const std::size_t n = family == 4 ? 4 : 16;
  out[0] = static_cast<uint8_t>(RuleKind::kService);
  out[1] = family;
  out[2] = proto;
  put_addr(out + 3, family, dst);
  put_be16(out + 3 + n, dport);
  return 3 + n + 2;
}

// An HTTP authority (host, [ipv6] literal, optionally ":port") split into
// its canonical parts. The host is in[0..host_len) with one trailing dot
// already excluded (not yet lower-cased); port is -1 when absent, empty or 80
// (the default is not written), else 0-65535.
struct AuthorityParts {
  std::size_t host_len = 0;
  int32_t port = -1;
};

// Returns false for an empty host, an unterminated '[', anything but ":port"
// after ']', or a port that is not decimal digits or exceeds 65535. For a bad
// port alone, res.host_len is set all the same (the host before the ':'):
// servers such as nginx pick the virtual host by it.
inline bool split_authority(const uint8_t* in, std::size_t len, AuthorityParts& res) noexcept {
  std::size_t host_end = len;  // end of the host text in `in`
  std::size_t port_pos = len;  // index of the ':' before the port, len if none
  if (len > 0 && in[0] == '[') {
    const void* rb = std::memchr(in, ']', len);
    if (rb == nullptr) return false;
    host_end = static_cast<std::size_t>(static_cast<const uint8_t*>(rb) - in) + 1;
    if (host_end < len) {
      if (in[host_end] != ':') return false;
      port_pos = host_end;
    }
  } else {
    const void* colon = std::memchr(in, ':', len);
    if (colon != nullptr) {
      host_end = static_cast<std::size_t>(static_cast<const uint8_t*>(colon) - in);
      port_pos = host_end;
    }
  }
  std::size_t hl = host_end;
  if (hl > 0 && in[hl - 1] == '.') --hl;  // one trailing dot
  if (hl == 0) return false;
  res.host_len = hl;
  res.port = -1;
  if (port_pos + 1 >= len) return true;  // no port, or "host:" (the default)
  uint32_t port = 0;
  for (std::size_t i = port_pos + 1; i < len; ++i) {
    if (in[i] < '0' || in[i] > '9') return false;
    port = port * 10 + (in[i] - '0');
    if (port > 65535) return false;
  }
  if (port != 80) res.port = static_cast<int32_t>(port);
  return true;
}

// Length of the canonical authority text: host, plus ":port" when kept.
inline std::size_t authority_len(const AuthorityParts& a) noexcept {
  if (a.port < 0) return a.host_len;
  std::size_t digits = 1;
  for (int32_t p = a.port; p >= 10; p /= 10) ++digits;
  return a.host_len + 1 + digits;
}

// Writes the canonical authority (host lower-cased, ":port" when kept) to
// out, which must have room for authority_len(a) bytes.
inline void write_authority(const uint8_t* in, const AuthorityParts& a, uint8_t* out) noexcept {
  for (std::size_t i = 0; i < a.host_len; ++i) out[i] = ascii_lower(in[i]);
  if (a.port < 0) return;
  const std::size_t total = authority_len(a);
  out[a.host_len] = ':';
  int32_t p = a.port;
  for (std::size_t i = total; i > a.host_len + 1; --i) {
    out[i - 1] = static_cast<uint8_t>('0' + p % 10);
    p /= 10;
  }
}

}  // namespace cg::detail
