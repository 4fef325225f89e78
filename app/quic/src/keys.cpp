// Client Initial keys (RFC 9001 §5.2, RFC 9369 §3.3).
//
// What allocates: nothing here. OpenSSL 3.0 re-creates the provider context
// on every EVP_DigestInit_ex / EVP_MAC_init (1 to 5 allocations each,
// measured with CRYPTO_set_mem_functions), so HMAC-SHA256 is written out on
// the low-level SHA256_CTX, a plain struct on the stack. Those functions are
// marked deprecated in 3.0 (still shipped and maintained); the API level
// below keeps them usable without the deprecation warning.
#define OPENSSL_API_COMPAT 10101
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <cstring>

#include "cuckoogate/quic/initial.hpp"

namespace cg::quic {
namespace {

constexpr std::size_t kBlock = 64;  // SHA-256 block

// RFC 9001 §5.2.
constexpr uint8_t kSaltV1[20] = {0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17,
                                 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f, 0x0a};
// RFC 9369 §3.3.1.
constexpr uint8_t kSaltV2[20] = {0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93,
                                 0x81, 0xbe, 0x6e, 0x26, 0x9d, 0xcb, 0xf9, 0xbd, 0x2e, 0xd9};

// HMAC-SHA256 (RFC 2104) with a key of at most one block (ours are 20 or 32
// bytes): the inner and outer states after the padded key, reusable for
// several messages under the same key.
struct Hmac {
  SHA256_CTX inner, outer;

  Hmac(const uint8_t* key, std::size_t len) noexcept {
    uint8_t pad[kBlock];
    std::memset(pad, 0x36, sizeof pad);
    for (std::size_t i = 0; i < len; ++i) pad[i] ^= key[i];
    SHA256_Init(&inner);
    SHA256_Update(&inner, pad, sizeof pad);
    for (std::size_t i = 0; i < kBlock; ++i) pad[i] ^= 0x36 ^ 0x5c;
    SHA256_Init(&outer);
    SHA256_Update(&outer, pad, sizeof pad);
    OPENSSL_cleanse(pad, sizeof pad);
  }

  // HMAC(key, a || b) into out[32].
  void mac(const uint8_t* a, std::size_t alen, const uint8_t* b, std::size_t blen,
           uint8_t* out) const noexcept {
    SHA256_CTX c = inner;
    SHA256_Update(&c, a, alen);
    if (blen != 0) SHA256_Update(&c, b, blen);
    uint8_t h[kSecretLen];
    SHA256_Final(h, &c);
    c = outer;
    SHA256_Update(&c, h, sizeof h);
    SHA256_Final(out, &c);
  }
};

// HKDF-Expand-Label(secret, label, "", len) for len <= 32 (RFC 8446 §7.1):
// one HMAC block, T(1) = HMAC(secret, HkdfLabel || 0x01).
void expand_label(const Hmac& prk, const char* label, std::size_t len, uint8_t* out) noexcept {
  uint8_t info[2 + 1 + 6 + 32 + 1 + 1];
  const std::size_t llen = std::strlen(label);
  std::size_t n = 0;
  info[n++] = 0;
  info[n++] = static_cast<uint8_t>(len);
  info[n++] = static_cast<uint8_t>(6 + llen);
  std::memcpy(info + n, "tls13 ", 6);
  n += 6;
  std::memcpy(info + n, label, llen);
  n += llen;
  info[n++] = 0;  // empty context
  info[n++] = 1;  // block counter
  uint8_t t[kSecretLen];
  prk.mac(info, n, nullptr, 0, t);
  std::memcpy(out, t, len);
  OPENSSL_cleanse(t, sizeof t);
}

}  // namespace

bool derive_client_initial_keys(uint32_t version, const uint8_t* dcid, std::size_t dcid_len,
                                InitialKeys& out) noexcept {
  if (!supported_version(version) || dcid_len > kMaxCidLen) return false;
  const bool v2 = version == kVersion2;
  // initial_secret = HKDF-Extract(salt, dcid) = HMAC(salt, dcid).
  uint8_t initial[kSecretLen];
  const Hmac extract(v2 ? kSaltV2 : kSaltV1, sizeof kSaltV1);
  extract.mac(dcid, dcid_len, nullptr, 0, initial);
  const Hmac initial_prk(initial, sizeof initial);
  expand_label(initial_prk, "client in", kSecretLen, out.secret);
  const Hmac client(out.secret, kSecretLen);
  expand_label(client, v2 ? "quicv2 key" : "quic key", kKeyLen, out.key);
  expand_label(client, v2 ? "quicv2 iv" : "quic iv", kIvLen, out.iv);
  expand_label(client, v2 ? "quicv2 hp" : "quic hp", kHpLen, out.hp);
  OPENSSL_cleanse(initial, sizeof initial);
  return true;
}

}  // namespace cg::quic
