// Feed formats: hosts files, domain lists, address/prefix lists (docs/rules.md,
// "Feed formats"), their errors, and the load progress line.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuckoogate/feeds/feed.hpp"

namespace cg::feeds {
namespace {

std::vector<std::string> texts(const std::vector<Rule>& rules) {
  std::vector<std::string> out;
  for (const Rule& r : rules) out.push_back(format_rule(r));
  return out;
}

using V = std::vector<std::string>;

TEST(FeedNames, FormatsAndCidrKindsRoundTrip) {
  for (const Format f : {Format::kRules, Format::kHosts, Format::kDomains, Format::kCidr})
    EXPECT_EQ(format_from_name(format_name(f)), f);
  EXPECT_FALSE(format_from_name("Hosts"));
  EXPECT_FALSE(format_from_name(""));
  EXPECT_EQ(cidr_kind_from_name("src"), RuleKind::kSrc);
  EXPECT_EQ(cidr_kind_from_name("dst"), RuleKind::kDst);
  EXPECT_EQ(cidr_kind_from_name("ip"), RuleKind::kIp);
  EXPECT_FALSE(cidr_kind_from_name("host"));
}

TEST(Hosts, EveryNameBecomesAHostRuleAndTheMachinesOwnNamesAreSkipped) {
  const std::string feed =
      "# hosts file of an ad list\r\n"
      "127.0.0.1 localhost\r\n"
      "127.0.0.1 localhost.localdomain\n"
      "127.0.0.1 local\n"
      "255.255.255.255 broadcasthost\n"
      "::1 localhost ip6-localhost ip6-loopback\n"
      "fe80::1%lo0 localhost\n"
      "ff02::2 IP6-ALLROUTERS\n"
      "0.0.0.0 0.0.0.0\n"
      "\n"
      "   \t \n"
      "0.0.0.0 ads.example.com # tracking\n"
      "127.0.0.1\tA.Example.NET. b.example.net\r\n"
      "::1 v6.example.org\n"
      "0.0.0.0 ads.example.com\n";  // repeated: returned once
  const RuleFileParse p = parse_feed(feed, {Format::kHosts}, false);
  EXPECT_TRUE(p.errors.empty()) << p.errors[0].message();
  EXPECT_EQ(texts(p.rules),
            (V{"host ads.example.com", "host a.example.net", "host b.example.net", "host v6.example.org"}));
}

TEST(Hosts, SkipNamesAreCaseInsensitiveAndCoverIp6Names) {
  for (const char* n : {"localhost", "LOCALHOST", "localhost.", "localhost.localdomain", "localhost4",
                        "localhost6.localdomain6", "local", "broadcasthost", "ip6-localnet",
                        "ip6-mcastprefix", "0.0.0.0"})
    EXPECT_TRUE(is_hosts_skip_name(n)) << n;
  for (const char* n : {"localhost.example.com", "mylocalhost", "ip6", "locals", "example.com",
                        "ip6-tracker.example.com", "IP6-ads.example.net."})
    EXPECT_FALSE(is_hosts_skip_name(n)) << n;
}

// Words are split where the rule language splits them: a name followed by a
// vertical tab or form feed is still the name it is without one, so
// "local\v" is skipped like "local" (found by feeds_fuzz: it became "host
// local"), and "a.example\fb.example" is two names.
TEST(Hosts, WordsSplitAtEveryRuleLanguageSpace) {
  const RuleFileParse skip = parse_feed("2.0.0.1 local\v\n127.0.0.1 localhost\f\n", {Format::kHosts}, false);
  ASSERT_TRUE(skip.errors.empty()) << skip.errors[0].message();
  EXPECT_EQ(texts(skip.rules), V{});
  const RuleFileParse p = parse_feed("0.0.0.0\va.example.com\fb.example.com\v\n", {Format::kHosts}, false);
  ASSERT_TRUE(p.errors.empty()) << p.errors[0].message();
  EXPECT_EQ(texts(p.rules), (V{"host a.example.com", "host b.example.com"}));
  const RuleFileParse d = parse_feed("a.example.org\v\n\fb.example.org\n", {Format::kDomains}, false);
  ASSERT_TRUE(d.errors.empty()) << d.errors[0].message();
  EXPECT_EQ(texts(d.rules), (V{"host a.example.org", "host b.example.org"}));
}

// An editor's UTF-8 byte-order mark before line 1 is not part of the feed,
// in any format.
TEST(ParseFeed, AByteOrderMarkIsSkipped) {
  const std::string bom = "\xEF\xBB\xBF";
  const RuleFileParse h = parse_feed(bom + "0.0.0.0 ads.example.com\n", {Format::kHosts}, false);
  ASSERT_TRUE(h.errors.empty()) << h.errors[0].message();
  EXPECT_EQ(texts(h.rules), V{"host ads.example.com"});
  const RuleFileParse r = parse_feed(bom + "src 192.0.2.1\n", {Format::kRules}, false);
  ASSERT_TRUE(r.errors.empty()) << r.errors[0].message();
  EXPECT_EQ(texts(r.rules), V{"src 192.0.2.1"});
  const RuleFileParse c = parse_feed(bom + "# DROP\n192.0.2.0/24 ; SBL1\n", {Format::kCidr}, false);
  ASSERT_TRUE(c.errors.empty()) << c.errors[0].message();
  EXPECT_EQ(texts(c.rules), V{"ip 192.0.2.0/24"});
  EXPECT_EQ(skip_bom("\xEF\xBB"), "\xEF\xBB");  // not a whole mark: left for the parser to refuse
}

TEST(Hosts, MalformedLinesNameTheColumnAndWhatWasExpected) {
  std::vector<Rule> out;
  ParseError e;
  EXPECT_FALSE(parse_feed_line({Format::kHosts}, "ads.example.com", 7, &out, &e));
  EXPECT_EQ(e.line, 7u);
  EXPECT_EQ(e.column, 1u);
  EXPECT_NE(e.expected.find("IP address"), std::string::npos) << e.expected;

  EXPECT_FALSE(parse_feed_line({Format::kHosts}, "0.0.0.0   # nothing", 1, &out, &e));
  EXPECT_EQ(e.column, 8u);
  EXPECT_NE(e.expected.find("host name after the address"), std::string::npos) << e.expected;

  // One bad name rejects the whole line: the good name before it is not kept.
  EXPECT_FALSE(parse_feed_line({Format::kHosts}, "0.0.0.0 good.example  bad..name", 3, &out, &e));
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(e.line, 3u);
  EXPECT_EQ(e.column, 27u);  // the empty label after "bad."
  EXPECT_NE(e.expected.find("host name"), std::string::npos) << e.expected;

  EXPECT_FALSE(parse_feed_line({Format::kHosts}, "300.0.0.1 x.example", 1, &out, &e));
  EXPECT_EQ(e.column, 1u);
}

TEST(Domains, OneNamePerLineWithComments) {
  const std::string feed =
      "# a domain list\n"
      "Tracker.Example.COM.\n"
      "  ads.example.net   # inline comment\r\n"
      "\n"
      "tracker.example.com\n";
  const RuleFileParse p = parse_feed(feed, {Format::kDomains}, false);
  ASSERT_TRUE(p.errors.empty()) << p.errors[0].message();
  EXPECT_EQ(texts(p.rules), (V{"host tracker.example.com", "host ads.example.net"}));
}

TEST(Domains, TwoWordsOrABadNameIsAnError) {
  std::vector<Rule> out;
  ParseError e;
  EXPECT_FALSE(parse_feed_line({Format::kDomains}, "a.example b.example", 2, &out, &e));
  EXPECT_EQ(e.column, 11u);
  EXPECT_NE(e.expected.find("one domain name per line"), std::string::npos) << e.expected;
  EXPECT_FALSE(parse_feed_line({Format::kDomains}, "  bad!name.example", 2, &out, &e));
  EXPECT_EQ(e.column, 6u);  // the '!'
  // A hosts line fed as a domain list: the address is one word, the name a second.
  EXPECT_FALSE(parse_feed_line({Format::kDomains}, "0.0.0.0 ads.example", 2, &out, &e));
  EXPECT_TRUE(out.empty());
}

TEST(Cidr, SpamhausAndFireholLinesBecomeRulesOfTheChosenKind) {
  const std::string feed =
      "; Spamhaus DROP List\n"
      "# FireHOL netset header\n"
      "192.0.2.7 ; SBL123\n"
      "198.51.100.9#x\n"
      "2001:DB8::7\n";
  RuleFileParse p = parse_feed(feed, {Format::kCidr, RuleKind::kIp}, false);
  ASSERT_TRUE(p.errors.empty()) << p.errors[0].message();
  EXPECT_EQ(texts(p.rules), (V{"ip 192.0.2.7", "ip 198.51.100.9", "ip 2001:db8::7"}));
  p = parse_feed(feed, {Format::kCidr, RuleKind::kSrc}, false);
  EXPECT_EQ(texts(p.rules), (V{"src 192.0.2.7", "src 198.51.100.9", "src 2001:db8::7"}));
  p = parse_feed(feed, {Format::kCidr, RuleKind::kDst}, false);
  EXPECT_EQ(texts(p.rules)[0], "dst 192.0.2.7");
}

TEST(Cidr, PrefixLinesGetWhatTheRuleLanguageSays) {
  // Prefixes are the rule language's business (`ip 10.0.0.0/8`): a cidr line
  // is accepted exactly when that rule is, and an error points into the line.
  for (const char* prefix : {"10.0.0.0/8", "1.10.16.0/20", "2001:db8::/32", "10.0.0.1/33"}) {
    std::vector<Rule> out;
    ParseError e;
    const std::string line = std::string("  ") + prefix + " ; SBL256894";
    const bool ok = parse_feed_line({Format::kCidr, RuleKind::kIp}, line, 4, &out, &e);
    const RuleParse direct = parse_rule(std::string("ip ") + prefix);
    ASSERT_EQ(ok, direct.rule.has_value()) << prefix;
    if (ok) {
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0], *direct.rule);
    } else {
      EXPECT_EQ(e.line, 4u);
      EXPECT_EQ(e.expected, direct.error.expected);
      EXPECT_EQ(e.column, direct.error.column - 3 + 2) << prefix;  // "ip " gone, two blanks in front
    }
  }
}

TEST(Cidr, SpamhausDropPrefixesBecomePrefixRules) {
  const RuleFileParse p = parse_feed("; Spamhaus DROP\n1.10.16.0/20 ; SBL256894\n2001:DB8:100::/40\n",
                                     {Format::kCidr, RuleKind::kSrc}, false);
  ASSERT_TRUE(p.errors.empty()) << p.errors[0].message();
  EXPECT_EQ(texts(p.rules), (V{"src 1.10.16.0/20", "src 2001:db8:100::/40"}));
  std::vector<Rule> out;
  ParseError e;
  EXPECT_FALSE(parse_feed_line({Format::kCidr}, "  10.1.2.3/16", 2, &out, &e));  // host bits set
  EXPECT_EQ(e.column, 3u);
  EXPECT_NE(e.expected.find("without host bits"), std::string::npos) << e.expected;
}

TEST(Cidr, MalformedLinesAreErrors) {
  std::vector<Rule> out;
  ParseError e;
  EXPECT_FALSE(parse_feed_line({Format::kCidr}, "  300.1.1.1 ; bad", 9, &out, &e));
  EXPECT_EQ(e.line, 9u);
  EXPECT_EQ(e.column, 3u);
  EXPECT_NE(e.expected.find("address"), std::string::npos) << e.expected;
  EXPECT_FALSE(parse_feed_line({Format::kCidr}, "192.0.2.1 SBL123", 1, &out, &e));
  EXPECT_EQ(e.column, 11u);
  EXPECT_NE(e.expected.find("one address or prefix per line"), std::string::npos) << e.expected;
  EXPECT_FALSE(parse_feed_line({Format::kCidr}, "1.2.3.4-1.2.3.9", 1, &out, &e));
  EXPECT_TRUE(out.empty());
}

TEST(ParseFeed, ABadLineRejectsEverythingUnlessSkipBad) {
  const std::string feed = "a.example\nbad name here\nb.example\n!!\nc.example";
  RuleFileParse strict = parse_feed(feed, {Format::kDomains}, false);
  EXPECT_TRUE(strict.rules.empty());
  ASSERT_EQ(strict.errors.size(), 2u);
  EXPECT_EQ(strict.errors[0].line, 2u);
  EXPECT_EQ(strict.errors[1].line, 4u);
  RuleFileParse lenient = parse_feed(feed, {Format::kDomains}, true);
  EXPECT_EQ(lenient.errors.size(), 2u);
  EXPECT_EQ(texts(lenient.rules), (V{"host a.example", "host b.example", "host c.example"}));
}

TEST(ParseFeed, RulesFormatIsTheRuleLanguage) {
  const RuleFileParse p = parse_feed("src 192.0.2.1\n# c\nhost a.example\nsrc 192.0.2.1\n", {}, false);
  EXPECT_TRUE(p.errors.empty());
  EXPECT_EQ(texts(p.rules), (V{"src 192.0.2.1", "host a.example"}));
  std::vector<Rule> out;
  ParseError e;
  EXPECT_TRUE(parse_feed_line({}, "   # only a comment", 1, &out, &e));
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(parse_feed_line({}, "block 1.2.3.4", 5, &out, &e));
  EXPECT_EQ(e.line, 5u);
  EXPECT_EQ(e.column, 1u);
}

TEST(Progress, RateShareAndTimeLeft) {
  EXPECT_EQ(progress_text(100, 2.0, 0, 0), "100 rules, 50 rules/s");
  EXPECT_EQ(progress_text(250000, 1.25, 0, 0), "250000 rules, 200000 rules/s");
  // A quarter of the file in 2 s: 6 s to go.
  EXPECT_EQ(progress_text(1000, 2.0, 25, 100), "1000 rules, 500 rules/s, 25%, ETA 6 s");
  EXPECT_EQ(progress_text(1000, 2.0, 100, 100), "1000 rules, 500 rules/s, 100%, ETA 0 s");
  EXPECT_EQ(progress_text(0, 0.0, 0, 100), "0 rules, 0 rules/s");
}

}  // namespace
}  // namespace cg::feeds
