// A rule's action byte in the rule store (issue 10, per-rule `action=`): the
// store keeps it for the gateway without reading it. It is journalled (record
// version 3, written only for a rule that has one), replayed, snapshotted and
// moved with its rule; the latest add defines it, as it defines the expiry.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cuckoogate/store/rule_store.hpp"
#include "test_util.hpp"

namespace cg::store {
namespace {

constexpr std::uint8_t kReject = 2;  // any non-zero byte: the store does not read it

std::unique_ptr<RuleStore> open_store(const std::string& dir) {
  RuleStore::Options o;
  o.state_dir = dir;
  std::unique_ptr<RuleStore> s;
  const Status st = RuleStore::open(o, &s);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return s;
}

std::uint8_t action_of(const RuleStore& s, std::string_view key) {
  const auto m = s.get(key);
  EXPECT_TRUE(m.has_value()) << key;
  return m ? m->action : 0xff;
}

TEST(RecordActions, AnActionIsVersionThreeAndNoActionIsEncodedAsBefore) {
  StoreRecord r;
  r.op = RecordOp::add;
  r.id = 9;
  r.key = "k";
  r.text = "t";
  std::string plain;
  encode_record(r, &plain);
  EXPECT_EQ(plain[1], 1);  // no set, no action: what the oldest readers read
  r.action = kReject;
  std::string p;
  encode_record(r, &p);
  EXPECT_EQ(p[1], 3);
  EXPECT_EQ(p.size(), plain.size() + 1);
  EXPECT_EQ(static_cast<std::uint8_t>(p[kStoreRecordFixed + 1]), kReject);  // after key "k", before the text
  StoreRecord back;
  ASSERT_TRUE(decode_record(p, &back));
  EXPECT_EQ(back, r);
  r.set = "ads";  // with a set: the byte follows the set name
  p.clear();
  encode_record(r, &p);
  EXPECT_EQ(p[1], 3);
  ASSERT_TRUE(decode_record(p, &back));
  EXPECT_EQ(back, r);
  std::string via_parts;
  encode_add_record(9, 0, 0, "k", "ads", "t", kReject, &via_parts);
  EXPECT_EQ(via_parts, p);
}

TEST(RecordActions, MalformedVersionThreeRecordsDoNotDecode) {
  StoreRecord r, back;
  r.op = RecordOp::add;
  r.key = "k";
  r.action = kReject;
  std::string p;
  encode_record(r, &p);
  ASSERT_TRUE(decode_record(p, &back));
  std::string cut = p.substr(0, p.size() - 1);  // no action byte
  EXPECT_FALSE(decode_record(cut, &back));
  std::string zero = p;
  zero.back() = 0;  // an action of 0 is written as version 1 or 2, never 3
  EXPECT_FALSE(decode_record(zero, &back));
  std::string del = p;
  del[0] = static_cast<char>(RecordOp::del);  // only an add has an action
  EXPECT_FALSE(decode_record(del, &back));
  std::string keep = p;
  keep.back() = static_cast<char>(kKeepAction);  // a request's sentinel, never stored
  EXPECT_FALSE(decode_record(keep, &back));
  std::string v4 = p;
  v4[1] = 4;
  EXPECT_FALSE(decode_record(v4, &back));
  // A del record with an action set in memory is encoded without it.
  r.op = RecordOp::del;
  p.clear();
  encode_record(r, &p);
  EXPECT_EQ(p[1], 1);
  ASSERT_TRUE(decode_record(p, &back));
  EXPECT_EQ(back.action, 0);
}

TEST(RuleStoreActions, TheLatestAddDefinesTheActionAndKeepsTheRuleItsIdentity) {
  test::TempDir dir;
  auto s = open_store(dir.path());
  RuleMeta added;
  ASSERT_TRUE(s->add("r", "", 0, &added, kReject).ok());
  EXPECT_EQ(added.action, kReject);
  EXPECT_EQ(action_of(*s, "r"), kReject);
  EXPECT_EQ(s->side_entries(), 1U);  // an action is kept beside the packed node
  EXPECT_EQ(s->add("r", "", 0, nullptr, kReject).code(), Errc::exists);  // nothing to change
  const Status st = s->add("r", "", 0);  // no action given: the rule's goes
  EXPECT_EQ(st.code(), Errc::updated) << st.to_string();
  EXPECT_EQ(action_of(*s, "r"), 0);
  EXPECT_EQ(s->get("r")->id, added.id);
  EXPECT_EQ(s->get("r")->added_unix_ms, added.added_unix_ms);
  EXPECT_EQ(s->side_entries(), 0U);
  EXPECT_EQ(s->add("r", "", 0).code(), Errc::exists);
  EXPECT_EQ(s->add("r", "", 0, nullptr, kReject).code(), Errc::updated);
  EXPECT_EQ(action_of(*s, "r"), kReject);
  EXPECT_EQ(s->get("r")->id, added.id);
}

// kKeepAction (a load's requests): a present rule keeps its action, also
// when the add changes its lifetime; a new rule gets none.
TEST(RuleStoreActions, KeepActionLeavesAPresentRulesActionAndGivesANewRuleNone) {
  test::TempDir dir;
  auto s = open_store(dir.path());
  ASSERT_TRUE(s->add("kept", "", 0, nullptr, kReject).ok());
  ASSERT_TRUE(s->add("expiring", "", 60'000, nullptr, kReject).ok());
  std::vector<Errc> res;
  const RuleStore::AddRequest reqs[] = {{"expiring", "", 0, "", kKeepAction},
                                        {"kept", "", 0, "", kKeepAction},
                                        {"new", "", 0, "", kKeepAction}};
  ASSERT_TRUE(s->add_batch(reqs, &res).ok());
  EXPECT_EQ(res, (std::vector<Errc>{Errc::updated, Errc::exists, Errc::ok}));  // a lifetime change only
  EXPECT_EQ(action_of(*s, "kept"), kReject);
  EXPECT_EQ(action_of(*s, "expiring"), kReject);
  EXPECT_EQ(s->get("expiring")->expiry_unix_ms, 0);
  EXPECT_EQ(action_of(*s, "new"), 0);
  using Op = RuleStore::Change::Op;
  const RuleStore::Change ch[] = {{Op::add, "kept", "", 5000, "", kKeepAction},
                                  {Op::add, "new2", "", 0, "", kKeepAction}};
  ASSERT_TRUE(s->apply(ch, &res).ok());
  EXPECT_EQ(action_of(*s, "kept"), kReject);
  EXPECT_EQ(action_of(*s, "new2"), 0);
  s.reset();
  s = open_store(dir.path());
  EXPECT_EQ(action_of(*s, "kept"), kReject);
  EXPECT_EQ(action_of(*s, "expiring"), kReject);
}

// Every write path carries the action: add_batch, apply (a repeated key: the
// unordered path) and apply with increasing keys (the ordered path, the Redis
// sync's), and restarts from the journal and from a snapshot restore it.
TEST(RuleStoreActions, EveryWritePathJournalsItAndRestartsRestoreIt) {
  test::TempDir dir;
  {
    auto s = open_store(dir.path());
    std::vector<Errc> res;
    const RuleStore::AddRequest reqs[] = {{"b1", "", 0, "", kReject}, {"b2", "", 0, "", 0}};
    ASSERT_TRUE(s->add_batch(reqs, &res).ok());
    using Op = RuleStore::Change::Op;
    const RuleStore::Change unordered[] = {{Op::add, "u1", "", 0, "", kReject},
                                           {Op::add, "u1", "", 0, "", kReject},  // exists
                                           {Op::add, "b2", "", 0, "", kReject}};  // an update
    ASSERT_TRUE(s->apply(unordered, &res).ok());
    EXPECT_EQ(res, (std::vector<Errc>{Errc::ok, Errc::exists, Errc::updated}));
    const RuleStore::Change ordered[] = {{Op::add, "o1", "", 0, "", kReject},
                                         {Op::add, "o2", "", 0, "", 0},
                                         {Op::add, "u1", "", 0, "", 0}};  // back to none
    ASSERT_TRUE(s->apply(ordered, &res).ok());
    EXPECT_EQ(res, (std::vector<Errc>{Errc::ok, Errc::ok, Errc::updated}));
  }
  auto check = [](const RuleStore& s) {
    EXPECT_EQ(action_of(s, "b1"), kReject);
    EXPECT_EQ(action_of(s, "b2"), kReject);
    EXPECT_EQ(action_of(s, "u1"), 0);
    EXPECT_EQ(action_of(s, "o1"), kReject);
    EXPECT_EQ(action_of(s, "o2"), 0);
    EXPECT_EQ(s.side_entries(), 3U);
  };
  {
    auto s = open_store(dir.path());  // from the journal
    check(*s);
    ASSERT_TRUE(s->snapshot().ok());
  }
  auto s = open_store(dir.path());  // from the snapshot
  check(*s);
  // A move keeps the rule's action.
  std::vector<RuleStore::Move> moves{{"b1", "b1-new", ""}};
  std::vector<Errc> res;
  ASSERT_TRUE(s->move(moves, &res).ok());
  EXPECT_EQ(action_of(*s, "b1-new"), kReject);
  s.reset();
  s = open_store(dir.path());
  EXPECT_EQ(action_of(*s, "b1-new"), kReject);
  // A merge (the same rule in both forms) keeps the present rule's action:
  // only a newer version writes under the newer key (docs/store.md).
  moves = {{"o1", "o2", ""}};
  ASSERT_TRUE(s->move(moves, &res).ok());
  EXPECT_EQ(res, std::vector<Errc>{Errc::exists});
  EXPECT_FALSE(s->get("o1").has_value());
  EXPECT_EQ(action_of(*s, "o2"), 0);
  s.reset();
  s = open_store(dir.path());
  EXPECT_EQ(action_of(*s, "o2"), 0);
  EXPECT_FALSE(s->get("o1").has_value());
}

}  // namespace
}  // namespace cg::store
