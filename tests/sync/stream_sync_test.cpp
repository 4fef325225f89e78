// StreamSync against a real redis-server of its own (Unix socket, AOF): the
// follower and publisher with an Applier that keeps the rule set in a map.
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "cuckoogate/sync/stream_sync.hpp"
#include "redis_server.hpp"
#include "serve.hpp"

namespace cg::sync {
namespace {

using namespace std::chrono_literals;

// The local blocklist of a test gateway: canonical text -> expiry.
struct MapApplier : Applier {
  std::map<std::string, int64_t> rules;
  StreamId last;        // the "durable" last applied ID
  uint64_t entries = 0; // entries applied (garbage excluded)
  bool fail_next = false;
  std::vector<std::size_t> calls;  // entries per apply() call

  bool apply(std::span<const Received> in, std::string* err) override {
    calls.push_back(in.size());
    if (fail_next) {
      *err = "disk full";
      return false;
    }
    for (const Received& r : in) {
      if (r.entry == nullptr) continue;
      ++entries;
      const Entry& e = *r.entry;
      switch (e.op) {
        case EntryOp::kFlush:
          std::erase_if(rules, [&](const auto& kv) {
            return !e.kind || parse_rule(kv.first).rule->kind == *e.kind;
          });
          break;
        case EntryOp::kBatch: {
          bool ok = true;  // all or nothing: a del of an absent rule fails it
          for (const EntryChange& c : e.changes)
            if (c.del && !rules.count(format_rule(c.rule))) ok = false;
          if (!ok) break;
          [[fallthrough]];
        }
        default:
          for (const EntryChange& c : e.changes) {
            if (c.del) rules.erase(format_rule(c.rule));
            else rules[format_rule(c.rule)] = c.expiry_unix_ms;
          }
      }
    }
    last = in.back().id;
    return true;
  }
  bool replace_all(const std::vector<EntryChange>& all, StreamId at, std::string*) override {
    rules.clear();
    for (const EntryChange& c : all) rules[format_rule(c.rule)] = c.expiry_unix_ms;
    last = at;
    return true;
  }
  void dump(std::vector<EntryChange>* out) const override {
    for (const auto& [text, exp] : rules) out->push_back({false, *parse_rule(text).rule, exp});
  }
};

using test::add;
Entry del(std::string_view text) {
  Entry e = add(text);
  e.op = EntryOp::kDel;
  e.changes[0].del = true;
  return e;
}

class StreamSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cg_sync_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    redis_ = std::make_unique<test::RedisServer>(dir_);
  }
  void TearDown() override {
    redis_.reset();
    std::filesystem::remove_all(dir_);
  }
  SyncOptions options(const std::string& id) {
    SyncOptions o;
    o.url = *parse_redis_url(redis_->url()).url;
    o.gateway_id = id;
    o.io_timeout = 500ms;
    o.block = 200ms;
    o.backoff_min = 20ms;
    o.backoff_max = 100ms;
    o.snapshot_every = 0ms;
    return o;
  }
  // Runs a control loop over the syncs until pred holds (or 5 s pass).
  template <class Pred>
  bool serve_until(std::vector<StreamSync*> syncs, Pred pred) {
    return cg::test::serve_until(syncs, pred, 5s);
  }
  // A gateway B (applier mb) that follows the stream up to `last`, then stops.
  void follow_then_stop(MapApplier& mb, const StreamId& last) {
    StreamSync b(options("b"), mb, {});
    ASSERT_TRUE(serve_until({&b}, [&] { return mb.last == last; }));
  }
  // Publishes through s; the entries' IDs (a failure fails the test).
  static std::vector<StreamId> publish_ok(StreamSync& s, const std::vector<Entry>& e) {
    std::vector<StreamId> ids;
    std::string err;
    EXPECT_TRUE(s.publish(e, &ids, &err)) << err;
    EXPECT_EQ(ids.size(), e.size());
    return ids;
  }
  std::string dir_;
  std::unique_ptr<test::RedisServer> redis_;
};

TEST_F(StreamSyncTest, PublishedChangesReachTheOtherGatewayInOrder) {
  MapApplier ma, mb;
  StreamSync a(options("a"), ma, {}), b(options("b"), mb, {});
  ASSERT_TRUE(serve_until({&a, &b}, [&] { return a.connected() && b.connected(); }));
  std::vector<StreamId> ids = publish_ok(a, {add("host a.example"), add("ip 10.0.0.1", 4102444800000)});
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_LT(ids[0], ids[1]);
  // The publisher applied its own entries before publish() returned.
  EXPECT_EQ(ma.rules.size(), 2u);
  EXPECT_EQ(ma.last, ids[1]);
  ASSERT_TRUE(serve_until({&a, &b}, [&] { return mb.last == ids[1]; }));
  EXPECT_EQ(mb.rules, ma.rules);
  EXPECT_EQ(mb.rules.at("ip 10.0.0.1"), 4102444800000);
  ids = publish_ok(b, {del("host a.example")});
  ASSERT_TRUE(serve_until({&a, &b}, [&] { return ma.last == ids[0]; }));
  EXPECT_EQ(ma.rules, (std::map<std::string, int64_t>{{"ip 10.0.0.1", 4102444800000}}));
  EXPECT_EQ(mb.rules, ma.rules);
  EXPECT_EQ(a.stats().published, 2u);
  EXPECT_EQ(b.stats().applied, 3u);
}

TEST_F(StreamSyncTest, GarbageFromOtherToolsIsCountedAndSkipped) {
  MapApplier m;
  StreamSync s(options("a"), m, {});
  ASSERT_TRUE(serve_until({&s}, [&] { return s.connected(); }));
  redis_->cli({"XADD", "cuckoogate:rules", "*", "op", "add", "rule", "host Tool.Example"});
  redis_->cli({"XADD", "cuckoogate:rules", "*", "op", "add", "rule", "host"});
  redis_->cli({"XADD", "cuckoogate:rules", "*", "op", "explode"});
  const std::string last = redis_->cli({"XADD", "cuckoogate:rules", "*", "op", "add", "rule", "ip 192.0.2.1"});
  const StreamId last_id = *StreamId::parse(last.substr(0, last.find('\n')));
  ASSERT_TRUE(serve_until({&s}, [&] { return s.stats().last_applied == last_id; }));
  EXPECT_EQ(m.rules.size(), 2u);
  EXPECT_TRUE(m.rules.count("host tool.example"));
  EXPECT_EQ(s.stats().garbage, 2u);
  EXPECT_EQ(m.entries, 2u);
  EXPECT_EQ(s.stats().applied, 2u);  // skipped, not applied
  EXPECT_EQ(m.last, last_id);  // garbage still advances the recorded position
}

TEST_F(StreamSyncTest, RestartResumesAfterTheLastAppliedId) {
  MapApplier ma, mb;
  StreamSync a(options("a"), ma, {});
  ASSERT_TRUE(serve_until({&a}, [&] { return a.connected(); }));
  std::vector<StreamId> ids = publish_ok(a, {add("host one.example"), add("host two.example")});
  follow_then_stop(mb, ids[1]);
  // B is down: changes go on without it.
  ids = publish_ok(a, {del("host one.example"), add("host three.example")});
  // B restarts from its durable position: applies only the two new entries.
  const uint64_t applied_before = mb.entries;
  StreamSync b2(options("b"), mb, mb.last);
  ASSERT_TRUE(serve_until({&b2}, [&] { return mb.last == ids[1]; }));
  EXPECT_EQ(mb.entries - applied_before, 2u);
  EXPECT_EQ(mb.rules, ma.rules);
}

// A restarted gateway far behind reads small pages (pipelined) but applies
// them in large batches: one Applier call (one journal sync) per
// apply_batch entries, in order, each entry once, garbage counted.
TEST_F(StreamSyncTest, CatchUpAppliesPagesInLargeBatches) {
  MapApplier ma;
  StreamSync a(options("a"), ma, {});
  ASSERT_TRUE(serve_until({&a}, [&] { return a.connected(); }));
  std::vector<Entry> many;
  for (int i = 0; i < 25000; ++i) many.push_back(add("src 10.7." + std::to_string(i / 250) + "." + std::to_string(i % 250)));
  std::vector<StreamId> ids = publish_ok(a, many);
  redis_->cli({"XADD", "cuckoogate:rules", "*", "op", "nonsense"});
  ids = publish_ok(a, {del("src 10.7.0.0")});
  MapApplier mb;
  SyncOptions o = options("b");
  o.catch_up_count = 1000;
  o.apply_batch = 10000;
  StreamSync b(o, mb, {});
  ASSERT_TRUE(serve_until({&b}, [&] { return b.connected(); })) << b.stats().last_error;
  EXPECT_EQ(mb.last, ids[0]);
  EXPECT_EQ(mb.calls, (std::vector<std::size_t>{10000, 10000, 5002}));  // 27 pages
  EXPECT_EQ(b.stats().applied, 25001u);  // the garbage entry is skipped, not applied
  EXPECT_EQ(b.stats().garbage, 1u);
  EXPECT_EQ(mb.rules, ma.rules);
  EXPECT_EQ(mb.rules.size(), 24999u);
}

TEST_F(StreamSyncTest, TrimmedPastOurIdRebuildsFromTheSnapshot) {
  MapApplier ma, mb;
  StreamSync a(options("a"), ma, {});
  ASSERT_TRUE(serve_until({&a}, [&] { return a.connected(); }));
  std::string err;
  std::vector<StreamId> ids = publish_ok(a, {add("host old.example")});
  const StreamId b_pos = ids[0];
  mb.rules = {{"host old.example", 0}};
  mb.last = b_pos;
  ids = publish_ok(a, {del("host old.example"), add("host new.example"), add("ip 10.9.9.9")});
  ASSERT_TRUE(a.write_snapshot(&err)) << err;
  EXPECT_EQ(a.stats().snapshots_written, 1u);
  redis_->cli({"XTRIM", "cuckoogate:rules", "MAXLEN", "0"});
  ids = publish_ok(a, {add("host after.example")});
  StreamSync b(options("b"), mb, mb.last);
  ASSERT_TRUE(serve_until({&b}, [&] { return mb.last == ids[0]; }));
  EXPECT_EQ(b.stats().snapshot_rebuilds, 1u);
  EXPECT_EQ(b.stats().gaps, 0u);
  EXPECT_EQ(mb.rules, ma.rules);
  EXPECT_FALSE(mb.rules.count("host old.example"));
}

TEST_F(StreamSyncTest, TrimmedWithoutSnapshotIsCountedAsAGap) {
  MapApplier ma, mb;
  StreamSync a(options("a"), ma, {});
  ASSERT_TRUE(serve_until({&a}, [&] { return a.connected(); }));
  std::vector<StreamId> ids = publish_ok(a, {add("host a.example"), add("host b.example")});
  redis_->cli({"XTRIM", "cuckoogate:rules", "MAXLEN", "1"});
  StreamSync b(options("b"), mb, {});
  ASSERT_TRUE(serve_until({&b}, [&] { return mb.last == ids[1]; }));
  EXPECT_EQ(b.stats().gaps, 1u);
  EXPECT_NE(b.stats().last_error.find("trimmed"), std::string::npos);
}

TEST_F(StreamSyncTest, RedisDownRefusesWritesThenReconnectsAndConverges) {
  MapApplier ma, mb;
  StreamSync a(options("a"), ma, {}), b(options("b"), mb, {});
  ASSERT_TRUE(serve_until({&a, &b}, [&] { return a.connected() && b.connected(); }));
  std::string err;
  std::vector<StreamId> ids = publish_ok(a, {add("host kept.example")});
  ASSERT_TRUE(serve_until({&a, &b}, [&] { return mb.last == ids[0]; }));
  redis_->stop();
  // Both notice (the follower's connection breaks) and keep their rules.
  ASSERT_TRUE(serve_until({&a, &b}, [&] { return !a.connected() && !b.connected(); }));
  const std::vector<Entry> e2 = {add("host refused.example")};
  EXPECT_FALSE(a.publish(e2, &ids, &err));
  EXPECT_NE(err.find("redis unavailable"), std::string::npos) << err;
  EXPECT_EQ(ma.rules.size(), 1u);
  EXPECT_EQ(a.stats().publish_failures, 1u);
  redis_->start();  // AOF: the acknowledged entry is still there
  ASSERT_TRUE(serve_until({&a, &b}, [&] { return a.connected() && b.connected(); }));
  ids = publish_ok(b, {add("host later.example")});
  ASSERT_TRUE(serve_until({&a, &b}, [&] { return ma.last == ids[0]; }));
  EXPECT_EQ(ma.rules, mb.rules);
  EXPECT_EQ(ma.rules.size(), 2u);
  EXPECT_GE(a.stats().reconnects, 1u);
  // Connected again: the connection's error is over.
  EXPECT_EQ(a.stats().last_error, "");
  EXPECT_EQ(b.stats().last_error, "");
}

// Redis restarted without its data (here: the stream deleted while B was
// away). A's changes of that time are lost for B, which must say so, and
// everything in the stream made anew is new to B, whatever its IDs.
TEST_F(StreamSyncTest, AStreamDeletedWhileAwayIsAGapAndItsNewEntriesAreAllRead) {
  MapApplier ma, mb;
  StreamSync a(options("a"), ma, {});
  ASSERT_TRUE(serve_until({&a}, [&] { return a.connected(); }));
  std::vector<StreamId> ids = publish_ok(a, {add("host one.example"), add("host two.example")});
  follow_then_stop(mb, ids[1]);
  publish_ok(a, {add("host lost.example")});
  redis_->cli({"DEL", "cuckoogate:rules"});
  {  // no stream at all while B starts
    StreamSync b(options("b"), mb, mb.last);
    ASSERT_TRUE(serve_until({&b}, [&] { return b.connected(); }));
    EXPECT_EQ(b.stats().gaps, 1u);
    EXPECT_NE(b.stats().last_error.find("is gone"), std::string::npos) << b.stats().last_error;
  }
  // Made anew (Redis restarted empty, then written to): all of it is new to B.
  redis_->cli({"XADD", "cuckoogate:rules", "*", "op", "add", "rule", "host early.example"});
  std::string last = redis_->cli({"XADD", "cuckoogate:rules", "*", "op", "add", "rule", "ip 192.0.2.7"});
  StreamId last_id = *StreamId::parse(last.substr(0, last.find('\n')));
  {
    StreamSync b(options("b"), mb, ids[1]);
    ASSERT_TRUE(serve_until({&b}, [&] { return b.stats().last_applied == last_id; })) << b.stats().last_error;
    EXPECT_EQ(b.stats().gaps, 1u);
    EXPECT_NE(b.stats().last_error.find("made anew"), std::string::npos) << b.stats().last_error;
    EXPECT_TRUE(mb.rules.count("host early.example"));
    EXPECT_TRUE(mb.rules.count("ip 192.0.2.7"));
    EXPECT_TRUE(mb.rules.count("host one.example"));  // what B had stays
    EXPECT_FALSE(mb.rules.count("host lost.example"));  // the gap
  }
  // A stream that still holds B's history is no gap.
  {
    StreamSync b2(options("b"), mb, mb.last);
    ASSERT_TRUE(serve_until({&b2}, [&] { return b2.connected(); }));
    EXPECT_EQ(b2.stats().gaps, 0u);
  }
  // Gone back in time (Redis restored from an older copy): its IDs stop
  // short of B's position. What it holds is old history, not read again
  // (its adds would bring back rules deleted since); what comes after is.
  redis_->cli({"DEL", "cuckoogate:rules"});
  redis_->cli({"XADD", "cuckoogate:rules", "1-1", "op", "add", "rule", "host old.example"});
  StreamSync b3(options("b"), mb, mb.last);
  ASSERT_TRUE(serve_until({&b3}, [&] { return b3.connected(); }));
  EXPECT_EQ(b3.stats().gaps, 1u);
  EXPECT_NE(b3.stats().last_error.find("went back"), std::string::npos) << b3.stats().last_error;
  last = redis_->cli({"XADD", "cuckoogate:rules", "*", "op", "add", "rule", "host new.example"});
  last_id = *StreamId::parse(last.substr(0, last.find('\n')));
  ASSERT_TRUE(serve_until({&b3}, [&] { return b3.stats().last_applied == last_id; })) << b3.stats().last_error;
  EXPECT_TRUE(mb.rules.count("host new.example"));
  EXPECT_FALSE(mb.rules.count("host old.example"));
  EXPECT_TRUE(mb.rules.count("ip 192.0.2.7"));  // the rules stay
}

// Only a missing key means the stream is gone: another XINFO error (here
// the key holds a string: WRONGTYPE; an ACL without XINFO: NOPERM) fails the
// connection with that error, no gap counted and the position kept.
TEST_F(StreamSyncTest, AnXinfoErrorIsAConnectionErrorNotAGap) {
  MapApplier m;
  const StreamId pos{1700000000000, 3};
  redis_->cli({"SET", "cuckoogate:rules", "not a stream"});
  StreamSync s(options("b"), m, pos);
  ASSERT_TRUE(serve_until({&s}, [&] { return s.stats().last_error.find("WRONGTYPE") != std::string::npos; }))
      << s.stats().last_error;
  EXPECT_FALSE(s.connected());
  EXPECT_EQ(s.stats().gaps, 0u);
  EXPECT_EQ(s.stats().last_applied, pos);
}

TEST_F(StreamSyncTest, ALocalJournalFailureStopsTheSync) {
  MapApplier m;
  StreamSync s(options("a"), m, {});
  ASSERT_TRUE(serve_until({&s}, [&] { return s.connected(); }));
  m.fail_next = true;
  std::vector<StreamId> ids;
  std::string err;
  const std::vector<Entry> e = {add("host a.example")};
  EXPECT_FALSE(s.publish(e, &ids, &err));
  EXPECT_FALSE(s.publish(e, &ids, &err));
  EXPECT_NE(err.find("local journal"), std::string::npos) << err;
}

TEST_F(StreamSyncTest, WaitReplicasRefusesAnOkNoReplicaAcknowledged) {
  MapApplier m;
  SyncOptions o = options("a");
  o.wait_replicas = 1;  // this redis-server has no replica
  o.io_timeout = 200ms;
  StreamSync s(o, m, {});
  ASSERT_TRUE(serve_until({&s}, [&] { return s.connected(); }));
  std::vector<StreamId> ids;
  std::string err;
  const std::vector<Entry> e = {add("host a.example")};
  EXPECT_FALSE(s.publish(e, &ids, &err));
  EXPECT_NE(err.find("WAIT: 0 of 1 replicas"), std::string::npos) << err;
  EXPECT_EQ(s.stats().publish_failures, 1u);
  EXPECT_TRUE(s.connected());  // Redis is fine; only the acknowledgement is missing
  // The entry is in the stream all the same (an unknown outcome for the
  // client): it is applied with the next read, here and everywhere.
  ASSERT_TRUE(serve_until({&s}, [&] { return m.rules.count("host a.example") == 1; }));
}

// requirepass and an ACL user limited to the stream's keys: the password
// (default user) and user + password are sent; a missing or wrong one is a
// clear error and the gateway stays disconnected.
TEST_F(StreamSyncTest, PasswordAndAclUserAreSentAndAWrongOneIsAClearError) {
  const std::string adir = dir_ + "/auth";
  std::filesystem::create_directories(adir);
  test::RedisServer r(adir, {"--requirepass", "s3cret", "--user", "gw", "on", ">gwpass", "~cuckoogate:*",
                             "+@all"});
  auto opts = [&](const std::string& user, const std::string& pw) {
    SyncOptions o = options("a");
    o.url = *parse_redis_url(r.url()).url;
    o.url.user = user;
    o.url.password = pw;
    return o;
  };
  MapApplier m0;
  StreamSync none(opts("", ""), m0, {});
  none.tick();
  EXPECT_FALSE(none.connected());
  EXPECT_NE(none.stats().last_error.find("NOAUTH"), std::string::npos) << none.stats().last_error;
  StreamSync wrong(opts("gw", "nope"), m0, {});
  wrong.tick();
  EXPECT_FALSE(wrong.connected());
  EXPECT_NE(wrong.stats().last_error.find("AUTH refused"), std::string::npos) << wrong.stats().last_error;
  EXPECT_NE(wrong.stats().last_error.find("WRONGPASS"), std::string::npos) << wrong.stats().last_error;
  MapApplier ma, mb;
  StreamSync a(opts("", "s3cret"), ma, {}), b(opts("gw", "gwpass"), mb, {});
  ASSERT_TRUE(serve_until({&a, &b}, [&] { return a.connected() && b.connected(); }))
      << a.stats().last_error << " / " << b.stats().last_error;
  const std::vector<StreamId> ids = publish_ok(b, {add("host acl.example")});
  ASSERT_TRUE(serve_until({&a, &b}, [&] { return ma.last == ids[0]; }));
  EXPECT_EQ(ma.rules, mb.rules);
}

TEST_F(StreamSyncTest, LagCountsEntriesNotYetApplied) {
  MapApplier ma, mb;
  SyncOptions ob = options("b");
  ob.lag_every = 0ms;
  StreamSync a(options("a"), ma, {}), b(ob, mb, {});
  ASSERT_TRUE(serve_until({&a, &b}, [&] { return a.connected() && b.connected(); }));
  const std::vector<StreamId> ids = publish_ok(a, {add("host a.example"), add("host b.example"), add("host c.example")});
  b.tick();  // measures without reading the follower's socket
  EXPECT_EQ(b.stats().lag_entries, 3u);
  EXPECT_EQ(b.stats().last_seen, ids[2]);
  EXPECT_GE(b.stats().lag_ms, 0);
  ASSERT_TRUE(serve_until({&a, &b}, [&] { return mb.last == ids[2]; }));
  b.tick();
  EXPECT_EQ(b.stats().lag_entries, 0u);
  EXPECT_EQ(b.stats().lag_ms, 0);
}

}  // namespace
}  // namespace cg::sync
