// The per-worker flow table: one entry for both directions, states and their
// timeouts on a fake clock, bounded eviction under floods (LRU within a
// bucket, unreplied flows first), pinning within a burst, the verdict-cache
// fields and the counters.
#include "cuckoogate/flow/flow_table.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <new>
#include <random>
#include <set>
#include <vector>

// Counts every global operator new while `g_counting` is set: the flood test
// asserts the table never allocates after create(). GCC takes the malloc/free
// pair inside replaced new/delete for a mismatch once inlined (it is not).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
namespace {
std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_news{0};
}  // namespace

void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace cg::flow {

struct FlowTableTestAccess {
  static uint64_t bucket_of(const FlowTable& t, const FlowKey& k) { return t.hash(k) & t.mask_; }
  static uint64_t buckets(const FlowTable& t) { return t.mask_ + 1; }
  // Slot index of an entry within its bucket.
  static unsigned slot_of(const FlowTable& t, const FlowEntry* e) {
    unsigned slot;
    (void)t.bucket_of(*e, &slot);
    return slot;
  }
  // Every slot's copy of its header state in its entry matches the header
  // (but for the pin bit), and a free slot's copy says free. Returns the
  // number of slots that break it.
  static uint64_t unmirrored(const FlowTable& t) {
    uint64_t bad = 0;
    for (uint64_t k = 0; k <= t.mask_; ++k) {
      const FlowTable::Bucket& b = t.buckets_[k];
      for (unsigned i = 0; i < FlowTable::kWays; ++i) {
        const SlotState& c = t.entry(b, i).slot;
        const bool free_ok = (b.sig[i] == 0) == (c.state == 0) && (b.sig[i] == 0) == (b.state[i] == 0);
        const bool same = b.sig[i] == 0 || (c.stamp == b.stamp[i] && c.state == b.state[i] &&
                                            c.bits == (b.bits[i] & ~detail::kPinned));
        bad += !(free_ok && same);
      }
    }
    return bad;
  }
};

namespace {

constexpr uint64_t kHz = 1000;  // fake clock: one tick per millisecond = one stamp unit

// An IPv4 packet of flow n from its "client" (10.x.y.z:port) to a server,
// or back when `reply`.
FlowPacket v4(uint32_t n, bool reply = false, uint8_t proto = kProtoUdp, uint8_t tcp_flags = 0,
              uint16_t zone = 0) {
  const uint8_t client[4] = {10, static_cast<uint8_t>(n >> 16), static_cast<uint8_t>(n >> 8),
                             static_cast<uint8_t>(n)};
  const uint8_t server[4] = {192, 0, 2, 1};
  FlowTuple t;
  t.src = reply ? server : client;
  t.dst = reply ? client : server;
  t.sport = reply ? 443 : static_cast<uint16_t>(1024 + (n & 0x7fff));
  t.dport = reply ? static_cast<uint16_t>(1024 + (n & 0x7fff)) : 443;
  t.proto = proto;
  t.zone = zone;
  t.family = 4;
  FlowPacket p{};
  p.side = make_flow_key(t, p.key);
  p.tcp_flags = tcp_flags;
  return p;
}

FlowPacket tcp(uint32_t n, bool reply, uint8_t flags) {
  return v4(n, reply, kProtoTcp, flags);
}

FlowTableConfig config(uint64_t capacity = 1024, uint64_t hz = kHz) {
  FlowTableConfig c;
  c.capacity = capacity;
  c.ticks_per_second = hz;
  c.seed = 0x5eed;
  return c;
}

FlowTable::Ptr make_table(const FlowTableConfig& c = config()) {
  const char* err = nullptr;
  FlowTable::Ptr t = FlowTable::create(c, {}, &err);
  EXPECT_NE(t, nullptr) << (err ? err : "");
  return t;
}

FlowResult track(FlowTable& t, const FlowPacket& p, uint64_t now) {
  return t.track(p.key, p.side, p.tcp_flags, now);
}

bool alive(FlowTable& t, const FlowPacket& p, uint64_t now) {
  return t.find(p.key, p.side, now).entry != nullptr;
}

// `count` flows (numbered from `from`, protocol `proto`) whose keys land in
// the bucket of `like`.
std::vector<FlowPacket> same_bucket(const FlowTable& t, const FlowPacket& like, unsigned count,
                                    uint32_t from = 100000, uint8_t proto = kProtoUdp) {
  std::vector<FlowPacket> out;
  const uint64_t b = FlowTableTestAccess::bucket_of(t, like.key);
  for (uint32_t n = from; out.size() < count; ++n) {
    FlowPacket p = v4(n, false, proto);
    if (FlowTableTestAccess::bucket_of(t, p.key) == b) out.push_back(p);
  }
  return out;
}

// ---- one entry per flow, direction --------------------------------------

TEST(FlowTable, BothDirectionsMapToOneEntryWithTheirDirection) {
  auto t = make_table();
  const FlowResult a = track(*t, v4(1), 0);
  ASSERT_NE(a.entry, nullptr);
  EXPECT_TRUE(a.created);
  EXPECT_EQ(a.dir, Dir::kForward);
  EXPECT_FALSE(a.replied);
  const FlowResult b = track(*t, v4(1, true), 1);
  EXPECT_EQ(b.entry, a.entry);
  EXPECT_FALSE(b.created);
  EXPECT_EQ(b.dir, Dir::kReverse);
  EXPECT_TRUE(b.replied);
  const FlowResult c = track(*t, v4(1), 2);
  EXPECT_EQ(c.entry, a.entry);
  EXPECT_EQ(c.dir, Dir::kForward);
  EXPECT_EQ(t->stats().active, 1u);
}

TEST(FlowTable, TheInitiatorIsWhoeverCreatedTheEntry) {
  // The server's packet comes first here: it is the initiator (side b of the key).
  auto t = make_table();
  const FlowPacket server = v4(7, true), client = v4(7);
  ASSERT_NE(server.side, client.side);
  EXPECT_EQ(track(*t, server, 0).dir, Dir::kForward);
  EXPECT_EQ(track(*t, client, 0).dir, Dir::kReverse);
  EXPECT_EQ(track(*t, server, 0).dir, Dir::kForward);
  EXPECT_EQ(t->find(client.key, client.side, 0).dir, Dir::kReverse);
}

TEST(FlowTable, Ipv6FlowsAreTrackedLikeIpv4) {
  auto t = make_table();
  uint8_t a[16] = {0x20, 0x01, 0x0d, 0xb8}, b[16] = {0x20, 0x01, 0x0d, 0xb8};
  a[15] = 1;
  b[15] = 2;
  FlowTuple ft{a, b, 5555, 80, 0, kProtoTcp, 6};
  FlowPacket fwd{}, rev{};
  fwd.side = make_flow_key(ft, fwd.key);
  ft = FlowTuple{b, a, 80, 5555, 0, kProtoTcp, 6};
  rev.side = make_flow_key(ft, rev.key);
  const FlowResult r1 = t->track(fwd.key, fwd.side, kTcpSyn, 0);
  const FlowResult r2 = t->track(rev.key, rev.side, kTcpSyn | kTcpAck, 1);
  EXPECT_EQ(r1.entry, r2.entry);
  EXPECT_EQ(r2.dir, Dir::kReverse);
  EXPECT_EQ(r2.state, FlowState::kTcpEstablished);
  EXPECT_EQ(std::memcmp(&r1.entry->key, &fwd.key, sizeof(FlowKey)), 0);
}

TEST(FlowTable, VlanZoneSeparatesOtherwiseEqualFlows) {
  auto t = make_table();
  const FlowResult z1 = track(*t, v4(3, false, kProtoUdp, 0, 1), 0);
  const FlowResult z2 = track(*t, v4(3, false, kProtoUdp, 0, 2), 0);
  EXPECT_TRUE(z1.created);
  EXPECT_TRUE(z2.created);
  EXPECT_NE(z1.entry, z2.entry);
  EXPECT_EQ(track(*t, v4(3, true, kProtoUdp, 0, 2), 0).entry, z2.entry);
  EXPECT_EQ(t->stats().created, 2u);
}

// ---- TCP states ----------------------------------------------------------

TEST(FlowTable, TcpHandshakeAndCloseWalkTheStates) {
  auto t = make_table();
  EXPECT_EQ(track(*t, tcp(1, false, kTcpSyn), 0).state, FlowState::kTcpNew);
  EXPECT_EQ(track(*t, tcp(1, false, kTcpSyn), 0).state, FlowState::kTcpNew);  // retransmit
  EXPECT_EQ(track(*t, tcp(1, true, kTcpSyn | kTcpAck), 0).state, FlowState::kTcpEstablished);
  EXPECT_EQ(track(*t, tcp(1, false, kTcpAck), 0).state, FlowState::kTcpEstablished);
  EXPECT_EQ(track(*t, tcp(1, false, kTcpFin | kTcpAck), 0).state, FlowState::kTcpClosing);
  EXPECT_EQ(track(*t, tcp(1, false, kTcpFin | kTcpAck), 0).state, FlowState::kTcpClosing);
  EXPECT_EQ(track(*t, tcp(1, true, kTcpFin | kTcpAck), 0).state, FlowState::kTcpClosed);
  EXPECT_EQ(track(*t, tcp(1, false, kTcpAck), 0).state, FlowState::kTcpClosed);
}

TEST(FlowTable, RstClosesAndFirstPacketsPickTheirState) {
  auto t = make_table();
  track(*t, tcp(1, false, kTcpSyn), 0);
  EXPECT_EQ(track(*t, tcp(1, true, kTcpRst | kTcpAck), 0).state, FlowState::kTcpClosed);
  EXPECT_EQ(track(*t, tcp(2, false, kTcpAck), 0).state, FlowState::kTcpNew);  // mid-stream
  EXPECT_EQ(track(*t, tcp(2, true, kTcpAck), 0).state, FlowState::kTcpEstablished);
  EXPECT_EQ(track(*t, tcp(3, false, kTcpFin | kTcpAck), 0).state, FlowState::kTcpClosing);
  EXPECT_EQ(track(*t, tcp(4, false, kTcpRst), 0).state, FlowState::kTcpClosed);
  EXPECT_EQ(track(*t, v4(5), 0).state, FlowState::kUdp);
  EXPECT_EQ(track(*t, v4(6, false, 1), 0).state, FlowState::kOther);  // ICMP
}

TEST(FlowTable, SynOnAClosedFlowStartsAFreshEntry) {
  auto t = make_table();
  track(*t, tcp(1, false, kTcpSyn), 0);
  FlowEntry* e = track(*t, tcp(1, true, kTcpSyn | kTcpAck), 0).entry;
  e->set_verdict(Verdict::kPass, 5);
  track(*t, tcp(1, true, kTcpRst), 0);
  // The server reconnects to the client's port: a new connection, new initiator.
  const FlowResult r = track(*t, tcp(1, true, kTcpSyn), 1);
  EXPECT_TRUE(r.created);
  EXPECT_EQ(r.entry, e);
  EXPECT_EQ(r.dir, Dir::kForward);
  EXPECT_EQ(r.state, FlowState::kTcpNew);
  EXPECT_EQ(r.entry->verdict, Verdict::kUnknown);
  EXPECT_EQ(t->stats().active, 1u);
  // A SYN-ACK (not a new connection) on a closed flow changes nothing.
  track(*t, tcp(2, false, kTcpRst), 0);
  EXPECT_FALSE(track(*t, tcp(2, false, kTcpSyn | kTcpAck), 0).created);
}

// A blocked flow is not reopened by a SYN: the block lasts until the flow
// times out or its rule goes (a forged RST and a SYN with ISN - 1 used to
// start a fresh, unblocked flow whose stream began past the retransmitted
// ClientHello, which then passed unjudged).
TEST(FlowTable, ASynDoesNotReopenABlockedFlow) {
  for (const uint8_t close : {kTcpRst, static_cast<uint8_t>(kTcpFin | kTcpAck)}) {
    auto t = make_table();
    track(*t, tcp(1, false, kTcpSyn), 0);
    FlowEntry* e = track(*t, tcp(1, true, kTcpSyn | kTcpAck), 0).entry;
    e->set_verdict(Verdict::kDrop, 5, 7, 42, true);
    track(*t, tcp(1, false, close), 0);
    const FlowResult r = track(*t, tcp(1, false, kTcpSyn), 1);
    EXPECT_FALSE(r.created);
    EXPECT_EQ(r.entry, e);
    EXPECT_TRUE(r.entry->blocked());
    EXPECT_EQ(r.entry->rule_slot, 42u);
    EXPECT_EQ(r.entry->generation, 5u);
    // In one burst too (the entry pinned by the earlier packets).
    const FlowPacket burst[] = {tcp(1, false, kTcpAck), tcp(1, false, close), tcp(1, false, kTcpSyn)};
    FlowResult rb[3];
    t->track_burst(burst, 3, 2, rb);
    for (const FlowResult& x : rb) EXPECT_EQ(x.entry, e);
    EXPECT_TRUE(e->blocked());
    EXPECT_EQ(t->stats().reopened_in_burst, 0u);
    // Once the block is lifted (its rule went), a SYN reopens as usual.
    e->set_verdict(Verdict::kUnknown, 0);
    track(*t, tcp(1, false, close), 3);
    EXPECT_TRUE(track(*t, tcp(1, false, kTcpSyn), 3).created);
  }
}

// A burst in which a SYN reopens a flow that an earlier packet of the same
// burst holds (ClientHello, RST, SYN back to back): the earlier packets keep
// the old connection's entry, unchanged, to be judged with (a rewrite under
// them let a blocked ClientHello pass uncounted); the entry is freed when the
// call returns and the new connection starts in another slot.
TEST(FlowTable, ASynReopeningAFlowInTheSameBurstLeavesTheOldEntryToItsPackets) {
  for (const bool bare_syn : {true, false}) {
    SCOPED_TRACE(bare_syn ? "bare SYNs tracked" : "bare SYNs deferred (the gateway)");
    FlowTableConfig c = config();
    c.track_bare_syn = bare_syn;
    auto t = make_table(c);
    track(*t, tcp(1, false, kTcpSyn), 0);
    FlowEntry* old = track(*t, tcp(1, true, kTcpSyn | kTcpAck), 0).entry;
    ASSERT_NE(old, nullptr);
    old->set_verdict(Verdict::kPass, 3);
    const FlowPacket burst[] = {tcp(1, false, kTcpAck), tcp(1, false, kTcpRst), tcp(1, false, kTcpSyn),
                                tcp(1, true, kTcpSyn | kTcpAck)};
    FlowResult r[4];
    t->track_burst(burst, 4, 1, r);
    // The data and the RST: the old connection's entry, its verdict intact.
    EXPECT_EQ(r[0].entry, old);
    EXPECT_EQ(r[1].entry, old);
    EXPECT_EQ(r[1].state, FlowState::kTcpClosed);
    EXPECT_EQ(old->verdict, Verdict::kPass);
    EXPECT_EQ(old->generation, 3u);
    // The SYN: a new connection, not in the old slot.
    if (bare_syn) {
      ASSERT_NE(r[2].entry, nullptr);
      EXPECT_NE(r[2].entry, old);
      EXPECT_TRUE(r[2].created);
      EXPECT_EQ(r[2].state, FlowState::kTcpNew);
      EXPECT_EQ(r[3].entry, r[2].entry);  // its answer finds it
      EXPECT_EQ(r[3].state, FlowState::kTcpEstablished);
    } else {
      EXPECT_EQ(r[2].entry, nullptr);
      EXPECT_TRUE(r[2].deferred);
      ASSERT_NE(r[3].entry, nullptr);  // the SYN-ACK creates it, for the client
      EXPECT_NE(r[3].entry, old);
      EXPECT_TRUE(r[3].created);
      EXPECT_EQ(r[3].dir, Dir::kReverse);
    }
    const FlowStats st = t->stats();
    EXPECT_EQ(st.reopened_in_burst, 1u);
    EXPECT_EQ(st.active, 1u);  // the old entry freed once the call returned
    EXPECT_EQ(FlowTableTestAccess::unmirrored(*t), 0u);
    const FlowResult now = t->find(burst[0].key, burst[0].side, 1);
    EXPECT_EQ(now.entry, r[3].entry);
    EXPECT_EQ(now.state, FlowState::kTcpEstablished);
    // Outside a burst (nothing pinned) a SYN reopens in place, or, when bare
    // SYNs wait for their answer, frees the entry and waits as well.
    track(*t, tcp(1, false, kTcpRst), 2);
    const FlowResult again = track(*t, tcp(1, false, kTcpSyn), 2);
    if (bare_syn) {
      EXPECT_EQ(again.entry, r[3].entry);
    } else {
      EXPECT_EQ(again.entry, nullptr);
      EXPECT_TRUE(again.deferred);
      EXPECT_EQ(t->stats().active, 0u);
    }
    EXPECT_EQ(t->stats().reopened_in_burst, 1u);
    EXPECT_EQ(FlowTableTestAccess::unmirrored(*t), 0u);
  }
}

// ---- timeouts on a fake clock ----------------------------------------------

struct TimeoutCase {
  const char* name;
  std::vector<FlowPacket> packets;  // all at time 0
  uint32_t seconds;                 // the state's timeout
};

TEST(FlowTable, EachStateLivesExactlyItsTimeout) {
  FlowTableConfig c = config();
  c.timeouts = {11, 301, 61, 9, 29, 121, 31};  // distinct, so a mix-up shows
  const std::vector<TimeoutCase> cases = {
      {"tcp new", {tcp(1, false, kTcpSyn)}, 11},
      {"tcp established", {tcp(1, false, kTcpSyn), tcp(1, true, kTcpSyn | kTcpAck)}, 301},
      {"tcp closing", {tcp(1, false, kTcpSyn), tcp(1, true, kTcpAck), tcp(1, false, kTcpFin)}, 61},
      {"tcp closed (rst)", {tcp(1, false, kTcpSyn), tcp(1, true, kTcpRst)}, 9},
      {"tcp closed (fins)", {tcp(1, false, kTcpFin), tcp(1, true, kTcpFin)}, 9},
      {"udp", {v4(1)}, 29},
      {"udp replied", {v4(1), v4(1, true)}, 121},
      {"other", {v4(1, false, 47)}, 31},
      {"other replied", {v4(1, false, 47), v4(1, true, 47)}, 31},
  };
  for (const TimeoutCase& tc : cases) {
    SCOPED_TRACE(tc.name);
    auto t = make_table(c);
    for (const FlowPacket& p : tc.packets) track(*t, p, 0);
    const FlowPacket& probe = tc.packets.front();
    const uint64_t limit = uint64_t{tc.seconds} * kHz;
    EXPECT_TRUE(alive(*t, probe, limit - 1));
    EXPECT_TRUE(alive(*t, probe, limit));
    EXPECT_FALSE(alive(*t, probe, limit + 1));
    // find() does not refresh: still gone. track() starts a fresh entry.
    EXPECT_FALSE(alive(*t, probe, limit + 1));
    const FlowResult r = track(*t, probe, limit + 1);
    EXPECT_TRUE(r.created);
    EXPECT_EQ(t->stats().expired, 1u);
    EXPECT_EQ(t->stats().active, 1u);
  }
}

TEST(FlowTable, SynOnlyFlowsExpireBeforeEstablishedOnes) {
  auto t = make_table();  // default timeouts
  const FlowPacket syn = tcp(1, false, kTcpSyn);
  track(*t, syn, 0);
  track(*t, tcp(2, false, kTcpSyn), 0);
  track(*t, tcp(2, true, kTcpSyn | kTcpAck), 0);
  const uint64_t t1 = uint64_t{FlowTimeouts{}.tcp_new} * kHz + 1;
  EXPECT_FALSE(alive(*t, syn, t1));
  EXPECT_TRUE(alive(*t, tcp(2, false, 0), t1));
  EXPECT_LT(FlowTimeouts{}.tcp_new, FlowTimeouts{}.tcp_established);
}

TEST(FlowTable, EveryPacketRefreshesTheTimeout) {
  auto t = make_table();
  const FlowPacket p = v4(1);
  const uint64_t udp = uint64_t{FlowTimeouts{}.udp} * kHz;
  track(*t, p, 0);
  for (uint64_t now = udp; now <= 10 * udp; now += udp) EXPECT_FALSE(track(*t, p, now).created);
  EXPECT_EQ(t->stats().expired, 0u);
}

TEST(FlowTable, FastClockExpiresWithinTwoStampUnits) {
  const uint64_t hz = 2'500'000'000;  // a 2.5 GHz TSC
  auto t = make_table(config(1024, hz));
  const uint64_t unit = t->stamp_unit_ticks();
  EXPECT_LE(unit, hz / 1000);
  EXPECT_GT(unit * 2, hz / 1000);
  const uint64_t start = 12345678901234;
  const FlowPacket p = v4(1);
  track(*t, p, start);
  const uint64_t limit = uint64_t{FlowTimeouts{}.udp} * hz;
  EXPECT_TRUE(alive(*t, p, start + limit));
  EXPECT_FALSE(alive(*t, p, start + limit + 2 * unit));
}

TEST(FlowTable, AClockSteppingBackDoesNotExpireEntries) {
  auto t = make_table();
  const FlowPacket p = v4(1);
  track(*t, p, 5000);
  EXPECT_TRUE(alive(*t, p, 4990));
  EXPECT_FALSE(track(*t, p, 4990).created);
}

TEST(FlowTable, ExpireSweepsIdleBucketsWithinItsBudget) {
  auto t = make_table(config(4096));
  for (uint32_t n = 0; n < 200; ++n) track(*t, v4(n), 0);
  const uint64_t late = uint64_t{FlowTimeouts{}.udp} * kHz + 1;
  EXPECT_EQ(t->expire(late - 2, 1u << 20), 0u);  // nothing due yet
  const uint64_t buckets = FlowTableTestAccess::buckets(*t);
  uint64_t swept = 0;
  for (uint64_t done = 0; done < buckets; done += 16) swept += t->expire(late, 16);
  EXPECT_EQ(swept, 200u);
  const FlowStats s = t->stats();
  EXPECT_EQ(s.active, 0u);
  EXPECT_EQ(s.expired, 200u);
}

// ---- eviction --------------------------------------------------------------

TEST(FlowTable, AFullBucketEvictsItsLeastRecentlySeenFlow) {
  auto t = make_table();
  const std::vector<FlowPacket> f = same_bucket(*t, v4(0), FlowTable::kWays + 1);
  for (unsigned i = 0; i < FlowTable::kWays; ++i) track(*t, f[i], i);  // f[0] oldest
  track(*t, f[0], 100);                                                // now f[1] is
  EXPECT_TRUE(track(*t, f[FlowTable::kWays], 101).created);
  EXPECT_TRUE(alive(*t, f[0], 102));
  EXPECT_FALSE(alive(*t, f[1], 102));
  for (unsigned i = 2; i <= FlowTable::kWays; ++i) EXPECT_TRUE(alive(*t, f[i], 102)) << i;
  EXPECT_EQ(t->stats().evicted, 1u);
  EXPECT_EQ(t->stats().active, FlowTable::kWays);
}

TEST(FlowTable, AFullBucketTakesAnExpiredEntryBeforeEvicting) {
  auto t = make_table();
  std::vector<FlowPacket> flows = same_bucket(*t, v4(0), FlowTable::kWays + 1);
  // flows[5] becomes a closed TCP flow (10 s) in the same bucket; the others are UDP (30 s).
  flows[5] = same_bucket(*t, v4(0), 1, 200000, kProtoTcp)[0];
  flows[5].tcp_flags = kTcpRst;
  for (unsigned i = 0; i < FlowTable::kWays; ++i) track(*t, flows[i], i);
  const uint64_t later = 11 * kHz;  // closed expired, UDP not
  EXPECT_TRUE(track(*t, flows[FlowTable::kWays], later).created);
  EXPECT_FALSE(alive(*t, flows[5], later));
  EXPECT_TRUE(alive(*t, flows[0], later));  // the oldest UDP flow was spared
  const FlowStats s = t->stats();
  EXPECT_EQ(s.evicted, 0u);
  EXPECT_EQ(s.expired, 1u);
}

TEST(FlowTable, UnrepliedFlowsAreEvictedBeforeRepliedOnes) {
  auto t = make_table();
  const std::vector<FlowPacket> f = same_bucket(*t, v4(0), FlowTable::kWays + 1);
  // f[0] is the oldest but has seen a reply; f[1] is the oldest unreplied.
  track(*t, f[0], 0);
  FlowPacket reply = f[0];
  reply.side = f[0].side == Side::kA ? Side::kB : Side::kA;
  track(*t, reply, 1);
  for (unsigned i = 1; i < FlowTable::kWays; ++i) track(*t, f[i], 10 + i);
  track(*t, f[FlowTable::kWays], 50);
  EXPECT_TRUE(alive(*t, f[0], 51));
  EXPECT_FALSE(alive(*t, f[1], 51));
  EXPECT_EQ(t->stats().evicted_replied, 0u);
}

// Counts calls, so that "allocates once" is checked and not assumed.
struct CountingAllocator {
  int allocs = 0, releases = 0;
  FlowAllocator get() {
    FlowAllocator a;
    a.ctx = this;
    a.allocate = [](std::size_t size, std::size_t align, void* ctx) -> void* {
      ++static_cast<CountingAllocator*>(ctx)->allocs;
      return std::aligned_alloc(align, (size + align - 1) / align * align);
    };
    a.release = [](void* p, std::size_t, void* ctx) {
      ++static_cast<CountingAllocator*>(ctx)->releases;
      std::free(p);
    };
    return a;
  }
};

TEST(FlowTable, AFloodOfNewFlowsKeepsMemoryAndCapacityFixed) {
  CountingAllocator ca;
  {
    FlowTableConfig c = config(4096);
    c.timeouts.udp = c.timeouts.udp_replied = 3600;  // no expiry during the flood
    auto t = FlowTable::create(c, ca.get());
    ASSERT_NE(t, nullptr);
    const std::size_t bytes = t->memory_bytes();
    const uint64_t cap = t->capacity();
    ASSERT_EQ(cap, 4096u);
    const uint32_t inserts = 10 * 4096;
    // Long-lived flows: 64 that keep sending (one direction only) and 64
    // replied ones that stay silent during the flood.
    for (uint32_t n = 0; n < 64; ++n) track(*t, v4(1'000'000 + n), 0);
    for (uint32_t n = 0; n < 64; ++n) {
      track(*t, v4(2'000'000 + n), 0);
      track(*t, v4(2'000'000 + n, true), 0);
    }
    g_news = 0;
    g_counting = true;
    uint64_t recreated = 0;
    for (uint32_t n = 0; n < inserts; ++n) {
      track(*t, v4(n), n + 1);
      recreated += track(*t, v4(1'000'000 + n % 64), n + 1).created;
    }
    g_counting = false;
    const FlowStats s = t->stats();
    EXPECT_EQ(g_news.load(), 0u) << "the table allocated on the data path";
    EXPECT_EQ(ca.allocs, 1);
    EXPECT_EQ(t->memory_bytes(), bytes);
    EXPECT_EQ(s.active, cap);
    EXPECT_EQ(s.created, inserts + 128u);
    EXPECT_EQ(s.evicted, s.created - cap);  // every bucket ends full, nothing expired
    EXPECT_EQ(s.expired, 0u);
    EXPECT_EQ(s.evicted_replied, 0u);
    EXPECT_EQ(s.insert_failed, 0u);
    EXPECT_EQ(recreated, 0u) << "a flow that keeps sending was evicted";
    const uint64_t end = inserts + 2;
    for (uint32_t n = 0; n < 64; ++n) {
      EXPECT_TRUE(alive(*t, v4(1'000'000 + n), end)) << n;
      EXPECT_TRUE(alive(*t, v4(2'000'000 + n), end)) << n;
    }
    // The flood itself was mostly evicted: LRU, not "first come, kept forever".
    uint32_t early_alive = 0;
    for (uint32_t n = 0; n < 4096; ++n) early_alive += alive(*t, v4(n), end);
    EXPECT_EQ(early_alive, 0u);
  }
  EXPECT_EQ(ca.releases, 1);
}

// ---- bare SYNs wait for their answer (track_bare_syn off) ----------------

TEST(FlowTable, ABareSynCreatesNoEntryAndItsSynAckCreatesItForTheClient) {
  FlowTableConfig c = config();
  c.track_bare_syn = false;
  auto t = make_table(c);
  const FlowResult syn = track(*t, tcp(7, false, kTcpSyn), 0);
  EXPECT_EQ(syn.entry, nullptr);
  EXPECT_TRUE(syn.deferred);
  EXPECT_EQ(t->stats().active, 0u);
  EXPECT_EQ(t->stats().syn_deferred, 1u);
  EXPECT_FALSE(alive(*t, tcp(7, false, 0), 1));
  // The SYN-ACK creates it; its receiver (the client) is the initiator.
  const FlowResult sa = track(*t, tcp(7, true, kTcpSyn | kTcpAck), 2);
  ASSERT_NE(sa.entry, nullptr);
  EXPECT_TRUE(sa.created);
  EXPECT_FALSE(sa.deferred);
  EXPECT_EQ(sa.dir, Dir::kReverse);
  EXPECT_EQ(sa.state, FlowState::kTcpEstablished);
  EXPECT_TRUE(sa.replied);
  const FlowResult ack = track(*t, tcp(7, false, kTcpAck), 3);
  EXPECT_EQ(ack.entry, sa.entry);
  EXPECT_EQ(ack.dir, Dir::kForward);
  EXPECT_EQ(ack.state, FlowState::kTcpEstablished);
  // A retransmitted SYN of a tracked flow finds it (no new deferral).
  EXPECT_EQ(track(*t, tcp(7, false, kTcpSyn), 4).entry, sa.entry);
  EXPECT_EQ(t->stats().syn_deferred, 1u);
  // Mid-stream packets and UDP still create entries on their own.
  EXPECT_NE(track(*t, tcp(8, false, kTcpAck), 5).entry, nullptr);
  EXPECT_NE(track(*t, v4(9), 6).entry, nullptr);
  EXPECT_EQ(t->stats().created, 3u);
}

// A SYN or SYN-ACK that finds only its own flow's expired entry (the same
// 5-tuple reused once the old connection timed out) is what it would be
// without it: the SYN waits, its SYN-ACK creates the flow for the client.
// (The stale slot was filled in place from the SYN, which anchored the
// client stream at the SYN's sequence number.)
TEST(FlowTable, ASynOnItsFlowsExpiredEntryWaitsForItsAnswerToo) {
  FlowTableConfig c = config();
  c.track_bare_syn = false;
  auto t = make_table(c);
  track(*t, tcp(7, false, kTcpSyn), 0);
  ASSERT_NE(track(*t, tcp(7, true, kTcpSyn | kTcpAck), 0).entry, nullptr);
  track(*t, tcp(7, false, kTcpRst), 1);  // closed: 10 s
  const uint64_t later = 12 * kHz;
  const FlowResult syn = track(*t, tcp(7, false, kTcpSyn), later);
  EXPECT_EQ(syn.entry, nullptr);
  EXPECT_TRUE(syn.deferred);
  EXPECT_EQ(t->stats().expired, 1u);
  EXPECT_EQ(t->stats().active, 0u);
  EXPECT_EQ(t->stats().syn_deferred, 2u);
  const FlowResult sa = track(*t, tcp(7, true, kTcpSyn | kTcpAck), later + 1);
  ASSERT_NE(sa.entry, nullptr);
  EXPECT_TRUE(sa.created);
  EXPECT_EQ(sa.dir, Dir::kReverse);
  EXPECT_EQ(sa.state, FlowState::kTcpEstablished);
  // Expired again, the SYN-ACK alone (its SYN not seen) makes the same flow.
  track(*t, tcp(7, false, kTcpRst), later + 2);
  const FlowResult again = track(*t, tcp(7, true, kTcpSyn | kTcpAck), 2 * later);
  ASSERT_NE(again.entry, nullptr);
  EXPECT_TRUE(again.created);
  EXPECT_EQ(again.dir, Dir::kReverse);
  EXPECT_TRUE(again.replied);
  EXPECT_EQ(t->stats().expired, 2u);
  EXPECT_EQ(t->stats().active, 1u);
}

TEST(FlowTable, ASynFloodDoesNotTouchTheTableWhenBareSynsWait) {
  FlowTableConfig c = config(1024);
  c.track_bare_syn = false;
  auto t = make_table(c);
  for (uint32_t n = 0; n < 64; ++n) {  // established flows, created by their SYN-ACKs
    track(*t, tcp(1'000'000 + n, false, kTcpSyn), 0);
    track(*t, tcp(1'000'000 + n, true, kTcpSyn | kTcpAck), 0);
  }
  std::vector<FlowPacket> flood;
  for (uint32_t n = 0; n < 10 * 1024; ++n) flood.push_back(tcp(n, false, kTcpSyn));
  std::vector<FlowResult> out(flood.size());
  for (std::size_t i = 0; i < flood.size(); i += 32)
    t->track_burst(flood.data() + i, 32, 1 + i, out.data() + i);
  const FlowStats s = t->stats();
  EXPECT_EQ(s.active, 64u);
  EXPECT_EQ(s.evicted, 0u);
  EXPECT_EQ(s.insert_failed, 0u);
  EXPECT_EQ(s.syn_deferred, 64u + 10u * 1024u);
  for (const FlowResult& r : out) EXPECT_TRUE(r.deferred && r.entry == nullptr);
  for (uint32_t n = 0; n < 64; ++n) EXPECT_TRUE(alive(*t, tcp(1'000'000 + n, false, 0), 20000)) << n;
}

// The default memory: a table of a huge page or more starts on a 2 MiB
// boundary, in a mapping advised for transparent huge pages (VmFlags "hg"),
// and is unmapped when destroyed.
TEST(FlowTable, DefaultMemoryIsHugePageAlignedAndAdvised) {
  auto flags_of = [](uintptr_t addr) -> std::string {  // "" if not mapped
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    bool inside = false;
    while (std::getline(smaps, line)) {
      unsigned long lo = 0, hi = 0;
      if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {  // a mapping's first line
        inside = addr >= lo && addr < hi;
      } else if (inside && line.rfind("VmFlags:", 0) == 0) {
        return line;
      }
    }
    return "";
  };
  auto t = make_table(config(uint64_t{1} << 17));  // 16384 buckets of 640 bytes: 10 MiB
  ASSERT_NE(t, nullptr);
  const auto at = reinterpret_cast<uintptr_t>(t.get());
  EXPECT_EQ(at % (uintptr_t{2} << 20), 0u);
  const std::string flags = flags_of(at);
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  t.reset();
  EXPECT_EQ(flags_of(at), "");
}

TEST(FlowTable, BurstPinsItsEntriesAndFailsOnlyWhenABucketIsAllPinned) {
  auto t = make_table();
  const std::vector<FlowPacket> f = same_bucket(*t, v4(0), FlowTable::kWays + 1);
  FlowResult out[FlowTable::kWays + 1];
  t->track_burst(f.data(), FlowTable::kWays + 1, 0, out);
  std::set<FlowEntry*> distinct;
  for (unsigned i = 0; i < FlowTable::kWays; ++i) {
    ASSERT_NE(out[i].entry, nullptr) << i;
    EXPECT_EQ(std::memcmp(&out[i].entry->key, &f[i].key, sizeof(FlowKey)), 0) << i;
    distinct.insert(out[i].entry);
  }
  EXPECT_EQ(distinct.size(), FlowTable::kWays);
  EXPECT_EQ(out[FlowTable::kWays].entry, nullptr);
  EXPECT_EQ(t->stats().insert_failed, 1u);
  // Pins last only for the call: the next packet may evict.
  EXPECT_NE(track(*t, f[FlowTable::kWays], 1).entry, nullptr);
  EXPECT_EQ(t->stats().evicted, 1u);
}

// FlowPacket::no_state (a packet its receiver drops, found by its bad
// checksum): looked up only. A RST of a live flow closes nothing, a packet
// of no flow creates nothing; the entry it finds is pinned for the burst
// like any other (a later packet of the burst cannot evict it).
TEST(FlowTable, APacketWithNoStateIsOnlyLookedUp) {
  auto t = make_table();
  track(*t, tcp(1, false, kTcpSyn), 0);
  FlowEntry* e = track(*t, tcp(1, true, kTcpSyn | kTcpAck), 0).entry;
  ASSERT_NE(e, nullptr);
  const uint64_t active = t->stats().active;
  FlowPacket rst = tcp(1, false, kTcpRst), stray = tcp(2, false, kTcpAck);
  rst.no_state = stray.no_state = true;
  const FlowPacket burst[] = {rst, stray};
  FlowResult r[2];
  t->track_burst(burst, 2, 5, r);
  EXPECT_EQ(r[0].entry, e);
  EXPECT_FALSE(r[0].created);
  EXPECT_EQ(r[0].dir, Dir::kForward);
  EXPECT_EQ(r[0].state, FlowState::kTcpEstablished);
  EXPECT_EQ(r[1].entry, nullptr);
  EXPECT_FALSE(r[1].deferred);
  EXPECT_EQ(t->stats().active, active);
  EXPECT_FALSE(alive(*t, tcp(2, false, kTcpAck), 5));
  EXPECT_EQ(track(*t, tcp(1, false, kTcpAck), 5).state, FlowState::kTcpEstablished);  // still open
  EXPECT_EQ(FlowTableTestAccess::unmirrored(*t), 0u);
  // Pinned: a full bucket behind it cannot take its entry in the same burst.
  auto u = make_table();
  const std::vector<FlowPacket> f = same_bucket(*u, v4(0), FlowTable::kWays + 1);
  for (unsigned i = 0; i < FlowTable::kWays; ++i) track(*u, f[i], i == 0 ? 0 : 1);  // f[0] the oldest
  FlowPacket probe = f[0];
  probe.no_state = true;
  const FlowPacket b2[] = {probe, f[FlowTable::kWays]};
  FlowResult r2[2];
  u->track_burst(b2, 2, 2, r2);
  ASSERT_NE(r2[0].entry, nullptr);
  EXPECT_EQ(std::memcmp(&r2[0].entry->key, &f[0].key, sizeof(FlowKey)), 0);
  EXPECT_NE(r2[1].entry, r2[0].entry);
}

// Random bursts of UDP and TCP packets over `flows` flows: hands every burst
// to `check` with its packets. Without `resyn`, a bare SYN never follows an
// earlier packet of its flow in the same burst (it becomes an ACK): such a
// SYN may reopen a flow whose entry that packet holds, which track_burst()
// does apart (a new slot; ASynReopeningAFlowInTheSameBurstLeavesTheOldEntry-
// ToItsPackets), so it is left out where a burst is compared with track().
template <typename Check>
void random_bursts(uint32_t flows, int rounds, Check check, bool resyn = true) {
  std::mt19937_64 rng(7);
  const uint8_t tcp_flags[] = {kTcpSyn, kTcpSyn | kTcpAck, kTcpAck, kTcpFin | kTcpAck, kTcpRst};
  std::vector<FlowPacket> burst(64);
  std::vector<uint32_t> seen;
  for (int round = 0; round < rounds; ++round) {
    seen.clear();
    for (FlowPacket& p : burst) {
      const auto n = static_cast<uint32_t>(rng() % flows);
      const bool reply = rng() % 2 == 0;
      const bool again = std::find(seen.begin(), seen.end(), n) != seen.end();
      seen.push_back(n);
      if (rng() % 2) {
        p = v4(n, reply);
        continue;
      }
      uint8_t f = tcp_flags[rng() % 5];
      if (!resyn && again && f == kTcpSyn) f = kTcpAck;
      p = tcp(n, reply, f);
    }
    check(burst, static_cast<uint64_t>(round) * 500);
  }
}

TEST(FlowTable, BurstGivesTheSameResultsAsOnePacketAtATime) {
  // Room for every flow: no eviction, so pinning changes nothing.
  auto a = make_table(config(4096)), b = make_table(config(4096));
  FlowResult ra[64];
  random_bursts(600, 200, [&](const std::vector<FlowPacket>& burst, uint64_t now) {
    a->track_burst(burst.data(), static_cast<uint32_t>(burst.size()), now, ra);
    for (std::size_t i = 0; i < burst.size(); ++i) {
      const FlowResult rb = track(*b, burst[i], now);
      ASSERT_NE(ra[i].entry, nullptr);
      // Same slot in the same layout (the tables differ only in address).
      const auto off_a =
          reinterpret_cast<uintptr_t>(ra[i].entry) - reinterpret_cast<uintptr_t>(a.get());
      const auto off_b =
          reinterpret_cast<uintptr_t>(rb.entry) - reinterpret_cast<uintptr_t>(b.get());
      EXPECT_EQ(off_a, off_b);
      EXPECT_EQ(ra[i].dir, rb.dir);
      EXPECT_EQ(ra[i].state, rb.state);
      EXPECT_EQ(ra[i].created, rb.created);
      EXPECT_EQ(ra[i].replied, rb.replied);
    }
  }, /*resyn=*/false);
  const FlowStats sa = a->stats(), sb = b->stats();
  EXPECT_EQ(sa.created, sb.created);
  EXPECT_EQ(sa.hits, sb.hits);
  EXPECT_EQ(sa.active, sb.active);
  EXPECT_EQ(sa.expired, sb.expired);
  EXPECT_GT(sa.expired, 0u);  // the 30 s timeouts did pass during the 100 s
}

TEST(FlowTable, BurstWithTheCallersHashesEqualsBurst) {
  auto a = make_table(config(64)), b = make_table(config(64));  // eviction too
  FlowResult ra[64], rb[64];
  uint64_t h[64];
  random_bursts(600, 200, [&](const std::vector<FlowPacket>& burst, uint64_t now) {
    const auto n = static_cast<uint32_t>(burst.size());
    a->track_burst(burst.data(), n, now, ra);
    for (uint32_t i = 0; i < n; ++i) h[i] = b->hash(burst[i].key);
    b->track_burst(burst.data(), h, n, now, rb);
    for (uint32_t i = 0; i < n; ++i) {
      ASSERT_EQ(ra[i].entry == nullptr, rb[i].entry == nullptr) << i;
      if (ra[i].entry == nullptr) continue;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(ra[i].entry) - reinterpret_cast<uintptr_t>(a.get()),
                reinterpret_cast<uintptr_t>(rb[i].entry) - reinterpret_cast<uintptr_t>(b.get()));
      EXPECT_EQ(ra[i].dir, rb[i].dir);
      EXPECT_EQ(ra[i].state, rb[i].state);
      EXPECT_EQ(ra[i].created, rb[i].created);
    }
  });
  const FlowStats sa = a->stats(), sb = b->stats();
  EXPECT_EQ(std::memcmp(&sa, &sb, sizeof sa), 0);
}

// The inline fast path against track(), with the full key (track_steady)
// and the compact one (track_steady_v4): where it takes a packet, the table
// ends exactly as track() leaves it (same entry, direction, state, reply
// bit, counters); where it declines, track() would have created the entry or
// the packet carries SYN, FIN or RST. A packet it took and that track() is
// then given as well (the gateway's lane ending at it) changes nothing more.
TEST(FlowTable, TrackSteadyDoesWhatTrackDoesOrDeclines) {
  for (const bool v4key : {false, true}) {
    SCOPED_TRACE(v4key ? "track_steady_v4" : "track_steady");
    auto a = make_table(config(4096)), b = make_table(config(4096));
    uint64_t taken = 0, declined = 0, again = 0;
    random_bursts(600, 200, [&](const std::vector<FlowPacket>& burst, uint64_t now) {
      for (const FlowPacket& p : burst) {
        const FlowResult rb = track(*b, p, now);
        Dir d = Dir::kForward;
        const FlowKeyV4 k = compact(p.key);
        ASSERT_EQ(a->hash_v4(k), a->hash(p.key));
        ASSERT_EQ(a->probe().hash_v4(k), a->hash(p.key));
        FlowEntry* e = v4key ? a->track_steady_v4(k, a->hash_v4(k), p.side, p.tcp_flags, now, &d)
                             : a->track_steady(p.key, a->hash(p.key), p.side, p.tcp_flags, now, &d);
        if (e == nullptr) {
          ++declined;
          const bool syn_fin_rst = p.key.proto == kProtoTcp && (p.tcp_flags & (kTcpSyn | kTcpFin | kTcpRst)) != 0;
          EXPECT_TRUE(rb.created || syn_fin_rst);
          track(*a, p, now);
          continue;
        }
        ++taken;
        EXPECT_FALSE(rb.created);
        FlowResult ra;
        if (taken % 5 == 0) {  // taken, then tracked: counted once, by track()
          ++again;
          ra = track(*a, p, now);
          EXPECT_FALSE(ra.created);
        } else {
          a->count_hits(1);
          ra = a->find(p.key, p.side, now);
        }
        ASSERT_EQ(ra.entry, e);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(e) - reinterpret_cast<uintptr_t>(a.get()),
                  reinterpret_cast<uintptr_t>(rb.entry) - reinterpret_cast<uintptr_t>(b.get()));
        EXPECT_EQ(d, rb.dir);
        EXPECT_EQ(ra.dir, rb.dir);
        EXPECT_EQ(ra.state, rb.state);
        EXPECT_EQ(ra.replied, rb.replied);
      }
    });
    EXPECT_GT(taken, 5000u);  // both ways exercised
    EXPECT_GT(declined, 5000u);
    EXPECT_GT(again, 1000u);
    EXPECT_EQ(FlowTableTestAccess::unmirrored(*a), 0u);
    const FlowStats sa = a->stats(), sb = b->stats();
    EXPECT_EQ(std::memcmp(&sa, &sb, sizeof sa), 0);
  }
}

TEST(FlowTable, TrackSteadyDeclinesWithoutChangingAnything) {
  auto t = make_table();
  const FlowPacket syn = tcp(1, false, kTcpSyn), ack = tcp(1, false, kTcpAck), back = tcp(1, true, kTcpAck);
  Dir d = Dir::kForward;
  EXPECT_EQ(t->track_steady(ack.key, t->hash(ack.key), ack.side, ack.tcp_flags, 0, &d), nullptr);  // no entry
  EXPECT_EQ(t->stats().active, 0u);
  track(*t, syn, 0);
  const FlowStats before = t->stats();
  // SYN, FIN and RST change more than track_steady can: declined, nothing changed.
  for (uint8_t f : {kTcpSyn, uint8_t(kTcpSyn | kTcpAck), uint8_t(kTcpFin | kTcpAck), kTcpRst}) {
    const FlowPacket p = tcp(1, true, f);
    EXPECT_EQ(t->track_steady(p.key, t->hash(p.key), p.side, p.tcp_flags, 10, &d), nullptr) << int(f);
    EXPECT_EQ(t->track_steady_v4(compact(p.key), t->hash(p.key), p.side, p.tcp_flags, 10, &d), nullptr) << int(f);
  }
  // Expired: declined (track() starts it afresh), and not refreshed.
  EXPECT_EQ(t->track_steady(back.key, t->hash(back.key), back.side, back.tcp_flags, 31'000, &d), nullptr);
  EXPECT_EQ(t->find(syn.key, syn.side, 10).state, FlowState::kTcpNew);
  EXPECT_FALSE(t->find(syn.key, syn.side, 10).replied);
  EXPECT_EQ(t->find(syn.key, syn.side, 31'000).entry, nullptr);
  // The answer's ACK is taken: established, replied, refreshed; not counted.
  FlowEntry* e = t->track_steady_v4(compact(back.key), t->hash(back.key), back.side, back.tcp_flags, 10, &d);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(d, Dir::kReverse);
  EXPECT_EQ(t->find(syn.key, syn.side, 10).state, FlowState::kTcpEstablished);
  EXPECT_TRUE(t->find(syn.key, syn.side, 10).replied);
  EXPECT_NE(t->find(syn.key, syn.side, 10 + 31'000).entry, nullptr);  // alive past the SYN's 30 s
  const FlowStats after = t->stats();
  EXPECT_EQ(std::memcmp(&before, &after, sizeof before), 0);
}

// track_steady() reads a flow at home from its entry's line alone; the
// entry's copy of the slot's state is what keeps that exact. A slot freed
// by erase(), by expiry or by the sweep keeps its last key, and must not be
// taken for that flow again — also when the stale stamp would look fresh
// (the clock a multiple of 2^32 stamp units later).
TEST(FlowTable, TrackSteadyNeverTakesAFreedSlotForItsOldFlow) {
  auto t = make_table();
  const FlowPacket p = v4(1), back = v4(1, true);
  Dir d = Dir::kForward;
  track(*t, p, 0);
  ASSERT_NE(t->track_steady(back.key, t->hash(back.key), back.side, 0, 0, &d), nullptr);
  ASSERT_TRUE(t->erase(p.key));
  EXPECT_EQ(t->track_steady(back.key, t->hash(back.key), back.side, 0, 0, &d), nullptr);
  EXPECT_EQ(t->track_steady_v4(compact(back.key), t->hash(back.key), back.side, 0, 0, &d), nullptr);
  EXPECT_EQ(t->stats().active, 0u);

  // Reclaimed by the sweep, then asked about 2^32 units after its last packet.
  track(*t, p, 0);
  const uint64_t late = uint64_t{FlowTimeouts{}.udp} * kHz + 1;
  ASSERT_EQ(t->expire(late, 1u << 20), 1u);
  const uint64_t wrapped = uint64_t{1} << 32;  // a stamp unit is one tick at 1 kHz
  EXPECT_EQ(t->track_steady(back.key, t->hash(back.key), back.side, 0, wrapped, &d), nullptr);
  // And by a full bucket that makes room (it reclaims every expired entry).
  track(*t, p, 0);
  std::vector<FlowPacket> others = same_bucket(*t, p, FlowTable::kWays);
  for (unsigned j = 0; j + 1 < FlowTable::kWays; ++j) track(*t, others[j], late - 10);
  track(*t, others.back(), late);  // full: p expired, reclaimed, its slot reused or left free
  EXPECT_EQ(t->find(p.key, p.side, late).entry, nullptr);
  EXPECT_EQ(t->track_steady(back.key, t->hash(back.key), back.side, 0, wrapped, &d), nullptr);
  EXPECT_EQ(FlowTableTestAccess::unmirrored(*t), 0u);
}

// A flow whose home slot another flow holds is found through the header.
TEST(FlowTable, TrackSteadyFindsAFlowAwayFromItsHomeSlot) {
  auto t = make_table(config(64));
  const std::vector<FlowPacket> f = same_bucket(*t, v4(1), FlowTable::kWays);
  unsigned away = 0;
  for (const FlowPacket& p : f) track(*t, p, 0);
  for (const FlowPacket& p : f) {
    const FlowResult r = t->find(p.key, p.side, 0);
    ASSERT_NE(r.entry, nullptr);
    away += FlowTableTestAccess::slot_of(*t, r.entry) != (static_cast<unsigned>(t->hash(p.key) >> 40) & 7u);
    Dir d = Dir::kReverse;
    EXPECT_EQ(t->track_steady(p.key, t->hash(p.key), p.side, 0, 5, &d), r.entry);
    EXPECT_EQ(d, Dir::kForward);
    // The answer, wherever the flow sits: replied, in the header too.
    const Side back = p.side == Side::kA ? Side::kB : Side::kA;
    EXPECT_EQ(t->track_steady(p.key, t->hash(p.key), back, 0, 6, &d), r.entry);
    EXPECT_EQ(d, Dir::kReverse);
    EXPECT_TRUE(t->find(p.key, p.side, 6).replied);
  }
  EXPECT_GE(away, 1u);  // eight flows, eight home slots drawn at random: some collide
  EXPECT_EQ(FlowTableTestAccess::unmirrored(*t), 0u);
}

// Each entry has its own cold state, and writing it leaves every entry alone.
TEST(FlowTable, EveryEntryOfABucketHasItsOwnColdState) {
  auto t = make_table(config(64));
  const std::vector<FlowPacket> f = same_bucket(*t, v4(1), FlowTable::kWays);
  std::vector<FlowEntry*> e;
  for (const FlowPacket& p : f) e.push_back(track(*t, p, 0).entry);
  std::vector<FlowEntry> before;
  for (FlowEntry* x : e) before.push_back(*x);
  for (uint32_t j = 0; j < e.size(); ++j) {
    t->cold(*e[j]).stream[0] = 0x1000 + j;
    t->cold(*e[j]).stream[1] = 0x2000 + j;
  }
  std::set<const FlowCold*> distinct;
  for (uint32_t j = 0; j < e.size(); ++j) {
    EXPECT_EQ(t->cold(*e[j]).stream[0], 0x1000 + j);
    EXPECT_EQ(t->cold(*e[j]).stream[1], 0x2000 + j);
    EXPECT_EQ(std::memcmp(e[j], &before[j], sizeof(FlowEntry)), 0) << j;
    distinct.insert(&t->cold(*e[j]));
  }
  EXPECT_EQ(distinct.size(), FlowTable::kWays);
  EXPECT_EQ(FlowTableTestAccess::unmirrored(*t), 0u);
}

// What track_steady() refreshes, expiry and eviction see: they read the
// header, not the entry.
TEST(FlowTable, TrackSteadyRefreshesWhatExpiryAndEvictionRead) {
  auto t = make_table(config(4096));
  const FlowPacket p = v4(1), back = v4(1, true);
  track(*t, p, 0);
  Dir d = Dir::kForward;
  const uint64_t udp = uint64_t{FlowTimeouts{}.udp} * kHz;
  ASSERT_NE(t->track_steady(p.key, t->hash(p.key), p.side, 0, udp - 5, &d), nullptr);
  EXPECT_EQ(t->expire(udp + 10, 1u << 20), 0u);  // seen at udp - 5: alive until 2 * udp - 5
  EXPECT_TRUE(alive(*t, p, udp + 10));
  // A reply through the steady lane makes it a replied flow (120 s) ...
  ASSERT_NE(t->track_steady(back.key, t->hash(back.key), back.side, 0, udp, &d), nullptr);
  EXPECT_EQ(d, Dir::kReverse);
  EXPECT_EQ(t->expire(3 * udp, 1u << 20), 0u);
  EXPECT_TRUE(t->find(p.key, p.side, 3 * udp).replied);
  // ... which eviction keeps over the unreplied ones of its bucket.
  for (const FlowPacket& o : same_bucket(*t, p, 2 * FlowTable::kWays)) track(*t, o, 3 * udp);
  EXPECT_TRUE(alive(*t, p, 3 * udp));
  EXPECT_EQ(FlowTableTestAccess::unmirrored(*t), 0u);
}

// A new flow takes its home slot (hash bits prefetch() reads the entry line
// by) while that slot is free, and any free one otherwise.
TEST(FlowTable, NewFlowsTakeTheirHomeSlotWhenFree) {
  auto t = make_table(config(64));
  const FlowPacket first = v4(1);
  const std::vector<FlowPacket> f = same_bucket(*t, first, FlowTable::kWays);
  unsigned at_home = 0;
  std::set<unsigned> used;
  for (const FlowPacket& p : f) {
    const FlowResult r = track(*t, p, 0);
    ASSERT_NE(r.entry, nullptr);
    const unsigned slot = FlowTableTestAccess::slot_of(*t, r.entry);
    const unsigned home = static_cast<unsigned>(t->hash(p.key) >> 40) & 7u;
    if (used.count(home) == 0) {
      EXPECT_EQ(slot, home);  // free: taken
    }
    at_home += slot == home;
    EXPECT_TRUE(used.insert(slot).second);
  }
  EXPECT_EQ(used.size(), FlowTable::kWays);  // then the free ones: the bucket fills up
  EXPECT_GE(at_home, 1u);
}

TEST(FlowTable, BurstUnderEvictionKeepsEveryEntryItReturned) {
  auto t = make_table(config(64));  // 8 buckets, 600 flows: constant eviction
  FlowResult out[64];
  uint64_t failed = 0;
  random_bursts(600, 300, [&](const std::vector<FlowPacket>& burst, uint64_t now) {
    t->track_burst(burst.data(), static_cast<uint32_t>(burst.size()), now, out);
    for (std::size_t i = 0; i < burst.size(); ++i) {
      if (out[i].entry == nullptr) {
        ++failed;
        continue;
      }
      // Still this packet's flow after the whole burst: nothing evicted it
      // (it may have been retired and freed if a later SYN of the burst
      // reopened the flow).
      ASSERT_EQ(std::memcmp(&out[i].entry->key, &burst[i].key, sizeof(FlowKey)), 0) << i;
      bool reopened_later = false;
      for (std::size_t j = i + 1; j < burst.size(); ++j)
        reopened_later |= burst[j].key.proto == kProtoTcp && burst[j].tcp_flags == kTcpSyn &&
                          std::memcmp(&burst[j].key, &burst[i].key, sizeof(FlowKey)) == 0;
      if (!reopened_later) {
        ASSERT_TRUE(alive(*t, burst[i], now)) << i;
      }
    }
  });
  const FlowStats s = t->stats();
  EXPECT_EQ(FlowTableTestAccess::unmirrored(*t), 0u);
  EXPECT_GT(s.reopened_in_burst, 0u);  // the case above did occur
  EXPECT_EQ(s.insert_failed, failed);
  EXPECT_GT(s.evicted, 1000u);
  EXPECT_LE(s.active, t->capacity());
}

// ---- the verdict cache fields ----------------------------------------------

TEST(FlowTable, VerdictFieldsRoundTripAndStartZeroed) {
  auto t = make_table();
  FlowEntry* e = track(*t, v4(1), 0).entry;
  EXPECT_EQ(e->verdict, Verdict::kUnknown);
  EXPECT_FALSE(e->verdict_current(0));
  EXPECT_EQ(e->generation, 0u);
  EXPECT_EQ(e->rule_slot, 0u);
  EXPECT_EQ(e->rule_kind, 0);
  EXPECT_EQ(e->inspect, 0);
  EXPECT_EQ(e->flags, 0);
  e->set_verdict(Verdict::kReject, 0x1234567890ull, 7, 0xfeedbeef, true);
  e->inspect = 0x5a;
  t->cold(*e).stream[0] = 1000;
  t->cold(*e).stream[1] = 0xfffffff0u;
  const FlowResult r = track(*t, v4(1, true), 1);
  ASSERT_EQ(r.entry, e);
  EXPECT_EQ(r.entry->verdict, Verdict::kReject);
  EXPECT_TRUE(r.entry->verdict_current(0x1234567890ull));
  EXPECT_FALSE(r.entry->verdict_current(0x1234567891ull));
  EXPECT_EQ(r.entry->rule_kind, 7);
  EXPECT_EQ(r.entry->rule_slot, 0xfeedbeefu);
  EXPECT_TRUE(r.entry->blocked());
  EXPECT_EQ(r.entry->inspect, 0x5a);
  EXPECT_EQ(t->cold(*r.entry).stream[0], 1000u);
  EXPECT_EQ(t->cold(*r.entry).stream[1], 0xfffffff0u);
  r.entry->set_verdict(Verdict::kPass, 9);
  EXPECT_FALSE(r.entry->blocked());
  // A new flow in a reused slot starts from zero again.
  t->erase(v4(1).key);
  const FlowResult again = track(*t, v4(1), 2);
  EXPECT_TRUE(again.created);
  EXPECT_EQ(again.entry->verdict, Verdict::kUnknown);
  EXPECT_EQ(again.entry->inspect, 0);
  EXPECT_EQ(t->cold(*again.entry).stream[0], 0u);
  EXPECT_EQ(t->cold(*again.entry).stream[1], 0u);
}

// ---- counters and creation -------------------------------------------------

TEST(FlowTable, CountersFollowHitsMissesAndErase) {
  auto t = make_table();
  track(*t, v4(1), 0);              // miss, created
  track(*t, v4(1, true), 0);        // hit
  track(*t, v4(2), 0);              // miss, created
  track(*t, v4(1), 0);              // hit
  t->find(v4(3).key, Side::kA, 0);  // not counted
  EXPECT_TRUE(t->erase(v4(2).key));
  EXPECT_FALSE(t->erase(v4(2).key));
  const FlowStats s = t->stats();
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.created, 2u);
  EXPECT_EQ(s.active, 1u);
  EXPECT_EQ(s.evicted, 0u);
  EXPECT_EQ(s.expired, 0u);
}

// hash_v4() is a keyed folded multiply, not XXH3: every part of the hash the
// table uses (bucket index: low bits; home slot: bits 40-42; signature: the
// top 16) must spread flows that differ in one field only, for any seed (0
// too), and another seed must put them elsewhere.
namespace {

struct Spread {
  unsigned max_bucket = 0, min_bucket = 0, moved = 0;
  std::vector<unsigned> slot;
  std::size_t sigs = 0;
};

constexpr unsigned kSpreadBuckets = 4096, kSpreadFlows = 1u << 16;

// The spread of kSpreadFlows keys, key(n) for n < kSpreadFlows.
template <class KeyOf>
Spread spread(const detail::HashKeys& keys, const detail::HashKeys& other, KeyOf key) {
  std::vector<unsigned> bucket(kSpreadBuckets);
  Spread r;
  r.slot.assign(8, 0);
  std::set<uint16_t> sigs;
  for (uint32_t n = 0; n < kSpreadFlows; ++n) {
    const FlowKeyV4 k = key(n);
    const uint64_t h = detail::hash_v4(k, keys);
    ++bucket[h & (kSpreadBuckets - 1)];
    ++r.slot[detail::home_slot(h)];
    sigs.insert(detail::signature(h));
    r.moved += (h & (kSpreadBuckets - 1)) != (detail::hash_v4(k, other) & (kSpreadBuckets - 1));
  }
  r.max_bucket = *std::max_element(bucket.begin(), bucket.end());
  r.min_bucket = *std::min_element(bucket.begin(), bucket.end());
  r.sigs = sigs.size();
  return r;
}

// `every_bucket`: none left empty (false: only none crowded).
void expect_uniform(const Spread& r, bool every_bucket = true) {
  // 16 flows a bucket on average: a uniform hash's fullest of 4096 holds
  // about 33 and its emptiest about 4.
  EXPECT_LE(r.max_bucket, 48u);
  if (every_bucket) {
    EXPECT_GE(r.min_bucket, 1u);
  }
  for (const unsigned c : r.slot) EXPECT_NEAR(c, kSpreadFlows / 8, kSpreadFlows / 80);  // within 10 %
  EXPECT_GE(r.sigs, 40000u);  // of 65 536 values: a uniform hash gives ~41 400
}

}  // namespace

TEST(FlowTable, Ipv4HashesSpreadEveryFieldOverBucketsSlotsAndSignatures) {
  for (const uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{0x5eed}, ~uint64_t{0}}) {
    const detail::HashKeys keys = detail::hash_keys(seed), other = detail::hash_keys(seed + 1);
    // One field at a time: either port, the low or high 16 bits of either
    // address, the zone; the rest fixed.
    for (int field = 0; field < 7; ++field) {
      SCOPED_TRACE("seed " + std::to_string(seed) + ", field " + std::to_string(field));
      const Spread r = spread(keys, other, [field](uint32_t n) {
        const auto v = static_cast<uint16_t>(n);
        FlowKeyV4 k{};
        k.a = field == 2 ? n : field == 3 ? n << 16 : 0x0100000a;
        k.b = field == 4 ? n : field == 5 ? n << 16 : 0x010200c0;
        k.tail = detail::key_tail(field == 0 ? v : 1024, field == 1 ? v : 443, field == 6 ? v : 0, kProtoTcp, 4);
        return k;
      });
      expect_uniform(r);
      EXPECT_GE(r.moved, kSpreadFlows * 99 / 100);  // another seed, another bucket (1/4096 stay)
    }
  }
}

// Where one factor of the product is zero (the addresses equal to their key,
// or the tail to its), the product is zero whatever the other word holds:
// the key itself, added in, must still keep those flows from crowding one
// bucket or signature (a case of probability 2^-32 for a sender who does not
// know the keys: spread, if not as evenly as by the product).
TEST(FlowTable, Ipv4HashesSpreadFlowsWhoseProductIsZero) {
  const detail::HashKeys keys = detail::hash_keys(0x5eed), other = detail::hash_keys(0x5eee);
  SCOPED_TRACE("addresses equal to their key, ports varying");
  expect_uniform(spread(keys, other, [&](uint32_t n) {
    FlowKeyV4 k{};
    std::memcpy(&k, &keys.lo, 8);
    k.tail = detail::key_tail(static_cast<uint16_t>(n), 443, 0, kProtoTcp, 4);
    return k;
  }), false);
  SCOPED_TRACE("tail equal to its key, an address varying");
  expect_uniform(spread(keys, other, [&](uint32_t n) {
    FlowKeyV4 k{};
    k.a = n;
    k.b = 0x010200c0;
    k.tail = keys.hi;
    return k;
  }), false);
}

TEST(FlowTable, CapacityRoundsUpToPowerOfTwoBuckets) {
  auto t = make_table(config(1000));
  EXPECT_EQ(t->capacity(), 1024u);
  EXPECT_EQ(FlowTableTestAccess::buckets(*t), 128u);
  EXPECT_GE(t->memory_bytes(), 128u * 15 * 64);  // a header, 8 entries and 6 cold lines per bucket
  EXPECT_LT(t->memory_bytes(), 128u * 15 * 64 + 1024);
  EXPECT_EQ(make_table(config(1))->capacity(), FlowTable::kWays);
}

TEST(FlowTable, CreateRejectsBadConfigurationsWithAReason) {
  const char* err = nullptr;
  EXPECT_EQ(FlowTable::create(config(0), {}, &err), nullptr);
  EXPECT_NE(err, nullptr);
  err = nullptr;
  EXPECT_EQ(FlowTable::create(config(1024, 0), {}, &err), nullptr);
  EXPECT_NE(err, nullptr);
  FlowTableConfig c = config();
  c.timeouts.udp = 0;
  EXPECT_EQ(FlowTable::create(c, {}, &err), nullptr);
  FlowAllocator half;
  half.allocate = [](std::size_t, std::size_t, void*) -> void* { return nullptr; };
  EXPECT_EQ(FlowTable::create(config(), half, &err), nullptr);
  FlowAllocator none = half;
  none.release = [](void*, std::size_t, void*) {};
  err = nullptr;
  EXPECT_EQ(FlowTable::create(config(), none, &err), nullptr);
  EXPECT_STREQ(err, "flow table allocation failed");
}

}  // namespace
}  // namespace cg::flow
