// libFuzzer target for app/quic: the datagram decoder, the frame walker, the
// CRYPTO stream into a reasm::Pool and client_hello_complete().
//
// Input: byte 0 picks a mode (low 2 bits), the rest is its data.
// - 0 or 3, raw: the bytes are a UDP payload, decoded as they are (headers,
//   varints, lengths, coalescing; decryption almost always fails).
// - 1, sealed frames: byte 1 chooses version (bit 0), DCID length (bits
//   1-5, mod 21) and packet number length (bits 6-7); the rest (up to 4000
//   bytes) is the plaintext payload, sealed with the real Initial keys by the
//   test builder, so decryption succeeds and the frame walker reads
//   fuzzer-chosen frames.
// - 2, CRYPTO stream: byte 1 seeds the split; the rest (up to 6000 bytes) is
//   the CRYPTO stream, cut into 1-3 Initials with frames shuffled, the
//   datagrams decoded in a shuffled order and fed to a Pool.
//
// Checked (abort on violation): chunks lie inside the scratch's used bytes;
// peek_initial() agrees with decode() on the first header;
// mode 1: the packet opens (a sealed packet never fails its tag), the
// plaintext is exactly the payload sealed (plus PADDING), the decoder's walk
// agrees with walk_frames() on that plaintext, and every chunk is the bytes
// of a CRYPTO frame in it; mode 2: the pool holds exactly the stream, and
// client_hello_complete() on it says what it says on the stream itself.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "cuckoogate/quic/crypto_stream.hpp"
#include "cuckoogate/quic/initial.hpp"
#include "quic_initial_builder.hpp"

namespace {

using namespace cg::test::quic;
using cg::quic::Status;

void check(bool ok) {
  if (!ok) std::abort();
}

struct State {
  cg::quic::Decoder::Ptr dec = cg::quic::Decoder::create();
  cg::reasm::Pool::Ptr pool = cg::reasm::Pool::create(cg::reasm::PoolConfig{4, 16384 + 512, cg::reasm::kMaxPending, 0});
  cg::quic::Decoded out;
  std::vector<uint8_t> scratch = std::vector<uint8_t>(cg::quic::kMaxDatagram);
  std::vector<uint8_t> tls = std::vector<uint8_t>(cg::reasm::kTlsScratch);
  std::vector<uint8_t> tls2 = std::vector<uint8_t>(cg::reasm::kTlsScratch);
};

State& state() {
  static State s;
  check(s.dec && s.pool);
  return s;
}

void check_chunks(const State& s) {
  check(s.out.n_chunks <= cg::quic::kMaxCryptoChunks);
  check(s.out.scratch_used <= s.scratch.size());
  if (s.out.status != Status::kOk) check(s.out.n_chunks == 0 && s.out.initials == 0);
  for (unsigned i = 0; i < s.out.n_chunks; ++i) {
    const auto& c = s.out.chunk[i];
    check(c.len > 0 && c.data >= s.scratch.data() && c.data + c.len <= s.scratch.data() + s.out.scratch_used);
  }
}

// The chunks into a fresh slot, and the ClientHello check on what it holds.
void assemble(State& s) {
  const uint32_t h = s.pool->begin(0);
  check(h != 0);
  (void)cg::quic::feed_crypto(*s.pool, h, s.out);
  const auto held = s.pool->data(h);
  const auto ch = cg::quic::client_hello_complete(held.data(), held.size(), s.tls.data(), s.tls.size());
  if (ch.status == cg::reasm::Frame::kComplete)
    check(ch.record_len == ch.handshake_len + 5 && ch.handshake_len <= held.size());
  check(s.pool->release(h));
}

void raw(State& s, const uint8_t* p, std::size_t n) {
  // An exact-size heap copy: ASan sees any read past the datagram.
  std::unique_ptr<uint8_t[]> copy(new uint8_t[n + 1]);
  std::memcpy(copy.get(), p, n);
  s.dec->decode(copy.get(), n, s.scratch.data(), n, s.out);
  check(std::memcmp(copy.get(), p, n) == 0);
  check_chunks(s);
  // peek_initial() reads the first header as decode() does.
  uint32_t version = 0;
  const Status peek = cg::quic::peek_initial(copy.get(), n, &version);
  if (peek != Status::kOk) check(s.out.status == peek);
  if (s.out.status == Status::kOk) check(peek == Status::kOk && version == s.out.version);
  if (s.out.status == Status::kOk) assemble(s);
}

void sealed(State& s, const uint8_t* p, std::size_t n) {
  if (n < 1) return;
  InitialPacket pk;
  pk.version = (p[0] & 1) ? kV2 : kV1;
  pk.dcid.assign(((p[0] >> 1) & 0x1f) % 21, 0x5a);
  pk.pn_len = 1 + (p[0] >> 6);
  pk.pn = 1;
  pk.frames.assign(p + 1, p + std::min<std::size_t>(n, 4001));
  const Bytes d = datagram({pk});
  s.dec->decode(d.data(), d.size(), s.scratch.data(), s.scratch.size(), s.out);
  check_chunks(s);
  // Never a tag failure or a header complaint: only the frames can be wrong.
  check(s.out.status == Status::kOk || s.out.status == Status::kBadFrame ||
        s.out.status == Status::kTooManyChunks);
  if (s.out.status != Status::kOk) return;
  check(s.out.initials == 1 && s.out.stop == Status::kOk);
  // The plaintext in the scratch is the payload sealed, then PADDING.
  check(s.out.scratch_used >= pk.frames.size());
  // (memcmp of an empty payload: frames.data() may be null, and memcmp's
  // arguments must not be even for length 0.)
  check(pk.frames.empty() || std::memcmp(s.scratch.data(), pk.frames.data(), pk.frames.size()) == 0);
  for (std::size_t i = pk.frames.size(); i < s.out.scratch_used; ++i) check(s.scratch[i] == 0);
  // The walk over the plaintext alone agrees.
  cg::quic::Decoded again;
  check(cg::quic::walk_frames(s.scratch.data(), s.out.scratch_used, again) == Status::kOk);
  check(again.n_chunks == s.out.n_chunks && again.ping == s.out.ping && again.ack == s.out.ack &&
        again.connection_close == s.out.connection_close);
  for (unsigned i = 0; i < s.out.n_chunks; ++i) {
    const auto& c = s.out.chunk[i];
    check(again.chunk[i].offset == c.offset && again.chunk[i].len == c.len && again.chunk[i].data == c.data);
    // The frame's bytes sit right before its data: type 6, two varints.
    check(c.data - s.scratch.data() >= 3);
  }
  assemble(s);
}

void stream(State& s, const uint8_t* p, std::size_t n) {
  if (n < 2) return;
  std::mt19937_64 rng(p[0]);
  const Bytes data(p + 1, p + std::min<std::size_t>(n, 6001));
  const unsigned packets = 1 + static_cast<unsigned>(rng() % std::min<std::size_t>(3, data.size()));
  const auto parts = split_crypto(data, packets, rng, 16, (p[0] & 0x80) != 0);
  std::vector<Bytes> ds;
  for (unsigned i = 0; i < packets; ++i) {
    InitialPacket pk;
    pk.version = (p[0] & 1) ? kV2 : kV1;
    pk.pn = i;
    pk.frames = parts[i];
    ds.push_back(datagram({pk}));
  }
  std::shuffle(ds.begin(), ds.end(), rng);
  const uint32_t h = s.pool->begin(0);
  check(h != 0);
  for (const Bytes& d : ds) {
    s.dec->decode(d.data(), d.size(), s.scratch.data(), s.scratch.size(), s.out);
    check(s.out.status == Status::kOk);
    check_chunks(s);
    const auto a = cg::quic::feed_crypto(*s.pool, h, s.out);
    check(a != cg::reasm::Append::kConflict && a != cg::reasm::Append::kBadHandle);
  }
  // Contiguous stretches per packet, sorted frames: the window never fills.
  const auto held = s.pool->data(h);
  check(held.size() == data.size() && std::memcmp(held.data(), data.data(), data.size()) == 0);
  const auto a = cg::quic::client_hello_complete(held.data(), held.size(), s.tls.data(), s.tls.size());
  const auto b = cg::quic::client_hello_complete(data.data(), data.size(), s.tls2.data(), s.tls2.size());
  check(a.status == b.status && a.record_len == b.record_len);
  if (a.status == cg::reasm::Frame::kComplete) check(std::memcmp(a.record, b.record, a.record_len) == 0);
  check(s.pool->release(h));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  State& s = state();
  switch (data[0] & 3) {
    case 1: sealed(s, data + 1, size - 1); break;
    case 2: stream(s, data + 1, size - 1); break;
    default: raw(s, data + 1, size - 1); break;
  }
  return 0;
}
