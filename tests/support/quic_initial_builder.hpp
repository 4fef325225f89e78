// Test-side encoder of QUIC v1/v2 client Initial packets (RFC 9000 §17.2.2,
// RFC 9001 §5, RFC 9369): frames, packet protection with the real Initial
// keys, coalesced datagrams padded to 1200 bytes, and ClientHellos of any
// size split into CRYPTO frames over several packets in any order.
//
// The keys are derived here with OpenSSL's EVP_KDF "HKDF", independently of
// app/quic (which writes HMAC out on SHA256_CTX), so a test that builds here
// and decodes there checks one implementation against another.
//
//   using namespace cg::test::quic;
//   Bytes ch = client_hello("blocked.example", 1800, rng);  // handshake message
//   auto parts = split_crypto(ch, 2, rng);                   // frames of 2 Initials
//   Bytes d1 = datagram({{.dcid = dcid, .frames = parts[0]}});  // 1200 bytes
//
// Test code: allocates freely, throws std::runtime_error on OpenSSL failure.
#pragma once

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cg::test::quic {

using Bytes = std::vector<uint8_t>;

inline constexpr uint32_t kV1 = 0x00000001;
inline constexpr uint32_t kV2 = 0x6b3343cf;

struct Keys {
  uint8_t secret[32];
  uint8_t key[16];
  uint8_t iv[12];
  uint8_t hp[16];
};

namespace detail {

inline void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("quic_initial_builder: ") + what);
}

// HKDF through EVP_KDF: EXTRACT_ONLY (salt, ikm) or EXPAND_ONLY (prk, info).
inline void hkdf(int mode, const uint8_t* salt_or_prk, std::size_t slen, const uint8_t* data,
                 std::size_t dlen, uint8_t* out, std::size_t olen) {
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  check(kdf != nullptr, "HKDF not available");
  EVP_KDF_CTX* ctx = EVP_KDF_CTX_new(kdf);
  EVP_KDF_free(kdf);
  check(ctx != nullptr, "EVP_KDF_CTX_new");
  char digest[] = "SHA256";
  OSSL_PARAM params[5];
  int n = 0;
  params[n++] = OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode);
  params[n++] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0);
  if (mode == EVP_KDF_HKDF_MODE_EXTRACT_ONLY) {
    params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<uint8_t*>(salt_or_prk), slen);
    // An empty key (DCID of length 0) still needs a valid pointer.
    static uint8_t empty = 0;
    params[n++] = OSSL_PARAM_construct_octet_string(
        OSSL_KDF_PARAM_KEY, dlen != 0 ? const_cast<uint8_t*>(data) : &empty, dlen);
  } else {
    params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<uint8_t*>(salt_or_prk), slen);
    params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<uint8_t*>(data), dlen);
  }
  params[n] = OSSL_PARAM_construct_end();
  const int ok = EVP_KDF_derive(ctx, out, olen, params);
  EVP_KDF_CTX_free(ctx);
  check(ok == 1, "EVP_KDF_derive");
}

inline void expand_label(const uint8_t* prk, std::string_view label, uint8_t* out, std::size_t len) {
  // HkdfLabel: length, "tls13 " + label, an empty context. A plain buffer:
  // GCC 12 at -O2 with TSan flags a vector insert after its initialiser list
  // as out of bounds (-Warray-bounds, an error in CI's -Werror builds).
  check(label.size() <= 64, "expand_label: label too long");
  uint8_t info[2 + 1 + 6 + 64 + 1];
  std::size_t n = 0;
  info[n++] = static_cast<uint8_t>(len >> 8);
  info[n++] = static_cast<uint8_t>(len);
  info[n++] = static_cast<uint8_t>(6 + label.size());
  std::memcpy(info + n, "tls13 ", 6);
  n += 6;
  std::memcpy(info + n, label.data(), label.size());
  n += label.size();
  info[n++] = 0;
  hkdf(EVP_KDF_HKDF_MODE_EXPAND_ONLY, prk, 32, info, n, out, len);
}

}  // namespace detail

inline Keys client_initial_keys(uint32_t version, const Bytes& dcid) {
  static const uint8_t kSaltV1[20] = {0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17,
                                      0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f, 0x0a};
  static const uint8_t kSaltV2[20] = {0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93,
                                      0x81, 0xbe, 0x6e, 0x26, 0x9d, 0xcb, 0xf9, 0xbd, 0x2e, 0xd9};
  const bool v2 = version == kV2;
  uint8_t initial[32];
  detail::hkdf(EVP_KDF_HKDF_MODE_EXTRACT_ONLY, v2 ? kSaltV2 : kSaltV1, 20, dcid.data(), dcid.size(),
               initial, sizeof initial);
  Keys k{};
  detail::expand_label(initial, "client in", k.secret, 32);
  detail::expand_label(k.secret, v2 ? "quicv2 key" : "quic key", k.key, 16);
  detail::expand_label(k.secret, v2 ? "quicv2 iv" : "quic iv", k.iv, 12);
  detail::expand_label(k.secret, v2 ? "quicv2 hp" : "quic hp", k.hp, 16);
  return k;
}

// ---- frames ----------------------------------------------------------------

// A varint (RFC 9000 §16) in its shortest form, or in `len` bytes (1, 2, 4, 8).
inline void put_varint(Bytes& b, uint64_t v, unsigned len = 0) {
  if (len == 0) len = v < 64 ? 1 : v < 16384 ? 2 : v < (1u << 30) ? 4 : 8;
  const uint8_t prefix = len == 1 ? 0x00 : len == 2 ? 0x40 : len == 4 ? 0x80 : 0xc0;
  for (unsigned i = 0; i < len; ++i) {
    uint8_t byte = static_cast<uint8_t>(v >> (8 * (len - 1 - i)));
    if (i == 0) byte = static_cast<uint8_t>((byte & 0x3f) | prefix);
    b.push_back(byte);
  }
}

inline Bytes crypto_frame(uint64_t offset, const uint8_t* p, std::size_t n) {
  Bytes f = {0x06};
  put_varint(f, offset);
  put_varint(f, n);
  f.insert(f.end(), p, p + n);
  return f;
}
inline Bytes ping_frame() { return {0x01}; }
inline Bytes padding_frames(std::size_t n) { return Bytes(n, 0); }
// ACK of packet `largest` and, with `extra_ranges`, older ranges; with ECN
// counts when `ecn`.
inline Bytes ack_frame(uint64_t largest, unsigned extra_ranges = 0, bool ecn = false) {
  Bytes f = {static_cast<uint8_t>(ecn ? 0x03 : 0x02)};
  put_varint(f, largest + 4 * extra_ranges);
  put_varint(f, 25);  // ack delay
  put_varint(f, extra_ranges);
  put_varint(f, 0);   // first range
  for (unsigned i = 0; i < extra_ranges; ++i) {
    put_varint(f, 1);  // gap
    put_varint(f, 1);  // range length
  }
  if (ecn) {
    put_varint(f, 1);
    put_varint(f, 0);
    put_varint(f, 300);  // a 2-byte varint
  }
  return f;
}
inline Bytes connection_close_frame(uint64_t error, std::string_view reason) {
  Bytes f = {0x1c};
  put_varint(f, error);
  put_varint(f, 0x06);  // frame type that caused it
  put_varint(f, reason.size());
  f.insert(f.end(), reason.begin(), reason.end());
  return f;
}

// ---- packets and datagrams ---------------------------------------------------

struct InitialPacket {
  uint32_t version = kV1;
  Bytes dcid = {0x83, 0x94, 0xc8, 0xf0, 0x3e, 0x51, 0x57, 0x08};
  Bytes scid = {};
  Bytes token = {};
  uint64_t pn = 0;
  unsigned pn_len = 2;  // 1..4
  Bytes frames;         // the plaintext payload
  // Derive keys from this DCID instead of `dcid` (a client after a server
  // Initial changed its DCID); empty: `dcid`.
  Bytes key_dcid = {};
};

// A protected Initial. Its payload is `frames` followed by PADDING so that
// the packet is at least `min_len` bytes and long enough to sample.
inline Bytes protect(const InitialPacket& pk, std::size_t min_len = 0) {
  const bool v2 = pk.version == kV2;
  const unsigned type = v2 ? 1 : 0;
  Bytes h = {static_cast<uint8_t>(0xc0 | (type << 4) | (pk.pn_len - 1))};
  for (int i = 3; i >= 0; --i) h.push_back(static_cast<uint8_t>(pk.version >> (8 * i)));
  h.push_back(static_cast<uint8_t>(pk.dcid.size()));
  h.insert(h.end(), pk.dcid.begin(), pk.dcid.end());
  h.push_back(static_cast<uint8_t>(pk.scid.size()));
  h.insert(h.end(), pk.scid.begin(), pk.scid.end());
  put_varint(h, pk.token.size());
  h.insert(h.end(), pk.token.begin(), pk.token.end());
  Bytes plain = pk.frames;
  // Header + 2-byte Length + pn + payload + tag >= min_len; pn + payload >= 4.
  const std::size_t fixed = h.size() + 2 + pk.pn_len + 16;
  if (fixed + plain.size() < min_len) plain.resize(min_len - fixed, 0);
  if (pk.pn_len + plain.size() < 4) plain.resize(4 - pk.pn_len, 0);
  const std::size_t length = pk.pn_len + plain.size() + 16;
  detail::check(length < 16384, "packet too long for a 2-byte Length");
  put_varint(h, length, 2);
  const std::size_t pn_off = h.size();
  for (unsigned i = 0; i < pk.pn_len; ++i)
    h.push_back(static_cast<uint8_t>(pk.pn >> (8 * (pk.pn_len - 1 - i))));

  const Keys k = client_initial_keys(pk.version, pk.key_dcid.empty() ? pk.dcid : pk.key_dcid);
  uint8_t nonce[12];
  std::memcpy(nonce, k.iv, 12);
  for (int i = 0; i < 8; ++i) nonce[11 - i] ^= static_cast<uint8_t>(pk.pn >> (8 * i));
  Bytes out = h;
  out.resize(h.size() + plain.size() + 16);
  EVP_CIPHER_CTX* c = EVP_CIPHER_CTX_new();
  int len = 0;
  bool ok = c != nullptr && EVP_EncryptInit_ex(c, EVP_aes_128_gcm(), nullptr, k.key, nonce) == 1 &&
            EVP_EncryptUpdate(c, nullptr, &len, h.data(), static_cast<int>(h.size())) == 1 &&
            EVP_EncryptUpdate(c, out.data() + h.size(), &len, plain.data(), static_cast<int>(plain.size())) == 1 &&
            EVP_EncryptFinal_ex(c, out.data() + h.size() + len, &len) == 1 &&
            EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, out.data() + h.size() + plain.size()) == 1;
  EVP_CIPHER_CTX_free(c);
  detail::check(ok, "AES-128-GCM");
  // Header protection: mask from the sample 4 bytes after the pn's start.
  uint8_t mask[32];
  c = EVP_CIPHER_CTX_new();
  ok = c != nullptr && EVP_EncryptInit_ex(c, EVP_aes_128_ecb(), nullptr, k.hp, nullptr) == 1 &&
       EVP_CIPHER_CTX_set_padding(c, 0) == 1 &&
       EVP_EncryptUpdate(c, mask, &len, out.data() + pn_off + 4, 16) == 1;
  EVP_CIPHER_CTX_free(c);
  detail::check(ok, "AES-128-ECB");
  out[0] ^= mask[0] & 0x0f;
  for (unsigned i = 0; i < pk.pn_len; ++i) out[pn_off + i] ^= mask[1 + i];
  return out;
}

// Coalesced Initials in one datagram; the last one padded so that the
// datagram is at least min_datagram bytes (1200: RFC 9000 §14.1).
inline Bytes datagram(const std::vector<InitialPacket>& packets, std::size_t min_datagram = 1200) {
  Bytes d;
  for (std::size_t i = 0; i < packets.size(); ++i) {
    const bool last = i + 1 == packets.size();
    const Bytes p = protect(packets[i], last && d.size() < min_datagram ? min_datagram - d.size() : 0);
    d.insert(d.end(), p.begin(), p.end());
  }
  return d;
}

// A long-header packet of another type (v1: 1 0-RTT, 2 Handshake; v2: 2
// 0-RTT, 3 Handshake) with `body` bytes of opaque payload, as coalesced after
// an Initial. Not encrypted: the decoder must stop before it.
inline Bytes other_long_packet(uint32_t version, unsigned type, const Bytes& dcid, std::size_t body) {
  Bytes h = {static_cast<uint8_t>(0xc0 | (type << 4) | 1)};
  for (int i = 3; i >= 0; --i) h.push_back(static_cast<uint8_t>(version >> (8 * i)));
  h.push_back(static_cast<uint8_t>(dcid.size()));
  h.insert(h.end(), dcid.begin(), dcid.end());
  h.push_back(0);
  put_varint(h, body, 2);
  for (std::size_t i = 0; i < body; ++i) h.push_back(static_cast<uint8_t>(0x5a ^ i));
  return h;
}

// ---- ClientHello -------------------------------------------------------------

inline void put16(Bytes& b, std::size_t v) {
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}

// A TLS 1.3 ClientHello handshake message (type 1, 24-bit length, body; no
// record header, as QUIC carries it) with an SNI for `sni` (none if empty),
// supported_versions, ALPN h3, a key_share and quic_transport_parameters.
// With target_len, a padding extension (21) brings the message to that many
// bytes (a post-quantum ClientHello is 1.7-2 KB). With rng, the extension
// order is shuffled as Chrome does.
inline Bytes client_hello(std::string_view sni, std::size_t target_len = 0, std::mt19937_64* rng = nullptr) {
  std::vector<Bytes> exts;
  auto ext = [&](uint16_t type, const Bytes& body) {
    Bytes e;
    put16(e, type);
    put16(e, body.size());
    e.insert(e.end(), body.begin(), body.end());
    exts.push_back(std::move(e));
  };
  if (!sni.empty()) {
    Bytes b;
    put16(b, sni.size() + 3);
    b.push_back(0);
    put16(b, sni.size());
    b.insert(b.end(), sni.begin(), sni.end());
    ext(0x0000, b);
  }
  ext(0x002b, {0x02, 0x03, 0x04});                                  // supported_versions: TLS 1.3
  ext(0x0010, {0x00, 0x03, 0x02, 'h', '3'});                        // ALPN
  ext(0x000a, {0x00, 0x04, 0x11, 0xec, 0x00, 0x1d});                // groups: X25519MLKEM768, x25519
  {
    Bytes ks;  // key_share: one x25519 share
    put16(ks, 2 + 2 + 32);
    put16(ks, 0x001d);
    put16(ks, 32);
    for (int i = 0; i < 32; ++i) ks.push_back(static_cast<uint8_t>(0x20 + i));
    ext(0x0033, ks);
  }
  ext(0x0039, {0x01, 0x02, 0x40, 0x64, 0x04, 0x04, 0x80, 0x10, 0x00, 0x00});  // transport parameters
  if (rng != nullptr) std::shuffle(exts.begin(), exts.end(), *rng);

  Bytes body;
  put16(body, 0x0303);
  for (int i = 0; i < 32; ++i) body.push_back(static_cast<uint8_t>(i * 7));  // random
  body.push_back(0);                                                          // session id
  put16(body, 6);
  put16(body, 0x1301);
  put16(body, 0x1302);
  put16(body, 0x1303);
  body.push_back(1);
  body.push_back(0);
  std::size_t ext_len = 0;
  for (const Bytes& e : exts) ext_len += e.size();
  // 4 (handshake header) + body + 2 (extensions length) + extensions.
  const std::size_t bare = 4 + body.size() + 2 + ext_len;
  if (target_len >= bare + 4) {
    Bytes pad(target_len - bare - 4, 0);
    Bytes e;
    put16(e, 21);
    put16(e, pad.size());
    e.insert(e.end(), pad.begin(), pad.end());
    // Placed at a random position too (browsers put it last; any is valid).
    const std::size_t at = rng != nullptr ? (*rng)() % (exts.size() + 1) : exts.size();
    exts.insert(exts.begin() + static_cast<std::ptrdiff_t>(at), std::move(e));
    ext_len += 4 + pad.size();
  }
  put16(body, ext_len);
  for (const Bytes& e : exts) body.insert(body.end(), e.begin(), e.end());
  // Reserved first: inserting into a 4-byte vector trips GCC 12's -O3
  // -Warray-bounds false positive.
  Bytes hs;
  hs.reserve(4 + body.size());
  hs.push_back(1);
  hs.push_back(static_cast<uint8_t>(body.size() >> 16));
  put16(hs, body.size());
  hs.insert(hs.end(), body.begin(), body.end());
  return hs;
}

// The CRYPTO stream `data` cut into `packets` payloads of CRYPTO frames: the
// stream is split at random points into at least `packets` pieces (at most
// max_pieces), and the frames of each packet shuffled (Chrome sends them out
// of order); with `ping`, a PING frame and a PADDING run are mixed into each. Packet i carries
// the i-th contiguous stretch of pieces, as browsers send it; with
// `scatter`, pieces beyond the first `packets` go to random packets, so a
// packet's frames have holes between them. result[i] is packet i's payload.
inline std::vector<Bytes> split_crypto(const Bytes& data, unsigned packets, std::mt19937_64& rng,
                                       unsigned max_pieces = 24, bool ping = false,
                                       bool scatter = false) {
  detail::check(packets >= 1 && packets <= data.size(), "split_crypto: 1 <= packets <= bytes");
  std::size_t pieces = packets;
  if (max_pieces > packets) pieces += rng() % (max_pieces - packets + 1);
  pieces = std::min(pieces, data.size());  // every piece holds a byte
  std::vector<std::size_t> cuts = {0, data.size()};
  while (cuts.size() < pieces + 1 && cuts.size() < data.size() + 1) {
    const std::size_t c = 1 + rng() % (data.size() - 1);
    if (std::find(cuts.begin(), cuts.end(), c) == cuts.end()) cuts.push_back(c);
  }
  std::sort(cuts.begin(), cuts.end());
  std::vector<std::vector<Bytes>> frames(packets);
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
    // Contiguous: piece i of n goes to packet i * packets / n. Scattered:
    // the first `packets` pieces one to each packet, the rest anywhere.
    const std::size_t n = cuts.size() - 1;
    const std::size_t to = !scatter ? i * packets / n : i < packets ? i : rng() % packets;
    frames[to].push_back(crypto_frame(cuts[i], data.data() + cuts[i], cuts[i + 1] - cuts[i]));
  }
  std::vector<Bytes> out(packets);
  for (unsigned p = 0; p < packets; ++p) {
    if (ping) {  // Chrome's chaos protection: PINGs and PADDING runs between the frames
      frames[p].push_back(ping_frame());
      frames[p].push_back(padding_frames(1 + rng() % 24));
    }
    std::shuffle(frames[p].begin(), frames[p].end(), rng);
    for (const Bytes& f : frames[p]) out[p].insert(out[p].end(), f.begin(), f.end());
  }
  return out;
}

}  // namespace cg::test::quic
