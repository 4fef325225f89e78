// Opening client Initial packets (RFC 9001 §5.3-5.4, RFC 9000 §17.2.2) and
// walking their frames (RFC 9000 §12.4, §19).
//
// What allocates: create() (the Decoder, EVP_CIPHER_CTX_new twice, and the
// first EVP_*Init_ex with a cipher, which creates the provider contexts).
// Per packet, EVP_DecryptInit_ex / EVP_EncryptInit_ex with a NULL cipher only
// set a new key or IV into the existing provider context, and the update,
// ctrl and final calls work in place: 0 allocations, measured on OpenSSL
// 3.0 (tests/quic/alloc_test.cpp keeps it so).
#include <openssl/evp.h>

#include <cstring>
#include <new>

#include "cuckoogate/quic/initial.hpp"

namespace cg::quic {
namespace {

// RFC 9000 §16: a variable-length integer at p[*pos]; false when it runs past n.
bool varint(const uint8_t* p, std::size_t n, std::size_t* pos, uint64_t* v) noexcept {
  if (*pos >= n) return false;
  const std::size_t len = std::size_t{1} << (p[*pos] >> 6);
  if (len > n - *pos) return false;
  uint64_t x = p[*pos] & 0x3f;
  for (std::size_t i = 1; i < len; ++i) x = (x << 8) | p[*pos + i];
  *pos += len;
  *v = x;
  return true;
}

// Skips `count` varints.
bool skip_varints(const uint8_t* p, std::size_t n, std::size_t* pos, unsigned count) noexcept {
  uint64_t v = 0;
  for (unsigned i = 0; i < count; ++i) {
    if (!varint(p, n, pos, &v)) return false;
  }
  return true;
}

// Long-header packet types of the Initial per version (RFC 9000 §17.2,
// RFC 9369 §3.2: v2 numbers them Retry 0, Initial 1, 0-RTT 2, Handshake 3).
constexpr unsigned initial_type(uint32_t version) noexcept { return version == kVersion2 ? 1 : 0; }

constexpr unsigned kFrameCrypto = 0x06;

}  // namespace

const char* status_name(Status s) noexcept {
  switch (s) {
    case Status::kOk: return "ok";
    case Status::kNotLongHeader: return "not a long header";
    case Status::kUnsupportedVersion: return "unsupported version";
    case Status::kNotInitial: return "not an Initial";
    case Status::kOtherConnection: return "another connection ID";
    case Status::kTruncated: return "truncated";
    case Status::kMalformed: return "malformed";
    case Status::kDecryptFailed: return "decryption failed";
    case Status::kBadFrame: return "bad frame";
    case Status::kTooManyChunks: return "too many CRYPTO frames";
    case Status::kScratchTooSmall: return "scratch too small";
    case Status::kCryptoError: return "crypto error";
  }
  return "?";
}

Status walk_frames(const uint8_t* p, std::size_t n, Decoded& out) noexcept {
  if (n == 0) return Status::kBadFrame;  // RFC 9000 §12.4: a packet holds at least one frame
  std::size_t pos = 0;
  while (pos < n) {
    const uint8_t type = p[pos++];
    // Every frame type allowed here has a one-byte encoding; a longer one is
    // not the shortest (RFC 9000 §12.4 lets a receiver reject it).
    switch (type) {
      case 0x00:  // PADDING
        while (pos < n && p[pos] == 0) ++pos;
        break;
      case 0x01:  // PING
        out.ping = true;
        break;
      case 0x02:    // ACK
      case 0x03: {  // ACK with ECN counts
        uint64_t ranges = 0;
        if (!skip_varints(p, n, &pos, 2) || !varint(p, n, &pos, &ranges) || !skip_varints(p, n, &pos, 1))
          return Status::kBadFrame;
        // Each range is two varints of at least one byte: the loop ends with
        // the payload, whatever the count says.
        for (uint64_t r = 0; r < ranges; ++r) {
          if (!skip_varints(p, n, &pos, 2)) return Status::kBadFrame;
        }
        if (type == 0x03 && !skip_varints(p, n, &pos, 3)) return Status::kBadFrame;
        out.ack = true;
        break;
      }
      case kFrameCrypto: {
        uint64_t off = 0, len = 0;
        if (!varint(p, n, &pos, &off) || !varint(p, n, &pos, &len)) return Status::kBadFrame;
        if (len > n - pos) return Status::kBadFrame;
        if (off + len > (uint64_t{1} << 62) - 1) return Status::kBadFrame;  // RFC 9000 §19.6
        if (len != 0) {
          if (out.n_chunks == kMaxCryptoChunks) return Status::kTooManyChunks;
          out.chunk[out.n_chunks++] = {off, p + pos, static_cast<uint32_t>(len)};
        }
        pos += static_cast<std::size_t>(len);
        break;
      }
      case 0x1c: {  // CONNECTION_CLOSE (transport): error, frame type, reason
        uint64_t reason = 0;
        if (!skip_varints(p, n, &pos, 2) || !varint(p, n, &pos, &reason) || reason > n - pos)
          return Status::kBadFrame;
        out.connection_close = true;
        return Status::kOk;  // the connection ends: nothing after it counts
      }
      default:
        return Status::kBadFrame;
    }
  }
  return Status::kOk;
}

// The header of one long-header packet, as parsed (offsets into the datagram).
struct Decoder::Packet {
  uint32_t version = 0;
  unsigned type = 0;
  std::size_t dcid_off = 0, dcid_len = 0;
  std::size_t pn_off = 0;  // packet number (protected)
  std::size_t end = 0;     // one past the packet (pn_off + Length)
  int64_t largest = -1;    // the largest packet number opened before it in its space
  uint64_t pn = 0;         // once opened
};

namespace {

// Parses the long header at p[0..n): kOk with the fields filled.
Status parse_long_header(const uint8_t* p, std::size_t n, uint32_t* version, unsigned* type,
                         std::size_t* dcid_off, std::size_t* dcid_len, std::size_t* pn_off,
                         std::size_t* end) noexcept {
  if (n == 0 || (p[0] & 0x80) == 0) return Status::kNotLongHeader;
  // The fixed bit (0x40) is not checked: RFC 9287 lets peers grease it, and
  // the AEAD tag is what says whether this is a QUIC packet.
  if (n < 5) return Status::kTruncated;
  *version = (uint32_t{p[1]} << 24) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 8) | p[4];
  if (!supported_version(*version)) return Status::kUnsupportedVersion;
  *type = (p[0] >> 4) & 0x03;
  std::size_t pos = 5;
  if (pos >= n) return Status::kTruncated;
  *dcid_len = p[pos++];
  if (*dcid_len > kMaxCidLen) return Status::kMalformed;
  *dcid_off = pos;
  if (*dcid_len > n - pos) return Status::kTruncated;
  pos += *dcid_len;
  if (pos >= n) return Status::kTruncated;
  const std::size_t scid_len = p[pos++];
  if (scid_len > kMaxCidLen) return Status::kMalformed;
  if (scid_len > n - pos) return Status::kTruncated;
  pos += scid_len;
  if (*type != initial_type(*version)) return Status::kNotInitial;
  uint64_t token = 0, length = 0;
  if (!varint(p, n, &pos, &token) || token > n - pos) return Status::kTruncated;
  pos += static_cast<std::size_t>(token);
  if (!varint(p, n, &pos, &length) || length > n - pos) return Status::kTruncated;
  // RFC 9001 §5.4.2: the sample is 16 bytes from pn_off + 4.
  if (length < 4 + kSampleLen) return Status::kMalformed;
  *pn_off = pos;
  *end = pos + static_cast<std::size_t>(length);
  return Status::kOk;
}

}  // namespace

Status peek_initial(const uint8_t* p, std::size_t n, uint32_t* version) noexcept {
  uint32_t v = 0;
  unsigned type = 0;
  std::size_t dcid_off = 0, dcid_len = 0, pn_off = 0, end = 0;
  if (n > kMaxDatagram) return Status::kMalformed;
  const Status st = parse_long_header(p, n, &v, &type, &dcid_off, &dcid_len, &pn_off, &end);
  if (st == Status::kOk) *version = v;
  return st;
}

void Decoder::Deleter::operator()(Decoder* d) const noexcept { delete d; }

Decoder::~Decoder() {
  EVP_CIPHER_CTX_free(gcm_);
  EVP_CIPHER_CTX_free(ecb_);
  OPENSSL_cleanse(&keys_, sizeof keys_);
}

Decoder::Ptr Decoder::create(const char** error) noexcept {
  Ptr d(new (std::nothrow) Decoder());
  auto fail = [&](const char* why) {
    if (error != nullptr) *error = why;
    return Ptr();
  };
  if (!d) return fail("out of memory");
  d->gcm_ = EVP_CIPHER_CTX_new();
  d->ecb_ = EVP_CIPHER_CTX_new();
  if (d->gcm_ == nullptr || d->ecb_ == nullptr) return fail("EVP_CIPHER_CTX_new failed");
  if (EVP_DecryptInit_ex(d->gcm_, EVP_aes_128_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(d->gcm_, EVP_CTRL_GCM_SET_IVLEN, static_cast<int>(kIvLen), nullptr) != 1)
    return fail("AES-128-GCM is not available");
  if (EVP_EncryptInit_ex(d->ecb_, EVP_aes_128_ecb(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_set_padding(d->ecb_, 0) != 1)
    return fail("AES-128-ECB is not available");
  return d;
}

bool Decoder::keys_for(uint32_t version, const uint8_t* dcid, std::size_t dcid_len) noexcept {
  if (cached_ && cached_version_ == version && cached_dcid_len_ == dcid_len &&
      (dcid_len == 0 || std::memcmp(cached_dcid_, dcid, dcid_len) == 0))
    return true;
  cached_ = false;
  if (!derive_client_initial_keys(version, dcid, dcid_len, keys_)) return false;
  // A key change costs an AES key schedule per context (and GCM's hash key);
  // no allocation. Packets under the same keys then set only the nonce.
  if (EVP_EncryptInit_ex(ecb_, nullptr, nullptr, keys_.hp, nullptr) != 1 ||
      EVP_DecryptInit_ex(gcm_, nullptr, nullptr, keys_.key, nullptr) != 1)
    return false;
  cached_ = true;
  cached_version_ = version;
  cached_dcid_len_ = static_cast<uint8_t>(dcid_len);
  if (dcid_len != 0) std::memcpy(cached_dcid_, dcid, dcid_len);
  return true;
}

// Removes header protection (on copies) and decrypts the payload of the
// packet pk of datagram p into plain (room for pk.end - pk.pn_off bytes).
Status Decoder::open(const uint8_t* p, Packet& pk, uint8_t* plain, std::size_t* plain_len) noexcept {
  // RFC 9001 §5.4: mask = AES-ECB(hp, sample); the low 4 bits of the first
  // byte and the packet number bytes are masked.
  uint8_t mask[kSampleLen + 16];  // ECB output of one block (+ room OpenSSL may assume)
  int outl = 0;
  if (EVP_EncryptUpdate(ecb_, mask, &outl, p + pk.pn_off + 4, static_cast<int>(kSampleLen)) != 1 ||
      outl != static_cast<int>(kSampleLen))
    return Status::kCryptoError;
  const uint8_t first = static_cast<uint8_t>(p[0] ^ (mask[0] & 0x0f));
  const std::size_t pn_len = (first & 0x03) + 1;
  uint8_t pn_bytes[4];
  uint64_t truncated = 0;
  for (std::size_t i = 0; i < pn_len; ++i) {
    pn_bytes[i] = static_cast<uint8_t>(p[pk.pn_off + i] ^ mask[1 + i]);
    truncated = (truncated << 8) | pn_bytes[i];
  }
  const uint64_t pn = decode_packet_number(pk.largest, truncated, static_cast<unsigned>(8 * pn_len));
  const std::size_t ct_off = pk.pn_off + pn_len;
  // Length >= 20 leaves at least 16 bytes after a packet number of <= 4.
  const std::size_t ct_len = pk.end - ct_off - kTagLen;
  // Nonce: the IV with the packet number XORed into its low bytes (§5.3).
  uint8_t nonce[kIvLen];
  std::memcpy(nonce, keys_.iv, kIvLen);
  for (std::size_t i = 0; i < 8; ++i) nonce[kIvLen - 1 - i] ^= static_cast<uint8_t>(pn >> (8 * i));
  uint8_t tag[kTagLen];
  std::memcpy(tag, p + pk.end - kTagLen, kTagLen);
  // The associated data is the unprotected header, fed in three pieces (GCM
  // accepts AAD in several calls before the ciphertext): the unmasked first
  // byte, the header as it is, the unmasked packet number.
  if (EVP_DecryptInit_ex(gcm_, nullptr, nullptr, nullptr, nonce) != 1 ||
      EVP_DecryptUpdate(gcm_, nullptr, &outl, &first, 1) != 1 ||
      EVP_DecryptUpdate(gcm_, nullptr, &outl, p + 1, static_cast<int>(pk.pn_off - 1)) != 1 ||
      EVP_DecryptUpdate(gcm_, nullptr, &outl, pn_bytes, static_cast<int>(pn_len)) != 1)
    return Status::kCryptoError;
  if (ct_len != 0 && (EVP_DecryptUpdate(gcm_, plain, &outl, p + ct_off, static_cast<int>(ct_len)) != 1 ||
                      outl != static_cast<int>(ct_len)))
    return Status::kCryptoError;
  if (EVP_CIPHER_CTX_ctrl(gcm_, EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagLen), tag) != 1)
    return Status::kCryptoError;
  if (EVP_DecryptFinal_ex(gcm_, plain + ct_len, &outl) != 1) {
    OPENSSL_cleanse(plain, ct_len);  // unauthenticated bytes are not left for anyone to read
    return Status::kDecryptFailed;
  }
  *plain_len = ct_len;
  pk.pn = pn;
  return Status::kOk;
}

uint64_t decode_packet_number(int64_t largest_pn, uint64_t truncated, unsigned bits) noexcept {
  const uint64_t expected = static_cast<uint64_t>(largest_pn + 1);  // largest_pn >= -1
  const uint64_t win = uint64_t{1} << bits;
  const uint64_t hwin = win / 2;
  const uint64_t candidate = (expected & ~(win - 1)) | (truncated & (win - 1));
  // (Written without negative intermediates: expected - hwin may be below 0.)
  if (candidate + hwin <= expected && candidate < (uint64_t{1} << 62) - win) return candidate + win;
  if (candidate > expected + hwin && candidate >= win) return candidate - win;
  return candidate;
}

void Decoder::decode(const uint8_t* p, std::size_t n, uint8_t* scratch, std::size_t scratch_cap,
                     Decoded& out, const uint8_t* key_dcid, std::size_t key_dcid_len,
                     int64_t largest_pn) noexcept {
  out.status = Status::kNotLongHeader;
  out.stop = Status::kOk;
  out.version = 0;
  out.dcid_len = 0;
  out.initials = 0;
  out.undecryptable = 0;
  out.ping = out.ack = out.connection_close = false;
  out.first_pn = 0;
  out.largest_pn = largest_pn < -1 ? -1 : largest_pn;
  out.n_chunks = 0;
  out.scratch_used = 0;
  if (n > kMaxDatagram) {
    out.status = Status::kMalformed;
    return;
  }
  std::size_t pos = 0;
  uint32_t first_version = 0;  // of the datagram's first packet, opened or not
  while (pos < n) {
    const uint8_t* q = p + pos;
    const bool later = out.initials != 0 || out.undecryptable != 0;
    if (later && q[0] == 0) {
      // Zero bytes after a packet: datagram padding some stacks add; a packet
      // never starts with 0 (long headers have bit 7 set, short ones bit 6).
      break;
    }
    Packet pk;
    Status st = parse_long_header(q, n - pos, &pk.version, &pk.type, &pk.dcid_off, &pk.dcid_len,
                                  &pk.pn_off, &pk.end);
    if (st == Status::kOk && later &&
        (pk.version != first_version || pk.dcid_len != out.dcid_len ||
         std::memcmp(q + pk.dcid_off, out.dcid, pk.dcid_len) != 0))
      st = Status::kOtherConnection;
    if (st == Status::kOk && !later) {  // the datagram's connection: every packet after it must be of it
      first_version = pk.version;
      out.dcid_len = static_cast<uint8_t>(pk.dcid_len);
      if (pk.dcid_len != 0) std::memcpy(out.dcid, q + pk.dcid_off, pk.dcid_len);
    }
    if (st == Status::kOk) {
      const uint8_t* kd = key_dcid != nullptr ? key_dcid : q + pk.dcid_off;
      const std::size_t kl = key_dcid != nullptr ? key_dcid_len : pk.dcid_len;
      if (kl > kMaxCidLen) {
        st = Status::kMalformed;
      } else if (!keys_for(pk.version, kd, kl)) {
        st = Status::kCryptoError;
      }
    }
    if (st == Status::kOk && pk.end - pk.pn_off > scratch_cap - out.scratch_used) st = Status::kScratchTooSmall;
    uint8_t* plain = scratch + out.scratch_used;
    std::size_t plain_len = 0;
    pk.largest = out.largest_pn;
    if (st == Status::kOk) st = open(q, pk, plain, &plain_len);
    // The frames go straight into out; a packet that fails is rolled back,
    // so only whole packets' CRYPTO frames are reported.
    const unsigned chunks_before = out.n_chunks;
    const bool ping = out.ping, ack = out.ack, close = out.connection_close;
    if (st == Status::kOk) st = walk_frames(plain, plain_len, out);
    if (st == Status::kDecryptFailed) {  // skipped: the packets after it are still read
      if (out.initials == 0) out.status = st;
      if (out.undecryptable != 255) ++out.undecryptable;
      pos += pk.end;
      continue;
    }
    if (st != Status::kOk) {
      out.n_chunks = chunks_before;
      out.ping = ping;
      out.ack = ack;
      out.connection_close = close;
      if (out.initials != 0 || out.undecryptable != 0) {
        out.stop = st;  // (status: kOk, or the kDecryptFailed of the skipped ones)
      } else {
        out.status = st;
      }
      break;
    }
    if (out.initials == 0) {
      out.status = Status::kOk;
      out.stop = Status::kOk;
      out.version = pk.version;
      out.first_pn = pk.pn;
    }
    ++out.initials;
    if (pk.pn < (uint64_t{1} << 62) && static_cast<int64_t>(pk.pn) > out.largest_pn)
      out.largest_pn = static_cast<int64_t>(pk.pn);
    out.scratch_used += plain_len;
    pos += pk.end;
  }
}

}  // namespace cg::quic
