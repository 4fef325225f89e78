// Test messages for app/reasm's tests: a browser-sized TLS ClientHello, its
// record framings, and DNS-over-TCP queries.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace cg::reasm::test {

using Bytes = std::vector<uint8_t>;

inline void put16(Bytes& b, std::size_t v) {
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}
inline void put24(Bytes& b, std::size_t v) {
  b.push_back(static_cast<uint8_t>(v >> 16));
  put16(b, v);
}
inline void append(Bytes& b, const Bytes& more) { b.insert(b.end(), more.begin(), more.end()); }
inline void append(Bytes& b, const std::string& s) { b.insert(b.end(), s.begin(), s.end()); }
inline Bytes fill(std::size_t n, uint8_t seed) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7);
  return b;
}
// An extension: type, 16-bit length, body.
inline void extension(Bytes& exts, uint16_t type, const Bytes& body) {
  put16(exts, type);
  put16(exts, body.size());
  append(exts, body);
}

// A ClientHello handshake message (4-byte header included) shaped like a
// current browser's: SNI, groups, an X25519MLKEM768 key share (1216 bytes)
// plus X25519, signature algorithms, ALPN, supported versions. ~1.5 KB.
inline Bytes client_hello(const std::string& host) {
  Bytes body;
  put16(body, 0x0303);
  append(body, fill(32, 1));  // random
  body.push_back(32);
  append(body, fill(32, 2));  // legacy session id
  Bytes suites = {0x13, 0x01, 0x13, 0x02, 0x13, 0x03, 0xc0, 0x2b, 0xc0, 0x2f,
                  0xc0, 0x2c, 0xc0, 0x30, 0xcc, 0xa9, 0xcc, 0xa8, 0x00, 0x9c};
  put16(body, suites.size());
  append(body, suites);
  body.push_back(1);
  body.push_back(0);  // null compression
  Bytes exts;
  Bytes sni;
  put16(sni, host.size() + 3);
  sni.push_back(0);  // host_name
  put16(sni, host.size());
  append(sni, host);
  extension(exts, 0x0a0a, {});  // GREASE
  extension(exts, 0x0017, {});  // extended master secret
  extension(exts, 0x000a, {0x00, 0x08, 0x11, 0xec, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x18});
  Bytes ks;
  Bytes shares;
  put16(shares, 0x11ec);
  put16(shares, 1216);
  append(shares, fill(1216, 3));
  put16(shares, 0x001d);
  put16(shares, 32);
  append(shares, fill(32, 4));
  put16(ks, shares.size());
  append(ks, shares);
  extension(exts, 0x0033, ks);  // key_share
  extension(exts, 0x000d, {0x00, 0x08, 0x04, 0x03, 0x08, 0x04, 0x04, 0x01, 0x05, 0x03});
  extension(exts, 0x0010, {0x00, 0x0c, 0x02, 'h', '2', 0x08, 'h', 't', 't', 'p', '/', '1', '.', '1'});
  extension(exts, 0x002b, {0x04, 0x03, 0x04, 0x03, 0x03});
  extension(exts, 0x0000, sni);  // SNI late, as a permuting browser may put it
  extension(exts, 0x0015, fill(180, 0) /* padding */);
  put16(body, exts.size());
  append(body, exts);
  Bytes hs = {1};
  put24(hs, body.size());
  append(hs, body);
  return hs;
}

// The handshake message in records of at most `record_max` payload bytes.
inline Bytes in_records(const Bytes& hs, std::size_t record_max) {
  Bytes out;
  for (std::size_t off = 0; off < hs.size(); off += record_max) {
    const std::size_t n = std::min(record_max, hs.size() - off);
    out.insert(out.end(), {22, 3, 1});
    put16(out, n);
    out.insert(out.end(), hs.begin() + off, hs.begin() + off + n);
  }
  return out;
}

// One record, split in two records after `cut` handshake bytes.
inline Bytes two_records(const Bytes& hs, std::size_t cut) {
  Bytes out = {22, 3, 1};
  put16(out, cut);
  out.insert(out.end(), hs.begin(), hs.begin() + cut);
  out.insert(out.end(), {22, 3, 3});
  put16(out, hs.size() - cut);
  out.insert(out.end(), hs.begin() + cut, hs.end());
  return out;
}

// A DNS query for `name` (one A question) behind its 2-byte TCP length.
inline Bytes dns_query(const std::string& name, uint16_t id) {
  Bytes m;
  put16(m, id);
  m.insert(m.end(), {0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0});
  std::size_t i = 0;
  while (i <= name.size()) {
    const std::size_t dot = std::min(name.find('.', i), name.size());
    m.push_back(static_cast<uint8_t>(dot - i));
    m.insert(m.end(), name.begin() + i, name.begin() + dot);
    i = dot + 1;
  }
  m.insert(m.end(), {0, 0, 1, 0, 1});
  Bytes framed;
  put16(framed, m.size());
  append(framed, m);
  return framed;
}

}  // namespace cg::reasm::test
