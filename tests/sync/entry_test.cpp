#include <gtest/gtest.h>

#include "cuckoogate/sync/entry.hpp"

namespace cg::sync {
namespace {

Rule rule(std::string_view text) {
  RuleParse p = parse_rule(text);
  EXPECT_TRUE(p.rule) << text;
  return *p.rule;
}

std::string garbage(const Fields& f) {
  EntryDecode d = decode_entry(f);
  EXPECT_FALSE(d.entry);
  EXPECT_FALSE(d.error.empty());
  return d.error;
}

TEST(Entry, AddWithExpiryRoundTrips) {
  Entry e;
  e.op = EntryOp::kAdd;
  e.changes.push_back({false, rule("host X.Example."), 1700000000123});
  e.origin = "gw-a";
  const Fields f = encode_entry(e);
  EXPECT_EQ(f, (Fields{{"op", "add"}, {"rule", "host x.example"}, {"ttl", "1700000000123"}, {"origin", "gw-a"}}));
  EntryDecode d = decode_entry(f);
  ASSERT_TRUE(d.entry) << d.error;
  EXPECT_EQ(d.entry->op, EntryOp::kAdd);
  ASSERT_EQ(d.entry->changes.size(), 1u);
  EXPECT_EQ(format_rule(d.entry->changes[0].rule), "host x.example");
  EXPECT_EQ(d.entry->changes[0].expiry_unix_ms, 1700000000123);
  EXPECT_EQ(d.entry->origin, "gw-a");
}

TEST(Entry, WhatRedisCliWritesIsCanonicalised) {
  // redis-cli XADD cuckoogate:rules '*' op add rule 'host WWW.Example.com'
  EntryDecode d = decode_entry({{"op", "add"}, {"rule", "host WWW.Example.com"}, {"note", "by hand"}});
  ASSERT_TRUE(d.entry) << d.error;
  EXPECT_EQ(format_rule(d.entry->changes[0].rule), "host www.example.com");
  EXPECT_EQ(d.entry->changes[0].expiry_unix_ms, 0);
  EXPECT_TRUE(d.entry->origin.empty());
}

// The reader decodes page after page into the same Entry objects: nothing of
// an entry may leak into the next one decoded into the same storage.
TEST(Entry, DecodingIntoAReusedEntryKeepsNothingOfThePreviousOne) {
  const std::vector<Fields> in = {
      {{"op", "batch"}, {"changes", "add 1700000000123 ip 10.0.0.1\ndel host a.example\n"}, {"origin", "gw-a"},
       {"outbox", "7.1.0"}},
      {{"op", "add"}, {"rule", "host b.example"}},
      {{"op", "flush"}, {"kind", "host"}, {"origin", "gw-b"}},
      {{"op", "del"}, {"rule", "ip 10.0.0.2"}},
      {{"op", "add"}, {"rule", "ip 10.0.0.3"}, {"ttl", "1700000000999"}},
      {{"op", "flush"}},
      {{"op", "load"}, {"changes", "add 0 src 192.0.2.1\n"}},
  };
  Entry reused;
  std::string err;
  for (const Fields& f : in) {
    FieldViews v;
    for (const auto& [k, val] : f) v.emplace_back(k, val);
    ASSERT_TRUE(decode_entry_into(v, &reused, &err)) << err;
    EntryDecode fresh = decode_entry(f);
    ASSERT_TRUE(fresh.entry) << fresh.error;
    EXPECT_EQ(encode_entry(reused), encode_entry(*fresh.entry)) << f[0].second;
    EXPECT_EQ(reused.kind, fresh.entry->kind);
  }
  // A refused entry says why; the next one decodes whole again.
  EXPECT_FALSE(decode_entry_into({{"op", "add"}, {"rule", "host x.example"}, {"ttl", "soon"}}, &reused, &err));
  EXPECT_NE(err.find("ttl"), std::string::npos) << err;
  ASSERT_TRUE(decode_entry_into({{"op", "add"}, {"rule", "host c.example"}}, &reused, &err)) << err;
  EXPECT_EQ(encode_entry(reused), (Fields{{"op", "add"}, {"rule", "host c.example"}}));
}

TEST(Entry, FlushOfAKindAndOfAll) {
  EntryDecode all = decode_entry({{"op", "flush"}});
  ASSERT_TRUE(all.entry);
  EXPECT_FALSE(all.entry->kind);
  Entry e;
  e.op = EntryOp::kFlush;
  e.kind = RuleKind::kHost;
  EntryDecode d = decode_entry(encode_entry(e));
  ASSERT_TRUE(d.entry) << d.error;
  EXPECT_EQ(d.entry->kind, RuleKind::kHost);
}

TEST(Entry, BatchAndLoadRoundTrip) {
  Entry e;
  e.op = EntryOp::kBatch;
  e.changes.push_back({false, rule("ip 10.0.0.1"), 0});
  e.changes.push_back({true, rule("host a.example"), 0});
  e.changes.push_back({false, rule("url example.com/x?y=1"), 99});
  EntryDecode d = decode_entry(encode_entry(e));
  ASSERT_TRUE(d.entry) << d.error;
  ASSERT_EQ(d.entry->changes.size(), 3u);
  EXPECT_FALSE(d.entry->changes[0].del);
  EXPECT_TRUE(d.entry->changes[1].del);
  EXPECT_EQ(d.entry->changes[2].expiry_unix_ms, 99);
  EXPECT_EQ(format_rule(d.entry->changes[2].rule), format_rule(rule("url example.com/x?y=1")));
  e.op = EntryOp::kLoad;
  garbage(encode_entry(e));  // a load holds adds only
  e.changes.erase(e.changes.begin() + 1);
  d = decode_entry(encode_entry(e));
  ASSERT_TRUE(d.entry) << d.error;
  EXPECT_EQ(d.entry->changes.size(), 2u);
}

// A rule's own action (issue 10): a field of an add entry, a word before the
// rule in a change line; absent for the default, refused when it is no action.
TEST(Entry, ActionsRoundTripInEntriesAndChangeLines) {
  Entry e;
  e.op = EntryOp::kAdd;
  e.changes.push_back({false, rule("host x.example"), 0, RuleAction::kReject});
  const Fields f = encode_entry(e);
  EXPECT_EQ(f, (Fields{{"op", "add"}, {"rule", "host x.example"}, {"action", "reject"}}));
  EntryDecode d = decode_entry(f);
  ASSERT_TRUE(d.entry) << d.error;
  EXPECT_EQ(d.entry->changes[0].action, RuleAction::kReject);
  e.changes[0].action = RuleAction::kDefault;
  EXPECT_EQ(encode_entry(e), (Fields{{"op", "add"}, {"rule", "host x.example"}}));
  e.op = EntryOp::kBatch;
  e.changes = {{false, rule("ip 10.0.0.1"), 0, RuleAction::kDrop},
               {false, rule("host a.example"), 7, RuleAction::kReject},
               {false, rule("host b.example"), 0},
               {true, rule("host c.example"), 0}};
  const Fields bf = encode_entry(e);
  EXPECT_EQ(bf[1].second, "add 0 action=drop ip 10.0.0.1\nadd 7 action=reject host a.example\nadd 0 host b.example\n"
                          "del host c.example\n");
  d = decode_entry(bf);
  ASSERT_TRUE(d.entry) << d.error;
  ASSERT_EQ(d.entry->changes.size(), 4u);
  EXPECT_EQ(d.entry->changes[0].action, RuleAction::kDrop);
  EXPECT_EQ(d.entry->changes[1].action, RuleAction::kReject);
  EXPECT_EQ(d.entry->changes[1].expiry_unix_ms, 7);
  EXPECT_EQ(d.entry->changes[2].action, RuleAction::kDefault);
  // A reused entry forgets an earlier action.
  Entry reused;
  std::string err;
  ASSERT_TRUE(decode_entry_into({{"op", "add"}, {"rule", "host x.example"}, {"action", "reject"}}, &reused, &err));
  ASSERT_TRUE(decode_entry_into({{"op", "add"}, {"rule", "host x.example"}}, &reused, &err));
  EXPECT_EQ(reused.changes[0].action, RuleAction::kDefault);
  std::vector<EntryChange> snap;
  std::string at;
  const std::vector<EntryChange> adds(e.changes.begin(), e.changes.begin() + 3);  // a snapshot holds adds
  ASSERT_TRUE(decode_snapshot(encode_snapshot(adds, "1-0"), &snap, &at, &err)) << err;
  EXPECT_EQ(snap[1].action, RuleAction::kReject);
  garbage({{"op", "add"}, {"rule", "host a.example"}, {"action", "rst"}});
  garbage({{"op", "add"}, {"rule", "host a.example"}, {"action", "default"}});
  garbage({{"op", "del"}, {"rule", "host a.example"}, {"action", "drop"}});
  garbage({{"op", "batch"}, {"changes", "add 0 action=rst host a.example"}});
  garbage({{"op", "batch"}, {"changes", "add 0 action=reject"}});
  garbage({{"op", "batch"}, {"changes", "del action=reject host a.example"}});
  garbage({{"op", "load"}, {"changes", "add 0 action=reject host a.example"}});  // a load has none
}

TEST(Entry, GarbageIsRejectedWhole) {
  garbage({});
  garbage({{"rule", "host a.example"}});
  garbage({{"op", "ad"}, {"rule", "host a.example"}});
  garbage({{"op", "add"}});
  garbage({{"op", "add"}, {"rule", "host"}});
  garbage({{"op", "add"}, {"rule", "host a.example # comment"}});
  garbage({{"op", "add"}, {"rule", "host a.example"}, {"rule", "host b.example"}});
  garbage({{"op", "add"}, {"op", "del"}, {"rule", "host a.example"}});
  garbage({{"op", "add"}, {"rule", "host a.example"}, {"ttl", "-5"}});
  garbage({{"op", "add"}, {"rule", "host a.example"}, {"ttl", "0"}});
  garbage({{"op", "add"}, {"rule", "host a.example"}, {"ttl", "12s"}});
  garbage({{"op", "del"}, {"rule", "host a.example"}, {"ttl", "5"}});
  garbage({{"op", "flush"}, {"kind", "hosts"}});
  garbage({{"op", "flush"}, {"rule", "host a.example"}});
  garbage({{"op", "batch"}, {"changes", ""}});
  garbage({{"op", "batch"}, {"changes", "add host a.example\n"}});       // no expiry
  garbage({{"op", "batch"}, {"changes", "add 0 host a.example\nput 0 ip 1.2.3.4"}});
  garbage({{"op", "batch"}, {"changes", "add 0 host a.example\n\n"}});  // empty line
  garbage({{"op", "batch"}, {"rule", "host a.example"}, {"changes", "add 0 host a.example"}});
}

TEST(Snapshot, RoundTripsAndRefusesDamage) {
  std::vector<EntryChange> rules = {{false, rule("ip 10.0.0.1"), 0}, {false, rule("host b.example"), 5}};
  const std::string s = encode_snapshot(rules, "12-3");
  std::vector<EntryChange> back;
  std::string at, err;
  ASSERT_TRUE(decode_snapshot(s, &back, &at, &err)) << err;
  EXPECT_EQ(at, "12-3");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(format_rule(back[1].rule), "host b.example");
  EXPECT_EQ(back[1].expiry_unix_ms, 5);
  EXPECT_TRUE(decode_snapshot(encode_snapshot({}, "1-0"), &back, &at, &err));
  EXPECT_TRUE(back.empty());
  EXPECT_FALSE(decode_snapshot("cuckoogate-snapshot 2 1-0\n", &back, &at, &err));
  EXPECT_FALSE(decode_snapshot(s + "del host b.example\n", &back, &at, &err));
  EXPECT_FALSE(decode_snapshot("cuckoogate-snapshot 1 \n", &back, &at, &err));
}

TEST(Entry, OutboxGroupsRoundTripAndRefuseAnythingElse) {
  std::vector<Entry> g(4);
  g[0].op = EntryOp::kAdd;
  g[0].changes.push_back({false, rule("host Q.example"), 1700000000000});
  g[1].op = EntryOp::kDel;
  g[1].changes.push_back({true, rule("ip 192.0.2.1"), 0});
  g[2].op = EntryOp::kFlush;
  g[3].op = EntryOp::kFlush;
  g[3].kind = RuleKind::kHost;
  const std::string text = encode_outbox_group(g);
  EXPECT_EQ(text, "cuckoogate-outbox 1\nadd 1700000000000 host q.example\ndel ip 192.0.2.1\nflush\nflush host\n");
  std::vector<Entry> back;
  std::string err;
  ASSERT_TRUE(decode_outbox_group(text, &back, &err)) << err;
  ASSERT_EQ(back.size(), 4u);
  EXPECT_EQ(back[0].op, EntryOp::kAdd);
  EXPECT_EQ(back[0].changes[0].expiry_unix_ms, 1700000000000);
  EXPECT_EQ(back[1].op, EntryOp::kDel);
  EXPECT_EQ(back[2].op, EntryOp::kFlush);
  EXPECT_FALSE(back[2].kind);
  EXPECT_EQ(back[3].kind, RuleKind::kHost);
  for (const char* bad : {"", "cuckoogate-outbox 1\n", "cuckoogate-outbox 2\nflush\n",
                          "cuckoogate-outbox 1\nflush nothing\n", "cuckoogate-outbox 1\nadd host x.example\n",
                          "cuckoogate-outbox 1\nbatch\n"}) {
    err.clear();
    EXPECT_FALSE(decode_outbox_group(bad, &back, &err)) << bad;
    EXPECT_FALSE(err.empty()) << bad;
  }
}

TEST(Entry, TheOutboxTokenRoundTrips) {
  Entry e;
  e.op = EntryOp::kFlush;
  e.origin = "gw";
  e.outbox = "1700000000000.3.1";
  const Fields f = encode_entry(e);
  EXPECT_EQ(f.back(), (std::pair<std::string, std::string>{"outbox", "1700000000000.3.1"}));
  EntryDecode d = decode_entry(f);
  ASSERT_TRUE(d.entry) << d.error;
  EXPECT_EQ(d.entry->outbox, "1700000000000.3.1");
}

}  // namespace
}  // namespace cg::sync
