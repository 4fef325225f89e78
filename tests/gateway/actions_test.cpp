// Per-rule actions in the Blocklist, in process (EAL for its memory, no
// ports; issue 10, `action=`): the byte the workers read per hit-counter
// slot follows every path that adds, changes, reuses or restores a rule —
// add, apply, apply_group (the Redis sync's), load, load replace, a slot
// reused by a rule without an action, and a restart from the state directory.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "control/blocklist.hpp"
#include "eal_test_main.hpp"
#include "rule_text.hpp"

namespace cg {
namespace {

std::string g_dir;

using test::R;
using Op = Blocklist::Change::Op;

class Actions : public testing::Test {
 protected:
  std::unique_ptr<Blocklist> open(const std::string& state_dir = "") {
    Blocklist::Options o;
    o.capacity = 1024;
    o.name = "act" + std::to_string(++seq_);
    o.state_dir = state_dir;
    std::string err;
    std::unique_ptr<Blocklist> b = Blocklist::create(o, &err);
    EXPECT_NE(b, nullptr) << err;
    return b;
  }
  // What a worker reads for a packet the rule blocks (RuleAction), -1 when absent.
  static int slot_action(const Blocklist& b, const Rule& r) {
    const std::string k = rule_key(r);
    const int64_t slot = b.exact().slot_of(key_hash128(k.data(), k.size()));
    return slot < 0 ? -1 : b.slot_actions()[slot].load();
  }
  static constexpr int kDefault = 0, kDrop = 1, kReject = 2;
  static int seq_;
};
int Actions::seq_ = 0;

TEST_F(Actions, AddSetsTheSlotsActionAndTheLatestAddChangesIt) {
  auto b = open();
  const Rule x = R("host x.example"), y = R("dst 192.0.2.1");
  EXPECT_EQ(b->add(x, 0, RuleAction::kReject), Blocklist::Result::kOk);
  EXPECT_EQ(b->add(y, 0, RuleAction::kDrop), Blocklist::Result::kOk);
  EXPECT_EQ(slot_action(*b, x), kReject);
  EXPECT_EQ(slot_action(*b, y), kDrop);
  EXPECT_EQ(b->action(x), RuleAction::kReject);
  EXPECT_EQ(b->add(x, 0, RuleAction::kReject), Blocklist::Result::kExists);
  EXPECT_EQ(b->add(x), Blocklist::Result::kUpdated);  // no action: the gateway's again
  EXPECT_EQ(slot_action(*b, x), kDefault);
  const auto out = b->apply({{Op::kAdd, x, 0, {}, RuleAction::kReject}, {Op::kAdd, y, 5000, {}, RuleAction::kDrop}}, false);
  EXPECT_EQ(out, (std::vector<Blocklist::Outcome>{Blocklist::Outcome::kActionUpdated, Blocklist::Outcome::kUpdated}));
  EXPECT_EQ(slot_action(*b, x), kReject);
  // Deleted and added again in one group: the lookup entry stays, the action is the last add's.
  b->apply({{Op::kDel, x, 0, {}, {}}, {Op::kAdd, x, 0, {}, RuleAction::kDrop}}, true);
  EXPECT_EQ(slot_action(*b, x), kDrop);
}

TEST_F(Actions, AReusedSlotDoesNotInheritTheDeletedRulesAction) {
  auto b = open();
  const Rule x = R("host x.example"), z = R("host z.example");
  ASSERT_EQ(b->add(x, 0, RuleAction::kReject), Blocklist::Result::kOk);
  const std::string k = rule_key(x);
  const int64_t slot = b->exact().slot_of(key_hash128(k.data(), k.size()));
  ASSERT_EQ(b->del(x), Blocklist::Result::kOk);
  ASSERT_EQ(b->add_batch(std::vector<Rule>{z}).added, 1u);  // a load: no per-rule action step after it
  const std::string kz = rule_key(z);
  ASSERT_EQ(b->exact().slot_of(key_hash128(kz.data(), kz.size())), slot);  // the freed slot
  EXPECT_EQ(slot_action(*b, z), kDefault);
}

// The Redis sync's path: a group's net effect per rule, its last add's action.
TEST_F(Actions, ApplyGroupEndsWithEachRulesLastAction) {
  auto b = open();
  const Rule x = R("host x.example"), y = R("src 198.51.100.9"), n = R("url n.example/a");
  ASSERT_EQ(b->add(x, 0, RuleAction::kReject), Blocklist::Result::kOk);
  ASSERT_EQ(b->add(y), Blocklist::Result::kOk);
  const auto out = b->apply_group({{Op::kAdd, x, 0, {}, {}},                      // back to the default
                                   {Op::kAdd, y, 0, {}, RuleAction::kReject},     // one given
                                   {Op::kAdd, n, 0, {}, RuleAction::kDrop},       // new,
                                   {Op::kAdd, n, 0, {}, RuleAction::kReject}});   // then changed
  EXPECT_EQ(out, (std::vector<Blocklist::Outcome>{Blocklist::Outcome::kActionUpdated, Blocklist::Outcome::kActionUpdated,
                                                  Blocklist::Outcome::kAdded, Blocklist::Outcome::kActionUpdated}));
  EXPECT_EQ(slot_action(*b, x), kDefault);
  EXPECT_EQ(slot_action(*b, y), kReject);
  EXPECT_EQ(slot_action(*b, n), kReject);
  EXPECT_EQ(b->action(n), RuleAction::kReject);
  // Unchanged: exists, nothing written.
  EXPECT_EQ(b->apply_group({{Op::kAdd, y, 0, {}, RuleAction::kReject}})[0], Blocklist::Outcome::kExists);
}

TEST_F(Actions, LoadsKeepAPresentRulesActionAndGiveNewRulesTheDefault) {
  auto b = open();
  const Rule x = R("host x.example"), e = R("host e.example"), n = R("host n.example");
  ASSERT_EQ(b->add(x, 0, RuleAction::kReject), Blocklist::Result::kOk);
  ASSERT_EQ(b->add(e, 60'000, RuleAction::kReject), Blocklist::Result::kOk);
  const Blocklist::BatchResult r = b->add_batch(std::vector<Rule>{x, e, n});
  EXPECT_EQ(r.added, 1u);
  EXPECT_EQ(r.updated, 1u);  // e: permanent now
  EXPECT_EQ(slot_action(*b, x), kReject);
  EXPECT_EQ(slot_action(*b, e), kReject);
  EXPECT_EQ(b->action(e), RuleAction::kReject);
  EXPECT_EQ(slot_action(*b, n), kDefault);
  ASSERT_EQ(b->add(R("host s.example"), 30'000, RuleAction::kReject), Blocklist::Result::kOk);
  Blocklist::KeyBatch keys;
  keys.add(R("host s.example"));
  const Blocklist::ReplaceResult rr = b->replace_set("default", keys);
  EXPECT_EQ(rr.result, Blocklist::Result::kOk);
  EXPECT_EQ(b->action(R("host s.example")), RuleAction::kReject);  // kept, and its action with it
  EXPECT_EQ(slot_action(*b, R("host s.example")), kReject);
}

TEST_F(Actions, ARestartRestoresEveryRulesAction) {
  const std::string dir = g_dir + "/restart";
  {
    auto b = open(dir);
    ASSERT_EQ(b->add(R("host x.example"), 0, RuleAction::kReject), Blocklist::Result::kOk);
    ASSERT_EQ(b->add(R("dst 192.0.2.0/24"), 0, RuleAction::kDrop), Blocklist::Result::kOk);
    ASSERT_EQ(b->add(R("host plain.example")), Blocklist::Result::kOk);
  }
  auto b = open(dir);
  EXPECT_EQ(slot_action(*b, R("host x.example")), kReject);
  EXPECT_EQ(slot_action(*b, R("dst 192.0.2.0/24")), kDrop);
  EXPECT_EQ(slot_action(*b, R("host plain.example")), kDefault);
  std::vector<std::string> listed;
  b->for_each_in_set(std::nullopt, "", std::nullopt,
                     [&](std::string_view t, int64_t, std::string_view, RuleAction a) {
                       listed.push_back(std::string(t) + " " + std::string(rule_action_name(a)));
                     });
  EXPECT_EQ(listed, (std::vector<std::string>{"dst 192.0.2.0/24 drop", "host plain.example ", "host x.example reject"}));
}

}  // namespace
}  // namespace cg

int main(int argc, char** argv) { return cg::test::run_eal_tests(argc, argv, "actions_test", &cg::g_dir); }
