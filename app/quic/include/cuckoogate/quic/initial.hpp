// QUIC v1 (RFC 9000/9001) and v2 (RFC 9369) client Initial packets: the
// keys anyone can derive from the Destination Connection ID, and a decoder
// that opens the Initials of one UDP datagram and hands back the CRYPTO
// frames they carry (issue 11, item 3). What it decrypts, when it gives up
// and what it cannot see: docs/quic.md.
//
// Thread-safety: derive_client_initial_keys() is a pure function. A Decoder
// holds OpenSSL cipher contexts and a one-entry key cache: ONE thread owns it
// (a worker creates one for itself).
//
// Data-path contract: Decoder::create() allocates (the decoder object and two
// OpenSSL EVP_CIPHER_CTX). After it, decode() and derive_client_initial_keys()
// allocate nothing, make no syscall and never throw (tests/quic/alloc_test.cpp
// counts OpenSSL's allocations to hold it so); decode() reads only
// [datagram, datagram + len), never writes it, writes only the caller's
// scratch and `out`, and does work linear in len.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

struct evp_cipher_ctx_st;  // OpenSSL's EVP_CIPHER_CTX

namespace cg::quic {

inline constexpr uint32_t kVersion1 = 0x00000001;  // RFC 9000
inline constexpr uint32_t kVersion2 = 0x6b3343cf;  // RFC 9369
inline constexpr std::size_t kMaxCidLen = 20;      // v1 and v2 connection IDs
inline constexpr std::size_t kSecretLen = 32;      // SHA-256
inline constexpr std::size_t kKeyLen = 16;         // AEAD_AES_128_GCM
inline constexpr std::size_t kIvLen = 12;
inline constexpr std::size_t kHpLen = 16;          // AES-128 header protection
inline constexpr std::size_t kTagLen = 16;
inline constexpr std::size_t kSampleLen = 16;
// CRYPTO frames reported per datagram (more: kTooManyChunks). A client's
// ClientHello cut into many frames (Chrome) uses a dozen or so per packet.
inline constexpr unsigned kMaxCryptoChunks = 64;
// Longest datagram decode() accepts (the largest UDP payload over IPv4).
inline constexpr std::size_t kMaxDatagram = 65507;

// True for the versions whose Initials this library can open.
constexpr bool supported_version(uint32_t v) noexcept { return v == kVersion1 || v == kVersion2; }

struct InitialKeys {
  uint8_t secret[kSecretLen];  // client_initial_secret
  uint8_t key[kKeyLen];
  uint8_t iv[kIvLen];
  uint8_t hp[kHpLen];
};

// The client's Initial secret and packet protection keys for `version`
// (RFC 9001 §5.2 with v1's salt and "quic key"/"quic iv"/"quic hp"; RFC 9369
// §3.3 with v2's salt and "quicv2 key"/"quicv2 iv"/"quicv2 hp"). false (out
// untouched) for another version or dcid_len > kMaxCidLen. HMAC-SHA256 is
// computed on OpenSSL's SHA256_CTX, a plain struct: nothing allocates.
bool derive_client_initial_keys(uint32_t version, const uint8_t* dcid, std::size_t dcid_len,
                                InitialKeys& out) noexcept;

enum class Status : uint8_t {
  kOk,                  // see Decoded
  kNotLongHeader,       // empty, or a short-header packet (first bit 0)
  kUnsupportedVersion,  // version negotiation (0) or a version other than v1/v2
  kNotInitial,          // a long-header packet of another type (0-RTT, Handshake, Retry)
  kOtherConnection,     // an Initial of another DCID or version than the datagram's first one
  kTruncated,           // a varint or a length runs past the datagram
  kMalformed,           // a connection ID over 20 bytes, a packet too short to sample,
                        // a datagram over kMaxDatagram
  kDecryptFailed,       // the AEAD tag did not verify (wrong keys or tampered bytes)
  kBadFrame,            // a frame not allowed in an Initial, unknown, cut, or no frame
  kTooManyChunks,       // more than kMaxCryptoChunks CRYPTO frames
  kScratchTooSmall,     // the caller's scratch cannot hold the plaintext
  kCryptoError,         // an OpenSSL call failed (never seen in practice)
};
const char* status_name(Status s) noexcept;

// One CRYPTO frame: `len` bytes of the Initial CRYPTO stream at `offset`.
// `data` points into the caller's scratch: valid until it is written again
// (the next decode() into it); feed_crypto() copies the bytes into the pool.
struct CryptoChunk {
  uint64_t offset;
  const uint8_t* data;
  uint32_t len;
};

// What decode() found in a datagram.
struct Decoded {
  // kOk: at least one Initial was opened and its frames walked; the CRYPTO
  // frames of every opened Initial are in chunk[]. Otherwise why none could
  // be (the first Initial's failure) and chunk[] is empty. kOk with no chunk
  // is normal: a client's Initial that only acknowledges (ACK, PING, PADDING).
  Status status = Status::kNotLongHeader;
  // Why the walk over coalesced packets ended: kOk when it reached the end of
  // the datagram (or zero padding after the last packet), else the first
  // packet it did not open: kNotInitial (0-RTT, Handshake: expected after a
  // client's Initial), kOtherConnection, kTruncated, ... A packet that fails
  // after one that opened ends the walk too; its chunks are not reported.
  // Except an Initial whose tag does not verify (kDecryptFailed): it is
  // skipped and the walk goes on, as its receiver processes each coalesced
  // packet apart (RFC 9000 §12.2) — else one junk packet first would hide the
  // ClientHello behind it. `undecryptable` counts them; with none opened,
  // status is kDecryptFailed.
  Status stop = Status::kOk;
  uint8_t undecryptable = 0;
  uint32_t version = 0;
  uint8_t dcid_len = 0;
  uint8_t dcid[kMaxCidLen] = {};
  uint8_t initials = 0;          // Initial packets opened
  bool ping = false;             // a PING frame was seen
  bool ack = false;              // an ACK frame was seen
  bool connection_close = false; // a CONNECTION_CLOSE (0x1c) ended a packet
  uint64_t first_pn = 0;         // packet number of the first Initial opened
  // The largest packet number opened, or the caller's largest_pn if that is
  // larger (-1: none): what the caller passes to the flow's next decode().
  int64_t largest_pn = -1;
  unsigned n_chunks = 0;
  std::size_t scratch_used = 0;  // plaintext bytes written to the scratch
  CryptoChunk chunk[kMaxCryptoChunks];
};

class Decoder {
 public:
  struct Deleter {
    void operator()(Decoder* d) const noexcept;
  };
  using Ptr = std::unique_ptr<Decoder, Deleter>;

  // Allocates the decoder and its two OpenSSL contexts (AES-128-GCM for the
  // payload, AES-128-ECB for header protection). nullptr on failure, with a
  // static message in *error (if set).
  static Ptr create(const char** error = nullptr) noexcept;

  // Opens the client Initials at the start of a UDP payload (a datagram may
  // coalesce several packets, RFC 9000 §12.2). The first packet must be a
  // long-header Initial of v1 or v2; each Initial with the same version and
  // DCID after it is opened too; the walk stops cleanly at anything else.
  //
  // Keys are derived from the DCID of the datagram's first packet, or from
  // `key_dcid` when given (a client keeps the keys of its first Initial's
  // DCID after a server Initial made it switch DCID, RFC 9001 §5.2). The
  // keys of the last DCID are cached: consecutive datagrams of one client
  // skip the derivation.
  //
  // Header protection is removed on copies (the input is never written);
  // plaintexts go to `scratch` one after the other, so a scratch of `len`
  // bytes is always enough. A packet number is sent truncated to 1-4 bytes
  // and decoded against `largest_pn`, the largest one opened so far in the
  // flow's Initial space (-1: none; RFC 9000 §17.1, §A.3): a server reads
  // packet 300 sent as the byte 0x2c after packet 200, and so must this, or
  // the nonce is wrong and the packet's ClientHello bytes unread. Coalesced
  // Initials are decoded in turn against the largest so far.
  void decode(const uint8_t* datagram, std::size_t len, uint8_t* scratch, std::size_t scratch_cap,
              Decoded& out, const uint8_t* key_dcid = nullptr, std::size_t key_dcid_len = 0,
              int64_t largest_pn = -1) noexcept;

  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

 private:
  struct Packet;
  Decoder() = default;
  ~Decoder();
  bool keys_for(uint32_t version, const uint8_t* dcid, std::size_t dcid_len) noexcept;
  Status open(const uint8_t* p, Packet& pk, uint8_t* plain, std::size_t* plain_len) noexcept;

  evp_cipher_ctx_st* gcm_ = nullptr;
  evp_cipher_ctx_st* ecb_ = nullptr;
  // One-entry cache: the keys of (cached_version_, cached_dcid_).
  bool cached_ = false;
  uint32_t cached_version_ = 0;
  uint8_t cached_dcid_len_ = 0;
  uint8_t cached_dcid_[kMaxCidLen] = {};
  InitialKeys keys_ = {};
};

// Whether a UDP payload starts with a client Initial of v1 or v2 whose header
// is sound (connection IDs, token and Length inside the datagram), without
// any cryptography: what a `quic = "block"` policy, or a decision to spend a
// decode, needs. kOk with *version set, or decode()'s status for the header
// (kNotLongHeader, kUnsupportedVersion, kNotInitial, kTruncated, kMalformed).
// Pure; reads only [p, p + n).
Status peek_initial(const uint8_t* p, std::size_t n, uint32_t* version) noexcept;

// RFC 9000 §A.3: the full packet number of `truncated`, sent in `bits` bits
// (8, 16, 24 or 32), given the largest one received in its space (-1: none):
// the candidate closest to largest_pn + 1. Pure.
uint64_t decode_packet_number(int64_t largest_pn, uint64_t truncated, unsigned bits) noexcept;

// Walks the frames of one decrypted Initial payload (RFC 9000 §12.4: PADDING,
// PING, ACK with or without ECN counts, CRYPTO, CONNECTION_CLOSE 0x1c, which
// ends the packet), appending CRYPTO frames to out.chunk. kBadFrame for any
// other type, a frame type not in its shortest encoding, a cut frame, or an
// empty payload; kTooManyChunks when chunk[] is full. Exposed for tests and
// the fuzz target; decode() calls it.
Status walk_frames(const uint8_t* p, std::size_t n, Decoded& out) noexcept;

}  // namespace cg::quic
