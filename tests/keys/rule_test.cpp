// The rule language: canonical forms, round trips, errors, files, encodings.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "cuckoogate/keys/rule.hpp"
#include "keys_test_util.hpp"

namespace cg {
namespace {

using test::rule;

struct Canon {
  const char* in;
  const char* canonical;
};

class CanonicalForm : public testing::TestWithParam<Canon> {};

TEST_P(CanonicalForm, PrintsCanonicallyAndRoundTrips) {
  const RuleParse p = parse_rule(GetParam().in);
  ASSERT_TRUE(p.rule) << GetParam().in << ": " << p.error.message();
  EXPECT_EQ(format_rule(*p.rule), GetParam().canonical);
  const RuleParse again = parse_rule(format_rule(*p.rule));
  ASSERT_TRUE(again.rule) << again.error.message();
  EXPECT_EQ(*again.rule, *p.rule);
  EXPECT_EQ(rule_key(*again.rule), rule_key(*p.rule));
}

INSTANTIATE_TEST_SUITE_P(
    EveryKind, CanonicalForm,
    testing::Values(
        Canon{"flow tcp 10.0.0.1:1234 10.0.0.2:80", "flow tcp 10.0.0.1:1234 10.0.0.2:80"},
        Canon{"flow 6 10.0.0.1:1234 10.0.0.2:80", "flow tcp 10.0.0.1:1234 10.0.0.2:80"},
        Canon{"FLOW TCP 10.0.0.1:01234 10.0.0.2:80", "flow tcp 10.0.0.1:1234 10.0.0.2:80"},
        Canon{"flow udp [2001:db8::1]:53 [2001:db8::2]:5353",
              "flow udp [2001:db8::1]:53 [2001:db8::2]:5353"},
        Canon{"flow 17 [2001:DB8:0:0::1]:53 [2001:db8::2]:5353",
              "flow udp [2001:db8::1]:53 [2001:db8::2]:5353"},
        Canon{"flow 132 192.0.2.1:9 192.0.2.2:0", "flow sctp 192.0.2.1:9 192.0.2.2:0"},
        Canon{"flow icmp 10.0.0.1 10.0.0.2", "flow icmp 10.0.0.1 10.0.0.2"},
        Canon{"flow 1 10.0.0.1 10.0.0.2", "flow icmp 10.0.0.1 10.0.0.2"},
        Canon{"flow 58 [2001:db8::1] 2001:db8::2", "flow icmpv6 2001:db8::1 2001:db8::2"},
        Canon{"flow 47 10.0.0.1 10.0.0.2", "flow 47 10.0.0.1 10.0.0.2"},
        Canon{"flow 0 10.0.0.1 10.0.0.2", "flow 0 10.0.0.1 10.0.0.2"},
        Canon{"src 192.0.2.7", "src 192.0.2.7"},
        Canon{"  src\t192.0.2.7   # a comment", "src 192.0.2.7"},
        Canon{"dst 2001:0db8::0007", "dst 2001:db8::7"},
        Canon{"dst [2001:db8::7]", "dst 2001:db8::7"},
        Canon{"ip 198.51.100.9", "ip 198.51.100.9"},
        Canon{"ip ::ffff:192.0.2.1", "ip ::ffff:192.0.2.1"},
        Canon{"service tcp 203.0.113.5:443", "service tcp 203.0.113.5:443"},
        Canon{"service udp [2001:db8::53]:53", "service udp [2001:db8::53]:53"},
        Canon{"service icmp 203.0.113.5", "service icmp 203.0.113.5"},
        Canon{"url example.com/path/page?x=1", "url example.com/path/page?x=1"},
        Canon{"url http://Example.COM:80/Path/Page?X=1", "url example.com/Path/Page?X=1"},
        Canon{"url HTTP://example.com", "url example.com/"},
        Canon{"url example.com", "url example.com/"},
        Canon{"url example.com:8080/a", "url example.com:8080/a"},
        Canon{"url example.com:08080/a", "url example.com:8080/a"},
        Canon{"url example.com:/a", "url example.com/a"},
        Canon{"url example.com?q=1", "url example.com/?q=1"},
        Canon{"url example.com/a#frag", "url example.com/a"},
        Canon{"url example.com./a", "url example.com/a"},
        Canon{"url [2001:DB8::1]:8080/x", "url [2001:db8::1]:8080/x"},
        Canon{"url example.com/%41%2f?a=b&c=%20", "url example.com/A%2F?a=b&c=%20"},
        // A stray '%' followed by escapes of hex digits: decoding them would
        // make a new escape that a second canonicalisation decodes again
        // (found by rule_parse_fuzz), so they stay encoded.
        Canon{"url h/%%30f", "url h/%%30f"},
        Canon{"url x/%%341", "url x/%%341"},
        Canon{"url x/%4%31", "url x/%4%31"},
        Canon{"url x/%%3g", "url x/%%3g"},
        Canon{"url x/%%67%%41", "url x/%g%%41"},
        Canon{"url x/a%?q=%%30f&r=%4%31", "url x/a%?q=%%30f&r=%4%31"},
        Canon{"url example.com/redirect?to=http://other.org/", "url example.com/redirect?to=http://other.org/"},
        Canon{"host example.org", "host example.org"},
        Canon{"host Example.ORG.", "host example.org"},
        Canon{"host _dmarc.mail-1.example.org", "host _dmarc.mail-1.example.org"}));

TEST(Rule, RulesThatCanonicaliseAlikeAreEqual) {
  EXPECT_EQ(rule("flow 6 10.0.0.1:1 10.0.0.2:2"), rule("flow tcp 10.0.0.1:1 10.0.0.2:2"));
  EXPECT_EQ(rule("url http://EXAMPLE.com:80"), rule("url example.com/"));
  EXPECT_EQ(rule("host Example.Org."), rule("host example.org"));
  EXPECT_EQ(rule("dst 2001:db8:0::7"), rule("dst 2001:db8::7"));
  EXPECT_NE(rule("src 1.2.3.4"), rule("dst 1.2.3.4"));
  EXPECT_NE(rule("url example.com/a"), rule("url example.com/A"));
}

TEST(Rule, Ipv4MappedIpv6StaysIpv6) {
  const Rule r = rule("src ::ffff:10.0.0.1");
  EXPECT_EQ(r.addr.family, 6);
  EXPECT_NE(rule_key(r), rule_key(rule("src 10.0.0.1")));
}

TEST(Rule, KindNamesRoundTrip) {
  for (std::size_t i = 1; i <= kRuleKindCount; ++i) {
    const auto k = static_cast<RuleKind>(i);
    EXPECT_EQ(kind_from_name(kind_name(k)), k);
  }
  EXPECT_EQ(kind_name(RuleKind::kService), "service");
  EXPECT_FALSE(kind_from_name("Flow").has_value());
  EXPECT_FALSE(kind_from_name("").has_value());
}

struct Bad {
  const char* text;
  std::size_t column;
  const char* expected;  // a substring of ParseError::expected
};

class ParseErrors : public testing::TestWithParam<Bad> {};

TEST_P(ParseErrors, NameColumnAndWhatWasExpected) {
  const RuleParse p = parse_rule(GetParam().text, 7);
  ASSERT_FALSE(p.rule) << GetParam().text << " parsed as " << format_rule(*p.rule);
  EXPECT_EQ(p.error.line, 7u);
  EXPECT_EQ(p.error.column, GetParam().column) << p.error.message();
  EXPECT_NE(p.error.expected.find(GetParam().expected), std::string::npos) << p.error.message();
}

INSTANTIATE_TEST_SUITE_P(
    Table, ParseErrors,
    testing::Values(
        Bad{"", 1, "rule kind"},
        Bad{"   # only a comment", 1, "rule kind"},
        Bad{"block 1.2.3.4", 1, "rule kind"},
        Bad{"flow", 5, "protocol"},
        Bad{"flow tcpx 1.2.3.4:1 1.2.3.5:2", 6, "protocol"},
        Bad{"flow 256 1.2.3.4 1.2.3.5", 6, "protocol"},
        Bad{"flow tcp", 9, "source address"},
        Bad{"flow tcp 10.0.0.1:", 19, "port number after ':'"},
        Bad{"flow tcp 10.0.0.1:x 10.0.0.2:80", 19, "port number"},
        Bad{"flow tcp 10.0.0.1:65536 10.0.0.2:80", 19, "port number 0-65535"},
        Bad{"flow tcp 10.0.0.1 10.0.0.2:80", 18, "':' and port number"},
        Bad{"flow tcp 10.0.0.256:1 10.0.0.2:80", 10, "source address"},
        Bad{"flow tcp 2001:db8::1:80 10.0.0.2:80", 10, "[IPv6]:port"},
        Bad{"flow tcp [2001:db8::1:80 10.0.0.2:80", 10, "']'"},
        Bad{"flow tcp [2001:db8::1] 10.0.0.2:80", 23, "':' and port number"},
        Bad{"flow tcp [10.0.0.1]:1 10.0.0.2:80", 11, "IPv6 address"},
        Bad{"flow tcp 10.0.0.1:1", 20, "destination address and port"},
        Bad{"flow tcp 10.0.0.1:1 [2001:db8::2]:80", 21, "same family"},
        Bad{"flow tcp 10.0.0.1:1 10.0.0.2:80 extra", 33, "end of rule"},
        Bad{"flow icmp 10.0.0.1:5 10.0.0.2", 19, "no ports"},
        Bad{"flow icmp [2001:db8::1]:5 2001:db8::2", 24, "no ports"},
        Bad{"src", 4, "address"},
        Bad{"src 1.2.3", 5, "address"},
        Bad{"src 01.2.3.4", 5, "address"},
        Bad{"src fe80::1%eth0", 5, "address"},
        Bad{"dst 1.2.3.4 1.2.3.5", 13, "end of rule"},
        Bad{"ip 1.2.3.4:80", 11, "no ports"},
        Bad{"service tcp 1.2.3.4", 20, "':' and port number"},
        Bad{"service", 8, "protocol"},
        Bad{"url", 4, "url"},
        Bad{"url https://example.com/", 5, "http://"},
        Bad{"url http:///path", 12, "host name"},
        Bad{"url example.com:99999/", 17, "port number"},
        Bad{"url exa mple.com/", 9, "end of rule"},
        Bad{"url ex!ample.com/", 7, "host name"},
        Bad{"url [2001:db8::1/", 5, "']'"},
        Bad{"host", 5, "host name"},
        Bad{"host a..b", 8, "host name"},
        Bad{"host .", 6, "host name"},
        Bad{"host exa$mple.org", 9, "host name"},
        Bad{"host example.org/x", 17, "host name"},
        Bad{"host example.org:80", 17, "host name"}));

TEST(Rule, ErrorMessageNamesLineColumnAndExpectation) {
  const RuleParse p = parse_rule("flow tcp 10.0.0.1: 10.0.0.2:80", 3);
  ASSERT_FALSE(p.rule);
  EXPECT_EQ(p.error.message(), "line 3, column 19: expected port number after ':'");
}

TEST(Rule, LongNamesAndUrlsAreBounded) {
  std::string label63(63, 'a');
  EXPECT_TRUE(parse_rule("host " + label63 + ".org").rule);
  EXPECT_FALSE(parse_rule("host " + label63 + "a.org").rule);
  std::string name;
  while (name.size() + 2 <= kMaxNameLen) name += "a.";
  name += "o";
  ASSERT_LE(name.size(), kMaxNameLen);
  EXPECT_TRUE(parse_rule("host " + name).rule);
  EXPECT_FALSE(parse_rule("host a" + name).rule);
  const std::string fits(kMaxUrlLen - std::string("example.com/").size(), 'p');
  EXPECT_TRUE(parse_rule("url example.com/" + fits).rule);
  const RuleParse too_long = parse_rule("url example.com/" + fits + "p");
  ASSERT_FALSE(too_long.rule);
  EXPECT_NE(too_long.error.expected.find("2048"), std::string::npos);
}

TEST(RuleFile, CommentsBlankLinesAndCrlf) {
  const RuleFileParse f = parse_rules(
      "# blocklist\n"
      "\n"
      "src 192.0.2.7   # scanner\r\n"
      "   \t\n"
      "host Example.org\n"
      "url example.com/x",
      false);
  EXPECT_TRUE(f.errors.empty());
  ASSERT_EQ(f.rules.size(), 3u);
  EXPECT_EQ(format_rule(f.rules[0]), "src 192.0.2.7");
  EXPECT_EQ(format_rule(f.rules[1]), "host example.org");
  EXPECT_EQ(format_rule(f.rules[2]), "url example.com/x");
}

TEST(RuleFile, AnErrorAppliesNothingAndNamesEveryBadLine) {
  const std::string text = "src 1.2.3.4\nsrc 1.2.3\nhost ok.org\nflow tcp 1.2.3.4 1.2.3.5:1\n";
  const RuleFileParse strict = parse_rules(text, false);
  EXPECT_TRUE(strict.rules.empty());
  ASSERT_EQ(strict.errors.size(), 2u);
  EXPECT_EQ(strict.errors[0].line, 2u);
  EXPECT_EQ(strict.errors[0].column, 5u);
  EXPECT_EQ(strict.errors[1].line, 4u);
  EXPECT_EQ(strict.errors[1].column, 17u);

  const RuleFileParse lenient = parse_rules(text, true);
  ASSERT_EQ(lenient.rules.size(), 2u);
  EXPECT_EQ(lenient.errors.size(), 2u);
}

TEST(RuleFile, DuplicatesAfterCanonicalisationAreOneRule) {
  const RuleFileParse f =
      parse_rules("host example.org\nhost EXAMPLE.org.\nflow 6 1.1.1.1:1 2.2.2.2:2\n"
                  "flow tcp 1.1.1.1:1 2.2.2.2:2\n",
                  false);
  EXPECT_EQ(f.rules.size(), 2u);
}

TEST(RuleFile, RepeatsDroppedFirstOccurrencesKeptInFileOrder) {
  // Many repeats, some many times over, interleaved with distinct rules.
  std::string text;
  std::vector<std::string> want;
  for (int i = 0; i < 3000; ++i) {
    const std::string r = i % 3 == 0 ? "host h" + std::to_string(i % 97) + ".example"
                                     : "url example.org/" + std::to_string(i);
    text += (i % 5 == 0 ? "  " : "") + r + "\n";
    if (std::find(want.begin(), want.end(), r) == want.end()) want.push_back(r);
  }
  text += "host H1.EXAMPLE.\n";  // the canonical form of an earlier one
  const RuleFileParse f = parse_rules(text, false);
  ASSERT_TRUE(f.errors.empty());
  std::vector<std::string> got;
  for (const Rule& r : f.rules) got.push_back(format_rule(r));
  EXPECT_EQ(got, want);
}

// The kind is in the encoding and in the exact set's hash; the filter hash
// of an address key leaves it out (one probe for src, dst and ip of an
// address: docs/rules.md, "Key encoding"), that of every other kind has it.
TEST(RuleKey, KindIsFoldedIntoEncodingAndExactHash) {
  const std::string s = rule_key(rule("src 1.2.3.4"));
  const std::string d = rule_key(rule("dst 1.2.3.4"));
  const std::string i = rule_key(rule("ip 1.2.3.4"));
  EXPECT_EQ(s[0], static_cast<char>(RuleKind::kSrc));
  EXPECT_NE(s, d);
  EXPECT_NE(key_hash128(s.data(), s.size()), key_hash128(d.data(), d.size()));
  EXPECT_NE(key_hash128(s.data(), s.size()), key_hash128(i.data(), i.size()));
  EXPECT_EQ(key_hash(s.data(), s.size()), key_hash(d.data(), d.size()));
  EXPECT_EQ(key_hash(s.data(), s.size()), key_hash(i.data(), i.size()));
  const std::string f = rule_key(rule("flow tcp 1.2.3.4:1 5.6.7.8:2"));
  const std::string v = rule_key(rule("service tcp 1.2.3.4:1"));
  EXPECT_NE(key_hash(f.data(), f.size()), key_hash(s.data(), s.size()));
  EXPECT_NE(key_hash(v.data(), v.size()), key_hash(s.data(), s.size()));
}

TEST(RuleKey, DocumentedByteLayout) {
  EXPECT_EQ(rule_key(rule("src 1.2.3.4")), std::string("\x02\x04\x01\x02\x03\x04", 6));
  EXPECT_EQ(rule_key(rule("flow tcp 10.0.0.1:1234 10.0.0.2:80")),
            std::string("\x01\x04\x06\x0a\x00\x00\x01\x04\xd2\x0a\x00\x00\x02\x00\x50", 15));
  EXPECT_EQ(rule_key(rule("flow icmp 10.0.0.1 10.0.0.2")),
            std::string("\x01\x04\x01\x0a\x00\x00\x01\x00\x00\x0a\x00\x00\x02\x00\x00", 15));
  EXPECT_EQ(rule_key(rule("service udp 10.0.0.2:53")),
            std::string("\x05\x04\x11\x0a\x00\x00\x02\x00\x35", 9));
  EXPECT_EQ(rule_key(rule("ip ::1")).size(), 18u);
  EXPECT_EQ(rule_key(rule("flow udp [::1]:1 [::2]:2")).size(), 39u);
  EXPECT_EQ(rule_key(rule("url example.com/a")), "\x06" "example.com/a");
  EXPECT_EQ(rule_key(rule("host a.example.org")), "\x07" "a\x07" "example\x07" "org");
}

TEST(RuleKey, ParentDomainKeyIsASuffixOfTheChildKey) {
  const std::string child = rule_key(rule("host a.b.example.org"));
  const std::string parent = rule_key(rule("host example.org"));
  EXPECT_TRUE(child.ends_with(parent));
  EXPECT_FALSE(rule_key(rule("host badexample.org")).ends_with(parent));
}

TEST(RuleOrderKey, SortsKindThenAddressesNumericallyThenNamesByLabel) {
  const std::vector<std::string> listed = {
      "flow tcp 10.0.0.1:1 10.0.0.2:2",
      "flow tcp 10.0.0.2:1 10.0.0.1:2",
      "src 9.0.0.1",
      "src 10.0.0.1",
      "src 192.0.2.1",
      "src ::1",
      "src 2001:db8::1",
      "dst 1.1.1.1",
      "ip 1.1.1.1",
      "service tcp 1.1.1.1:80",
      "service tcp 1.1.1.1:443",
      "url a.example.com/",
      "url b.example.com/",
      "host example.com",
      "host a.example.com",
      "host z.a.example.com",
      "host b.example.com",
      "host example-x.com",
      "host example.org",
  };
  std::vector<std::string> shuffled(listed.rbegin(), listed.rend());
  std::sort(shuffled.begin(), shuffled.end(), [](const std::string& a, const std::string& b) {
    return rule_order_key(rule(a)) < rule_order_key(rule(b));
  });
  EXPECT_EQ(shuffled, listed);
  std::set<std::string> order_keys;
  for (const std::string& r : listed) order_keys.insert(rule_order_key(rule(r)));
  EXPECT_EQ(order_keys.size(), listed.size()) << "order keys must be unique per rule";
}

// parse_address reads IPv4 text itself (no inet_pton call per address of a
// bulk load): it must accept exactly what inet_pton(AF_INET) accepts, with
// the same bytes. Checked on edge cases and on random strings over digits
// and dots. (One difference on purpose: a NUL byte inside the text is
// refused, IPv6 too; inet_pton stopped there and took the address before it,
// so "src 10.0.0.1<NUL>x" was the rule "src 10.0.0.1".)
TEST(ParseAddress, Ipv4AcceptsExactlyWhatInetPtonAccepts) {
  const auto same = [](const std::string& t) {
    uint8_t want[4] = {};
    const bool ok = inet_pton(AF_INET, t.c_str(), want) == 1;
    const std::optional<IpAddr> got = parse_address(t);
    ASSERT_EQ(got.has_value(), ok) << "'" << t << "'";
    if (ok) {
      ASSERT_EQ(got->family, 4) << t;
      for (int i = 0; i < 4; ++i) ASSERT_EQ(got->bytes[i], want[i]) << t;
      for (int i = 4; i < 16; ++i) ASSERT_EQ(got->bytes[i], 0) << t;
    }
  };
  for (const char* t : {"0.0.0.0", "255.255.255.255", "10.1.2.3", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.256",
                        "01.2.3.4", "1.2.3.04", "1.2.3.00", "0.0.0.00", "1..2.3", ".1.2.3", "1.2.3.", "1.2.3.4.",
                        "1000.1.1.1", "1.2.3.4 ", " 1.2.3.4", "1.2.3.4x", "+1.2.3.4", "1.2.3.-4", "0x1.2.3.4",
                        "999", "1.2.3.4/8", "a.b.c.d", "4294967295", "1.2.3.255", "1.2.3.2550"})
    same(t);
  std::mt19937 rng(7);
  const std::string alphabet = "0123456789.....0125x";
  for (int n = 0; n < 200000; ++n) {
    std::string t(1 + rng() % 16, '0');
    for (char& c : t) c = alphabet[rng() % alphabet.size()];
    same(t);
  }
  EXPECT_FALSE(parse_address(std::string_view("1.2.3.4\0", 8)));
  EXPECT_FALSE(parse_address(std::string_view("::1\0", 4)));
  EXPECT_FALSE(parse_rule(std::string_view("src 10.0.0.1\0x", 15)).rule);
}

}  // namespace
}  // namespace cg

namespace cg {
namespace {

TEST(RuleFromKey, InvertsRuleKeyForEveryKind) {
  for (const char* text :
       {"flow tcp 10.0.0.1:1234 10.0.0.2:80", "flow icmpv6 2001:db8::1 2001:db8::2",
        "src 1.2.3.4", "dst ::1", "ip ::ffff:1.2.3.4", "service udp [2001:db8::53]:53",
        "service 47 10.0.0.1", "url example.com:8080/a?b", "host a.b.example.org"}) {
    const Rule r = test::rule(text);
    const std::string k = rule_key(r);
    const auto back = rule_from_key(k.data(), k.size());
    ASSERT_TRUE(back) << text;
    EXPECT_EQ(*back, r) << text;
    EXPECT_EQ(format_rule(*back), text);
  }
  EXPECT_FALSE(rule_from_key("\x02\x04\x01", 3));
  EXPECT_FALSE(rule_from_key("\x09xx", 3));
  EXPECT_FALSE(rule_from_key("\x01\x04\x01\x0a\x00\x00\x01\x00\x05\x0a\x00\x00\x02\x00\x00", 15));
}

}  // namespace
}  // namespace cg
