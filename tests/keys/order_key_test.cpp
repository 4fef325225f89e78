// rule_from_order_key: the rule store keeps only a rule's listing-order key
// and rebuilds the rule (and its canonical text) from it, so the key must
// invert exactly for every rule the language has, and bytes that no rule
// encodes to must be refused rather than misread (docs/store.md, "Keys and
// texts"). rule_key_of_order_key, the bulk load's way from an order key to
// the lookup key, must give rule_key() of that rule and refuse the same bytes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuckoogate/keys/rule.hpp"

namespace cg {
namespace {

Rule parsed(std::string_view text) {
  const RuleParse p = parse_rule(text);
  EXPECT_TRUE(p.rule) << text << ": " << p.error.message();
  return p.rule.value_or(Rule{});
}

TEST(OrderKey, InvertsForEveryKindFamilyAndPrefix) {
  const std::vector<std::string> texts = {
      "flow tcp 10.0.0.1:1000 10.0.0.2:80",
      "flow udp [2001:db8::1]:53 [2001:db8::2]:5353",
      "flow icmp 192.0.2.1 192.0.2.2",
      "flow sctp 0.0.0.0:0 255.255.255.255:65535",
      "src 10.1.2.3",
      "dst 2001:db8::7",
      "ip ::ffff:10.0.0.1",
      "src 10.99.0.0/24",
      "dst 0.0.0.0/0",
      "ip 2001:db8::/127",
      "src ::/0",
      "service tcp 10.0.0.1:443",
      "service udp [::1]:53",
      "service icmpv6 2001:db8::1",
      "host example.com",
      "host a.b.c.d.example.co.uk",
      "host localhost",
      "host xn--bcher-kva.example",
      "url example.org/",
      "url example.org:8080/p/1?q=a%20b",
  };
  for (const std::string& t : texts) {
    const Rule r = parsed(t);
    const std::string key = rule_order_key(r);
    const std::optional<Rule> back = rule_from_order_key(key);
    ASSERT_TRUE(back) << t;
    EXPECT_EQ(*back, r) << t;
    EXPECT_EQ(format_rule(*back), format_rule(r)) << t;
    std::string lookup = "left over from an earlier key";  // replaced, not appended to
    ASSERT_TRUE(rule_key_of_order_key(key, &lookup)) << t;
    EXPECT_EQ(lookup, rule_key(r)) << t;
  }
}

TEST(OrderKey, InvertsForGeneratedRules) {
  // The load benchmark's mix, many addresses and names: every byte value
  // appears in the address positions, including 0 and the kind bytes.
  std::string lookup;  // reused, as a load does
  for (uint32_t i = 0; i < 70000; i += 7) {
    const uint32_t j = i * 2654435761u;
    auto a = [](uint32_t v) {
      return std::to_string(v >> 24) + "." + std::to_string((v >> 16) & 255) + "." +
             std::to_string((v >> 8) & 255) + "." + std::to_string(v & 255);
    };
    for (const std::string& t :
         {"src " + a(j), "flow tcp " + a(j) + ":" + std::to_string(j & 0xffff) + " " + a(~j) + ":80",
          "service udp " + a(j) + ":" + std::to_string(j >> 16), "host h" + std::to_string(j) + ".example.net",
          "url example.org/p/" + std::to_string(j)}) {
      const Rule r = parsed(t);
      const std::string key = rule_order_key(r);
      const std::optional<Rule> back = rule_from_order_key(key);
      ASSERT_TRUE(back) << t;
      ASSERT_EQ(*back, r) << t;
      ASSERT_TRUE(rule_key_of_order_key(key, &lookup)) << t;
      ASSERT_EQ(lookup, rule_key(r)) << t;
    }
  }
}

TEST(OrderKey, RefusesBytesNoRuleEncodesTo) {
  const std::string src = rule_order_key(parsed("src 10.1.2.3"));
  const std::string flow = rule_order_key(parsed("flow tcp 10.0.0.1:1000 10.0.0.2:80"));
  const std::string svc = rule_order_key(parsed("service tcp 10.0.0.1:443"));
  const std::string host = rule_order_key(parsed("host a.example.com"));
  std::vector<std::string> bad = {
      "",
      std::string(1, '\0'),
      std::string(1, '\x08'),                 // no such kind
      src.substr(0, src.size() - 1),          // truncated address
      src + std::string(1, '\x20'),           // a /32 prefix on an IPv4 address: never a prefix rule
      std::string("\x02\x05") + src.substr(2),  // family 5
      rule_order_key(parsed("src 10.0.0.0")) + std::string(1, '\x04'),  // 10.0.0.0/4: host bits set
      flow.substr(0, flow.size() - 1),
      flow + "x",
      svc.substr(0, svc.size() - 2),
      host.substr(0, host.size() - 1),        // the last label is not ended
      std::string("\x07") + std::string(1, '\0') + "com" + std::string(1, '\0'),  // empty label
      std::string("\x07"),                    // no name at all
      std::string("\x07") + "a.b" + std::string(1, '\0'),  // a dot inside a label
  };
  // icmp (no ports) with a port.
  std::string icmp = rule_order_key(parsed("service icmp 10.0.0.1"));
  icmp.back() = '\x01';
  bad.push_back(icmp);
  for (const std::string& b : bad) {
    EXPECT_FALSE(rule_from_order_key(b)) << testing::PrintToString(b);
    std::string lookup;
    EXPECT_FALSE(rule_key_of_order_key(b, &lookup)) << testing::PrintToString(b);
  }
}

}  // namespace
}  // namespace cg
