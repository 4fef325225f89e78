// The Initial CRYPTO stream of a QUIC flow, put back together with the
// TCP first-flight pool of app/reasm, and the ClientHello read from it
// (issue 11, item 3). A post-quantum ClientHello spans two or more Initials,
// and Chrome sends its CRYPTO frames split and out of order; the stream
// offset of a CRYPTO frame plays the TCP sequence number:
//
//   uint32_t& h = <the flow's reassembly handle>;
//   if (h == 0) h = pool.begin(0, now);                  // the stream starts at offset 0
//   decoder.decode(udp_payload, len, scratch, sizeof scratch, decoded);
//   if (decoded.status != quic::Status::kOk) ...        // not inspectable: policy
//   switch (quic::feed_crypto(pool, h, decoded, now)) { ... }   // as for TCP
//   auto ch = quic::client_hello_complete(pool.data(h).data(), pool.data(h).size(),
//                                         tls_scratch, sizeof tls_scratch);
//   if (ch.status == reasm::Frame::kComplete)
//     classify_meta(frame, meta, keys, ch.record, ch.record_len);
//
// Same contract as app/reasm: no allocation, no syscall, no exception, work
// linear in the input, reads only the given ranges. Thread-safety: the Pool's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuckoogate/quic/initial.hpp"
#include "cuckoogate/reasm/first_flight.hpp"
#include "cuckoogate/reasm/pool.hpp"

namespace cg::quic {

// CRYPTO offsets beyond this are not stored (the pool's sequence numbers are
// 32-bit serial numbers; a slot holds at most 2^20 bytes anyway).
inline constexpr uint64_t kMaxCryptoOffset = uint64_t{1} << 30;

// Appends every CRYPTO chunk of `d` (a kOk decode) to slot `handle`, begun at
// sequence number 0, in offset order (so a packet's frames sent shuffled use
// no more of the slot's out-of-order window than sent in order). Returns the most serious result of the appends, in this
// order: kBadHandle, kConflict, kOverflow, kAdvanced, kHeld, kNothing (no
// chunk: kNothing). A chunk reaching past kMaxCryptoOffset is not appended
// and counts as kOverflow.
reasm::Append feed_crypto(reasm::Pool& pool, uint32_t handle, const Decoded& d,
                          uint64_t now = 0) noexcept;

struct ClientHello {
  reasm::Frame status = reasm::Frame::kNeedMore;
  // kComplete: the handshake message (type 1, 24-bit length, body) behind a
  // synthesised 5-byte TLS record header (type 22, version 3.1, length), in
  // the caller's scratch: what classify_meta() reads as `app`, the same
  // shape reasm::detect_tls_client_hello() gives for TLS over TCP.
  const uint8_t* record = nullptr;
  std::size_t record_len = 0;
  std::size_t handshake_len = 0;  // 4 + the message's length
};

// Whether the CRYPTO stream bytes [p, p + n) from offset 0 hold a whole TLS
// ClientHello. kNeedMore: fewer than 4 bytes or than the message's length;
// kInvalid: the first byte is not 1 (ClientHello); kTooLarge: the length is
// over max_handshake or the scratch is smaller than 5 + 4 + length. Bytes
// after the message are ignored. The scratch must not overlap the input.
ClientHello client_hello_complete(const uint8_t* p, std::size_t n, uint8_t* scratch,
                                  std::size_t scratch_cap,
                                  std::size_t max_handshake = reasm::kTlsMaxHandshake) noexcept;

}  // namespace cg::quic
