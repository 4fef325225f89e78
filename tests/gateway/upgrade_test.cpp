// State written by older versions, restored by this one (in process, EAL
// for the Blocklist's memory, no ports; docs/store.md, "Keys and texts").
// The state directory is made byte by byte as those versions wrote it: a
// snapshot and a journal of version-1 records carrying rule texts, with url
// rules under the keys they had before URL canonicalisation (ea0d011).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "control/blocklist.hpp"
#include "cuckoogate/store/durable_log.hpp"
#include "eal_test_main.hpp"
#include "rule_text.hpp"

namespace cg {
std::string g_dir;
namespace {

using test::R;

int g_instance = 0;
constexpr int64_t kT0 = 1'700'000'000'000;  // when the old version wrote the state

// An add record's payload as versions before named sets wrote it (version 1,
// bytes 2-3 reserved, the rule text after the key), and a del's.
std::string v1_add(std::string_view key, std::string_view text, uint64_t id, int64_t expiry = 0) {
  std::string p(32, '\0');
  p[0] = 1;  // add
  p[1] = 1;  // version 1
  const auto key_len = static_cast<uint32_t>(key.size());
  std::memcpy(&p[4], &key_len, 4);
  std::memcpy(&p[8], &id, 8);
  const int64_t added = kT0;
  std::memcpy(&p[16], &added, 8);
  std::memcpy(&p[24], &expiry, 8);
  p.append(key);
  p.append(text);
  return p;
}
std::string v1_del(std::string_view key) {
  std::string p = v1_add(key, "", 0);
  p[0] = 2;  // del
  std::memset(&p[16], 0, 8);
  return p;
}

// Order keys as the old version made them: a url rule's is the kind byte
// (6) and its text as parsed then, before canonicalisation.
std::string old_url_key(std::string_view url) {
  std::string k(1, '\x06');  // appended: GCC 12's -Wrestrict misfires on "lit" + std::string
  k += url;
  return k;
}
const std::string kHostKey("\x07" "example\0a\0", 11);  // host a.example: labels from the top
const std::string kSrcKey("\x02\x04\xc0\x00\x02\x01", 6);  // src 192.0.2.1

// What a worker finds for a rule: the filter reports its key and the exact
// set confirms it (the key is the one classify() emits for traffic).
bool found(const Blocklist& bl, const Rule& r) {
  const LookupTables& t = *bl.tables().load(std::memory_order_acquire);
  const std::string key = rule_key(r);
  RuleKind kind;
  uint32_t slot;
  return t.filter->contains(key_hash(key.data(), key.size())) &&
         t.exact->contains(key_hash128(key.data(), key.size()), &kind, &slot);
}

Rule url_as_stored(std::string name) {  // a url rule in a form parse_rule no longer makes
  Rule r;
  r.kind = RuleKind::kUrl;
  r.name = std::move(name);
  return r;
}

class Upgrade : public testing::Test {
 protected:
  // Snapshot (records 1-4) and journal (5-8) of the old version.
  void write_old_state() {
    dir_ = g_dir + "/state" + std::to_string(++g_instance);
    std::unique_ptr<store::DurableLog> log;
    const auto none = [](uint64_t, std::string_view) {};
    ASSERT_TRUE(store::DurableLog::open({dir_, false}, none, none, &log, nullptr).ok());
    const std::vector<std::string> snap = {
        v1_add(old_url_key("example.com//a/./b%7ec"), "url example.com//a/./b%7ec", 1),
        v1_add(old_url_key("example.com/y"), "url example.com/y", 2, kT0 + 3'600'000),
        v1_add(kHostKey, "host a.example", 3),
        v1_add(kSrcKey, "src 192.0.2.1", 4),
    };
    for (const auto& p : snap) ASSERT_TRUE(log->append(p).ok());
    uint64_t seq = 0;
    ASSERT_TRUE(log->rotate(&seq).ok());
    ASSERT_EQ(seq, 4u);
    std::size_t next = 0;
    ASSERT_TRUE(log->write_snapshot(seq, [&](std::string* payload) {
                       if (next == snap.size()) return false;
                       *payload = snap[next++];
                       return true;
                     }).ok());
    for (const auto& p : {
             // The canonical form of example.com/y, which is present with an expiry.
             v1_add(old_url_key("example.com/x/../y"), "url example.com/x/../y", 5),
             v1_add(old_url_key("example.com/%7Ettl"), "url example.com/%7Ettl", 6, kT0 + 7'200'000),
             v1_add(old_url_key("example.com/gone//"), "url example.com/gone//", 7),
             v1_del(old_url_key("example.com/gone//")),
         })
      ASSERT_TRUE(log->append(p).ok());
    ASSERT_TRUE(log->sync().ok());
  }
  void open(std::vector<std::string>* notes) {
    bl_.reset();
    Blocklist::Options o;
    o.capacity = 1024;
    o.name = "up" + std::to_string(++g_instance);
    o.state_dir = dir_;
    o.clock = [] { return kT0 + 1000; };
    std::string err;
    bl_ = Blocklist::create(o, &err, notes);
    ASSERT_NE(bl_, nullptr) << err;
  }
  // url rules as listed: text and remaining lifetime.
  std::vector<std::pair<std::string, int64_t>> urls() const {
    std::vector<std::pair<std::string, int64_t>> out;
    bl_->for_each(RuleKind::kUrl, "", [&](std::string_view t, int64_t ttl) { out.emplace_back(t, ttl); });
    return out;
  }
  std::string dir_;
  std::unique_ptr<Blocklist> bl_;
};

TEST_F(Upgrade, UrlRulesStoredBeforeCanonicalisationBlockInTheirCanonicalForm) {
  write_old_state();
  std::vector<std::string> notes;
  open(&notes);
  bool noted = false;
  for (const auto& n : notes)
    noted = noted || n == "moved 3 rule(s) stored in an older canonical form to their canonical form"
                          " (1 of them present in both forms: merged)";
  EXPECT_TRUE(noted) << ::testing::PrintToString(notes);

  // Every rule of the old state, the url rules in canonical form; the one
  // stored in both forms is one rule, and lives as long as the longer.
  EXPECT_EQ(bl_->size(), 5u);
  EXPECT_EQ(urls(), (std::vector<std::pair<std::string, int64_t>>{
                        {"url example.com/a/b~c", 0}, {"url example.com/y", 0}, {"url example.com/~ttl", 7'199'000}}));
  for (const char* text : {"url example.com/a/b~c", "url example.com/y", "url example.com/~ttl", "host a.example",
                           "src 192.0.2.1"}) {
    EXPECT_TRUE(bl_->contains(R(text))) << text;
    EXPECT_TRUE(found(*bl_, R(text))) << text << ": not what the workers look up";
  }
  // The old forms are gone from the lookup tables and the store.
  for (const char* old : {"example.com//a/./b%7ec", "example.com/x/../y", "example.com/%7Ettl"}) {
    EXPECT_FALSE(found(*bl_, url_as_stored(old))) << old;
    EXPECT_FALSE(bl_->contains(url_as_stored(old))) << old;
  }
  EXPECT_FALSE(bl_->contains(R("url example.com/gone/")));

  // The moves are journalled: a restart moves nothing and finds the same.
  const auto before = urls();
  notes.clear();
  open(&notes);
  for (const auto& n : notes) EXPECT_EQ(n.find("moved"), std::string::npos) << n;
  EXPECT_EQ(urls(), before);
  EXPECT_EQ(bl_->size(), 5u);
  EXPECT_TRUE(found(*bl_, R("url example.com/a/b~c")));
  // And `del` of its text finds a moved rule.
  EXPECT_EQ(bl_->del(R("url example.com/a/b~c")), Blocklist::Result::kOk);
  EXPECT_FALSE(found(*bl_, R("url example.com/a/b~c")));
}

}  // namespace
}  // namespace cg

int main(int argc, char** argv) { return cg::test::run_eal_tests(argc, argv, "upgrade-test", &cg::g_dir); }
