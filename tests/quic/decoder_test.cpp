// The datagram decoder: headers, coalesced packets, header protection,
// AEAD, the frame walker, and every way a datagram can be wrong.
#include <gtest/gtest.h>

#include <random>

#include "cuckoogate/quic/initial.hpp"
#include "quic_test_util.hpp"

namespace {

using namespace cg::test::quic;
using cg::quic::Status;

Bytes some_crypto(std::size_t n, uint8_t seed = 1) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + 3 * i);
  return b;
}

InitialPacket packet(uint32_t version, Bytes dcid, Bytes frames) {
  InitialPacket p;
  p.version = version;
  p.dcid = std::move(dcid);
  p.scid = {0xaa, 0xbb, 0xcc};
  p.frames = std::move(frames);
  return p;
}

class QuicDecoder : public ::testing::Test {
 protected:
  cg::quic::Decoder::Ptr dec = make_decoder();
};

TEST_F(QuicDecoder, OpensV1AndV2InitialsForDcidLengths0To20) {
  for (uint32_t version : {kV1, kV2}) {
    for (std::size_t len : {0u, 1u, 8u, 19u, 20u}) {
      const Bytes data = some_crypto(300, static_cast<uint8_t>(len));
      Bytes dcid(len, static_cast<uint8_t>(0x40 + len));
      const Bytes d = datagram({packet(version, dcid, crypto_frame(0, data.data(), data.size()))});
      EXPECT_EQ(d.size(), 1200u);
      Decode r = decode(*dec, d);
      ASSERT_EQ(r.out->status, Status::kOk) << version << " " << len << ": " << cg::quic::status_name(r.out->status);
      EXPECT_EQ(r.out->version, version);
      EXPECT_EQ(r.out->dcid_len, len);
      EXPECT_EQ(r.out->initials, 1);
      ASSERT_EQ(r.out->n_chunks, 1u);
      EXPECT_EQ(Bytes(r.out->chunk[0].data, r.out->chunk[0].data + r.out->chunk[0].len), data);
    }
  }
}

TEST_F(QuicDecoder, PacketNumberLengthsOneToFour) {
  for (unsigned pn_len = 1; pn_len <= 4; ++pn_len) {
    const Bytes data = some_crypto(50);
    InitialPacket p = packet(kV1, {1, 2, 3, 4, 5, 6, 7, 8}, crypto_frame(7, data.data(), data.size()));
    p.pn_len = pn_len;
    p.pn = pn_len == 1 ? 0 : 0x0102 + pn_len;
    Decode r = decode(*dec, datagram({p}));
    ASSERT_EQ(r.out->status, Status::kOk) << pn_len;
    EXPECT_EQ(r.out->first_pn, p.pn);
    ASSERT_EQ(r.out->n_chunks, 1u);
    EXPECT_EQ(r.out->chunk[0].offset, 7u);
  }
}

// RFC 9000 §A.3: a packet number sent truncated is the candidate closest to
// the next one expected (the RFC's example, the window's edges, none yet).
TEST(QuicPacketNumber, TruncatedNumbersDecodeAgainstTheLargestReceived) {
  using cg::quic::decode_packet_number;
  EXPECT_EQ(decode_packet_number(0xa82f30ea, 0x9b32, 16), 0xa82f9b32u);
  EXPECT_EQ(decode_packet_number(-1, 0x2c, 8), 0x2cu);  // none received: as sent
  EXPECT_EQ(decode_packet_number(200, 0x2c, 8), 300u);
  EXPECT_EQ(decode_packet_number(200, 0xc9, 8), 201u);
  EXPECT_EQ(decode_packet_number(300, 0xff, 8), 255u);  // just behind: the earlier window
  EXPECT_EQ(decode_packet_number(127, 0x00, 8), 256u);  // hwin ahead of 128: the next window
  EXPECT_EQ(decode_packet_number(126, 0x00, 8), 0u);
  EXPECT_EQ(decode_packet_number(0xfffe, 0x0000, 16), 0x10000u);
}

// A client's Initial after packet 200, numbered 300 and sent in one byte
// (0x2c): opened only when decoded against the largest one received, and
// its number is the new largest. (It was taken for packet 44: the wrong
// nonce, a failed tag, its ClientHello bytes unread.)
TEST_F(QuicDecoder, ATruncatedPacketNumberIsDecodedAgainstTheLargestOpened) {
  const Bytes data = some_crypto(60);
  InitialPacket p = packet(kV1, {1, 2, 3, 4, 5, 6, 7, 8}, crypto_frame(0, data.data(), data.size()));
  p.pn = 200;
  p.pn_len = 1;
  Decode first = decode(*dec, datagram({p}));
  ASSERT_EQ(first.out->status, Status::kOk);
  EXPECT_EQ(first.out->largest_pn, 200);
  p.pn = 300;
  const Bytes d = datagram({p});
  EXPECT_EQ(decode(*dec, d).out->status, Status::kDecryptFailed);
  Decode r = decode(*dec, d, SIZE_MAX, nullptr, first.out->largest_pn);
  ASSERT_EQ(r.out->status, Status::kOk);
  EXPECT_EQ(r.out->first_pn, 300u);
  EXPECT_EQ(r.out->largest_pn, 300);
  // An older packet keeps the largest; two coalesced ones decode in turn.
  p.pn = 250;
  EXPECT_EQ(decode(*dec, datagram({p}), SIZE_MAX, nullptr, 300).out->largest_pn, 300);
  InitialPacket q = p;
  q.pn = 0x17f;  // after 0x100 (sent as 0x00), a 1-byte 0x7f is 0x17f
  p.pn = 0x100;
  Decode two = decode(*dec, datagram({p, q}), SIZE_MAX, nullptr, 0xf0);
  ASSERT_EQ(two.out->status, Status::kOk);
  EXPECT_EQ(two.out->initials, 2);
  EXPECT_EQ(two.out->largest_pn, 0x17f);
}

TEST_F(QuicDecoder, CoalescedInitialsAreAllOpened) {
  const Bytes a = some_crypto(200, 1), b = some_crypto(150, 9);
  InitialPacket p1 = packet(kV2, {9, 9, 9, 9, 9, 9, 9, 9}, crypto_frame(0, a.data(), a.size()));
  InitialPacket p2 = p1;
  p2.pn = 1;
  p2.frames = crypto_frame(200, b.data(), b.size());
  Decode r = decode(*dec, datagram({p1, p2}));
  ASSERT_EQ(r.out->status, Status::kOk);
  EXPECT_EQ(r.out->stop, Status::kOk);
  EXPECT_EQ(r.out->initials, 2);
  ASSERT_EQ(r.out->n_chunks, 2u);
  EXPECT_EQ(r.out->chunk[1].offset, 200u);
  Bytes whole = a;
  whole.insert(whole.end(), b.begin(), b.end());
  EXPECT_EQ(assemble({r.out.get()}), whole);
}

TEST_F(QuicDecoder, StopsCleanlyAtZeroRttOrHandshakeAfterTheInitial) {
  for (uint32_t version : {kV1, kV2}) {
    // 0-RTT and Handshake type bits of each version.
    for (unsigned type : version == kV1 ? std::vector<unsigned>{1, 2} : std::vector<unsigned>{2, 3}) {
      const Bytes data = some_crypto(100);
      const Bytes dcid = {5, 5, 5, 5, 5, 5, 5, 5};
      Bytes d = protect(packet(version, dcid, crypto_frame(0, data.data(), data.size())));
      const Bytes other = other_long_packet(version, type, dcid, 900);
      d.insert(d.end(), other.begin(), other.end());
      Decode r = decode(*dec, d);
      ASSERT_EQ(r.out->status, Status::kOk);
      EXPECT_EQ(r.out->stop, Status::kNotInitial) << version << " type " << type;
      EXPECT_EQ(r.out->initials, 1);
      EXPECT_EQ(r.out->n_chunks, 1u);
    }
  }
}

TEST_F(QuicDecoder, StopsAtAnInitialOfAnotherDcidAndAtTrailingZeros) {
  const Bytes data = some_crypto(100);
  Bytes d = protect(packet(kV1, {1, 1, 1, 1, 1, 1, 1, 1}, crypto_frame(0, data.data(), data.size())));
  Bytes with_zeros = d;
  with_zeros.resize(1200, 0);  // datagram padding outside any packet
  Decode z = decode(*dec, with_zeros);
  ASSERT_EQ(z.out->status, Status::kOk);
  EXPECT_EQ(z.out->stop, Status::kOk);
  const Bytes other = protect(packet(kV1, {2, 2, 2, 2, 2, 2, 2, 2}, crypto_frame(0, data.data(), data.size())));
  d.insert(d.end(), other.begin(), other.end());
  Decode r = decode(*dec, d);
  ASSERT_EQ(r.out->status, Status::kOk);
  EXPECT_EQ(r.out->stop, Status::kOtherConnection);
  EXPECT_EQ(r.out->initials, 1);
}

TEST_F(QuicDecoder, ALaterPacketThatFailsKeepsTheFirstOnesChunksOnly) {
  const Bytes a = some_crypto(100, 1), b = some_crypto(100, 2);
  InitialPacket p1 = packet(kV1, {3, 3, 3, 3}, crypto_frame(0, a.data(), a.size()));
  InitialPacket p2 = p1;
  p2.pn = 1;
  p2.frames = crypto_frame(100, b.data(), b.size());
  Bytes d = datagram({p1, p2});
  d.back() ^= 1;  // the second packet's tag
  Decode r = decode(*dec, d);
  ASSERT_EQ(r.out->status, Status::kOk);
  EXPECT_EQ(r.out->stop, Status::kOk);  // a packet whose tag fails is skipped, not the end
  EXPECT_EQ(r.out->undecryptable, 1);
  EXPECT_EQ(r.out->initials, 1);
  ASSERT_EQ(r.out->n_chunks, 1u);
  EXPECT_EQ(r.out->chunk[0].offset, 0u);
}

// A coalesced Initial whose tag does not verify is skipped and the ones
// after it are opened, as their receiver processes each packet apart (RFC
// 9000 §12.2). One junk packet first (or between) used to hide the
// ClientHello behind it. A later packet of another DCID still ends the walk.
TEST_F(QuicDecoder, AnUndecryptablePacketDoesNotHideTheOnesAfterIt) {
  const Bytes a = some_crypto(100, 1), b = some_crypto(100, 2);
  const Bytes dcid = {3, 3, 3, 3};
  InitialPacket junk = packet(kV1, dcid, ping_frame());
  junk.key_dcid = {9, 9, 9, 9};  // the same DCID, other keys: its tag fails
  InitialPacket p1 = packet(kV1, dcid, crypto_frame(0, a.data(), a.size()));
  p1.pn = 1;
  InitialPacket p2 = p1;
  p2.pn = 2;
  p2.frames = crypto_frame(100, b.data(), b.size());
  Decode r = decode(*dec, datagram({junk, p1, junk, p2}));
  ASSERT_EQ(r.out->status, Status::kOk);
  EXPECT_EQ(r.out->initials, 2);
  EXPECT_EQ(r.out->undecryptable, 2);
  ASSERT_EQ(r.out->n_chunks, 2u);
  EXPECT_EQ(r.out->first_pn, 1u);
  EXPECT_EQ(to_hex(r.out->dcid, r.out->dcid_len), to_hex(dcid.data(), dcid.size()));
  // Only junk: the first failure is the status.
  EXPECT_EQ(decode(*dec, datagram({junk, junk})).out->status, Status::kDecryptFailed);
  // A packet of another connection after a skipped one ends the walk there.
  InitialPacket other = p1;
  other.dcid = {4, 4, 4, 4};
  Decode o = decode(*dec, datagram({junk, other}));
  EXPECT_EQ(o.out->status, Status::kDecryptFailed);
  EXPECT_EQ(o.out->stop, Status::kOtherConnection);
}

TEST_F(QuicDecoder, ALaterPacketWithABadFrameContributesNoChunk) {
  // The second Initial opens, a CRYPTO frame is walked, then a STREAM frame
  // (not allowed in Initials) fails the packet: its CRYPTO frame is dropped.
  const Bytes a = some_crypto(100, 1), b = some_crypto(100, 2);
  InitialPacket p1 = packet(kV1, {3, 3, 3, 3}, crypto_frame(0, a.data(), a.size()));
  InitialPacket p2 = p1;
  p2.pn = 1;
  p2.frames = crypto_frame(100, b.data(), b.size());
  p2.frames.push_back(0x08);  // STREAM
  Decode r = decode(*dec, datagram({p1, p2}));
  ASSERT_EQ(r.out->status, Status::kOk);
  EXPECT_EQ(r.out->stop, Status::kBadFrame);
  EXPECT_EQ(r.out->initials, 1);
  ASSERT_EQ(r.out->n_chunks, 1u);
  EXPECT_EQ(r.out->chunk[0].offset, 0u);
}

TEST_F(QuicDecoder, TamperedBytesFailTheTag) {
  const Bytes data = some_crypto(400);
  InitialPacket p = packet(kV1, {7, 7, 7, 7, 7, 7, 7, 7}, crypto_frame(0, data.data(), data.size()));
  p.token = {0x10, 0x20, 0x30};
  const Bytes d = datagram({p});
  ASSERT_EQ(decode(*dec, d).out->status, Status::kOk);
  // The tag, the ciphertext, an SCID and a token byte (only the AAD covers
  // them), the first byte's protected bits... every one is caught.
  const std::size_t scid_at = 1 + 4 + 1 + 8 + 1;
  const std::size_t token_at = scid_at + 3 + 1;
  for (std::size_t at : {d.size() - 1, d.size() - 17, std::size_t{100}, scid_at, token_at}) {
    Bytes t = d;
    t[at] ^= 0x04;
    Decode r = decode(*dec, t);
    EXPECT_EQ(r.out->status, Status::kDecryptFailed) << "byte " << at;
    EXPECT_EQ(r.out->n_chunks, 0u);
  }
}

TEST_F(QuicDecoder, EveryTruncationGivesAStatusNeverAnOpenedPacket) {
  const Bytes data = some_crypto(500);
  InitialPacket p = packet(kV2, Bytes(20, 0x21), crypto_frame(0, data.data(), data.size()));
  p.token = Bytes(70, 0x33);  // a 2-byte token length
  const Bytes d = datagram({p});
  for (std::size_t n = 0; n < d.size(); ++n) {
    Decode r = decode(*dec, Bytes(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(n)));
    EXPECT_NE(r.out->status, Status::kOk) << n;
    EXPECT_EQ(r.out->n_chunks, 0u);
    if (n > 0) {
      EXPECT_EQ(r.out->status, Status::kTruncated) << n;
    }
  }
  // A coalesced pair cut inside the second packet: the first is still read.
  InitialPacket q = p;
  q.pn = 1;
  const Bytes d2 = datagram({p, q}, 0);
  const std::size_t first = protect(p).size();
  for (std::size_t n = first; n < d2.size(); n += 7) {
    Decode r = decode(*dec, Bytes(d2.begin(), d2.begin() + static_cast<std::ptrdiff_t>(n)));
    ASSERT_EQ(r.out->status, Status::kOk) << n;
    EXPECT_EQ(r.out->initials, 1);
    EXPECT_EQ(r.out->stop, n == first ? Status::kOk : Status::kTruncated) << n;
  }
}

TEST_F(QuicDecoder, VersionsOtherThanV1AndV2AreNotInspectable) {
  const Bytes data = some_crypto(100);
  Bytes d = datagram({packet(kV1, {1, 2, 3, 4, 5, 6, 7, 8}, crypto_frame(0, data.data(), data.size()))});
  for (uint32_t v : {0x00000000u, 0xff00001du, 0x00000002u, 0x709a50c4u, 0x1a2a3a4au}) {
    Bytes t = d;
    for (int i = 0; i < 4; ++i) t[1 + i] = static_cast<uint8_t>(v >> (24 - 8 * i));
    EXPECT_EQ(decode(*dec, t).out->status, Status::kUnsupportedVersion) << std::hex << v;
  }
  Bytes shortp = d;
  shortp[0] = 0x40;  // short header
  EXPECT_EQ(decode(*dec, shortp).out->status, Status::kNotLongHeader);
  EXPECT_EQ(decode(*dec, {}).out->status, Status::kNotLongHeader);
}

TEST_F(QuicDecoder, LongHeaderTypeBitsAreReadPerVersion) {
  const Bytes data = some_crypto(100);
  const Bytes dcid = {1, 2, 3, 4, 5, 6, 7, 8};
  // A v1 Initial (type 0) relabelled v2 is a v2 Retry; a v2 Initial (type 1)
  // relabelled v1 is a v1 0-RTT packet: neither is an Initial.
  Bytes v1 = datagram({packet(kV1, dcid, crypto_frame(0, data.data(), data.size()))});
  Bytes v2 = datagram({packet(kV2, dcid, crypto_frame(0, data.data(), data.size()))});
  std::swap_ranges(v1.begin() + 1, v1.begin() + 5, v2.begin() + 1);
  EXPECT_EQ(decode(*dec, v1).out->status, Status::kNotInitial);
  EXPECT_EQ(decode(*dec, v2).out->status, Status::kNotInitial);
}

TEST_F(QuicDecoder, ConnectionIdsOver20BytesAreMalformed) {
  const Bytes data = some_crypto(100);
  Bytes d = datagram({packet(kV1, Bytes(20, 1), crypto_frame(0, data.data(), data.size()))});
  Bytes t = d;
  t[5] = 21;
  EXPECT_EQ(decode(*dec, t).out->status, Status::kMalformed);
  t = d;
  t[5 + 1 + 20] = 200;  // SCID length
  EXPECT_EQ(decode(*dec, t).out->status, Status::kMalformed);
}

TEST_F(QuicDecoder, APacketTooShortToSampleIsMalformed) {
  // Length 19: the 16-byte sample at pn + 4 would reach past the packet.
  // (Built whole, not by resize: GCC 12 -O3 -Warray-bounds false positive.)
  Bytes d(9 + 19, 0x11);
  const uint8_t header[9] = {0xc0, 0, 0, 0, 1, 0, 0, 0, 19};
  std::copy(header, header + 9, d.begin());
  EXPECT_EQ(decode(*dec, d).out->status, Status::kMalformed);
  d[8] = 0x40 | 0;  // a 2-byte varint cut by the datagram's end is truncation
  d.resize(9);
  EXPECT_EQ(decode(*dec, d).out->status, Status::kTruncated);
}

TEST_F(QuicDecoder, FramesAllowedInInitialsAreWalked) {
  const Bytes data = some_crypto(64);
  Bytes f = ping_frame();
  for (const Bytes& x : {ack_frame(0), ack_frame(90, 3, true), padding_frames(5),
                         crypto_frame(1000, data.data(), data.size()), ack_frame(2, 0, true)})
    f.insert(f.end(), x.begin(), x.end());
  Decode r = decode(*dec, datagram({packet(kV1, {1, 2, 3, 4}, f)}));
  ASSERT_EQ(r.out->status, Status::kOk) << cg::quic::status_name(r.out->status);
  EXPECT_TRUE(r.out->ping);
  EXPECT_TRUE(r.out->ack);
  EXPECT_FALSE(r.out->connection_close);
  ASSERT_EQ(r.out->n_chunks, 1u);
  EXPECT_EQ(r.out->chunk[0].offset, 1000u);
}

TEST_F(QuicDecoder, ConnectionCloseEndsThePacket) {
  const Bytes data = some_crypto(64);
  Bytes f = connection_close_frame(0x0a, "bye");
  const Bytes c = crypto_frame(0, data.data(), data.size());
  f.insert(f.end(), c.begin(), c.end());
  Decode r = decode(*dec, datagram({packet(kV1, {1, 2, 3, 4}, f)}));
  ASSERT_EQ(r.out->status, Status::kOk);
  EXPECT_TRUE(r.out->connection_close);
  EXPECT_EQ(r.out->n_chunks, 0u);  // the CRYPTO frame after it is not read
}

TEST_F(QuicDecoder, FramesNotAllowedInInitialsAreBadFrames) {
  // STREAM, NEW_TOKEN, application CONNECTION_CLOSE, HANDSHAKE_DONE, a type
  // beyond RFC 9000, and CRYPTO written with a 2-byte frame type.
  for (const Bytes& f : {Bytes{0x08, 0x00, 0x01}, Bytes{0x07, 0x01, 0x00}, Bytes{0x1d, 0, 0, 0},
                         Bytes{0x1e}, Bytes{0x31}, Bytes{0x40, 0x06, 0x00, 0x01, 0xaa}}) {
    Decode r = decode(*dec, datagram({packet(kV1, {1, 2, 3, 4}, f)}));
    EXPECT_EQ(r.out->status, Status::kBadFrame) << to_hex(f.data(), f.size());
  }
  // A CRYPTO frame whose length runs past the payload; an ACK cut short.
  const Bytes cut = {0x06, 0x00, 0x44, 0x00};
  Decode r = decode(*dec, datagram({packet(kV1, {1, 2, 3, 4}, cut)}, 0));
  EXPECT_EQ(r.out->status, Status::kBadFrame);
  cg::quic::Decoded out;
  const Bytes ack = {0x03, 0x05, 0x00, 0x01, 0x00, 0x01, 0x01, 0x00};  // ECN counts missing
  EXPECT_EQ(cg::quic::walk_frames(ack.data(), ack.size(), out), Status::kBadFrame);
  // An ACK range count of 2^62 - 1 ends with the payload, not a long loop.
  const Bytes many = {0x02, 0x05, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x01, 0x01};
  EXPECT_EQ(cg::quic::walk_frames(many.data(), many.size(), out), Status::kBadFrame);
  EXPECT_EQ(cg::quic::walk_frames(many.data(), 0, out), Status::kBadFrame);  // no frame at all
  // A CRYPTO frame ending past 2^62 - 1.
  Bytes big = {0x06};
  put_varint(big, (uint64_t{1} << 62) - 2);
  put_varint(big, 2);
  big.push_back(1);
  big.push_back(2);
  EXPECT_EQ(cg::quic::walk_frames(big.data(), big.size(), out), Status::kBadFrame);
}

TEST_F(QuicDecoder, MoreCryptoFramesThanTheLimitAreRefused) {
  const Bytes data = some_crypto(cg::quic::kMaxCryptoChunks + 1);
  Bytes f;
  for (std::size_t i = 0; i < data.size(); ++i) {
    const Bytes c = crypto_frame(i, data.data() + i, 1);
    f.insert(f.end(), c.begin(), c.end());
  }
  EXPECT_EQ(decode(*dec, datagram({packet(kV1, {1}, f)})).out->status, Status::kTooManyChunks);
  f.resize(f.size() - 3);  // one frame fewer: exactly the limit
  Decode r = decode(*dec, datagram({packet(kV1, {1}, f)}));
  ASSERT_EQ(r.out->status, Status::kOk);
  EXPECT_EQ(r.out->n_chunks, cg::quic::kMaxCryptoChunks);
  EXPECT_EQ(assemble({r.out.get()}), Bytes(data.begin(), data.end() - 1));
}

TEST_F(QuicDecoder, ScratchTooSmallIsAStatus) {
  const Bytes data = some_crypto(100);
  const Bytes d = datagram({packet(kV1, {1, 2, 3, 4}, crypto_frame(0, data.data(), data.size()))});
  EXPECT_EQ(decode(*dec, d, 0).out->status, Status::kScratchTooSmall);
  EXPECT_EQ(decode(*dec, d, 1000).out->status, Status::kScratchTooSmall);
  EXPECT_EQ(decode(*dec, d, 1200).out->status, Status::kOk);
}

TEST_F(QuicDecoder, KeysOfTheOriginalDcidAfterTheClientSwitchedDcid) {
  const Bytes original = {1, 2, 3, 4, 5, 6, 7, 8}, server_chosen = {9, 8, 7, 6, 5};
  const Bytes data = some_crypto(100);
  InitialPacket p = packet(kV1, server_chosen, crypto_frame(700, data.data(), data.size()));
  p.key_dcid = original;
  const Bytes d = datagram({p});
  EXPECT_EQ(decode(*dec, d).out->status, Status::kDecryptFailed);
  Decode r = decode(*dec, d, SIZE_MAX, &original);
  ASSERT_EQ(r.out->status, Status::kOk);
  EXPECT_EQ(to_hex(r.out->dcid, r.out->dcid_len), to_hex(server_chosen.data(), server_chosen.size()));
  const Bytes too_long(21, 0);
  EXPECT_EQ(decode(*dec, d, SIZE_MAX, &too_long).out->status, Status::kMalformed);
}

TEST_F(QuicDecoder, TheKeyCacheNeverMixesConnections) {
  // DCIDs and versions alternating in every order: each datagram opens with
  // its own keys (the one-entry cache is keyed on both).
  std::mt19937_64 rng(3);
  std::vector<std::pair<uint8_t, Bytes>> ds;
  for (uint8_t i = 0; i < 6; ++i) {
    const Bytes data = some_crypto(80, i);
    const Bytes dcid = {static_cast<uint8_t>(i & 1), 2, 3, 4, 5, 6, 7, 8};
    ds.emplace_back(i, datagram({packet(i % 3 == 0 ? kV2 : kV1, dcid, crypto_frame(0, data.data(), data.size()))}));
  }
  for (int round = 0; round < 4; ++round) {
    for (const auto& [seed, d] : ds) {
      Decode r = decode(*dec, d);
      ASSERT_EQ(r.out->status, Status::kOk) << int{seed};
      EXPECT_EQ(r.out->chunk[0].data[0], seed);
      Decode again = decode(*dec, d);  // the cached keys
      ASSERT_EQ(again.out->status, Status::kOk);
    }
    std::shuffle(ds.begin(), ds.end(), rng);
  }
}

TEST_F(QuicDecoder, PeekRecognisesInitialsWithoutDecrypting) {
  const Bytes data = some_crypto(100);
  uint32_t v = 0;
  for (uint32_t version : {kV1, kV2}) {
    Bytes d = datagram({packet(version, {1, 2, 3, 4}, crypto_frame(0, data.data(), data.size()))});
    EXPECT_EQ(cg::quic::peek_initial(d.data(), d.size(), &v), Status::kOk);
    EXPECT_EQ(v, version);
    d[d.size() - 1] ^= 1;  // no tag check: still an Initial to peek
    EXPECT_EQ(cg::quic::peek_initial(d.data(), d.size(), &v), Status::kOk);
    EXPECT_EQ(cg::quic::peek_initial(d.data(), d.size() - 1, &v), Status::kTruncated);
  }
  const Bytes hs = other_long_packet(kV1, 2, {1, 2}, 100);
  EXPECT_EQ(cg::quic::peek_initial(hs.data(), hs.size(), &v), Status::kNotInitial);
  const Bytes vn = {0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  EXPECT_EQ(cg::quic::peek_initial(vn.data(), vn.size(), &v), Status::kUnsupportedVersion);
  const Bytes dns = {0x12, 0x34, 0x01, 0x00};
  EXPECT_EQ(cg::quic::peek_initial(dns.data(), dns.size(), &v), Status::kNotLongHeader);
}

TEST_F(QuicDecoder, ResultsOfAnEarlierDatagramDoNotLeakIntoTheNext) {
  const Bytes data = some_crypto(100);
  cg::quic::Decoded out;
  Bytes scratch(1500);
  const Bytes d = datagram({packet(kV1, {1, 2, 3, 4}, crypto_frame(0, data.data(), data.size()))});
  dec->decode(d.data(), d.size(), scratch.data(), scratch.size(), out);
  ASSERT_EQ(out.n_chunks, 1u);
  const Bytes bad = {0x40, 1, 2};
  dec->decode(bad.data(), bad.size(), scratch.data(), scratch.size(), out);
  EXPECT_EQ(out.status, Status::kNotLongHeader);
  EXPECT_EQ(out.n_chunks, 0u);
  EXPECT_EQ(out.initials, 0);
  EXPECT_EQ(out.scratch_used, 0u);
}

}  // namespace
