// CIDR prefix rules in the rule language: syntax, canonical text, host bits,
// lengths, encodings and listing order (docs/rules.md, "Prefixes").
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuckoogate/keys/rule.hpp"

namespace cg {
namespace {

std::string canon(std::string_view text) {
  const RuleParse p = parse_rule(text);
  if (!p.rule) return "ERROR " + p.error.expected;
  return format_rule(*p.rule);
}

TEST(PrefixRule, CanonicalTextRoundTripsForEveryAddressKind) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"src 10.99.0.0/24", "src 10.99.0.0/24"},
      {"dst 10.0.0.0/8", "dst 10.0.0.0/8"},
      {"ip 192.0.2.0/31", "ip 192.0.2.0/31"},
      {"src 0.0.0.0/0", "src 0.0.0.0/0"},
      {"src 10.0.0.0/008", "src 10.0.0.0/8"},
      // Leading zeros, any number of them (/0032 was refused while /032 was read).
      {"src 10.0.0.0/0008", "src 10.0.0.0/8"},
      {"src 10.0.0.1/0032", "src 10.0.0.1"},
      {"src 0.0.0.0/0000", "src 0.0.0.0/0"},
      {"ip 2001:db8::/00064", "ip 2001:db8::/64"},
      {"src 2001:0DB8::/32", "src 2001:db8::/32"},
      {"dst [2001:db8:1::]/48", "dst 2001:db8:1::/48"},
      {"ip ::/0", "ip ::/0"},
      {"ip 2001:db8::/127", "ip 2001:db8::/127"},
      {"ip ::ffff:10.0.0.0/104", "ip ::ffff:10.0.0.0/104"},
  };
  for (const auto& [in, want] : cases) {
    const RuleParse p = parse_rule(in);
    ASSERT_TRUE(p.rule) << in << ": " << p.error.message();
    EXPECT_EQ(format_rule(*p.rule), want) << in;
    const RuleParse again = parse_rule(format_rule(*p.rule));
    ASSERT_TRUE(again.rule);
    EXPECT_EQ(*again.rule, *p.rule) << in;
    EXPECT_EQ(rule_key(*again.rule), rule_key(*p.rule));
  }
}

TEST(PrefixRule, FullLengthPrefixIsTheAddressRule) {
  EXPECT_EQ(canon("src 10.0.0.1/32"), "src 10.0.0.1");
  EXPECT_EQ(canon("dst 2001:db8::1/128"), "dst 2001:db8::1");
  EXPECT_EQ(*parse_rule("ip 10.0.0.1/32").rule, *parse_rule("ip 10.0.0.1").rule);
  EXPECT_FALSE(parse_rule("ip 10.0.0.1/32").rule->prefix_len);
}

TEST(PrefixRule, HostBitsSetAreRefusedNamingTheCanonicalPrefix) {
  const RuleParse p = parse_rule("src 10.1.2.3/16", 4);
  ASSERT_FALSE(p.rule);
  EXPECT_EQ(p.error.line, 4u);
  EXPECT_EQ(p.error.column, 5u);
  EXPECT_NE(p.error.expected.find("10.1.0.0/16"), std::string::npos) << p.error.message();
  EXPECT_NE(p.error.expected.find("host bits"), std::string::npos) << p.error.message();
  EXPECT_NE(canon("dst 2001:db8::1/64").find("2001:db8::/64"), std::string::npos);
  EXPECT_NE(canon("ip 10.0.0.1/0").find("0.0.0.0/0"), std::string::npos);
  EXPECT_NE(canon("ip 192.0.2.129/25").find("192.0.2.128/25"), std::string::npos);
  // The last bit of a /31 and a /127.
  EXPECT_NE(canon("ip 192.0.2.1/31").find("192.0.2.0/31"), std::string::npos);
  EXPECT_NE(canon("ip 2001:db8::1/127").find("2001:db8::/127"), std::string::npos);
}

TEST(PrefixRule, BadLengthsAndMisplacedPrefixesAreErrors) {
  struct Bad {
    const char* text;
    std::size_t column;
    const char* expected;
  };
  for (const Bad& b : std::vector<Bad>{
           {"src 10.0.0.0/33", 14, "prefix length 0-32"},
           {"src 10.0.0.0/", 14, "prefix length 0-32"},
           {"src 10.0.0.0/1000", 14, "prefix length 0-32"},
           {"src 10.0.0.0/00033", 14, "prefix length 0-32"},
           {"dst 2001:db8::/0129", 16, "prefix length 0-128"},
           {"src 10.0.0.0/-1", 14, "prefix length 0-32"},
           {"src 10.0.0.0/+8", 14, "prefix length 0-32"},
           {"src 10.0.0.0/8/8", 14, "prefix length 0-32"},
           {"src 10.0.0.0/ 8", 14, "prefix length"},
           {"dst 2001:db8::/129", 16, "prefix length 0-128"},
           {"dst 2001:db8::/x", 16, "prefix length 0-128"},
           {"ip /8", 4, "address before '/'"},
           {"ip 10.0.0/8", 4, "network"},
           {"ip [10.0.0.0]/8", 5, "IPv6 address"},
           {"flow tcp 10.0.0.0/8:1 10.0.0.2:80", 18, "prefixes only in src, dst and ip"},
           {"service tcp 10.0.0.0/8:80", 21, "prefixes only in src, dst and ip"},
       }) {
    const RuleParse p = parse_rule(b.text);
    ASSERT_FALSE(p.rule) << b.text << " parsed as " << format_rule(*p.rule);
    EXPECT_EQ(p.error.column, b.column) << b.text << ": " << p.error.message();
    EXPECT_NE(p.error.expected.find(b.expected), std::string::npos) << b.text << ": " << p.error.message();
  }
}

TEST(PrefixRule, Ipv4MappedPrefixStaysIpv6) {
  const RuleParse p = parse_rule("src ::ffff:10.0.0.0/104");
  ASSERT_TRUE(p.rule);
  EXPECT_EQ(p.rule->addr.family, 6);
  EXPECT_EQ(*p.rule->prefix_len, 104);
  EXPECT_NE(rule_key(*p.rule), rule_key(*parse_rule("src 10.0.0.0/8").rule));
}

TEST(PrefixRule, KeyIsTheProbeEncodingAndNeverAnAddressKey) {
  const Rule r = *parse_rule("src 10.99.0.0/20").rule;
  const std::string k = rule_key(r);
  // [kind][family | 0x80][length][ceil(20 / 8) = 3 network bytes]
  EXPECT_EQ(k, std::string("\x02\x84\x14\x0a\x63\x00", 6));
  // What a worker builds from a packet address inside the prefix.
  const uint8_t inside[4] = {10, 99, 15, 200};
  uint8_t buf[kPrefixKeyMax];
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), encode_prefix_key(buf, RuleKind::kSrc, 4, inside, 20)), k);
  const uint8_t outside[4] = {10, 99, 16, 0};
  EXPECT_NE(std::string(reinterpret_cast<char*>(buf), encode_prefix_key(buf, RuleKind::kSrc, 4, outside, 20)), k);
  // Other kinds, lengths and families give other keys.
  EXPECT_NE(rule_key(*parse_rule("dst 10.99.0.0/20").rule), k);
  EXPECT_NE(rule_key(*parse_rule("src 10.99.0.0/21").rule), k);
  EXPECT_NE(rule_key(*parse_rule("src 10.99.0.0/20").rule), rule_key(*parse_rule("src 10.99.0.0").rule));
  // /0: kind, family, length and no address byte.
  EXPECT_EQ(rule_key(*parse_rule("ip ::/0").rule), std::string("\x04\x86\x00", 3));
}

TEST(PrefixRule, RuleFromKeyInvertsPrefixKeysAndRefusesHostBits) {
  for (const char* text : {"src 10.99.0.0/20", "dst 0.0.0.0/0", "ip 2001:db8::/33", "ip 2001:db8::/127"}) {
    const Rule r = *parse_rule(text).rule;
    const std::string k = rule_key(r);
    const auto back = rule_from_key(k.data(), k.size());
    ASSERT_TRUE(back) << text;
    EXPECT_EQ(*back, r) << text;
  }
  const std::string host_bits("\x02\x84\x14\x0a\x63\x01", 6);  // 10.99.1.0/20: a bit past /20
  EXPECT_FALSE(rule_from_key(host_bits.data(), host_bits.size()));
  const std::string too_long("\x02\x84\x20\x0a\x63\x01\x02", 7);  // /32 is never a prefix key
  EXPECT_FALSE(rule_from_key(too_long.data(), too_long.size()));
  const std::string short_key("\x02\x84\x14\x0a", 4);
  EXPECT_FALSE(rule_from_key(short_key.data(), short_key.size()));
}

TEST(PrefixRule, ListsByNetworkThenLengthAfterTheAddressRule) {
  const std::vector<std::string> want = {"src 9.255.255.255", "src 10.0.0.0", "src 10.0.0.0/8",
                                         "src 10.0.0.0/16", "src 10.0.0.1", "src 10.1.0.0/16",
                                         "src 2001:db8::/32"};
  std::vector<std::string> got = want;
  std::reverse(got.begin(), got.end());
  std::sort(got.begin(), got.end(), [](const std::string& a, const std::string& b) {
    return rule_order_key(*parse_rule(a).rule) < rule_order_key(*parse_rule(b).rule);
  });
  EXPECT_EQ(got, want);
}

TEST(PrefixRule, MaskAddressClearsExactlyTheHostBits) {
  const IpAddr a = *parse_address("255.255.255.255");
  EXPECT_EQ(format_address(mask_address(a, 0)), "0.0.0.0");
  EXPECT_EQ(format_address(mask_address(a, 9)), "255.128.0.0");
  EXPECT_EQ(format_address(mask_address(a, 32)), "255.255.255.255");
  const IpAddr b = *parse_address("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
  EXPECT_EQ(format_address(mask_address(b, 65)), "ffff:ffff:ffff:ffff:8000::");
  EXPECT_EQ(format_address(mask_address(b, 128)), "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
}

TEST(PrefixRule, RuleFilesDeduplicateCanonicalPrefixes) {
  const RuleFileParse f = parse_rules("src 10.0.0.0/8\nsrc 10.0.0.0/08\nsrc 10.0.0.1/32\nsrc 10.0.0.1\n", false);
  ASSERT_TRUE(f.errors.empty());
  ASSERT_EQ(f.rules.size(), 2u);
  EXPECT_EQ(format_rule(f.rules[0]), "src 10.0.0.0/8");
  EXPECT_EQ(format_rule(f.rules[1]), "src 10.0.0.1");
}

}  // namespace
}  // namespace cg
