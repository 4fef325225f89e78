// After Decoder::create(), decoding allocates nothing: OpenSSL's allocator is
// replaced (CRYPTO_set_mem_functions, before anything allocates) by one that
// counts, and whole datagrams of both versions with fresh DCIDs (so the keys
// are derived every time) are decoded while counting. OpenSSL 3.0 allocates
// in EVP_DigestInit_ex and EVP_MAC_init: a change to the key derivation that
// used them would fail here.
#include <gtest/gtest.h>
#include <openssl/crypto.h>

#include <atomic>
#include <cstdlib>

#include "cuckoogate/quic/crypto_stream.hpp"
#include "cuckoogate/quic/initial.hpp"
#include "quic_initial_builder.hpp"

namespace {

std::atomic<long> g_allocs{0};   // relaxed: one thread; a counter, no ordering
std::atomic<bool> g_counting{false};

void* count_malloc(std::size_t n, const char*, int) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n);
}
void* count_realloc(void* p, std::size_t n, const char*, int) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
  return std::realloc(p, n);
}
void count_free(void* p, const char*, int) { std::free(p); }

using namespace cg::test::quic;

TEST(QuicAlloc, DecodingAllocatesNothingAfterCreate) {
  const char* err = nullptr;
  auto dec = cg::quic::Decoder::create(&err);
  ASSERT_TRUE(dec) << err;
  std::mt19937_64 rng(11);
  std::vector<Bytes> ds;
  for (int i = 0; i < 40; ++i) {
    InitialPacket p;
    p.version = i % 2 ? kV1 : kV2;
    p.dcid.assign(static_cast<std::size_t>(i % 21), static_cast<uint8_t>(i));
    const Bytes ch = client_hello("a.example", 0, &rng);
    p.frames = split_crypto(ch, 1, rng, 8, true)[0];
    ds.push_back(datagram({p}));
  }
  ds.push_back(ds[0]);
  ds.back()[100] ^= 1;  // a failing tag too
  cg::quic::Decoded out;
  Bytes scratch(2048);
  uint8_t tls[cg::reasm::kTlsScratch];
  long decoded_ok = 0;
  g_allocs.store(0, std::memory_order_relaxed);
  g_counting.store(true, std::memory_order_relaxed);
  for (const Bytes& d : ds) {
    dec->decode(d.data(), d.size(), scratch.data(), scratch.size(), out);
    decoded_ok += out.status == cg::quic::Status::kOk;
    if (out.n_chunks != 0)
      (void)cg::quic::client_hello_complete(out.chunk[0].data, out.chunk[0].len, tls, sizeof tls);
  }
  g_counting.store(false, std::memory_order_relaxed);
  EXPECT_EQ(decoded_ok, 40);
  EXPECT_EQ(g_allocs.load(std::memory_order_relaxed), 0);
}

TEST(QuicAlloc, TheCounterSeesOpenSslAllocations) {
  // The test above would pass vacuously if the hook were not installed.
  g_allocs.store(0, std::memory_order_relaxed);
  g_counting.store(true, std::memory_order_relaxed);
  void* p = OPENSSL_malloc(16);
  g_counting.store(false, std::memory_order_relaxed);
  OPENSSL_free(p);
  EXPECT_EQ(g_allocs.load(std::memory_order_relaxed), 1);
}

}  // namespace

int main(int argc, char** argv) {
  if (CRYPTO_set_mem_functions(count_malloc, count_realloc, count_free) != 1) {
    std::fprintf(stderr, "CRYPTO_set_mem_functions failed: OpenSSL allocated before main\n");
    return 1;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
