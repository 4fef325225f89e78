// CRYPTO frames into a reasm::Pool, and the ClientHello they assemble.
#include "cuckoogate/quic/crypto_stream.hpp"

#include <cstring>

namespace cg::quic {
namespace {

// How serious an append result is, for feed_crypto's summary.
int rank(reasm::Append a) noexcept {
  switch (a) {
    case reasm::Append::kBadHandle: return 5;
    case reasm::Append::kConflict: return 4;
    case reasm::Append::kOverflow: return 3;
    case reasm::Append::kAdvanced: return 2;
    case reasm::Append::kHeld: return 1;
    case reasm::Append::kNothing: return 0;
  }
  return 5;
}

}  // namespace

reasm::Append feed_crypto(reasm::Pool& pool, uint32_t handle, const Decoded& d, uint64_t now) noexcept {
  // In offset order (an insertion sort of at most kMaxCryptoChunks): a
  // packet's frames sent shuffled then append as one growing range instead
  // of taking one of the slot's few out-of-order ranges each.
  const unsigned n = d.n_chunks < kMaxCryptoChunks ? d.n_chunks : kMaxCryptoChunks;
  uint8_t order[kMaxCryptoChunks];
  for (unsigned i = 0; i < n; ++i) {
    unsigned j = i;
    for (; j > 0 && d.chunk[order[j - 1]].offset > d.chunk[i].offset; --j) order[j] = order[j - 1];
    order[j] = static_cast<uint8_t>(i);
  }
  reasm::Append worst = reasm::Append::kNothing;
  for (unsigned k = 0; k < n; ++k) {
    const CryptoChunk& c = d.chunk[order[k]];
    reasm::Append a = reasm::Append::kOverflow;
    if (c.offset < kMaxCryptoOffset && c.len <= kMaxCryptoOffset - c.offset)
      a = pool.append(handle, static_cast<uint32_t>(c.offset), c.data, c.len, now);
    if (rank(a) > rank(worst)) worst = a;
    if (a == reasm::Append::kBadHandle) break;
  }
  return worst;
}

ClientHello client_hello_complete(const uint8_t* p, std::size_t n, uint8_t* scratch,
                                  std::size_t scratch_cap, std::size_t max_handshake) noexcept {
  ClientHello r;
  if (n == 0) return r;
  if (p[0] != 1) {
    r.status = reasm::Frame::kInvalid;
    return r;
  }
  if (n < 4) return r;
  const std::size_t len = (std::size_t{p[1]} << 16) | (std::size_t{p[2]} << 8) | p[3];
  // The record length field is 16 bits; kTlsMaxHandshake keeps far below it.
  if (len > max_handshake || len + 4 > 0xffff || scratch_cap < reasm::kTlsRecordHeader + 4 + len) {
    r.status = reasm::Frame::kTooLarge;
    return r;
  }
  if (n - 4 < len) return r;
  const std::size_t hs = 4 + len;
  scratch[0] = 22;  // handshake
  scratch[1] = 3;   // legacy_record_version 3.1, as TLS 1.3 clients write it
  scratch[2] = 1;
  scratch[3] = static_cast<uint8_t>(hs >> 8);
  scratch[4] = static_cast<uint8_t>(hs);
  std::memcpy(scratch + reasm::kTlsRecordHeader, p, hs);
  r.status = reasm::Frame::kComplete;
  r.record = scratch;
  r.record_len = reasm::kTlsRecordHeader + hs;
  r.handshake_len = hs;
  return r;
}

}  // namespace cg::quic
