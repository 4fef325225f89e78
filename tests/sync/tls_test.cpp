// TLS to Redis (rediss://, docs/sync.md "TLS"): StreamSync against a real
// redis-server 7.0 with --tls-port on loopback, certificates made in the
// test's directory (tests/support/test_certs.hpp). The server requires client certificates
// (Redis' default, tls-auth-clients yes).
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <map>

#include "cuckoogate/sync/stream_sync.hpp"
#include "redis_server.hpp"
#include "serve.hpp"
#include "test_certs.hpp"

namespace cg::sync {
namespace {

using namespace std::chrono_literals;

// Adds and deletes into a map; the last applied ID.
struct SetApplier : Applier {
  std::map<std::string, int64_t> rules;
  StreamId last;
  bool apply(std::span<const Received> in, std::string*) override {
    for (const Received& r : in) {
      if (r.entry == nullptr) continue;
      for (const EntryChange& c : r.entry->changes) {
        if (c.del) rules.erase(format_rule(c.rule));
        else rules[format_rule(c.rule)] = c.expiry_unix_ms;
      }
    }
    last = in.back().id;
    return true;
  }
  bool replace_all(const std::vector<EntryChange>&, StreamId at, std::string*) override {
    last = at;
    return true;
  }
  void dump(std::vector<EntryChange>*) const override {}
};

using test::add;

class TlsSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cg_sync_tls_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    test::TestCert ca("cuckoogate test CA", nullptr, "", 1);
    test::TestCert server("localhost", &ca, "DNS:localhost,IP:127.0.0.1", 2);
    test::TestCert client("gateway", &ca, "", 3);
    test::TestCert other_ca("some other CA", nullptr, "", 4);
    ca.write(dir_, "ca");
    server.write(dir_, "server");
    client.write(dir_, "client");
    client.write_encrypted_key(dir_, "client-encrypted", "secret");
    other_ca.write(dir_, "other-ca");
    port_ = test::free_tcp_port();
    redis_ = std::make_unique<test::RedisServer>(
        dir_, std::vector<std::string>{"--tls-port", std::to_string(port_), "--tls-cert-file", dir_ + "/server.pem",
                                       "--tls-key-file", dir_ + "/server.key", "--tls-ca-cert-file",
                                       dir_ + "/ca.pem"});
  }
  void TearDown() override {
    redis_.reset();
    std::filesystem::remove_all(dir_);
  }
  // rediss:// to the server with the right CA and the client certificate.
  SyncOptions options(const std::string& id, const std::string& host = "127.0.0.1") {
    SyncOptions o;
    o.url = parse_redis_url("rediss://" + host + ":" + std::to_string(port_)).url.value();  // throws on a refusal
    o.url.tls.ca_file = dir_ + "/ca.pem";
    o.url.tls.cert_file = dir_ + "/client.pem";
    o.url.tls.key_file = dir_ + "/client.key";
    o.gateway_id = id;
    o.io_timeout = 2000ms;
    o.block = 200ms;
    o.backoff_min = 20ms;
    o.backoff_max = 100ms;
    o.snapshot_every = 0ms;
    return o;
  }
  // One connection attempt; the error it left ("" if it connected).
  static std::string try_connect(const SyncOptions& o) {
    SetApplier m;
    StreamSync s(o, m, {});
    s.tick();
    return s.connected() ? std::string() : s.stats().last_error;
  }
  template <class Pred>
  bool serve_until(std::vector<StreamSync*> syncs, Pred pred) {
    return cg::test::serve_until(syncs, pred, 10s);
  }
  std::string dir_;
  uint16_t port_ = 0;
  std::unique_ptr<test::RedisServer> redis_;
};

TEST_F(TlsSyncTest, GatewaysSyncOverTlsFollowAndCatchUp) {
  SetApplier ma, mb;
  StreamSync a(options("a"), ma, {}), b(options("b", "localhost"), mb, {});
  ASSERT_TRUE(serve_until({&a, &b}, [&] { return a.connected() && b.connected(); }))
      << a.stats().last_error << " / " << b.stats().last_error;
  // Followed: B's XREAD BLOCK is answered through its pipe.
  std::vector<StreamId> ids;
  std::string err;
  ASSERT_TRUE(a.publish(std::vector<Entry>{add("host tls.example"), add("ip 192.0.2.9")}, &ids, &err)) << err;
  ASSERT_TRUE(serve_until({&a, &b}, [&] { return mb.last == ids.back(); }));
  EXPECT_EQ(mb.rules, ma.rules);
  EXPECT_EQ(mb.rules.count("host tls.example"), 1u);
  // Caught up: a new gateway reads 20 000 entries (several MB, pages of
  // 10 000: many TLS records and full pipe buffers both ways).
  std::vector<Entry> many;
  for (int i = 0; i < 20000; ++i) many.push_back(add("src 10.9." + std::to_string(i / 250) + "." + std::to_string(i % 250)));
  ASSERT_TRUE(a.publish(many, &ids, &err)) << err;
  // B follows them: XREAD BLOCK replies of 1 000 entries arrive in pieces.
  ASSERT_TRUE(serve_until({&a, &b}, [&] { return mb.last == ids.back(); })) << b.stats().last_error;
  EXPECT_EQ(mb.rules, ma.rules);
  SetApplier mc;
  StreamSync c(options("c"), mc, {});
  ASSERT_TRUE(serve_until({&c}, [&] { return c.connected(); })) << c.stats().last_error;
  EXPECT_EQ(mc.last, ids.back());
  EXPECT_EQ(mc.rules.size(), 20002u);
  EXPECT_EQ(mc.rules, ma.rules);
}

TEST_F(TlsSyncTest, AServerCertificateFromAnotherCaIsRefusedClearly) {
  SyncOptions o = options("a");
  o.url.tls.ca_file = dir_ + "/other-ca.pem";
  const std::string e = try_connect(o);
  EXPECT_NE(e.find("the server's certificate is refused"), std::string::npos) << e;
  // Redis sends its CA along: OpenSSL names the chain's root as not trusted.
  EXPECT_TRUE(e.find("self-signed certificate in certificate chain") != std::string::npos ||
              e.find("unable to get local issuer certificate") != std::string::npos)
      << e;
  EXPECT_NE(e.find("rediss://127.0.0.1:" + std::to_string(port_)), std::string::npos) << e;
}

TEST_F(TlsSyncTest, ACertificateForAnotherNameIsRefused) {
  SyncOptions o = options("a");
  o.url.tls.server_name = "redis.example";
  const std::string e = try_connect(o);
  EXPECT_NE(e.find("the server's certificate is refused"), std::string::npos) << e;
  EXPECT_NE(e.find("hostname mismatch"), std::string::npos) << e;
}

TEST_F(TlsSyncTest, WithoutAClientCertificateTheServerRefusesClearly) {
  SyncOptions o = options("a");
  o.url.tls.cert_file.clear();
  o.url.tls.key_file.clear();
  const std::string e = try_connect(o);
  EXPECT_FALSE(e.empty());
  EXPECT_NE(e.find("certificate required"), std::string::npos) << e;
}

TEST_F(TlsSyncTest, PlaintextAgainstTheTlsPortFailsWithAHint) {
  SyncOptions o = options("a");
  o.url.tls = {};
  o.io_timeout = 1000ms;
  const std::string e = try_connect(o);
  EXPECT_NE(e.find("PING to redis://127.0.0.1:" + std::to_string(port_)), std::string::npos) << e;
  EXPECT_NE(e.find("rediss://"), std::string::npos) << e;
}

TEST_F(TlsSyncTest, TlsAgainstAPlainPortFailsClearly) {
  const std::string pdir = dir_ + "/plain";
  std::filesystem::create_directories(pdir);
  const uint16_t plain = test::free_tcp_port();
  test::RedisServer r(pdir, {"--port", std::to_string(plain), "--bind", "127.0.0.1"});
  SyncOptions o = options("a");
  o.url.port = plain;
  o.io_timeout = 500ms;
  const std::string e = try_connect(o);
  // Redis waits for the end of what it takes as an inline command (timeout),
  // or answers it with an error that is not TLS ("does not speak TLS").
  EXPECT_NE(e.find("plain Redis is redis://"), std::string::npos) << e;
}

TEST_F(TlsSyncTest, MissingFilesAreNamed) {
  SyncOptions o = options("a");
  o.url.tls.ca_file = dir_ + "/nope.pem";
  std::string e = try_connect(o);
  EXPECT_NE(e.find("cannot load the CA certificates"), std::string::npos) << e;
  EXPECT_NE(e.find("nope.pem"), std::string::npos) << e;
  o = options("a");
  o.url.tls.key_file = dir_ + "/ca.key";  // not the certificate's key
  e = try_connect(o);
  EXPECT_NE(e.find("cannot use the client key"), std::string::npos) << e;
}

// OpenSSL's default would ask for the passphrase on the terminal and block
// the control thread on every reconnect: refused at once, saying why.
TEST_F(TlsSyncTest, AnEncryptedClientKeyIsRefusedWithoutAPrompt) {
  SyncOptions o = options("a");
  o.url.tls.key_file = dir_ + "/client-encrypted.key";
  const auto start = std::chrono::steady_clock::now();
  const std::string e = try_connect(o);
  EXPECT_NE(e.find("encrypted keys are not supported"), std::string::npos) << e;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

}  // namespace
}  // namespace cg::sync
