// CIDR prefix rules in the Blocklist (EAL for its memory, no ports): add,
// list, delete exactly, flush, expiry, batches, hit counters, generations,
// restart from the journal, and the workers' probe (PrefixTables::lookup)
// on classified frames: inside, on both edges and just outside each prefix.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "control/blocklist.hpp"
#include "cuckoogate/keys/classify.hpp"
#include "eal_test_main.hpp"
#include "packet_builder.hpp"
#include "rule_text.hpp"

namespace cg {
namespace {

std::string g_dir;
int g_instance = 0;

using test::R;

class Prefixes : public testing::Test {
 protected:
  void SetUp() override { open(""); }

  // pure_filter: as `--no-verify` sets it up (Options::kind_keyed_addresses).
  void open(const std::string& state_dir, int64_t* clock = nullptr, bool pure_filter = false) {
    bl_.reset();
    Blocklist::Options o;
    o.capacity = 1u << 12;
    o.kind_keyed_addresses = pure_filter;
    o.name = "pt" + std::to_string(++g_instance);
    o.state_dir = state_dir;
    if (clock != nullptr) o.clock = [clock] { return *clock; };
    std::string err;
    bl_ = Blocklist::create(o, &err);
    ASSERT_TRUE(bl_) << err;
    // Hit counters as the engine keeps them (one worker's array).
    hits_.assign(o.capacity, 0);
    bl_->set_hit_reader([this](uint32_t s) { return hits_[s]; });
  }

  std::vector<std::string> list() const {
    std::vector<std::string> out;
    bl_->for_each(std::nullopt, "", [&](std::string_view t, int64_t) { out.emplace_back(t); });
    return out;
  }

  // What the workers' probe says about one frame.
  PrefixHit probe(const test::Bytes& frame, bool verify) {
    auto keys = std::make_unique<PacketKeys>();
    classify(frame.data(), frame.size(), *keys);
    const bool cls = true;
    PrefixHit h;
    bl_->prefixes().lookup(keys.get(), &cls, 1, verify, &h);
    return h;
  }
  PrefixHit v4(const char* src, const char* dst, bool verify = true) {
    return probe(test::Packet().ipv4(src, dst).udp(1000, 2000).frame(), verify);
  }
  PrefixHit v6(const char* src, const char* dst, bool verify = true) {
    return probe(test::Packet().ipv6(src, dst).udp(1000, 2000).frame(), verify);
  }
  // Counts one confirmed drop for the rule in this slot, as a worker does.
  void count(const PrefixHit& h) { ++hits_[h.slot]; }
  // The listed rule whose hit-counter slot the probe named ("none": no match).
  std::string which(const PrefixHit& h) {
    if (h.kind == 0) return "none";
    std::vector<std::pair<std::string, uint64_t>> before;
    for (const std::string& t : list()) before.emplace_back(t, bl_->hits(R(t)));
    ++hits_[h.slot];
    std::string w = "?";
    for (const auto& [t, n] : before)
      if (bl_->hits(R(t)) != n) w = t;
    --hits_[h.slot];
    return w;
  }

  std::unique_ptr<Blocklist> bl_;
  std::vector<uint64_t> hits_;
};

TEST_F(Prefixes, AddListDeleteExactly) {
  for (const char* r : {"src 10.1.0.0/16", "src 10.0.0.0/8", "src 10.1.2.3", "dst 2001:db8::/32", "ip 0.0.0.0/0"})
    ASSERT_EQ(bl_->add(R(r)), Blocklist::Result::kOk) << r;
  EXPECT_EQ(bl_->add(R("src 10.0.0.0/08")), Blocklist::Result::kExists);
  EXPECT_EQ(list(), (std::vector<std::string>{"src 10.0.0.0/8", "src 10.1.0.0/16", "src 10.1.2.3",
                                               "dst 2001:db8::/32", "ip 0.0.0.0/0"}));
  EXPECT_EQ(bl_->prefixes().size(), 4u);
  // Deleted exactly: not by a covering or covered prefix, nor the address.
  EXPECT_EQ(bl_->del(R("src 10.0.0.0/9")), Blocklist::Result::kAbsent);
  EXPECT_EQ(bl_->del(R("src 10.1.0.0/24")), Blocklist::Result::kAbsent);
  EXPECT_EQ(bl_->del(R("src 10.0.0.0")), Blocklist::Result::kAbsent);
  EXPECT_EQ(bl_->del(R("dst 10.0.0.0/8")), Blocklist::Result::kAbsent);
  EXPECT_EQ(bl_->del(R("src 10.0.0.0/8")), Blocklist::Result::kOk);
  EXPECT_TRUE(bl_->contains(R("src 10.1.0.0/16")));
  EXPECT_FALSE(bl_->contains(R("src 10.0.0.0/8")));
  EXPECT_EQ(bl_->prefixes().size(), 3u);
  EXPECT_EQ(v4("10.2.0.1", "192.0.2.1").kind, static_cast<uint8_t>(RuleKind::kIp));  // only ip /0 now
}

// The IPv4 tables grow: rte_lpm's held 4096 groups (networks with a prefix
// longer than /24) and max(capacity, 1 M) prefixes, fixed at creation.
TEST_F(Prefixes, Ipv4TablesGrowPastTheOldFixedGroupLimit) {
  constexpr int kNets = 6000;
  hits_.assign(1u << 14, 0);  // a counter for every slot these rules take (past the capacity)
  for (int i = 0; i < kNets; ++i) {
    const std::string r = "src 10." + std::to_string(i / 256) + "." + std::to_string(i % 256) + ".128/25";
    ASSERT_EQ(bl_->add(R(r)), Blocklist::Result::kOk) << r << ": " << bl_->last_error();
  }
  EXPECT_EQ(bl_->prefixes().size(), static_cast<std::size_t>(kNets));
  for (int i = 0; i < kNets; i += 499) {
    const std::string net = "10." + std::to_string(i / 256) + "." + std::to_string(i % 256) + ".";
    EXPECT_EQ(v4((net + "128").c_str(), "192.0.2.1").kind, static_cast<uint8_t>(RuleKind::kSrc)) << net;
    EXPECT_EQ(v4((net + "255").c_str(), "192.0.2.1").len, 25) << net;
    EXPECT_EQ(v4((net + "127").c_str(), "192.0.2.1").kind, 0) << net;
  }
  EXPECT_GE(bl_->memory_use().prefixes, static_cast<std::size_t>(kNets) * 1024);  // a 1 KiB group each
  // The kind's last IPv4 prefix takes the table and its memory with it; the
  // next prefix makes a new one.
  ASSERT_EQ(bl_->add(R("dst 10.0.0.0/16")), Blocklist::Result::kOk);
  const std::size_t both = bl_->memory_use().prefixes;
  std::size_t n = 0;
  ASSERT_EQ(bl_->flush_kind(RuleKind::kSrc, &n), Blocklist::Result::kOk);
  EXPECT_EQ(n, static_cast<std::size_t>(kNets));
  const std::size_t dst_only = bl_->memory_use().prefixes;
  EXPECT_GT(dst_only, 0u);
  EXPECT_LE(dst_only, both - kNets * 1024u);  // the src table's groups are gone
  ASSERT_EQ(bl_->del(R("dst 10.0.0.0/16")), Blocklist::Result::kOk);
  EXPECT_EQ(bl_->memory_use().prefixes, 0u);
  EXPECT_EQ(v4("1.1.1.1", "10.0.0.1").kind, 0);
  ASSERT_EQ(bl_->add(R("dst 10.0.0.0/16")), Blocklist::Result::kOk);
  EXPECT_EQ(v4("1.1.1.1", "10.0.0.1").kind, static_cast<uint8_t>(RuleKind::kDst));
}

// max_memory bounds the IPv4 tables too: the add that would pass it fails
// with a clear error and leaves nothing behind.
TEST_F(Prefixes, Ipv4TablesStopAtMaxMemoryAndLeaveNothingHalfAdded) {
  bl_.reset();
  Blocklist::Options o;
  o.capacity = 1u << 12;
  // 1 MiB: the rule index (8 KiB) and three 256 KiB chunks of 256 groups.
  o.max_memory = std::size_t{1} << 20;
  o.name = "pt" + std::to_string(++g_instance);
  std::string err;
  bl_ = Blocklist::create(o, &err);
  ASSERT_TRUE(bl_) << err;
  int added = 0;
  std::string failed;
  for (int i = 0; i < 2000 && failed.empty(); ++i) {
    const std::string r = "dst 10." + std::to_string(i / 256) + "." + std::to_string(i % 256) + ".0/26";
    if (bl_->add(R(r)) == Blocklist::Result::kOk) {
      ++added;
    } else {
      failed = r;
    }
  }
  ASSERT_FALSE(failed.empty()) << "2000 groups fitted in 1 MiB";
  EXPECT_EQ(added, 768);
  EXPECT_NE(bl_->last_error().find("max_memory reached"), std::string::npos) << bl_->last_error();
  EXPECT_FALSE(bl_->contains(R(failed)));
  EXPECT_EQ(bl_->size(), static_cast<std::size_t>(added));
  const std::string addr = failed.substr(4, failed.size() - 4 - 5) + ".1";  // inside the failed /26
  EXPECT_EQ(probe(test::Packet().ipv4("192.0.2.1", addr.c_str()).udp(1, 2).frame(), true).kind, 0) << addr;
  // A /24 needs no group: still fits.
  EXPECT_EQ(bl_->add(R("dst 10.200.0.0/24")), Blocklist::Result::kOk);
  // The kinds share the budget: ip's first prefix finds no room for its
  // table's index, and the table made for it goes again.
  const std::size_t before = bl_->memory_use().prefixes;
  EXPECT_EQ(bl_->add(R("ip 10.0.0.0/25")), Blocklist::Result::kFull);
  EXPECT_NE(bl_->last_error().find("max_memory reached"), std::string::npos) << bl_->last_error();
  EXPECT_EQ(bl_->memory_use().prefixes, before);
  EXPECT_EQ(v4("10.0.0.1", "192.0.2.1").kind, 0);
}

TEST_F(Prefixes, V4InsideEdgesAndOutside) {
  ASSERT_EQ(bl_->add(R("src 10.99.0.0/24")), Blocklist::Result::kOk);
  ASSERT_EQ(bl_->add(R("dst 192.0.2.128/25")), Blocklist::Result::kOk);
  const auto src = static_cast<uint8_t>(RuleKind::kSrc), dst = static_cast<uint8_t>(RuleKind::kDst);
  EXPECT_EQ(v4("10.99.0.0", "1.1.1.1").kind, src);    // first address
  EXPECT_EQ(v4("10.99.0.77", "1.1.1.1").kind, src);   // inside
  EXPECT_EQ(v4("10.99.0.255", "1.1.1.1").kind, src);  // last address
  EXPECT_EQ(v4("10.98.255.255", "1.1.1.1").kind, 0);  // just below
  EXPECT_EQ(v4("10.99.1.0", "1.1.1.1").kind, 0);      // just above
  EXPECT_EQ(v4("1.1.1.1", "10.99.0.5").kind, 0);      // a src prefix does not match the destination
  EXPECT_EQ(which(v4("10.99.0.5", "1.1.1.1")), "src 10.99.0.0/24");
  EXPECT_EQ(v4("1.1.1.1", "192.0.2.128").kind, dst);
  EXPECT_EQ(v4("1.1.1.1", "192.0.2.255").kind, dst);
  EXPECT_EQ(v4("1.1.1.1", "192.0.2.127").kind, 0);
  EXPECT_EQ(v4("192.0.2.200", "1.1.1.1").kind, 0);
  // Both on one packet: the smaller kind (src) is the verdict.
  EXPECT_EQ(v4("10.99.0.1", "192.0.2.129").kind, src);
}

TEST_F(Prefixes, V6InsideEdgesAndOutsideAndMappedAddresses) {
  ASSERT_EQ(bl_->add(R("ip 2001:db8:aa::/48")), Blocklist::Result::kOk);
  ASSERT_EQ(bl_->add(R("src ::ffff:10.0.0.0/104")), Blocklist::Result::kOk);
  const auto ip = static_cast<uint8_t>(RuleKind::kIp), src = static_cast<uint8_t>(RuleKind::kSrc);
  EXPECT_EQ(v6("2001:db8:aa::", "2001:db8::1").kind, ip);
  EXPECT_EQ(v6("2001:db8::1", "2001:db8:aa:ffff:ffff:ffff:ffff:ffff").kind, ip);  // ip: either address
  EXPECT_EQ(v6("2001:db8:a9:ffff:ffff:ffff:ffff:ffff", "2001:db8::1").kind, 0);
  EXPECT_EQ(v6("2001:db8:ab::", "2001:db8::1").kind, 0);
  EXPECT_EQ(v6("::ffff:10.1.2.3", "2001:db8::1").kind, src);
  // An IPv4-mapped prefix is IPv6: an IPv4 packet from 10.1.2.3 is not inside.
  EXPECT_EQ(v4("10.1.2.3", "1.1.1.1").kind, 0);
}

TEST_F(Prefixes, LongestPrefixPerKindAndExactBeatsCoveringPrefix) {
  ASSERT_EQ(bl_->add(R("src 10.0.0.0/8")), Blocklist::Result::kOk);
  ASSERT_EQ(bl_->add(R("src 10.1.0.0/16")), Blocklist::Result::kOk);
  ASSERT_EQ(bl_->add(R("dst 10.1.0.0/16")), Blocklist::Result::kOk);
  EXPECT_EQ(which(v4("10.1.2.3", "8.8.8.8")), "src 10.1.0.0/16");
  EXPECT_EQ(which(v4("10.2.2.3", "8.8.8.8")), "src 10.0.0.0/8");
  // The hit counter of the longest prefix moves, not the covering one's.
  count(v4("10.1.2.3", "8.8.8.8"));
  count(v4("10.1.2.4", "8.8.8.8"));
  count(v4("10.2.2.3", "8.8.8.8"));
  EXPECT_EQ(bl_->hits(R("src 10.1.0.0/16")), 2u);
  EXPECT_EQ(bl_->hits(R("src 10.0.0.0/8")), 1u);
  EXPECT_EQ(bl_->hits(R("dst 10.1.0.0/16")), 0u);
  // src 10.0.0.0/8 and dst 10.1.0.0/16 on one packet: both match, src wins.
  EXPECT_EQ(v4("10.2.0.1", "10.1.0.1").kind, static_cast<uint8_t>(RuleKind::kSrc));
  // An exact rule lives in the filter and exact set, not in the prefix probe;
  // the worker keeps an exact hit of the same kind (worker.cpp step 2b).
  ASSERT_EQ(bl_->add(R("src 10.1.2.3")), Blocklist::Result::kOk);
  EXPECT_EQ(which(v4("10.1.2.3", "8.8.8.8")), "src 10.1.0.0/16");
  EXPECT_EQ(bl_->hits(R("src 10.1.2.3")), 0u);
  // Deleting the /16 uncovers the /8 for its addresses.
  ASSERT_EQ(bl_->del(R("src 10.1.0.0/16")), Blocklist::Result::kOk);
  EXPECT_EQ(which(v4("10.1.2.4", "8.8.8.8")), "src 10.0.0.0/8");
  // Re-added, it starts from zero hits.
  ASSERT_EQ(bl_->add(R("src 10.1.0.0/16")), Blocklist::Result::kOk);
  EXPECT_EQ(bl_->hits(R("src 10.1.0.0/16")), 0u);
}

TEST_F(Prefixes, SlashZeroMatchesEveryAddressOfItsFamily) {
  ASSERT_EQ(bl_->add(R("dst 0.0.0.0/0")), Blocklist::Result::kOk);
  EXPECT_EQ(v4("1.1.1.1", "0.0.0.0").kind, static_cast<uint8_t>(RuleKind::kDst));
  EXPECT_EQ(v4("1.1.1.1", "255.255.255.255").kind, static_cast<uint8_t>(RuleKind::kDst));
  EXPECT_EQ(v6("2001:db8::1", "2001:db8::2").kind, 0);
  ASSERT_EQ(bl_->add(R("dst ::/0")), Blocklist::Result::kOk);
  EXPECT_EQ(v6("2001:db8::1", "ffff::").kind, static_cast<uint8_t>(RuleKind::kDst));
  // A longer prefix of the same kind counts instead of /0 (IPv4: the LPM
  // table against the probed /0; IPv6: two probed lengths).
  ASSERT_EQ(bl_->add(R("dst 10.0.0.0/8")), Blocklist::Result::kOk);
  ASSERT_EQ(bl_->add(R("dst 2001:db8::/32")), Blocklist::Result::kOk);
  EXPECT_EQ(which(v4("1.1.1.1", "10.1.1.1")), "dst 10.0.0.0/8");
  EXPECT_EQ(which(v4("1.1.1.1", "11.1.1.1")), "dst 0.0.0.0/0");
  EXPECT_EQ(which(v6("::1", "2001:db8::7")), "dst 2001:db8::/32");
  EXPECT_EQ(which(v6("::1", "2001:db9::7")), "dst ::/0");
}

// Pure-filter mode (--no-verify) gives each exact address kind its own
// filter entry; a prefix key's hash covers its kind already, and the
// workers' probe looks it up unsalted. (Salted on insert too, IPv6 prefixes
// and IPv4 /0 were never found in this mode: found in review.)
TEST_F(Prefixes, PureFilterModeFindsProbedPrefixes) {
  open("", nullptr, /*pure_filter=*/true);
  const auto src = static_cast<uint8_t>(RuleKind::kSrc), dst = static_cast<uint8_t>(RuleKind::kDst),
             ip = static_cast<uint8_t>(RuleKind::kIp);
  ASSERT_EQ(bl_->add(R("dst 2001:db8::/32")), Blocklist::Result::kOk);
  ASSERT_EQ(bl_->add(R("ip 2001:db9::/64")), Blocklist::Result::kOk);
  ASSERT_EQ(bl_->add(R("src 0.0.0.0/0")), Blocklist::Result::kOk);
  ASSERT_EQ(bl_->add(R("dst 10.0.0.0/8")), Blocklist::Result::kOk);  // IPv4 /1-/32: the LPM table
  EXPECT_EQ(v6("::1", "2001:db8::7", false).kind, dst);
  EXPECT_EQ(v6("2001:db8::7", "::1", false).kind, 0);  // a dst prefix is not a src one
  EXPECT_EQ(v6("2001:db9::1", "::1", false).kind, ip);
  EXPECT_EQ(v6("::1", "2001:db9::1", false).kind, ip);
  EXPECT_EQ(v4("1.2.3.4", "5.6.7.8", false).kind, src);
  ASSERT_EQ(bl_->del(R("src 0.0.0.0/0")), Blocklist::Result::kOk);
  EXPECT_EQ(v4("1.2.3.4", "10.6.7.8", false).kind, dst);
  EXPECT_EQ(v4("10.6.7.8", "1.2.3.4", false).kind, 0);
}

TEST_F(Prefixes, IpRulesCountTheSourceAddressesPrefixWhenBothMatch) {
  ASSERT_EQ(bl_->add(R("ip 10.0.0.0/8")), Blocklist::Result::kOk);
  ASSERT_EQ(bl_->add(R("ip 192.168.0.0/16")), Blocklist::Result::kOk);
  ASSERT_EQ(bl_->add(R("ip 2001:db8::/32")), Blocklist::Result::kOk);
  ASSERT_EQ(bl_->add(R("ip 2001:db9::/48")), Blocklist::Result::kOk);
  EXPECT_EQ(which(v4("10.1.1.1", "192.168.1.1")), "ip 10.0.0.0/8");
  EXPECT_EQ(which(v4("192.168.1.1", "10.1.1.1")), "ip 192.168.0.0/16");
  EXPECT_EQ(which(v4("1.1.1.1", "10.1.1.1")), "ip 10.0.0.0/8");
  EXPECT_EQ(which(v6("2001:db9::1", "2001:db8::1")), "ip 2001:db9::/48");
  EXPECT_EQ(which(v6("2001:db8::1", "2001:db9::1")), "ip 2001:db8::/32");
}

TEST_F(Prefixes, NestedIpv6PrefixesCountTheLongest) {
  for (const char* r : {"src 2001:db8::/32", "src 2001:db8:1::/48", "src 2001:db8:1:2::/64"})
    ASSERT_EQ(bl_->add(R(r)), Blocklist::Result::kOk);
  EXPECT_EQ(which(v6("2001:db8:1:2::9", "::1")), "src 2001:db8:1:2::/64");
  EXPECT_EQ(which(v6("2001:db8:1:3::9", "::1")), "src 2001:db8:1::/48");
  EXPECT_EQ(which(v6("2001:db8:2::9", "::1")), "src 2001:db8::/32");
  ASSERT_EQ(bl_->del(R("src 2001:db8:1::/48")), Blocklist::Result::kOk);
  EXPECT_EQ(which(v6("2001:db8:1:3::9", "::1")), "src 2001:db8::/32");
  EXPECT_EQ(which(v6("2001:db8:1:2::9", "::1")), "src 2001:db8:1:2::/64");
}

TEST_F(Prefixes, AddsBumpBothGenerationsRemovalsOnlyTheFullOneAndFreeTheSlot) {
  const uint64_t g0 = bl_->generation().load(), p0 = bl_->pass_generation().load();
  ASSERT_EQ(bl_->add(R("src 10.0.0.0/8")), Blocklist::Result::kOk);
  EXPECT_GT(bl_->generation().load(), g0);
  EXPECT_GT(bl_->pass_generation().load(), p0);
  const PrefixHit h = v4("10.0.0.1", "1.1.1.1");
  ASSERT_EQ(h.kind, static_cast<uint8_t>(RuleKind::kSrc));
  const uint64_t g1 = bl_->generation().load(), p1 = bl_->pass_generation().load();
  ASSERT_EQ(bl_->del(R("src 10.0.0.0/8")), Blocklist::Result::kOk);
  EXPECT_GT(bl_->generation().load(), g1);
  EXPECT_EQ(bl_->pass_generation().load(), p1);
  // A flow blocked by the prefix at generation g1 sees its slot freed since.
  EXPECT_GE(bl_->slot_removed_at()[h.slot].load(), g1);
  EXPECT_EQ(v4("10.0.0.1", "1.1.1.1").kind, 0);
}

TEST_F(Prefixes, FlushKindFlushBatchAndAtomicApply) {
  {
    const auto res = bl_->add_batch({R("src 10.0.0.0/8"), R("dst 10.0.0.0/8"), R("src 10.0.0.0/8"), R("ip ::/0")});
    ASSERT_EQ(res.result, Blocklist::Result::kOk);
    EXPECT_EQ(res.added, 3u);
    EXPECT_EQ(res.existed, 1u);
  }
  std::size_t n = 0;
  ASSERT_EQ(bl_->flush_kind(RuleKind::kSrc, &n), Blocklist::Result::kOk);
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(v4("10.0.0.1", "1.1.1.1").kind, 0);
  EXPECT_EQ(v4("1.1.1.1", "10.0.0.1").kind, static_cast<uint8_t>(RuleKind::kDst));
  // Atomic apply: a failing delete leaves the prefix add unapplied.
  Blocklist::Change add, del;
  add.op = Blocklist::Change::Op::kAdd;
  add.rule = R("src 172.16.0.0/12");
  del.op = Blocklist::Change::Op::kDel;
  del.rule = R("src 192.168.0.0/16");
  const auto out = bl_->apply({add, del}, /*atomic=*/true);
  EXPECT_EQ(out[0], Blocklist::Outcome::kNotApplied);
  EXPECT_EQ(out[1], Blocklist::Outcome::kAbsent);
  EXPECT_EQ(v4("172.16.0.1", "1.1.1.1").kind, 0);
  EXPECT_FALSE(bl_->contains(R("src 172.16.0.0/12")));
  ASSERT_EQ(bl_->flush(&n), Blocklist::Result::kOk);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(bl_->prefixes().size(), 0u);
  EXPECT_EQ(v6("2001:db8::1", "2001:db8::2").kind, 0);
}

// flush_kind deletes the kind's rules in one ordered pass of the store:
// every one of them, nothing of other kinds, expiring rules included, and
// the journal replays to the same state.
TEST_F(Prefixes, FlushKindLeavesOtherKindsAndReplaysFromTheJournal) {
  int64_t now = 1'000'000;
  const std::string dir = g_dir + "/flushkind" + std::to_string(g_instance);
  open(dir, &now);
  std::vector<Rule> rules;
  for (int i = 0; i < 300; ++i) {
    const std::string net = "10." + std::to_string(i / 256) + "." + std::to_string(i % 256);
    rules.push_back(R("src " + net + ".0/24"));
    rules.push_back(R("src " + net + ".7"));
    rules.push_back(R("dst " + net + ".0/25"));
  }
  ASSERT_EQ(bl_->add_batch(rules).result, Blocklist::Result::kOk);
  ASSERT_EQ(bl_->add(R("src 172.16.0.0/12"), 60'000), Blocklist::Result::kOk);  // expiring
  ASSERT_EQ(bl_->add(R("host keep.example")), Blocklist::Result::kOk);
  std::size_t n = 0;
  ASSERT_EQ(bl_->flush_kind(RuleKind::kSrc, &n), Blocklist::Result::kOk);
  EXPECT_EQ(n, 601u);
  auto check = [&] {
    EXPECT_EQ(bl_->size(), 301u);
    EXPECT_EQ(list().front(), "dst 10.0.0.0/25");
    EXPECT_EQ(v4("10.0.5.7", "1.1.1.1").kind, 0);
    EXPECT_EQ(v4("172.16.0.1", "1.1.1.1").kind, 0);
    EXPECT_EQ(v4("1.1.1.1", "10.1.2.9").kind, static_cast<uint8_t>(RuleKind::kDst));
    EXPECT_EQ(v4("1.1.1.1", "10.1.2.200").kind, 0);
    EXPECT_TRUE(bl_->contains(R("host keep.example")));
  };
  check();
  EXPECT_EQ(bl_->expire_due(), 0u);
  now += 120'000;
  EXPECT_EQ(bl_->expire_due(), 0u);  // the flushed rule's expiry went with it
  open(dir, &now);  // replays the journal
  check();
}

TEST_F(Prefixes, ExpiredPrefixesStopMatching) {
  int64_t now = 1'000'000;
  const std::string dir = g_dir + "/expiry" + std::to_string(g_instance);
  open(dir, &now);
  ASSERT_EQ(bl_->add(R("src 10.0.0.0/8"), 5000), Blocklist::Result::kOk);
  ASSERT_EQ(bl_->add(R("src 10.1.0.0/16")), Blocklist::Result::kOk);
  now += 6000;
  EXPECT_EQ(bl_->expire_due(), 1u);
  EXPECT_EQ(v4("10.2.0.1", "1.1.1.1").kind, 0);
  EXPECT_EQ(which(v4("10.1.0.1", "1.1.1.1")), "src 10.1.0.0/16");
}

TEST_F(Prefixes, PrefixesSurviveARestartFromTheJournal) {
  const std::string dir = g_dir + "/restart" + std::to_string(g_instance);
  open(dir);
  for (const char* r : {"src 10.99.0.0/24", "dst 2001:db8::/32", "ip 0.0.0.0/0", "src 10.99.0.7"})
    ASSERT_EQ(bl_->add(R(r)), Blocklist::Result::kOk) << r;
  ASSERT_EQ(bl_->del(R("ip 0.0.0.0/0")), Blocklist::Result::kOk);
  const std::vector<std::string> before = list();
  open(dir);  // closes the first blocklist, replays its journal
  EXPECT_EQ(list(), before);
  EXPECT_EQ(list(), (std::vector<std::string>{"src 10.99.0.0/24", "src 10.99.0.7", "dst 2001:db8::/32"}));
  EXPECT_EQ(bl_->prefixes().size(), 2u);
  EXPECT_EQ(which(v4("10.99.0.200", "1.1.1.1")), "src 10.99.0.0/24");
  EXPECT_EQ(v6("2001:db9::1", "2001:db8:ffff::1").kind, static_cast<uint8_t>(RuleKind::kDst));
  EXPECT_EQ(v4("10.98.0.1", "1.1.1.1").kind, 0);
}

}  // namespace
}  // namespace cg

int main(int argc, char** argv) { return cg::test::run_eal_tests(argc, argv, "prefix-test", &cg::g_dir); }
