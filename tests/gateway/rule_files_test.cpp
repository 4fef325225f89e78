// read_rule_files: rule files named on the command line or in the
// configuration are regular files of bounded size; a directory, FIFO, device
// or oversized file stops the start with a clear error instead of loading
// nothing, hanging or exhausting memory (issue 9, item 3).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "gateway/rule_files.hpp"
#include "scratch_files.hpp"

namespace cg {
namespace {

class RuleFiles : public testing::Test {
 protected:
  // Rules already in `out_` must survive a failed read.
  void SetUp() override { out_ = parse_rules("src 192.0.2.1\n", false).rules; }
  std::string write(const std::string& name, const std::string& text) { return dir_.write(name, text); }
  // read_rule_files on `files`, returning promptly or failing the test.
  bool read(const std::vector<std::string>& files) {
    err_.clear();
    const auto r = test::returns_within(std::chrono::seconds(10), files,
                                        [&] { return read_rule_files(files, out_, &err_); });
    if (!r) ADD_FAILURE() << "read_rule_files blocked for 10 s";
    return r.value_or(true);
  }
  void expect_untouched() {
    ASSERT_EQ(out_.size(), 1u);
    EXPECT_EQ(format_rule(out_[0]), "src 192.0.2.1");
  }

  test::ScratchDir dir_;
  std::string err_;
  std::vector<Rule> out_;
};

TEST_F(RuleFiles, EveryFileIsAppendedInOrder) {
  ASSERT_TRUE(read({write("a", "host example.org\n"), write("b", "# nothing\n"),
                    write("c", "dst 2001:db8::7\n")}))
      << err_;
  ASSERT_EQ(out_.size(), 3u);
  EXPECT_EQ(format_rule(out_[1]), "host example.org");
  EXPECT_EQ(format_rule(out_[2]), "dst 2001:db8::7");
}

TEST_F(RuleFiles, EmptyFileAddsNothing) {
  ASSERT_TRUE(read({write("empty", "")})) << err_;
  expect_untouched();
}

TEST_F(RuleFiles, BadLineIsNamedWithFileLineAndColumn) {
  const std::string f = write("bad", "host example.org\nhost bad..x\n");
  EXPECT_FALSE(read({f}));
  EXPECT_EQ(err_.rfind(f + ":2:", 0), 0u) << err_;
  expect_untouched();
}

TEST_F(RuleFiles, DirectoryIsAnErrorNotAnEmptyFile) {
  EXPECT_FALSE(read({dir_.path()}));
  EXPECT_EQ(err_, dir_.path() + ": is a directory");
  expect_untouched();
}

TEST_F(RuleFiles, DevZeroIsAnErrorNotAnEndlessRead) {
  EXPECT_FALSE(read({"/dev/zero"}));
  EXPECT_EQ(err_, "/dev/zero: not a regular file (a character device)");
  expect_untouched();
}

TEST_F(RuleFiles, FifoIsAnErrorNotAHang) {
  const std::string fifo = dir_.fifo("fifo");
  EXPECT_FALSE(read({fifo}));
  EXPECT_EQ(err_, fifo + ": not a regular file (a FIFO)");
  expect_untouched();
}

TEST_F(RuleFiles, FileLargerThanTheLimitIsRefusedUnread) {
  // A hole: one byte over the limit costs no disk, and is refused from its size.
  const std::string big = dir_.sparse("big.rules", static_cast<off_t>(kMaxRuleFileBytes) + 1);
  EXPECT_FALSE(read({big}));
  EXPECT_EQ(err_, big + ": larger than 1073741824 bytes (1 GiB, the limit for a rule file)");
  expect_untouched();
}

TEST_F(RuleFiles, EveryBadFileIsNamedAndNothingIsApplied) {
  const std::string good = write("good", "host example.org\n");
  EXPECT_FALSE(read({good, dir_.path(), dir_.path("missing"), "/dev/null"}));
  EXPECT_EQ(err_, dir_.path() + ": is a directory\n" + dir_.path("missing") +
                      ": cannot open: No such file or directory\n/dev/null: not a regular file (a character device)");
  expect_untouched();
}

TEST_F(RuleFiles, ManyBadLinesAreCutShort) {
  std::string text;
  for (int i = 0; i < 25; ++i) text += "nonsense\n";
  const std::string f = write("binary", text);
  EXPECT_FALSE(read({f}));
  std::size_t lines = 0;
  for (char ch : err_) lines += ch == '\n';
  EXPECT_EQ(lines, 20u) << err_;  // 20 bad lines shown, then the summary line
  EXPECT_NE(err_.find(f + ":20:1: expected"), std::string::npos) << err_;
  EXPECT_EQ(err_.find(f + ":21:"), std::string::npos) << err_;
  EXPECT_NE(err_.find(f + ": 5 more bad lines"), std::string::npos) << err_;
}

// [[rules]] files in a feed format (issue 12, item 5).
TEST_F(RuleFiles, FeedsAreReadInTheirFormatAfterThePlainRuleFiles) {
  const std::string plain = write("plain.rules", "host plain.example\n");
  const std::string hosts = write("ads.hosts", "127.0.0.1 localhost\n0.0.0.0 ads.example # x\n");
  const std::string cidr = write("drop.txt", "; DROP\n198.51.100.7 ; SBL1\n");
  std::vector<RuleFeedConfig> feeds = {{hosts, {feeds::Format::kHosts}, {}},
                                       {cidr, {feeds::Format::kCidr, RuleKind::kSrc}, {}}};
  std::vector<SetRules> sets;
  ASSERT_TRUE(read_rule_files({plain}, feeds, sets, &err_)) << err_;
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_EQ(sets[0].set, "");  // the default set
  std::vector<std::string> got;
  for (const Rule& r : sets[0].rules) got.push_back(format_rule(r));
  EXPECT_EQ(got, (std::vector<std::string>{"host plain.example", "host ads.example", "src 198.51.100.7"}));
}

// [[rules]] set = "NAME": each feed's rules go to its set, grouped by set in
// the order the sets first appear.
TEST_F(RuleFiles, FeedsAreGroupedByTheirSets) {
  const std::string plain = write("plain.rules", "host plain.example\n");
  const std::string ads = write("ads.hosts", "0.0.0.0 ads.example\n");
  const std::string more = write("more.txt", "more.example\n");
  const std::string drop = write("drop.txt", "198.51.100.0/24\n");
  const std::vector<RuleFeedConfig> feeds = {{ads, {feeds::Format::kHosts}, "ads"},
                                             {drop, {feeds::Format::kCidr}, "drop"},
                                             {more, {feeds::Format::kDomains}, "ads"}};
  std::vector<SetRules> sets;
  ASSERT_TRUE(read_rule_files({plain}, feeds, sets, &err_)) << err_;
  ASSERT_EQ(sets.size(), 3u);
  auto texts = [](const SetRules& s) {
    std::vector<std::string> t;
    for (const Rule& r : s.rules) t.push_back(format_rule(r));
    return t;
  };
  EXPECT_EQ(sets[0].set, "");
  EXPECT_EQ(texts(sets[0]), std::vector<std::string>{"host plain.example"});
  EXPECT_EQ(sets[1].set, "ads");
  EXPECT_EQ(texts(sets[1]), (std::vector<std::string>{"host ads.example", "host more.example"}));
  EXPECT_EQ(sets[2].set, "drop");
  EXPECT_EQ(texts(sets[2]), std::vector<std::string>{"ip 198.51.100.0/24"});
}

TEST_F(RuleFiles, ABadFeedLineNamesTheFileAndLineAndNothingIsApplied) {
  const std::string hosts = write("bad.hosts", "0.0.0.0 ok.example\nads.example\n");
  std::vector<SetRules> sets(1);
  EXPECT_FALSE(read_rule_files({}, {{hosts, {feeds::Format::kHosts}, {}}}, sets, &err_));
  EXPECT_EQ(err_.rfind(hosts + ":2:1: expected IP address", 0), 0u) << err_;
  ASSERT_EQ(sets.size(), 1u);  // untouched
  EXPECT_TRUE(sets[0].rules.empty());
}

}  // namespace
}  // namespace cg
