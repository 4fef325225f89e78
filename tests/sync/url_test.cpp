#include <gtest/gtest.h>

#include "cuckoogate/sync/redis_url.hpp"
#include "cuckoogate/sync/stream_id.hpp"

namespace cg::sync {
namespace {

RedisUrl ok(std::string_view s) {
  RedisUrlParse p = parse_redis_url(s);
  EXPECT_TRUE(p.url) << s << ": " << p.error;
  return p.url.value_or(RedisUrl{});
}

std::string refused(std::string_view s) {
  RedisUrlParse p = parse_redis_url(s);
  EXPECT_FALSE(p.url) << s;
  EXPECT_FALSE(p.error.empty()) << s;
  return p.error;
}

TEST(RedisUrl, TcpWithDefaults) {
  const RedisUrl u = ok("redis://127.0.0.1");
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, 6379);
  EXPECT_EQ(u.db, 0);
  EXPECT_TRUE(u.password.empty());
}

TEST(RedisUrl, TcpPortDbAndCredentials) {
  const RedisUrl u = ok("redis://gw:p%40ss%3Aw@redis.example:6380/3");
  EXPECT_EQ(u.host, "redis.example");
  EXPECT_EQ(u.port, 6380);
  EXPECT_EQ(u.db, 3);
  EXPECT_EQ(u.user, "gw");
  EXPECT_EQ(u.password, "p@ss:w");
  EXPECT_EQ(describe(u), "redis://gw@redis.example:6380/3");  // never the password
}

TEST(RedisUrl, PasswordOnlyIsNotShown) {
  const RedisUrl u = ok("redis://:secret@localhost/1");
  EXPECT_EQ(u.user, "");
  EXPECT_EQ(u.password, "secret");
  EXPECT_EQ(describe(u).find("secret"), std::string::npos);
}

TEST(RedisUrl, Ipv6Literal) {
  const RedisUrl u = ok("redis://[::1]:7000/2");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 7000);
  EXPECT_EQ(u.db, 2);
  EXPECT_EQ(describe(u), "redis://[::1]:7000/2");
}

TEST(RedisUrl, UnixSocketWithDb) {
  const RedisUrl u = ok("unix://:pw@/run/redis/redis.sock?db=4");
  EXPECT_EQ(u.unix_path, "/run/redis/redis.sock");
  EXPECT_TRUE(u.host.empty());
  EXPECT_EQ(u.db, 4);
  EXPECT_EQ(u.password, "pw");
}

TEST(RedisUrl, RedissIsTcpWithTls) {
  const RedisUrl u = ok("rediss://gw:pw@redis.example:6380/2");
  EXPECT_TRUE(u.tls.on);
  EXPECT_EQ(u.host, "redis.example");
  EXPECT_EQ(u.port, 6380);
  EXPECT_EQ(u.db, 2);
  EXPECT_EQ(describe(u), "rediss://gw@redis.example:6380/2");
  EXPECT_FALSE(ok("redis://redis.example").tls.on);
  EXPECT_FALSE(ok("unix:///run/r.sock").tls.on);
}

TEST(RedisUrl, RefusesWhatItCannotServe) {
  EXPECT_NE(refused("rediss:///run/r.sock").find("no host"), std::string::npos);
  EXPECT_NE(refused("ftp://host").find("not redis, rediss or unix"), std::string::npos);
  refused("http://host");
  refused("127.0.0.1:6379");
  refused("redis://");
  refused("redis://host:0");
  refused("redis://host:65536");
  refused("redis://host:");
  refused("redis://host:12x");
  refused("redis://host/abc");
  refused("redis://[::1");
  refused("redis://[::1]x");
  refused("redis://a%4@host");
  refused("redis://host?tls=1");
  refused("unix://relative.sock");
  refused(std::string("redis://ho\nst"));
}

TEST(StreamId, ParsesAndOrders) {
  EXPECT_EQ(StreamId::parse("1700000000000-5"), (StreamId{1700000000000u, 5}));
  EXPECT_EQ(StreamId::parse("42"), (StreamId{42, 0}));
  EXPECT_FALSE(StreamId::parse(""));
  EXPECT_FALSE(StreamId::parse("-1"));
  EXPECT_FALSE(StreamId::parse("1-"));
  EXPECT_FALSE(StreamId::parse("1-2-3"));
  EXPECT_FALSE(StreamId::parse("x-1"));
  EXPECT_LT((StreamId{1, 9}), (StreamId{2, 0}));
  EXPECT_LT((StreamId{2, 0}), (StreamId{2, 1}));
  EXPECT_EQ((StreamId{7, 3}).str(), "7-3");
}

}  // namespace
}  // namespace cg::sync
