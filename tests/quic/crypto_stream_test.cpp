// CRYPTO frames of several Initials into app/reasm's Pool, and the
// ClientHello they make, read by app/keys: a post-quantum ClientHello split
// over two or three Initials, frames cut and out of order (Chrome), datagrams
// reordered and retransmitted, for many random splits.
#include <gtest/gtest.h>

#include <random>

#include "cuckoogate/quic/crypto_stream.hpp"
#include "quic_test_util.hpp"

namespace {

using namespace cg::test::quic;
using cg::quic::Status;
using cg::reasm::Append;
using cg::reasm::Frame;

cg::reasm::Pool::Ptr make_pool() {
  cg::reasm::PoolConfig cfg;
  cfg.slots = 4;
  return cg::reasm::Pool::create(cfg);
}

TEST(QuicClientHello, CompleteOnlyWithTheWholeMessage) {
  std::mt19937_64 rng(1);
  const Bytes ch = client_hello("www.example.net", 1800, &rng);
  ASSERT_EQ(ch.size(), 1800u);
  std::vector<uint8_t> scratch(cg::reasm::kTlsScratch);
  for (std::size_t n = 0; n < ch.size(); ++n) {
    const auto r = cg::quic::client_hello_complete(ch.data(), n, scratch.data(), scratch.size());
    ASSERT_EQ(r.status, Frame::kNeedMore) << n;
    EXPECT_EQ(r.record, nullptr);
  }
  Bytes more = ch;
  more.push_back(0x0b);  // bytes of a next message are ignored
  const auto r = cg::quic::client_hello_complete(more.data(), more.size(), scratch.data(), scratch.size());
  ASSERT_EQ(r.status, Frame::kComplete);
  EXPECT_EQ(r.handshake_len, ch.size());
  ASSERT_EQ(r.record_len, ch.size() + 5);
  EXPECT_EQ(r.record, scratch.data());
  EXPECT_EQ(Bytes(r.record, r.record + 5), (Bytes{22, 3, 1, 0x07, 0x08}));  // 1800 = 0x708
  EXPECT_EQ(Bytes(r.record + 5, r.record + r.record_len), ch);
  EXPECT_TRUE(host_key_from_record(r.record, r.record_len, "www.example.net"));
  EXPECT_TRUE(host_key_from_record(r.record, r.record_len, "example.net"));  // parents too
}

TEST(QuicClientHello, OtherMessagesAndOversizedOnesAreRefused) {
  const Bytes ch = client_hello("a.example");
  std::vector<uint8_t> scratch(cg::reasm::kTlsScratch);
  Bytes other = ch;
  other[0] = 2;  // ServerHello
  EXPECT_EQ(cg::quic::client_hello_complete(other.data(), 1, scratch.data(), scratch.size()).status, Frame::kInvalid);
  EXPECT_EQ(cg::quic::client_hello_complete(ch.data(), 0, scratch.data(), scratch.size()).status, Frame::kNeedMore);
  // 64 KiB claimed: over the 16 KiB limit before it has even arrived.
  const Bytes huge = {1, 0x01, 0x00, 0x00, 0x03, 0x03};
  EXPECT_EQ(cg::quic::client_hello_complete(huge.data(), huge.size(), scratch.data(), scratch.size()).status,
            Frame::kTooLarge);
  // A scratch one byte short of record header + message.
  EXPECT_EQ(cg::quic::client_hello_complete(ch.data(), ch.size(), scratch.data(), ch.size() + 4).status,
            Frame::kTooLarge);
  EXPECT_EQ(cg::quic::client_hello_complete(ch.data(), ch.size(), scratch.data(), ch.size() + 5).status,
            Frame::kComplete);
  // A larger limit is the caller's choice.
  const Bytes big = client_hello("a.example", 17000);
  std::vector<uint8_t> s2(big.size() + 5);
  EXPECT_EQ(cg::quic::client_hello_complete(big.data(), big.size(), s2.data(), s2.size()).status, Frame::kTooLarge);
  EXPECT_EQ(cg::quic::client_hello_complete(big.data(), big.size(), s2.data(), s2.size(), 20000).status,
            Frame::kComplete);
}

// One flow's client Initials, as the worker would see them.
struct Flow {
  cg::quic::Decoder& dec;
  cg::reasm::Pool& pool;
  uint32_t h = 0;
  std::vector<uint8_t> tls = std::vector<uint8_t>(cg::reasm::kTlsScratch);
  // Decodes and feeds one datagram; returns the ClientHello state after it.
  cg::quic::ClientHello feed(const Bytes& d, Append* a = nullptr) {
    Decode r = decode(dec, d);
    EXPECT_EQ(r.out->status, Status::kOk) << cg::quic::status_name(r.out->status);
    if (h == 0) h = pool.begin(0);
    EXPECT_NE(h, 0u);
    const Append got = cg::quic::feed_crypto(pool, h, *r.out);
    if (a != nullptr) *a = got;
    const auto held = pool.data(h);
    return cg::quic::client_hello_complete(held.data(), held.size(), tls.data(), tls.size());
  }
};

TEST(QuicCryptoStream, PostQuantumClientHelloOverSeveralInitialsInAnyOrder) {
  auto dec = make_decoder();
  auto pool = make_pool();
  for (uint64_t seed = 0; seed < 300; ++seed) {
    std::mt19937_64 rng(seed);
    const uint32_t version = seed % 2 ? kV1 : kV2;
    std::string sni = "blocked";
    sni += std::to_string(seed);
    sni += ".example.org";
    const Bytes ch = client_hello(sni, 1700 + rng() % 301, &rng);
    const unsigned packets = 2 + static_cast<unsigned>(rng() % 2);
    const auto parts = split_crypto(ch, packets, rng, 4 + rng() % 20, rng() % 2 == 0);
    Bytes dcid(8 + rng() % 13);
    for (auto& b : dcid) b = static_cast<uint8_t>(rng());
    std::vector<Bytes> ds;
    const bool coalesce = packets == 2 && rng() % 4 == 0;  // both Initials in one datagram
    std::vector<InitialPacket> pks;
    for (unsigned i = 0; i < packets; ++i) {
      InitialPacket p;
      p.version = version;
      p.dcid = dcid;
      p.pn = i;
      p.pn_len = 1 + static_cast<unsigned>(rng() % 4);
      p.frames = parts[i];
      pks.push_back(p);
    }
    if (coalesce) {
      ds.push_back(datagram(pks, 1200));
    } else {
      for (const InitialPacket& p : pks) ds.push_back(datagram({p}));
    }
    std::shuffle(ds.begin(), ds.end(), rng);
    Flow f{*dec, *pool};
    for (std::size_t i = 0; i < ds.size(); ++i) {
      const auto r = f.feed(ds[i]);
      if (i + 1 < ds.size()) {
        // Every piece may not have arrived; complete only if what is held is
        // the whole message already (never a partial one).
        if (r.status == Frame::kComplete) ASSERT_EQ(r.handshake_len, ch.size());
        else ASSERT_EQ(r.status, Frame::kNeedMore) << "seed " << seed;
        continue;
      }
      ASSERT_EQ(r.status, Frame::kComplete) << "seed " << seed;
      ASSERT_EQ(Bytes(r.record + 5, r.record + r.record_len), ch) << "seed " << seed;
      EXPECT_TRUE(host_key_from_record(r.record, r.record_len, sni)) << "seed " << seed;
    }
    ASSERT_TRUE(pool->release(f.h));
  }
}

TEST(QuicCryptoStream, ManyShuffledFramesInAPacketNeedNoOutOfOrderWindow) {
  // Two Initials of 16 shuffled CRYPTO frames each, the second datagram
  // first: appended in offset order, each packet's frames grow one range,
  // so a window of 4 ranges never fills (appended as sent, it would).
  auto dec = make_decoder();
  auto pool = make_pool();
  for (uint64_t seed = 0; seed < 50; ++seed) {
    std::mt19937_64 rng(seed);
    const Bytes ch = client_hello("many.example", 1900, &rng);
    const auto parts = split_crypto(ch, 2, rng, 32, true);
    std::vector<Bytes> ds;
    for (unsigned i = 0; i < 2; ++i) {
      InitialPacket p;
      p.pn = i;
      p.frames = parts[i];
      ds.push_back(datagram({p}));
    }
    Flow f{*dec, *pool};
    Append a{};
    EXPECT_EQ(f.feed(ds[1], &a).status, Frame::kNeedMore);
    EXPECT_EQ(a, Append::kHeld) << "seed " << seed;
    const auto r = f.feed(ds[0], &a);
    EXPECT_EQ(a, Append::kAdvanced) << "seed " << seed;
    ASSERT_EQ(r.status, Frame::kComplete) << "seed " << seed;
    EXPECT_TRUE(host_key_from_record(r.record, r.record_len, "many.example"));
    ASSERT_TRUE(pool->release(f.h));
  }
  EXPECT_EQ(pool->stats().window_full, 0u);
}

TEST(QuicCryptoStream, ScatteredFramesCompleteOrOverflowNeverMislead) {
  // Pieces dealt to random packets leave holes in every packet: the slot's
  // out-of-order window (max_pending ranges) may fill, which feed_crypto
  // reports as kOverflow (the worker's inspect_overflow policy). Whatever
  // happens, a ClientHello reported complete is the one sent.
  auto dec = make_decoder();
  auto pool = make_pool();
  unsigned completed = 0, overflowed = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::mt19937_64 rng(seed);
    std::string sni = "s";  // appends: GCC 12 -Wrestrict false positive on "lit" + string
    sni += std::to_string(seed);
    sni += ".example";
    const Bytes ch = client_hello(sni, 1800, &rng);
    const auto parts = split_crypto(ch, 2, rng, 24, false, /*scatter=*/true);
    std::vector<Bytes> ds;
    for (unsigned i = 0; i < 2; ++i) {
      InitialPacket p;
      p.pn = i;
      p.frames = parts[i];
      ds.push_back(datagram({p}));
    }
    if (rng() % 2) std::swap(ds[0], ds[1]);
    Flow f{*dec, *pool};
    bool overflow = false;
    cg::quic::ClientHello r;
    for (const Bytes& d : ds) {
      Append a{};
      r = f.feed(d, &a);
      overflow |= a == Append::kOverflow;
      ASSERT_NE(a, Append::kConflict);
    }
    if (r.status == Frame::kComplete) {
      ++completed;
      ASSERT_EQ(Bytes(r.record + 5, r.record + r.record_len), ch) << "seed " << seed;
      EXPECT_TRUE(host_key_from_record(r.record, r.record_len, sni));
    } else {
      ASSERT_TRUE(overflow) << "seed " << seed;
      ++overflowed;
    }
    ASSERT_TRUE(pool->release(f.h));
  }
  EXPECT_EQ(completed + overflowed, 200u);
  EXPECT_GT(completed, 0u);
  std::printf("scattered: %u complete, %u overflowed the window\n", completed, overflowed);
}

TEST(QuicCryptoStream, ARetransmittedInitialAddsNothing) {
  auto dec = make_decoder();
  auto pool = make_pool();
  std::mt19937_64 rng(5);
  const Bytes ch = client_hello("x.example", 1900, &rng);
  const auto parts = split_crypto(ch, 2, rng);
  InitialPacket p;
  p.frames = parts[1];
  const Bytes second = datagram({p});
  p.frames = parts[0];
  p.pn = 1;
  const Bytes first = datagram({p});
  Flow f{*dec, *pool};
  Append a{};
  EXPECT_EQ(f.feed(second, &a).status, Frame::kNeedMore);
  EXPECT_NE(a, Append::kNothing);
  EXPECT_EQ(f.feed(second, &a).status, Frame::kNeedMore);
  EXPECT_EQ(a, Append::kNothing);
  EXPECT_EQ(f.feed(first, &a).status, Frame::kComplete);
  EXPECT_EQ(a, Append::kAdvanced);
}

TEST(QuicCryptoStream, FeedReportsTheMostSeriousAppend) {
  auto dec = make_decoder();
  auto pool = make_pool();
  const Bytes data(100, 0x11), other(100, 0x22);
  // Held out of order, then the same range with other bytes: a conflict
  // (the pool keeps the first copy; the worker applies its policy).
  InitialPacket p;
  p.frames = crypto_frame(500, data.data(), data.size());
  Flow f{*dec, *pool};
  Append a{};
  f.feed(datagram({p}), &a);
  EXPECT_EQ(a, Append::kHeld);
  p.frames = crypto_frame(500, other.data(), other.size());
  Bytes both = crypto_frame(0, data.data(), 10);
  both.insert(both.end(), p.frames.begin(), p.frames.end());
  p.frames = both;
  f.feed(datagram({p}), &a);
  EXPECT_EQ(a, Append::kConflict);
  // A CRYPTO offset beyond what the pool's sequence numbers can carry.
  p.frames = crypto_frame(cg::quic::kMaxCryptoOffset, data.data(), 10);
  f.feed(datagram({p}), &a);
  EXPECT_EQ(a, Append::kOverflow);
  // A stale handle.
  ASSERT_TRUE(pool->release(f.h));
  p.frames = crypto_frame(10, data.data(), 10);
  Decode r = decode(*dec, datagram({p}));
  EXPECT_EQ(cg::quic::feed_crypto(*pool, f.h, *r.out), Append::kBadHandle);
  // No chunk at all.
  p.frames = ping_frame();
  Decode none = decode(*dec, datagram({p}));
  const uint32_t h = pool->begin(0);
  EXPECT_EQ(cg::quic::feed_crypto(*pool, h, *none.out), Append::kNothing);
}

}  // namespace
