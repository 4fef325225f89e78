// Packet classification, per encapsulation and per rule kind. Every match is
// checked through Classified::has(), which requires the emitted key bytes to
// equal rule_key() of the rule, with the same kind and key_hash().
#include <gtest/gtest.h>

#include "cuckoogate/keys/classify.hpp"
#include "h2_builder.hpp"
#include "keys_test_util.hpp"

namespace cg {
namespace {

using test::Bytes;
using test::classify_frame;
using test::Packet;

Bytes http(std::string_view req) {
  return Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80).payload(req).frame();
}

// ---- L3/L4 and the address kinds -------------------------------------------

TEST(Classify, Ipv4TcpEmitsFlowAddressesAndService) {
  const auto c = classify_frame(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1234, 80).frame());
  EXPECT_FALSE(c.malformed());
  EXPECT_EQ(c.keys->n, 6u);
  EXPECT_TRUE(c.matches("flow tcp 10.0.0.1:1234 10.0.0.2:80"));
  EXPECT_TRUE(c.matches("src 10.0.0.1"));
  EXPECT_TRUE(c.matches("dst 10.0.0.2"));
  EXPECT_TRUE(c.matches("ip 10.0.0.1"));
  EXPECT_TRUE(c.matches("ip 10.0.0.2"));
  EXPECT_TRUE(c.matches("service tcp 10.0.0.2:80"));
  EXPECT_EQ(c.count(RuleKind::kIp), 2u);
}

TEST(Classify, DirectionAndFieldsMatter) {
  const auto c = classify_frame(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1234, 80).frame());
  EXPECT_FALSE(c.matches("flow tcp 10.0.0.2:80 10.0.0.1:1234"));  // other direction
  EXPECT_FALSE(c.matches("flow udp 10.0.0.1:1234 10.0.0.2:80"));
  EXPECT_FALSE(c.matches("src 10.0.0.2"));
  EXPECT_FALSE(c.matches("dst 10.0.0.1"));
  EXPECT_FALSE(c.matches("service tcp 10.0.0.1:1234"));
  EXPECT_FALSE(c.matches("service tcp 10.0.0.2:81"));
  EXPECT_FALSE(c.matches("service udp 10.0.0.2:80"));
}

TEST(Classify, Ipv6UdpAndSctp) {
  const auto u = classify_frame(Packet().ipv6("2001:db8::1", "2001:db8::2").udp(53, 5353).frame());
  EXPECT_FALSE(u.malformed());
  EXPECT_TRUE(u.matches("flow udp [2001:db8::1]:53 [2001:db8::2]:5353"));
  EXPECT_TRUE(u.matches("service udp [2001:db8::2]:5353"));
  EXPECT_TRUE(u.matches("src 2001:db8::1"));
  EXPECT_TRUE(u.matches("ip 2001:db8::2"));
  const auto s = classify_frame(Packet().ipv4("192.0.2.1", "192.0.2.2").sctp(5000, 6000).frame());
  EXPECT_TRUE(s.matches("flow sctp 192.0.2.1:5000 192.0.2.2:6000"));
  EXPECT_TRUE(s.matches("service 132 192.0.2.2:6000"));
}

TEST(Classify, ProtocolsWithoutPortsUseZeroPorts) {
  const auto i4 = classify_frame(Packet().ipv4("10.0.0.1", "10.0.0.2").icmp().frame());
  EXPECT_TRUE(i4.matches("flow icmp 10.0.0.1 10.0.0.2"));
  EXPECT_TRUE(i4.matches("service icmp 10.0.0.2"));
  const auto i6 = classify_frame(Packet().ipv6("2001:db8::1", "2001:db8::2").icmp().frame());
  EXPECT_TRUE(i6.matches("flow icmpv6 2001:db8::1 2001:db8::2"));
  const auto gre = classify_frame(Packet().ipv4("10.0.0.1", "10.0.0.2").proto(47).payload("xxxx").frame());
  EXPECT_TRUE(gre.matches("flow 47 10.0.0.1 10.0.0.2"));
  EXPECT_FALSE(gre.malformed());
}

TEST(Classify, Ipv4MappedIpv6AddressStaysIpv6) {
  const auto c = classify_frame(Packet().ipv6("::ffff:10.0.0.1", "2001:db8::2").udp(1, 2).frame());
  EXPECT_TRUE(c.matches("src ::ffff:10.0.0.1"));
  EXPECT_FALSE(c.matches("src 10.0.0.1"));
}

// ---- L2 ----------------------------------------------------------------------

TEST(Classify, VlanAndQinQ) {
  const auto v = classify_frame(Packet().vlan(10).ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).frame());
  EXPECT_TRUE(v.matches("flow udp 10.0.0.1:1 10.0.0.2:2"));
  const auto q = classify_frame(
      Packet().vlan(100, 0x88a8).vlan(200).ipv6("2001:db8::1", "2001:db8::2").tcp(1, 2).frame());
  EXPECT_FALSE(q.malformed());
  EXPECT_TRUE(q.matches("flow tcp [2001:db8::1]:1 [2001:db8::2]:2"));
  const auto qq = classify_frame(Packet().vlan(1).vlan(2).ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).frame());
  EXPECT_TRUE(qq.matches("src 10.0.0.1"));
}

TEST(Classify, NonIpMatchesNothing) {
  const auto arp = classify_frame(Packet().eth_type(0x0806).payload("arp arp arp arp").frame());
  EXPECT_EQ(arp.keys->n, 0u);
  EXPECT_FALSE(arp.malformed());
}

// Issue 11, item 5: tunnels. The inner packet gives every key; the outermost
// IP header's addresses are keys too.
TEST(Classify, TunnelsGiveInnerKeysAndOuterAddresses) {
  auto inner = [](Packet p) {
    const Bytes f = p.frame();
    return Bytes(f.begin() + 14, f.end());
  };
  auto cat = [](Bytes a, const Bytes& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  const Bytes ip4 = inner(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80)
                              .payload("GET / HTTP/1.1\r\nHost: blocked.example\r\n\r\n"));
  const Bytes ip6 = inner(Packet().ipv6("2001:db8::1", "2001:db8::2").udp(40000, 53).payload(test::dns_query("blocked.example")));
  const Bytes eth4 = Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80)
                         .payload("GET / HTTP/1.1\r\nHost: blocked.example\r\n\r\n").frame();
  auto check = [](const test::Classified& c, const char* outer_src, const char* what) {
    EXPECT_FALSE(c.malformed()) << what;
    EXPECT_TRUE(c.matches(std::string("src ") + outer_src)) << what;
    EXPECT_TRUE(c.matches("host blocked.example")) << what;
  };
  // IPv4-in-IPv4 (protocol 4) and 6in4 (protocol 41).
  const auto ipip = classify_frame(Packet().ipv4("192.0.2.1", "192.0.2.2").proto(4).payload(ip4).frame());
  check(ipip, "192.0.2.1", "ipip");
  EXPECT_TRUE(ipip.matches("src 10.0.0.1"));
  EXPECT_TRUE(ipip.matches("flow tcp 10.0.0.1:40000 10.0.0.2:80"));
  EXPECT_TRUE(ipip.matches("dst 192.0.2.2"));
  check(classify_frame(Packet().ipv4("192.0.2.1", "192.0.2.2").proto(41).payload(ip6).frame()), "192.0.2.1", "6in4");
  // IPv6 carrying IPv4.
  check(classify_frame(Packet().ipv6("2001:db8:ff::1", "2001:db8:ff::2").proto(4).payload(ip4).frame()),
        "2001:db8:ff::1", "4in6");
  // GRE: plain IPv4 inside; with checksum, key and sequence; Ethernet inside.
  check(classify_frame(Packet().ipv4("192.0.2.1", "192.0.2.2").proto(47).payload(cat({0x00, 0x00, 0x08, 0x00}, ip4)).frame()),
        "192.0.2.1", "gre");
  const Bytes gre_cks = {0xb0, 0x00, 0x86, 0xdd, 0, 0, 0, 0, 0, 0, 0, 42, 0, 0, 0, 7};
  check(classify_frame(Packet().ipv4("192.0.2.1", "192.0.2.2").proto(47).payload(cat(gre_cks, ip6)).frame()),
        "192.0.2.1", "gre c/k/s");
  check(classify_frame(Packet().ipv4("192.0.2.1", "192.0.2.2").proto(47).payload(cat({0x00, 0x00, 0x65, 0x58}, eth4)).frame()),
        "192.0.2.1", "gre teb");
  // VXLAN (flags with the VNI bit, VNI 42) and GENEVE (one 4-byte option).
  const Bytes vxlan = {0x08, 0, 0, 0, 0, 0, 42, 0};
  const auto vx = classify_frame(Packet().ipv4("192.0.2.1", "192.0.2.2").udp(50000, 4789).payload(cat(vxlan, eth4)).frame());
  check(vx, "192.0.2.1", "vxlan");
  EXPECT_EQ(vx.count(RuleKind::kService), 1u);  // the inner packet's, not the tunnel's
  EXPECT_TRUE(vx.matches("service tcp 10.0.0.2:80"));
  // ... also on 8472, Linux's first VXLAN port, which flannel uses (it passed undecapsulated)
  check(classify_frame(Packet().ipv4("192.0.2.1", "192.0.2.2").udp(50000, 8472).payload(cat(vxlan, eth4)).frame()),
        "192.0.2.1", "vxlan 8472");
  const Bytes geneve = {0x01, 0x00, 0x65, 0x58, 0, 0, 42, 0, 0x01, 0x02, 0x03, 0x00};
  check(classify_frame(Packet().ipv4("192.0.2.1", "192.0.2.2").udp(50000, 6081).payload(cat(geneve, eth4)).frame()),
        "192.0.2.1", "geneve");
  // Nested: IP-in-IP inside VXLAN; the outermost addresses are the keys.
  const Bytes mid = Packet().ipv4("198.51.100.1", "198.51.100.2").proto(4).payload(ip4).frame();
  const auto nested = classify_frame(Packet().ipv4("192.0.2.1", "192.0.2.2").udp(50000, 4789).payload(cat(vxlan, mid)).frame());
  check(nested, "192.0.2.1", "nested");
  EXPECT_TRUE(nested.matches("flow tcp 10.0.0.1:40000 10.0.0.2:80"));
  // UDP to 4789 that is not VXLAN, and GRE version 1: judged as they are.
  const auto notvx = classify_frame(Packet().ipv4("192.0.2.1", "192.0.2.2").udp(50000, 4789).payload("plain data").frame());
  EXPECT_TRUE(notvx.matches("service udp 192.0.2.2:4789"));
  EXPECT_FALSE(notvx.malformed());
  const auto gre1 = classify_frame(Packet().ipv4("192.0.2.1", "192.0.2.2").proto(47).payload(cat({0x30, 0x01, 0x88, 0x0b}, ip4)).frame());
  EXPECT_FALSE(gre1.matches("host blocked.example"));
  EXPECT_TRUE(gre1.matches("src 192.0.2.1"));
}

// A tunnel whose inner packet is junk or cut short still gives the outermost
// addresses (flagged malformed): wrapping junk in GRE or IP-in-IP must not
// get a packet past a rule on a tunnel endpoint.
TEST(Classify, ATunnelWithAMalformedInnerPacketKeepsItsOuterAddresses) {
  auto cat = [](Bytes a, const Bytes& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  const Bytes junk(24, 0xee);                                  // version nibble 14
  const Bytes cut4 = {0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6};      // 10 bytes of an IPv4 header
  const Bytes cut6 = {0x60, 0, 0, 0, 0, 8, 17, 64};            // 8 bytes of an IPv6 header
  struct Case {
    const char* what;
    Bytes frame;
    const char* src;
    const char* dst;
  };
  const Case cases[] = {
      {"gre junk", Packet().ipv4("192.0.2.1", "192.0.2.44").proto(47).payload(cat({0, 0, 0x08, 0x00}, junk)).frame(),
       "192.0.2.1", "192.0.2.44"},
      {"gre cut ipv4", Packet().ipv4("192.0.2.1", "192.0.2.44").proto(47).payload(cat({0, 0, 0x08, 0x00}, cut4)).frame(),
       "192.0.2.1", "192.0.2.44"},
      {"ipip junk", Packet().ipv4("192.0.2.1", "192.0.2.44").proto(4).payload(junk).frame(), "192.0.2.1",
       "192.0.2.44"},
      {"ipip cut", Packet().ipv4("192.0.2.1", "192.0.2.44").proto(4).payload(cut4).frame(), "192.0.2.1",
       "192.0.2.44"},
      {"6in4 junk", Packet().ipv4("192.0.2.1", "192.0.2.44").proto(41).payload(junk).frame(), "192.0.2.1",
       "192.0.2.44"},
      {"6in6 cut", Packet().ipv6("2001:db8:1::1", "2001:db8:2::44").proto(41).payload(cut6).frame(),
       "2001:db8:1::1", "2001:db8:2::44"},
      {"gre6 junk",
       Packet().ipv6("2001:db8:1::1", "2001:db8:2::44").proto(47).payload(cat({0, 0, 0x86, 0xdd}, junk)).frame(),
       "2001:db8:1::1", "2001:db8:2::44"},
  };
  for (const Case& c : cases) {
    const auto k = classify_frame(c.frame);
    EXPECT_TRUE(k.malformed()) << c.what;
    EXPECT_TRUE(k.matches(std::string("src ") + c.src)) << c.what;
    EXPECT_TRUE(k.matches(std::string("dst ") + c.dst)) << c.what;
    EXPECT_TRUE(k.matches(std::string("ip ") + c.src)) << c.what;
    EXPECT_TRUE(k.matches(std::string("ip ") + c.dst)) << c.what;
    EXPECT_EQ(k.count(RuleKind::kFlow), 0u) << c.what;  // nothing of the inner packet
  }
  // Nested: a valid IP-in-IP inside GRE whose innermost packet is junk keeps
  // the outermost addresses (not the middle ones alone).
  const Bytes mid = Packet().ipv4("198.51.100.1", "198.51.100.2").proto(4).payload(junk).frame();
  const auto nested = classify_frame(
      Packet().ipv4("192.0.2.1", "192.0.2.44").proto(47).payload(cat({0, 0, 0x08, 0x00}, Bytes(mid.begin() + 14, mid.end()))).frame());
  EXPECT_TRUE(nested.malformed());
  EXPECT_TRUE(nested.matches("dst 192.0.2.44"));
}

// Issue 11, item 5: tag stacks of any depth and TPID 0x9100, MPLS label
// stacks and PPPoE sessions all reach the IP packet inside.
TEST(Classify, VlanStacksMplsAndPppoeReachTheIpPacket) {
  const auto three = classify_frame(
      Packet().vlan(1, 0x9100).vlan(2, 0x88a8).vlan(3).ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).frame());
  EXPECT_TRUE(three.matches("flow udp 10.0.0.1:1 10.0.0.2:2"));
  Packet deep;
  for (uint16_t t = 1; t <= 40; ++t) deep.vlan(t);
  EXPECT_TRUE(classify_frame(deep.ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).frame()).matches("src 10.0.0.1"));

  auto inner = [](Packet p) {  // the IP packet of a frame, without its Ethernet header
    const Bytes f = p.frame();
    return Bytes(f.begin() + 14, f.end());
  };
  auto wrap = [](uint16_t ethertype, Bytes head, const Bytes& ip) {
    head.insert(head.end(), ip.begin(), ip.end());
    return Packet().eth_type(ethertype).payload(head).frame();
  };
  const Bytes v4 = inner(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80)
                             .payload("GET / HTTP/1.1\r\nHost: blocked.example\r\n\r\n"));
  const Bytes v6 = inner(Packet().ipv6("2001:db8::1", "2001:db8::2").udp(40000, 53).payload(test::dns_query("blocked.example")));
  // MPLS: two labels (bottom of stack on the second), then IPv4 or IPv6.
  const Bytes labels = {0x00, 0x01, 0x00, 0x40, 0x00, 0x02, 0x01, 0x40};
  const auto m4 = classify_frame(wrap(0x8847, labels, v4));
  EXPECT_TRUE(m4.matches("src 10.0.0.1"));
  EXPECT_TRUE(m4.matches("host blocked.example"));
  EXPECT_TRUE(classify_frame(wrap(0x8848, labels, v6)).matches("host blocked.example"));
  // PPPoE session: ver/type 0x11, code 0, session 0x1234, length, PPP protocol.
  const Bytes ppp4 = {0x11, 0x00, 0x12, 0x34, 0x00, 0x00, 0x00, 0x21};
  const Bytes ppp6 = {0x11, 0x00, 0x12, 0x34, 0x00, 0x00, 0x00, 0x57};
  const auto p4 = classify_frame(wrap(0x8864, ppp4, v4));
  EXPECT_TRUE(p4.matches("dst 10.0.0.2"));
  EXPECT_TRUE(p4.matches("host blocked.example"));
  EXPECT_TRUE(classify_frame(wrap(0x8864, ppp6, v6)).matches("dst 2001:db8::2"));
  // Not IP inside (PPP LCP, an Ethernet pseudowire), or cut: no keys.
  const Bytes lcp = {0x11, 0x00, 0x12, 0x34, 0x00, 0x00, 0xc0, 0x21};
  EXPECT_EQ(classify_frame(wrap(0x8864, lcp, v4)).keys->n, 0u);
  const Bytes pw = {0x00, 0x01, 0x01, 0x40, 0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(classify_frame(wrap(0x8847, pw, {0x02, 0x00})).keys->n, 0u);
  const auto cut = classify_frame(wrap(0x8847, {0x00, 0x01, 0x00}, {}));
  EXPECT_TRUE(cut.malformed());
  EXPECT_EQ(cut.keys->n, 0u);
}

TEST(Classify, EthernetPaddingIsNotPayload) {
  Bytes f = Packet().ipv4("10.0.0.1", "10.0.0.2").udp(1000, 53).frame();
  f.resize(80, 0);  // padding beyond the IP total length
  const auto c = classify_frame(f);
  EXPECT_FALSE(c.malformed());
  EXPECT_EQ(c.count(RuleKind::kHost), 0u);
  EXPECT_TRUE(c.matches("flow udp 10.0.0.1:1000 10.0.0.2:53"));
}

// ---- IPv4 options, IPv6 extension headers, fragments -------------------------

TEST(Classify, Ipv4OptionsAreSkipped) {
  const Bytes f = Packet()
                      .ipv4("10.0.0.1", "10.0.0.2")
                      .ipv4_options({0x94, 0x04, 0x00, 0x00, 0x01, 0x01, 0x01})  // RA + NOPs
                      .tcp(1234, 8080)
                      .payload("GET /x HTTP/1.1\r\nHost: a.example\r\n\r\n")
                      .frame();
  const auto c = classify_frame(f);
  EXPECT_FALSE(c.malformed());
  EXPECT_TRUE(c.matches("flow tcp 10.0.0.1:1234 10.0.0.2:8080"));
  EXPECT_TRUE(c.matches("url a.example/x"));
}

TEST(Classify, Ipv6ExtensionChainIsWalked) {
  const Bytes f = Packet()
                      .ipv6("2001:db8::1", "2001:db8::2")
                      .ipv6_ext(0)
                      .ipv6_ext(43, 14)
                      .ipv6_ext(60, 30)
                      .tcp(1234, 443)
                      .payload(test::tls_client_hello("sni.example.net"))
                      .frame();
  const auto c = classify_frame(f);
  EXPECT_FALSE(c.malformed());
  EXPECT_TRUE(c.matches("flow tcp [2001:db8::1]:1234 [2001:db8::2]:443"));
  EXPECT_TRUE(c.matches("host sni.example.net"));
}

TEST(Classify, Ipv6AuthenticationHeaderAndFragmentHeaderInTheChain) {
  const Bytes f = Packet()
                      .ipv6("2001:db8::1", "2001:db8::2")
                      .ipv6_ext(0)
                      .ipv6_ext(51, 12)
                      .ipv6_ext(60)
                      .fragment(0, false)  // atomic fragment
                      .udp(1000, 53)
                      .payload(test::dns_query("ah.example"))
                      .frame();
  const auto c = classify_frame(f);
  EXPECT_FALSE(c.malformed());
  EXPECT_TRUE(c.matches("flow udp [2001:db8::1]:1000 [2001:db8::2]:53"));
  EXPECT_TRUE(c.matches("host ah.example"));
}

// Linux walks any number of extension headers (an IPv6 SYN behind 17 of them
// is answered), so every chain that fits the packet reaches the transport.
TEST(Classify, Ipv6ExtensionChainsOfAnyLengthReachTheTransport) {
  for (int count : {16, 17, 100}) {
    Packet p;
    p.ipv6("2001:db8::1", "2001:db8::2");
    for (int i = 0; i < count; ++i) p.ipv6_ext(60);
    const auto c = classify_frame(p.tcp(1, 443, 0x02).frame());
    EXPECT_FALSE(c.malformed()) << count;
    EXPECT_TRUE(c.matches("flow tcp [2001:db8::1]:1 [2001:db8::2]:443")) << count;
  }
  // A chain cut by the end of the packet is still malformed.
  Packet p;
  p.ipv6("2001:db8::1", "2001:db8::2");
  for (int i = 0; i < 20; ++i) p.ipv6_ext(60);
  Bytes f = p.udp(1, 2).frame();
  f.resize(14 + 40 + 8 * 10 + 4);
  const auto c = classify_frame(f);
  EXPECT_TRUE(c.malformed());
  EXPECT_TRUE(c.matches("dst 2001:db8::2"));
  EXPECT_EQ(c.count(RuleKind::kFlow), 0u);
}

TEST(Classify, Ipv6NoNextHeaderIsAProtocolWithoutPorts) {
  const auto c = classify_frame(Packet().ipv6("2001:db8::1", "2001:db8::2").frame());
  EXPECT_FALSE(c.malformed());
  EXPECT_TRUE(c.matches("flow 59 2001:db8::1 2001:db8::2"));
}

TEST(Classify, FirstFragmentsCarryPortsBothFamilies) {
  const auto v4 = classify_frame(
      Packet().ipv4("10.0.0.1", "10.0.0.2").fragment(0, true).udp(1000, 53)
          .payload(test::dns_query("frag.example.org")).frame());
  EXPECT_FALSE(v4.malformed());
  EXPECT_FALSE(v4.keys->non_first_fragment);
  EXPECT_TRUE(v4.matches("flow udp 10.0.0.1:1000 10.0.0.2:53"));
  EXPECT_TRUE(v4.matches("host example.org"));
  const auto v6 = classify_frame(
      Packet().ipv6("2001:db8::1", "2001:db8::2").ipv6_ext(0).fragment(0, true).tcp(1, 80)
          .payload("GET / HTTP/1.1\r\nHost: f.example\r\n\r\n").frame());
  EXPECT_FALSE(v6.malformed());
  EXPECT_TRUE(v6.matches("flow tcp [2001:db8::1]:1 [2001:db8::2]:80"));
  EXPECT_TRUE(v6.matches("url f.example/"));
}

TEST(Classify, NonFirstFragmentsMatchAddressRulesOnly) {
  for (const Bytes& f :
       {Packet().ipv4("10.0.0.1", "10.0.0.2").fragment(185, false).tcp(1, 80)
            .payload("GET / HTTP/1.1\r\nHost: f.example\r\n\r\n").frame(),
        Packet().ipv6("2001:db8::1", "2001:db8::2")
            .fragment(185, true).udp(1, 53).payload(test::dns_query("f.example")).frame()}) {
    const auto c = classify_frame(f);
    EXPECT_FALSE(c.malformed());
    EXPECT_TRUE(c.keys->non_first_fragment);
    EXPECT_EQ(c.keys->n, 4u);
    EXPECT_EQ(c.count(RuleKind::kSrc), 1u);
    EXPECT_EQ(c.count(RuleKind::kDst), 1u);
    EXPECT_EQ(c.count(RuleKind::kIp), 2u);
  }
}

// ---- malformed -------------------------------------------------------------

TEST(Classify, CutTcpHeaderIsMalformedButKeepsAddresses) {
  Bytes f = Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1234, 80).frame();
  f.resize(14 + 20 + 10);
  const auto c = classify_frame(f);
  EXPECT_TRUE(c.malformed());
  EXPECT_TRUE(c.matches("src 10.0.0.1"));
  EXPECT_TRUE(c.matches("ip 10.0.0.2"));
  EXPECT_EQ(c.count(RuleKind::kFlow), 0u);
  EXPECT_EQ(c.count(RuleKind::kService), 0u);
}

TEST(Classify, InconsistentHeadersAreMalformed) {
  Bytes bad_ihl = Packet().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).frame();
  bad_ihl[14] = 0x44;  // IHL 4
  EXPECT_TRUE(classify_frame(bad_ihl).malformed());
  Bytes long_total = Packet().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).frame();
  long_total[16] = 0x05;  // total length beyond the frame
  const auto lt = classify_frame(long_total);
  EXPECT_TRUE(lt.malformed());
  EXPECT_TRUE(lt.matches("dst 10.0.0.2"));
  Bytes bad_udp = Packet().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).frame();
  bad_udp[14 + 20 + 5] = 4;  // UDP length < 8
  EXPECT_TRUE(classify_frame(bad_udp).malformed());
  Bytes bad_doff = Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2).frame();
  bad_doff[14 + 20 + 12] = 0x40;  // data offset 4
  EXPECT_TRUE(classify_frame(bad_doff).malformed());
  Bytes wrong_version = Packet().ipv6("2001:db8::1", "2001:db8::2").udp(1, 2).frame();
  wrong_version[14] = 0x40;
  EXPECT_TRUE(classify_frame(wrong_version).malformed());
  Bytes cut_ext = Packet().ipv6("2001:db8::1", "2001:db8::2").ipv6_ext(60, 30).frame();
  cut_ext.resize(cut_ext.size() - 8);
  const auto ce = classify_frame(cut_ext);
  EXPECT_TRUE(ce.malformed());
  EXPECT_TRUE(ce.matches("src 2001:db8::1"));
  EXPECT_TRUE(classify_frame(Bytes(10, 0)).malformed());
  Bytes cut_vlan = Packet().vlan(5).ipv4("10.0.0.1", "10.0.0.2").frame();
  cut_vlan.resize(16);
  EXPECT_TRUE(classify_frame(cut_vlan).malformed());
}

TEST(Classify, TcpOptionsAreSkipped) {
  const auto c = classify_frame(Packet().ipv4("10.0.0.1", "10.0.0.2")
                                    .tcp(1, 80)
                                    .tcp_options({2, 4, 0x05, 0xb4, 1, 1, 4, 2})
                                    .payload("GET /o HTTP/1.0\r\nHost: opt.example\r\n\r\n")
                                    .frame());
  EXPECT_FALSE(c.malformed());
  EXPECT_TRUE(c.matches("url opt.example/o"));
}

// ---- url and host from HTTP ----------------------------------------------------

TEST(ClassifyHttp, OriginFormTakesHostHeaderWithMixedCaseAndPort) {
  const auto c = classify_frame(http(
      "GET /Path/Page?X=1&y=%20 HTTP/1.1\r\nUser-Agent: t\r\nhOsT:  WWW.Example.COM:8080 \r\n\r\n"));
  EXPECT_TRUE(c.matches("url www.example.com:8080/Path/Page?X=1&y=%20"));
  EXPECT_FALSE(c.matches("url www.example.com/Path/Page?X=1&y=%20"));
  EXPECT_TRUE(c.matches("host www.example.com"));
  EXPECT_TRUE(c.matches("host example.com"));
  EXPECT_TRUE(c.matches("host com"));
  EXPECT_FALSE(c.matches("url www.example.com:8080/path/page?x=1&y=%20"));
}

TEST(ClassifyHttp, DefaultPortIsDropped) {
  const auto c = classify_frame(http("POST /a HTTP/1.0\r\nHost: example.com:80\r\n\r\nbody"));
  EXPECT_TRUE(c.matches("url example.com/a"));
  EXPECT_TRUE(c.matches("url http://example.com:80/a"));
  EXPECT_EQ(c.count(RuleKind::kUrl), 1u);
  const auto d = classify_frame(http("GET /a HTTP/1.1\r\nHost: Example.com.\r\n\r\n"));
  EXPECT_TRUE(d.matches("url example.com/a"));
  EXPECT_TRUE(d.matches("host example.com"));
}

TEST(ClassifyHttp, AbsoluteFormTakesHostFromTarget) {
  const auto c = classify_frame(
      http("GET http://Proxy.Example.NET:3128/q?x HTTP/1.1\r\nHost: other.org\r\n\r\n"));
  EXPECT_TRUE(c.matches("url proxy.example.net:3128/q?x"));
  EXPECT_TRUE(c.matches("host example.net"));
  // Node and Express route by the Host header whatever the target: a Host
  // naming another host is looked up too (it passed a host rule before).
  EXPECT_TRUE(c.matches("host other.org"));
  EXPECT_FALSE(c.matches("url other.org/q?x"));  // url keys come from the target alone
  // ... whatever the target's port (Node parses it laxly and routes by Host).
  const auto badport = classify_frame(http("GET http://ok.example:x/ HTTP/1.1\r\nHost: blocked.example\r\n\r\n"));
  EXPECT_TRUE(badport.matches("host blocked.example"));
  EXPECT_TRUE(badport.matches("host ok.example"));
  const auto connect = classify_frame(http("CONNECT a.example:443 HTTP/1.1\r\nHost: b.example:443\r\n\r\n"));
  EXPECT_TRUE(connect.matches("host a.example"));
  EXPECT_TRUE(connect.matches("host b.example"));
  // The same host twice (any case, any port) is looked up once.
  const auto same = classify_frame(http("GET http://A.example/ HTTP/1.1\r\nHost: a.EXAMPLE:80\r\n\r\n"));
  EXPECT_EQ(same.count(RuleKind::kHost), classify_frame(http("GET http://a.example/ HTTP/1.1\r\n\r\n")).count(RuleKind::kHost));
  const auto bare = classify_frame(http("HEAD HTTP://example.com HTTP/1.1\r\n\r\n"));
  EXPECT_TRUE(bare.matches("url example.com/"));
  const auto query = classify_frame(http("GET http://example.com?q HTTP/1.1\r\n\r\n"));
  EXPECT_TRUE(query.matches("url example.com/?q"));
  const auto user = classify_frame(http("GET http://u:p@example.com/ HTTP/1.1\r\n\r\n"));
  EXPECT_TRUE(user.matches("url example.com/"));
}

// Found by red-teaming: nginx serves the name before a ':' whatever follows
// it, and takes the host from an absolute target of any scheme. Both passed
// a host rule before (a bad port gave no host key at all; only http:// and
// https:// targets were read).
TEST(ClassifyHttp, HostsAsServersPickThem) {
  for (const char* req : {"GET /a HTTP/1.1\r\nHost: a.example:99999\r\n\r\n",
                          "GET /a HTTP/1.1\r\nHost: a.example:abc\r\n\r\n",
                          "GET /a HTTP/1.1\r\nHost: a.example:+80\r\n\r\n"}) {
    const auto c = classify_frame(http(req));
    EXPECT_TRUE(c.matches("host a.example")) << req;
    EXPECT_EQ(c.count(RuleKind::kUrl), 0u) << req;  // no url without a port to put in it
  }
  for (const char* req : {"GET ws://a.example/chat HTTP/1.1\r\nHost: benign.net\r\n\r\n",
                          "GET WSS://a.example HTTP/1.1\r\nHost: benign.net\r\n\r\n",
                          "GET svn+ssh://u@a.example:22/r HTTP/1.1\r\nHost: benign.net\r\n\r\n"}) {
    const auto c = classify_frame(http(req));
    EXPECT_TRUE(c.matches("host a.example")) << req;
    EXPECT_TRUE(c.matches("host benign.net")) << req;  // the Host header too (AbsoluteFormTakesHostFromTarget)
    EXPECT_EQ(c.count(RuleKind::kUrl), 0u) << req;  // url rules are http://
  }
  // Not a scheme: no letter first, or no "://" after it.
  const auto digit = classify_frame(http("GET 1ws://a.example/ HTTP/1.1\r\nHost: benign.net\r\n\r\n"));
  EXPECT_TRUE(digit.matches("host benign.net"));
  const auto colon = classify_frame(http("GET ws:a.example HTTP/1.1\r\nHost: benign.net\r\n\r\n"));
  EXPECT_TRUE(colon.matches("host benign.net"));
}

TEST(ClassifyHttp, EveryMethodOnAnyPort) {
  for (const char* m : {"GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE"}) {
    const auto c = classify_frame(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 9999)
                                      .payload(std::string(m) + " /m HTTP/1.1\r\nHost: m.example\r\n\r\n")
                                      .frame());
    EXPECT_TRUE(c.matches("url m.example/m")) << m;
  }
  const auto connect = classify_frame(http("CONNECT tunnel.example:443 HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(connect.matches("host tunnel.example"));
  EXPECT_EQ(connect.count(RuleKind::kUrl), 0u);
}

// Issue 11, item 6: the url a server resolves, for rules and traffic alike.
TEST(ClassifyHttp, UrlsAreCanonicalisedLikeRules) {
  auto get = [](const std::string& target) {
    return classify_frame(http("GET " + target + " HTTP/1.1\r\nHost: Shop.Example\r\n\r\n"));
  };
  for (const char* t : {"/secret/page", "/%73ecret/page", "//secret//page", "/./secret/./page", "/x/../secret/page",
                        "/secret/x/y/../../page", "/../secret/page", "/secret/page?any=query", "/%73ecret%2fx/../page"}) {
    // The last: to RFC 3986 %2f is an escaped '/', not a separator, so
    // "secret%2Fx" is one segment that ".." removes: the url is /page. nginx
    // decodes it first and serves /secret/page: both are looked up
    // (EscapedDelimitersMatchUrlRulesWrittenEitherWay).
    const auto c = get(t);
    if (std::string_view(t) == "/%73ecret%2fx/../page") {
      EXPECT_TRUE(c.matches("url shop.example/page")) << t;
      EXPECT_TRUE(c.matches("url shop.example/secret/page")) << t;
      continue;
    }
    EXPECT_TRUE(c.matches("url shop.example/secret/page")) << t;
  }
  // A rule with a query matches that query only; its text is canonical too.
  EXPECT_TRUE(get("/a?x=%41").matches("url shop.example/a?x=A"));
  EXPECT_FALSE(get("/a?x=B").matches("url shop.example/a?x=A"));
  EXPECT_TRUE(get("/a?x=B").matches("url shop.example/a"));
  EXPECT_TRUE(get("/a/b/").matches("url shop.example/x/../a//b/"));
  EXPECT_FALSE(get("/a/b/").matches("url shop.example/a/b"));  // a trailing slash is a different resource
  EXPECT_FALSE(get("/Secret/page").matches("url shop.example/secret/page"));  // paths keep their case
  EXPECT_TRUE(get("/%7e%5b").matches("url shop.example/~%5B"));  // unreserved decoded, other escapes upper-cased
  // Padding that canonicalises away cannot push a url past the length limit.
  std::string padded;
  for (int i = 0; i < 800; ++i) padded += "/.";
  padded += "/secret/page";
  const auto p = get(padded);
  EXPECT_TRUE(p.matches("url shop.example/secret/page"));
}

// nginx decodes every escape in a path before it matches locations ("%2F"
// included, then dot segments): a url rule written with the raw character
// must match its escape too (all of these passed before), and one written
// with the escape still matches.
TEST(ClassifyHttp, EscapedDelimitersMatchUrlRulesWrittenEitherWay) {
  const struct {
    const char* path;
    const char* rule;
  } cases[] = {
      {"/a%21b", "url example.com/a!b"},   {"/a%3Ab", "url example.com/a:b"},
      {"/a%40b", "url example.com/a@b"},   {"/a%28b%29", "url example.com/a(b)"},
      {"/a%2Fb", "url example.com/a/b"},   {"/a%2F..%2Fb", "url example.com/b"},
      {"/a%2f%2e%2e%2fb?q=1", "url example.com/b?q=1"}, {"/x%2Fy?k", "url example.com/x/y"},
  };
  for (const auto& c : cases) {
    const auto k = classify_frame(http(std::string("GET ") + c.path + " HTTP/1.1\r\nHost: example.com\r\n\r\n"));
    EXPECT_TRUE(k.matches(c.rule)) << c.path << " vs " << c.rule;
  }
  // Written with the escape: the plain form still matches.
  const auto k = classify_frame(http("GET /a%21b HTTP/1.1\r\nHost: example.com\r\n\r\n"));
  EXPECT_TRUE(k.matches("url example.com/a%21b"));
  // What may not stand raw stays escaped ('?', '#', '%', space): no new url.
  const auto q = classify_frame(http("GET /a%3Fb%23c%25d%20e HTTP/1.1\r\nHost: example.com\r\n\r\n"));
  EXPECT_EQ(q.count(RuleKind::kUrl), 1u);
  // No escape, no second form.
  EXPECT_EQ(classify_frame(http("GET /a!b HTTP/1.1\r\nHost: example.com\r\n\r\n")).count(RuleKind::kUrl), 1u);
}

TEST(ClassifyHttp, FragmentInTargetIsDropped) {
  const auto c = classify_frame(http("GET /a?b#c HTTP/1.1\r\nHost: e.example\r\n\r\n"));
  EXPECT_TRUE(c.matches("url e.example/a?b"));
}

TEST(ClassifyHttp, NoHostNoUrlOrHostKey) {
  for (const char* req : {"GET /a HTTP/1.1\r\n\r\n", "GET /a HTTP/1.1\r\nX-Host: a.b\r\n\r\n",
                          "GET /a HTTP/1.1\r\nHost:\r\n\r\n",
                          "GET /a HTTP/1.1\r\nAccept: */*\r\n"}) {  // headers cut before Host
    const auto c = classify_frame(http(req));
    EXPECT_EQ(c.count(RuleKind::kUrl), 0u) << req;
    EXPECT_EQ(c.count(RuleKind::kHost), 0u) << req;
    EXPECT_FALSE(c.malformed());
  }
}

// What nginx and Node accept is a request here too (issue 11: each of these
// walked past a host rule while the server behind read the Host).
// nginx's header parser skips a CR before a line's end: "Host: a\r\r\n"
// is the host a there (it passed a host rule before: "a\r" is no name).
TEST(ClassifyHttp, AHostLineEndingInSeveralCrsIsTheName) {
  for (const char* req : {"GET / HTTP/1.1\r\nHost: a.example\r\r\n\r\n", "GET / HTTP/1.1\r\nHost: a.example \r\r\r\n\r\n"}) {
    const auto c = classify_frame(http(req));
    EXPECT_TRUE(c.matches("host a.example")) << req;
  }
}

// An empty Host line folded onto the next (obs-fold): Apache and HAProxy
// route by the unfolded name (found by an outside check; it gave no key).
TEST(ClassifyHttp, AFoldedHostNameIsTheName) {
  for (const char* req : {"GET / HTTP/1.1\r\nHost:\r\n blocked.example\r\n\r\n",
                          "GET / HTTP/1.1\r\nHost: \r\n\tblocked.example \r\n\r\n",
                          "GET / HTTP/1.1\nhost:\n  blocked.example\n\n",
                          "GET / HTTP/1.1\r\nHost:\r\n \r\n\t\r\n blocked.example\r\n\r\n"}) {  // blank folds first
    const auto c = classify_frame(http(req));
    EXPECT_TRUE(c.matches("host blocked.example")) << req;
  }
  // An empty Host not folded names nothing; a fold cut by the segment's end neither.
  EXPECT_EQ(classify_frame(http("GET / HTTP/1.1\r\nHost:\r\nX: blocked.example\r\n\r\n")).count(RuleKind::kHost), 0u);
  EXPECT_EQ(classify_frame(http("GET / HTTP/1.1\r\nHost:\r\n blocked.exa")).count(RuleKind::kHost), 0u);
}

// Python's http.server splits header lines at a bare CR too (its email
// parser): a Host line behind one is the Host it routes by (an outside check
// had it serve blocked.example through the gateway). The line as nginx
// reads it is still judged; with no bare CR nothing changes.
TEST(ClassifyHttp, AHostLineBehindABareCrIsJudgedToo) {
  const auto a = classify_frame(http("GET /secret HTTP/1.1\r\nX-A: 1\rHost: blocked.example\r\n\r\n"));
  EXPECT_TRUE(a.matches("host blocked.example"));
  EXPECT_TRUE(a.matches("url blocked.example/secret"));
  const auto b =
      classify_frame(http("GET /secret HTTP/1.1\r\nX-A: 1\rHost: blocked.example\r\nHost: ok.example\r\n\r\n"));
  EXPECT_TRUE(b.matches("host blocked.example"));
  EXPECT_TRUE(b.matches("url blocked.example/secret"));
  EXPECT_TRUE(b.matches("host ok.example"));
  EXPECT_TRUE(b.matches("url ok.example/secret"));
  // An absolute-form target names the host; the Host line behind the bare
  // CR is looked up as another Host header.
  const auto c = classify_frame(
      http("GET http://ok.example/x HTTP/1.1\r\nX-A: 1\rHost: blocked.example\r\n\r\n"));
  EXPECT_TRUE(c.matches("host ok.example"));
  EXPECT_TRUE(c.matches("host blocked.example"));
  // A bare CR that makes an empty line ends Python's header block there.
  EXPECT_FALSE(classify_frame(http("GET / HTTP/1.1\r\nX-A: 1\r\rHost: blocked.example\r\n\r\n"))
                   .matches("host blocked.example"));
  // Two readings of a request with a long escaped path and a query: eight
  // url keys, which the key budget holds (the second reading once wrote
  // past it: found by a review under ASan).
  const std::string path = "/" + std::string(1200, 'a') + "%2F?q=1";
  const auto e = classify_frame(http("GET " + path + " HTTP/1.1\r\nX: 1\rHost: b.example\r\nHost: a.example\r\n\r\n"));
  EXPECT_EQ(e.count(RuleKind::kUrl), 8u);
  EXPECT_TRUE(e.matches("url b.example/" + std::string(1200, 'a') + "%2F"));
  EXPECT_TRUE(e.matches("url a.example/" + std::string(1200, 'a') + "%2F"));
  // No bare CR: one Host, one host key per label, as before.
  const auto d = classify_frame(http("GET / HTTP/1.1\r\nHost: one.example\r\nX: 1\r\n\r\n"));
  EXPECT_EQ(d.count(RuleKind::kHost), 2u);  // one.example, example
}

// Several Host lines: nginx, Go and Tomcat refuse the request, Node and
// Python take the first, a server that takes the last routes by that one
// (an outside check got a fine name then a blocked one past the gateway):
// the first and the last are judged. The same name twice is one reading.
TEST(ClassifyHttp, TheFirstAndTheLastOfSeveralHostLinesAreJudged) {
  const auto a = classify_frame(http("GET /s HTTP/1.1\r\nHost: fine.example\r\nHost: blocked.example\r\n\r\n"));
  EXPECT_TRUE(a.matches("host fine.example"));
  EXPECT_TRUE(a.matches("host blocked.example"));
  EXPECT_TRUE(a.matches("url blocked.example/s"));
  const auto b = classify_frame(
      http("GET /s HTTP/1.1\r\nHost: fine.example\r\nX: 1\r\nhost:blocked.example\r\nHost:\r\n\r\n"));
  EXPECT_TRUE(b.matches("host blocked.example"));  // (a last line without a name is not a reading)
  const auto c = classify_frame(http("GET http://ok.example/x HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n"));
  EXPECT_TRUE(c.matches("host ok.example"));
  EXPECT_TRUE(c.matches("host a.example"));
  EXPECT_TRUE(c.matches("host b.example"));
  const auto d = classify_frame(http("GET / HTTP/1.1\r\nHost: one.example\r\nHost: one.example\r\n\r\n"));
  EXPECT_EQ(d.count(RuleKind::kHost), 2u);  // one.example, example: once
  // A first Host line that names nothing does not hide a later one.
  const auto e = classify_frame(http("GET /s HTTP/1.1\r\nHost:\r\nHost: blocked.example\r\n\r\n"));
  EXPECT_TRUE(e.matches("host blocked.example"));
  EXPECT_TRUE(e.matches("url blocked.example/s"));
  // A bare CR gives the second reading: the last Host line is a third, its
  // host keys judged (in origin- and absolute-form, within the key budget).
  const auto f = classify_frame(http(
      "GET /s HTTP/1.1\r\nX: 1\rHost: fine2.example\r\nHost: fine.example\r\nHost: blocked.example\r\n\r\n"));
  EXPECT_TRUE(f.matches("host fine2.example"));
  EXPECT_TRUE(f.matches("host fine.example"));
  EXPECT_TRUE(f.matches("host blocked.example"));
  EXPECT_FALSE(f.malformed());
  const auto g = classify_frame(http(
      "GET http://ok.example/x HTTP/1.1\r\nX: 1\rHost: a.example\r\nHost: b.example\r\nHost: c.example\r\n\r\n"));
  for (const char* h : {"host ok.example", "host a.example", "host b.example", "host c.example"})
    EXPECT_TRUE(g.matches(h)) << h;
  EXPECT_FALSE(g.malformed());
}

// ---- Cleartext HTTP/2 (prior knowledge) -------------------------------------

Bytes h2(const Bytes& block) {
  return Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80).payload(test::h2_start(block)).frame();
}

Bytes fields(std::initializer_list<std::pair<std::string_view, std::string_view>> f) {
  Bytes b;
  for (const auto& [name, value] : f) test::hpack_field(b, name, value);
  return b;
}

Bytes unhex(std::string_view h) {
  Bytes out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoi(std::string(h.substr(i, 2)), nullptr, 16)));
  return out;
}

TEST(ClassifyHttp2, AConnectionsFirstRequestIsJudgedByItsAuthorityAndPath) {
  const auto a = classify_frame(h2(fields({{":method", "GET"}, {":scheme", "http"}, {":authority", "blocked.example"},
                                          {":path", "/secret?x=1#frag"}})));
  EXPECT_TRUE(a.matches("host blocked.example"));
  EXPECT_TRUE(a.matches("url blocked.example/secret?x=1"));
  EXPECT_TRUE(a.matches("url blocked.example/secret"));
  EXPECT_FALSE(a.malformed());
  // Huffman-coded, static-table indices, as curl sends it (coded by python3-hpack).
  const auto b = classify_frame(h2(unhex(
      "8286418f8e8393a9645cbe474d7416e3c0781f4489610525854ff9e600ff7a8825b650c3abbcf2e15383f963e7")));
  EXPECT_TRUE(b.matches("host blocked.example"));
  EXPECT_TRUE(b.matches("url blocked.example:8080/secret?x=1"));
  // RFC 7541 C.4.1: :path "/" from the static table.
  const auto c = classify_frame(h2(unhex("828684418cf1e3c2e5f23a6ba0ab90f4ff")));
  EXPECT_TRUE(c.matches("host www.example.com"));
  EXPECT_TRUE(c.matches("url www.example.com/"));
  // CONNECT: an authority, no url.
  const auto d = classify_frame(h2(fields({{":method", "CONNECT"}, {":authority", "blocked.example:443"}})));
  EXPECT_TRUE(d.matches("host blocked.example"));
  EXPECT_EQ(d.count(RuleKind::kUrl), 0u);
}

TEST(ClassifyHttp2, EveryHostAServerMayRouteByIsJudged) {
  // No :authority: the Host field, url included (RFC 9113 §8.3.1).
  const auto a = classify_frame(h2(fields({{":method", "GET"}, {":path", "/s"}, {"host", "blocked.example"}})));
  EXPECT_TRUE(a.matches("url blocked.example/s"));
  // :authority and another Host field: both names.
  const auto b = classify_frame(
      h2(fields({{":method", "GET"}, {":authority", "fine.example"}, {":path", "/s"}, {"host", "blocked.example"}})));
  EXPECT_TRUE(b.matches("url fine.example/s"));
  EXPECT_TRUE(b.matches("host blocked.example"));
  // Several Host fields: the first and the last, each a reading of its own.
  const auto c = classify_frame(h2(fields({{":method", "GET"}, {":path", "/s"}, {"host", "fine.example"},
                                          {"host", "other.example"}, {"host", "blocked.example"}})));
  EXPECT_TRUE(c.matches("url fine.example/s"));
  EXPECT_TRUE(c.matches("url blocked.example/s"));
  // Two :authority fields: the last one's host keys too.
  const auto g = classify_frame(
      h2(fields({{":authority", "fine.example"}, {":authority", "blocked.example"}, {":path", "/s"}})));
  EXPECT_TRUE(g.matches("url fine.example/s"));
  EXPECT_TRUE(g.matches("host blocked.example"));
  // An empty :authority names nothing: the Host field does.
  const auto d = classify_frame(h2(fields({{":authority", ""}, {":path", "/s"}, {"host", "blocked.example"}})));
  EXPECT_TRUE(d.matches("url blocked.example/s"));
  // A Host field the block adds to its table and names again by index.
  Bytes e = fields({{":method", "GET"}, {":path", "/s"}});
  test::hpack_field(e, "host", "fine.example", /*index=*/true);
  test::hpack_field(e, "x-pad", "blocked.example", /*index=*/true);
  e.push_back(0x40 | 0x3f);  // a literal named like entry 63 (host), value ...
  e.push_back(0x00);         // ... 63 - 63 = 0 more
  test::hpack_string(e, "blocked.example");
  const auto f = classify_frame(h2(e));
  EXPECT_TRUE(f.matches("host fine.example"));
  EXPECT_TRUE(f.matches("url blocked.example/s"));
}

TEST(ClassifyHttp2, WhatIsNotAWholeFirstBlockIsNotRead) {
  Bytes start = test::h2_start(fields({{":authority", "blocked.example"}, {":path", "/"}}));
  // Cut before the HEADERS frame ends: nothing (the stream inspector holds it).
  start.pop_back();
  const auto a = classify_frame(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80).payload(start).frame());
  EXPECT_EQ(a.count(RuleKind::kHost), 0u);
  EXPECT_FALSE(a.malformed());
  // Frames without the preface are not HTTP/2 prior knowledge.
  const Bytes frames(start.begin() + 24, start.end());
  const auto b = classify_frame(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80).payload(frames).frame());
  EXPECT_EQ(b.count(RuleKind::kHost), 0u);
  // A block that fails to decode after its :authority (its server refuses
  // it): that name is judged, and the packet counted malformed.
  Bytes bad = fields({{":authority", "blocked.example"}});
  bad.push_back(0xbe);  // index 62: the table is empty
  const auto c = classify_frame(h2(bad));
  EXPECT_TRUE(c.matches("host blocked.example"));
  EXPECT_TRUE(c.malformed());
  // A block larger than the reader's 16 KiB (one packet of a jumbo frame or
  // a GRO merge; the stream holds no more): flagged malformed.
  const auto d = classify_frame(h2(fields({{":path", "/"}, {"x-big", std::string(17000, 'a')}})));
  EXPECT_TRUE(d.malformed());
}

TEST(ClassifyHttp2, EveryValueOfABlockIsReadHoweverLongItDecodes) {
  // A Huffman-coded :path of 10 241 bytes that decodes to 16 385 (the most
  // a 16 KiB block can decode to fits the reader; a review found a 16 KiB
  // output left such a request without any key): the :authority is judged.
  Bytes b = fields({{":authority", "blocked.example"}});
  b.push_back(0x04);  // :path (static name 4), not indexed, its value:
  test::hpack_int(b, 0x80, 7, 10241);
  b.push_back(0x60);  // '/' is 011000 ...
  b.insert(b.end(), 10239, 0x00);  // ... then '0's (00000) ...
  b.push_back(0x07);               // ... the last one, then padding
  const auto a = classify_frame(h2(b));
  EXPECT_TRUE(a.matches("host blocked.example"));
  EXPECT_FALSE(a.malformed());
  EXPECT_TRUE(a.keys->url_too_long);  // (no url rule is that long)
}

TEST(ClassifyHttp2, APathAsGoAndOldGrpcServersReadItIsJudged) {
  // Absolute-form (Go: url.ParseRequestURI; served under :authority).
  const auto a = classify_frame(
      h2(fields({{":authority", "fine.example"}, {":path", "http://other.example/secret?x"}})));
  EXPECT_TRUE(a.matches("url fine.example/secret?x"));
  EXPECT_TRUE(a.matches("host other.example"));
  // No leading slash (grpc-go before its 2026 fix served "pkg.Svc/Method").
  const auto b = classify_frame(h2(fields({{":authority", "blocked.example"}, {":path", "pkg.Svc/Method"}})));
  EXPECT_TRUE(b.matches("url blocked.example/pkg.Svc/Method"));
  // "*" (OPTIONS): no url.
  const auto c = classify_frame(h2(fields({{":authority", "blocked.example"}, {":path", "*"}})));
  EXPECT_EQ(c.count(RuleKind::kUrl), 0u);
  EXPECT_TRUE(c.matches("host blocked.example"));
}

TEST(ClassifyHttp, RequestsAsLenientServersReadThem) {
  for (const char* p :
       {"GETX / HTTP/1.1\r\nHost: a.example\r\n\r\n",       // any token is a method
        "get / HTTP/1.1\r\nHost: a.example\r\n\r\n", "M-SEARCH+1 / HTTP/1.1\r\nHost: a.example\r\n\r\n",
        "GET /  HTTP/1.1\r\nHost: a.example\r\n\r\n",       // runs of spaces and tabs
        "GET  / HTTP/1.1\r\nHost: a.example\r\n\r\n", "GET\t/\t\tHTTP/1.1 \r\nHost: a.example\r\n\r\n",
        "GET / HTTP/1.1\nHost: a.example\n\n",                   // bare LF line ends
        "\r\n\r\nGET / HTTP/1.1\r\nHost: a.example\r\n\r\n",   // leading empty lines
        "\nGET / HTTP/1.0\nHost: a.example\n\n",
        "\rGET / HTTP/1.1\r\nHost: a.example\r\n\r\n",        // lone CRs first: nginx and Node skip
        "\r\r\n\rGET / HTTP/1.1\r\nHost: a.example\r\n\r\n",  // each CR or LF on its own
        "GET / HTTP/1.01\r\nHost: a.example\r\n\r\n",        // nginx: minor versions of 1 to 3 digits
        "GET / HTTP/1.10\r\nHost: a.example\r\n\r\n", "GET / HTTP/1.999\r\nHost: a.example\r\n\r\n",
        "GET / HTTP/1.0001\r\nHost: a.example\r\n\r\n", "GET / HTTP/1.000000999\r\nHost: a.example\r\n\r\n"}) {
    const auto c = classify_frame(http(p));
    EXPECT_TRUE(c.matches("host a.example")) << p;
    EXPECT_TRUE(c.matches("url a.example/")) << p;
  }
}

// Linux takes the byte before the urgent pointer out of the stream: a Host
// with one extra byte sent as urgent data is read as the blocked name.
TEST(ClassifyHttp, UrgentDataIsRemovedAsLinuxDoes) {
  const std::string req = "GET / HTTP/1.1\r\nHost: blozcked.example\r\n\r\n";
  const auto at = static_cast<uint16_t>(req.find('z') + 1);  // points one past the urgent byte
  auto seg = [&](uint8_t flags, uint16_t ptr) {
    return classify_frame(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80, flags).urgent(ptr).payload(req).frame());
  };
  const auto urg = seg(0x38, at);
  EXPECT_TRUE(urg.matches("host blocked.example"));
  EXPECT_TRUE(urg.matches("url blocked.example/"));
  // Without URG the pointer means nothing; pointing past this segment, the
  // urgent byte is in a later one: the payload is read as it is.
  EXPECT_FALSE(seg(0x18, at).matches("host blocked.example"));
  EXPECT_FALSE(seg(0x38, static_cast<uint16_t>(req.size() + 1)).matches("host blocked.example"));
  EXPECT_TRUE(seg(0x38, static_cast<uint16_t>(req.size() + 1)).matches("host blozcked.example"));
  // A TLS ClientHello with an urgent byte spliced in front of it.
  const Bytes hello = test::tls_client_hello("blocked.example");
  Bytes spliced = {0x00};
  spliced.insert(spliced.end(), hello.begin(), hello.end());
  const auto tls = classify_frame(
      Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 443, 0x38).urgent(1).payload(spliced).frame());
  EXPECT_TRUE(tls.matches("host blocked.example"));
}

// Python's http.server splits its request line with str.split(): it takes
// whitespace before the method, VT, FF, \x1c-\x1f, \x85 and \xa0 as
// separators, any version HTTP/d.d below 2.0 (1 to 10 digits each), any
// method, and "GET path" alone (HTTP/0.9, its header lines still read).
// nginx and Node answer 400 to such lines; Python serves them, and the
// requests behind them on a keep-alive connection (an outside check in
// session 21). They are read as Python reads them.
TEST(ClassifyHttp, RequestLinesAsPythonReadsThemAreJudged) {
  for (const char* p : {" GET /secret HTTP/1.1\r\nHost: blocked.example\r\n\r\n",
                        "\t\x0bGET\x0b/secret\x0cHTTP/1.1\r\nHost: blocked.example\r\n\r\n",
                        "GET\x1c/secret\x1fHTTP/1.1 \x0b\r\r\nHost: blocked.example\r\n\r\n",
                        "GET\xa0/secret\x85HTTP/1.1\r\nHost: blocked.example\r\n\r\n",
                        "\r GET /secret HTTP/1.1\r\nHost: blocked.example\r\n\r\n",
                        "GET /secret HTTP/01.0000000001\r\nHost: blocked.example\r\n\r\n",
                        "GET /secret\r\nHost: blocked.example\r\n\r\n",  // HTTP/0.9
                        "GET /secret HTTP/1.1000\r\nHost: blocked.example\r\n\r\n",
                        // Debian 12's Python 3.11.2 reads the numbers with int(): signs, underscores
                        "GET /secret HTTP/-1.0\r\nHost: blocked.example\r\n\r\n",
                        "GET\x0b/secret HTTP/+1.1\r\nHost: blocked.example\r\n\r\n",
                        "GET /secret HTTP/0_1.0\r\nHost: blocked.example\r\n\r\n",
                        "do_X_1 /secret HTTP/0.9\r\nHost: blocked.example\r\n\r\n",
                        // nginx's reading takes these too, with another target: both are judged
                        "GET \x0b/secret HTTP/1.1\r\nHost: blocked.example\r\n\r\n",
                        "GET /secret\xa0 HTTP/1.1\r\nHost: blocked.example\r\n\r\n",
                        "GET /secret\x1c\tHTTP/1.1\r\nHost: blocked.example\r\n\r\n"}) {
    const auto c = classify_frame(http(p));
    EXPECT_TRUE(c.matches("url blocked.example/secret")) << p;
    EXPECT_TRUE(c.matches("host blocked.example")) << p;
  }
  // Its bare-CR reading of the header lines too.
  const auto d = classify_frame(http(" GET /s HTTP/1.1\r\nX: 1\rHost: blocked.example\r\nHost: fine.example\r\n\r\n"));
  EXPECT_TRUE(d.matches("url blocked.example/s"));
}

TEST(ClassifyHttp, LookAlikesAreNotHttp) {
  // Refused by nginx, Node and Python alike (Python's reading below takes
  // more than nginx's: "GET /" as HTTP/0.9, any "HTTP/" version word).
  for (const char* p :
       {"HTTP/1.1 200 OK\r\nHost: a.example\r\n\r\n", "GET / HTTP/1.1", "GET / x HTTP/1.1\r\nHost: a.example\r\n\r\n",
        "POST /\r\nHost: a.example\r\n\r\n", "GET\r\nHost: a.example\r\n\r\n",
        "\r\r\n\x01GET / HTTP/1.1\r\nHost: a.example\r\n\r\n", "GET / xHTTP/1.1\r\nHost: a.example\r\n\r\n",
        "G(T / HTTP/1.1\r\nHost: a.example\r\n\r\n", "\r\n GET / HTTP/1.1\r\nHost: a.example\r\n\r\n",
        "GET / HTTP\r\nHost: a.example\r\n\r\n"}) {
    const auto c = classify_frame(http(p));
    EXPECT_EQ(c.count(RuleKind::kUrl), 0u) << p;
    EXPECT_EQ(c.count(RuleKind::kHost), 0u) << p;
  }
  // An HTTP request over UDP is not HTTP either.
  const auto udp = classify_frame(Packet().ipv4("10.0.0.1", "10.0.0.2").udp(1, 80)
                                      .payload("GET / HTTP/1.1\r\nHost: a.example\r\n\r\n").frame());
  EXPECT_EQ(udp.count(RuleKind::kUrl), 0u);
}

TEST(ClassifyHttp, LongUrlIsFlaggedNotEmitted) {
  const std::string path(kMaxUrlLen, 'p');
  const auto c = classify_frame(http("GET /" + path + " HTTP/1.1\r\nHost: l.example\r\n\r\n"));
  EXPECT_TRUE(c.keys->url_too_long);
  EXPECT_EQ(c.count(RuleKind::kUrl), 0u);
  EXPECT_TRUE(c.matches("host l.example"));
  const std::string fits(kMaxUrlLen - std::string("l.example/").size(), 'p');
  const auto d = classify_frame(http("GET /" + fits + " HTTP/1.1\r\nHost: l.example\r\n\r\n"));
  EXPECT_FALSE(d.keys->url_too_long);
  EXPECT_TRUE(d.matches("url l.example/" + fits));
}

// ---- host: subdomains, TLS, DNS ----------------------------------------------

TEST(ClassifyHost, NameAndEveryParentButNotLookAlikes) {
  const auto c = classify_frame(http("GET / HTTP/1.1\r\nHost: a.b.example.org\r\n\r\n"));
  EXPECT_EQ(c.count(RuleKind::kHost), 4u);
  for (const char* r : {"host a.b.example.org", "host b.example.org", "host example.org", "host org"})
    EXPECT_TRUE(c.matches(r)) << r;
  EXPECT_FALSE(c.matches("host badexample.org"));
  EXPECT_FALSE(c.matches("host b.example"));
  const auto bad = classify_frame(http("GET / HTTP/1.1\r\nHost: badexample.org\r\n\r\n"));
  EXPECT_FALSE(bad.matches("host example.org"));
}

TEST(ClassifyHost, DeepAndOverlongNamesCannotEscape) {
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += "a.";
  deep += "example.org";  // 411 bytes: longer than any DNS name
  const auto c = classify_frame(http("GET / HTTP/1.1\r\nHost: " + deep + "\r\n\r\n"));
  EXPECT_TRUE(c.matches("host example.org"));
  EXPECT_TRUE(c.matches("host a.example.org"));
  EXPECT_LE(c.count(RuleKind::kHost), kMaxHostKeys);
  EXPECT_LE(c.keys->n, kMaxKeysPerPacket);

  std::string max_labels;  // 127 one-byte labels: 253 bytes
  for (int i = 0; i < 126; ++i) max_labels += "b.";
  max_labels += "c";
  ASSERT_EQ(max_labels.size(), kMaxNameLen);
  const auto m = classify_frame(Packet().ipv4("10.0.0.1", "10.0.0.2").udp(1, 53)
                                    .payload(test::dns_query(max_labels)).frame());
  EXPECT_EQ(m.count(RuleKind::kHost), 127u);
  EXPECT_TRUE(m.matches("host " + max_labels));
  EXPECT_TRUE(m.matches("host b.c"));
}

TEST(ClassifyHost, TlsClientHelloSniOnAnyPort) {
  const auto c = classify_frame(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(5555, 8443)
                                    .payload(test::tls_client_hello("Api.Example.COM")).frame());
  EXPECT_TRUE(c.matches("host api.example.com"));
  EXPECT_TRUE(c.matches("host example.com"));
  EXPECT_EQ(c.count(RuleKind::kUrl), 0u);
  const auto none = classify_frame(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(5555, 443)
                                       .payload(test::tls_client_hello("")).frame());
  EXPECT_EQ(none.count(RuleKind::kHost), 0u);
  EXPECT_FALSE(none.malformed());
  Bytes server_hello = test::tls_client_hello("s.example");
  server_hello[5] = 2;
  const auto sh = classify_frame(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(443, 5555)
                                     .payload(server_hello).frame());
  EXPECT_EQ(sh.count(RuleKind::kHost), 0u);
  Bytes cut = test::tls_client_hello("cut.example");
  cut.resize(cut.size() - 3);  // ClientHello continues in the next segment
  const auto ct = classify_frame(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 443).payload(cut).frame());
  EXPECT_EQ(ct.count(RuleKind::kHost), 0u);
  // Empty handshake records before it are skipped, as OpenSSL skips them.
  Bytes behind = {22, 3, 1, 0, 0, 22, 3, 3, 0, 0};
  const Bytes hello = test::tls_client_hello("behind.example");
  behind.insert(behind.end(), hello.begin(), hello.end());
  EXPECT_TRUE(classify_frame(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 443).payload(behind).frame())
                  .matches("host behind.example"));
  // So are 2-byte alert records (Go drops warning alerts before a
  // ClientHello), and record versions below 0x1000 other than 3.x.
  Bytes alerted = {21, 3, 1, 0, 2, 1, 0x70, 21, 0, 0, 0, 2, 1, 0};
  alerted.insert(alerted.end(), hello.begin(), hello.end());
  alerted[14 + 1] = 0x02;
  EXPECT_TRUE(classify_frame(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 443).payload(alerted).frame())
                  .matches("host behind.example"));
}

TEST(ClassifyHost, DnsQueriesButNotResponses) {
  auto dns = [](const Bytes& msg, uint16_t dport = 53) {
    return classify_frame(Packet().ipv6("2001:db8::1", "2001:db8::53").udp(40000, dport).payload(msg).frame());
  };
  const auto q = dns(test::dns_query("WWW.Example.Org"));
  EXPECT_TRUE(q.matches("host www.example.org"));
  EXPECT_TRUE(q.matches("host example.org"));
  EXPECT_EQ(dns(test::dns_query("www.example.org", true)).count(RuleKind::kHost), 0u);
  EXPECT_EQ(dns(test::dns_query("www.example.org", false, 2)).count(RuleKind::kHost), 0u);
  EXPECT_EQ(dns(test::dns_query("www.example.org"), 5353).count(RuleKind::kHost), 0u);
  Bytes no_question = test::dns_query("www.example.org");
  no_question[5] = 0;  // QDCOUNT 0
  EXPECT_EQ(dns(no_question).count(RuleKind::kHost), 0u);
  Bytes pointer = test::dns_query("www.example.org");
  pointer[12] = 0xc0;
  pointer[13] = 0x0c;  // a compression pointer to itself
  EXPECT_EQ(dns(pointer).count(RuleKind::kHost), 0u);
  EXPECT_EQ(dns(test::dns_query("")).count(RuleKind::kHost), 0u);  // the root
  // DNS over TCP is not looked at.
  const auto tcp = classify_frame(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 53)
                                      .payload(test::dns_query("t.example")).frame());
  EXPECT_EQ(tcp.count(RuleKind::kHost), 0u);
}

// A resolver reads every question and follows compression pointers to any
// offset of the message (issue 11, item 8): so do we.
TEST(ClassifyHost, DnsEveryQuestionAndPointersAnywhere) {
  auto dns = [](const Bytes& msg) {
    return classify_frame(Packet().ipv4("10.0.0.1", "10.0.0.53").udp(40000, 53).payload(msg).frame());
  };
  auto label = [](Bytes& m, std::string_view l) {
    m.push_back(static_cast<uint8_t>(l.size()));
    m.insert(m.end(), l.begin(), l.end());
  };
  auto header = [](uint16_t qd) {
    return Bytes{0x12, 0x34, 0x01, 0x00, static_cast<uint8_t>(qd >> 8), static_cast<uint8_t>(qd), 0, 0, 0, 0, 0, 0};
  };
  auto tail = [](Bytes& m) { m.insert(m.end(), {0x00, 0x01, 0x00, 0x01}); };  // QTYPE A, QCLASS IN
  {  // "www" then a forward pointer to "blocked.example" placed after the question
    Bytes m = header(1);
    label(m, "www");
    const std::size_t ptr = m.size();
    m.insert(m.end(), {0xc0, 0x00});
    tail(m);
    m[ptr + 1] = static_cast<uint8_t>(m.size());
    label(m, "blocked");
    label(m, "example");
    m.push_back(0);
    const auto c = dns(m);
    EXPECT_TRUE(c.matches("host www.blocked.example"));
    EXPECT_TRUE(c.matches("host blocked.example"));
    EXPECT_FALSE(c.malformed());
  }
  {  // two questions, the second one's parent a pointer into the first
    Bytes m = header(2);
    label(m, "fine");
    label(m, "example");
    m.push_back(0);
    tail(m);
    label(m, "blocked");
    m.insert(m.end(), {0xc0, 12 + 5});  // -> "example"
    tail(m);
    const auto c = dns(m);
    EXPECT_TRUE(c.matches("host fine.example"));
    EXPECT_TRUE(c.matches("host blocked.example"));
    EXPECT_FALSE(c.malformed());
  }
  {  // more questions than kMaxNamesPerPacket: the first ones, flagged malformed
    Bytes m = header(kMaxNamesPerPacket + 1);
    for (unsigned q = 0; q <= kMaxNamesPerPacket; ++q) {
      label(m, std::string("q").append(std::to_string(q)));
      label(m, "example");
      m.push_back(0);
      tail(m);
    }
    const auto c = dns(m);
    auto rule = [](unsigned q) { return std::string("host q").append(std::to_string(q)).append(".example"); };
    for (unsigned q = 0; q < kMaxNamesPerPacket; ++q) EXPECT_TRUE(c.matches(rule(q)));
    EXPECT_FALSE(c.matches(rule(kMaxNamesPerPacket)));
    EXPECT_TRUE(c.malformed());
  }
  {  // a name reached through a chain of pointers: dnsmasq follows 255 (and
     // answers), Unbound 256; 65 gave no key before. Deeper: no key, malformed.
    for (const unsigned hops : {65u, 200u, 256u, 300u}) {
      SCOPED_TRACE(hops);
      Bytes m = header(1);
      const std::size_t q = m.size();
      m.insert(m.end(), {0xc0, 0x00});  // -> the chain's first pointer
      tail(m);
      const std::size_t chain = m.size();
      for (unsigned k = 1; k < hops; ++k) {
        const std::size_t to = chain + 2 * k;
        m.insert(m.end(), {static_cast<uint8_t>(0xc0 | to >> 8), static_cast<uint8_t>(to)});
      }
      m[q + 1] = static_cast<uint8_t>(chain);
      m[q] = static_cast<uint8_t>(0xc0 | chain >> 8);
      label(m, "blocked");
      label(m, "example");
      m.push_back(0);
      const auto c = dns(m);
      EXPECT_EQ(c.matches("host blocked.example"), hops <= 256u);  // kMaxDnsJumps
      EXPECT_EQ(c.malformed(), hops > 256u);
    }
  }
  {  // two pointers to each other: no name, no hang; a second question cut short
    Bytes m = header(1);
    m.insert(m.end(), {0xc0, 14, 0xc0, 12});
    tail(m);
    EXPECT_EQ(dns(m).count(RuleKind::kHost), 0u);
    Bytes cut = header(2);
    label(cut, "first");
    cut.push_back(0);
    tail(cut);
    label(cut, "second");
    const auto c = dns(cut);
    EXPECT_TRUE(c.matches("host first"));
    EXPECT_TRUE(c.malformed());
  }
}

// ---- rule_key equivalence for every kind, both families ------------------------

TEST(ClassifyKeys, EncodingsEqualRuleKeysOfMatchingRules) {
  struct Case {
    Bytes frame;
    std::vector<const char*> rules;
  };
  const std::vector<Case> cases = {
      {Packet().ipv4("192.0.2.7", "203.0.113.5").tcp(33000, 443).frame(),
       {"flow tcp 192.0.2.7:33000 203.0.113.5:443", "src 192.0.2.7", "dst 203.0.113.5",
        "ip 192.0.2.7", "ip 203.0.113.5", "service tcp 203.0.113.5:443"}},
      {Packet().vlan(3).ipv6("2001:db8::7", "2001:db8::9").udp(1, 2).frame(),
       {"flow udp [2001:db8::7]:1 [2001:db8::9]:2", "src 2001:db8::7", "dst 2001:db8::9",
        "ip 2001:db8::7", "ip 2001:db8::9", "service udp [2001:db8::9]:2"}},
      {http("GET /p?q HTTP/1.1\r\nHost: X.example.com:81\r\n\r\n"),
       {"url x.example.com:81/p?q", "url x.example.com:81/p", "host x.example.com", "host example.com",
        "host com"}},
  };
  for (const Case& cs : cases) {
    const auto c = classify_frame(cs.frame);
    EXPECT_EQ(c.keys->n, 6 + (cs.rules.size() == 5 ? 5u : 0u));
    for (const char* r : cs.rules) EXPECT_TRUE(c.matches(r)) << r;
    for (unsigned i = 0; i < c.keys->n; ++i) {
      EXPECT_EQ(c.keys->key[i].hash, key_hash(c.keys->key_bytes(i), c.keys->key[i].len));
      EXPECT_EQ(c.keys->key_bytes(i)[0], static_cast<uint8_t>(c.keys->key[i].kind));
    }
  }
}

// key_hash() of an address key leaves its kind out: src, dst and ip of one
// address are one filter probe (the exact set tells them apart); nothing
// else shares a hash, and kind_keyed_hash() parts the kinds again for
// pure-filter mode.
TEST(ClassifyKeys, AddressKeysOfOneAddressShareTheirHashAndNothingElseDoes) {
  auto hash_of = [](const char* text) {
    const RuleParse p = parse_rule(text);
    EXPECT_TRUE(p.rule.has_value()) << text;
    const std::string k = p.rule ? rule_key(*p.rule) : std::string();
    return key_hash(k.data(), k.size());
  };
  for (const char* a : {"192.0.2.7", "2001:db8::7"}) {
    SCOPED_TRACE(a);
    const std::string s = a;
    const uint64_t h = hash_of(("src " + s).c_str());
    EXPECT_EQ(hash_of(("dst " + s).c_str()), h);
    EXPECT_EQ(hash_of(("ip " + s).c_str()), h);
    EXPECT_NE(hash_of("src 192.0.2.8"), h);
    EXPECT_NE(hash_of(("src " + s).c_str()), hash_of("src 198.51.100.0"));
    const uint64_t src = kind_keyed_hash(h, RuleKind::kSrc), dst = kind_keyed_hash(h, RuleKind::kDst),
                   ip = kind_keyed_hash(h, RuleKind::kIp);
    EXPECT_NE(src, dst);
    EXPECT_NE(src, ip);
    EXPECT_NE(dst, ip);
    // The 12-bit fingerprints (the hash's top bits) differ too.
    EXPECT_NE(src >> 52, dst >> 52);
    EXPECT_NE(src >> 52, ip >> 52);
    EXPECT_NE(dst >> 52, ip >> 52);
  }
  // A prefix key is hashed whole: not the hash of its network address.
  EXPECT_NE(hash_of("src 192.0.2.0/24"), hash_of("src 192.0.2.0"));
  EXPECT_NE(hash_of("src 192.0.2.0/24"), hash_of("dst 192.0.2.0/24"));
  EXPECT_NE(hash_of("ip 2001:db8::/64"), hash_of("ip 2001:db8::"));
  const uint64_t host = hash_of("host example.org");
  EXPECT_EQ(kind_keyed_hash(host, RuleKind::kHost), host);
  // In a packet: ip (src) and ip (dst) carry src's and dst's hash.
  const auto c = classify_frame(Packet().ipv4("192.0.2.7", "203.0.113.5").tcp(33000, 443).frame());
  ASSERT_EQ(c.keys->n, 6u);
  uint64_t by_kind[8] = {};
  for (unsigned i = 0; i < c.keys->n; ++i) {
    const PacketKey& k = c.keys->key[i];
    if (k.kind == RuleKind::kIp) {
      EXPECT_TRUE(k.hash == by_kind[static_cast<unsigned>(RuleKind::kSrc)] ||
                  k.hash == by_kind[static_cast<unsigned>(RuleKind::kDst)]);
      // `same` names the src or dst key of its address: same hash, same address bytes.
      ASSERT_TRUE(k.same != 0 && k.same - 1u < i);
      const PacketKey& o = c.keys->key[k.same - 1];
      EXPECT_TRUE(o.kind == RuleKind::kSrc || o.kind == RuleKind::kDst);
      EXPECT_EQ(o.hash, k.hash);
      EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(c.keys->key_bytes(k.same - 1)) + 1, o.len - 1u),
                std::string_view(reinterpret_cast<const char*>(c.keys->key_bytes(i)) + 1, k.len - 1u));
    } else {
      EXPECT_EQ(k.same, 0);
      by_kind[static_cast<unsigned>(k.kind)] = k.hash;
    }
  }
  EXPECT_NE(by_kind[static_cast<unsigned>(RuleKind::kSrc)], by_kind[static_cast<unsigned>(RuleKind::kDst)]);
}

}  // namespace
}  // namespace cg

namespace cg {
namespace {

PacketMeta meta_of(const test::Bytes& f) {
  PacketMeta m;
  parse_packet(f.data(), f.size(), m);
  return m;
}

// parse_packet(): the header walk a flow lookup uses without classifying.
TEST(ParsePacket, TcpFieldsPortsPayloadAndVlan) {
  const test::Bytes f =
      test::Packet().vlan(42).vlan(7, 0x8100).ipv4("192.0.2.1", "198.51.100.2").tcp(40000, 443, 0x12).payload("hello").frame();
  const PacketMeta m = meta_of(f);
  EXPECT_EQ(m.family, 4);
  EXPECT_EQ(m.proto, kProtoTcp);
  EXPECT_TRUE(m.l4);
  EXPECT_FALSE(m.malformed);
  EXPECT_EQ(m.vlan, 42);  // the outer tag
  EXPECT_EQ(m.sport, 40000);
  EXPECT_EQ(m.dport, 443);
  EXPECT_EQ(m.tcp_flags, 0x12);
  EXPECT_EQ(m.payload_len, 5u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f.data() + m.payload_off), 5), "hello");
  EXPECT_EQ(f[m.addr_off], 192);
  EXPECT_EQ(f[m.addr_off + 4], 198);
  EXPECT_EQ(m.tcp_seq, 1000u);  // as the builder writes them
  EXPECT_EQ(m.tcp_ack, 0u);
}

TEST(ParsePacket, Ipv6ExtensionsFragmentsAndTruncation) {
  PacketMeta m = meta_of(test::Packet().ipv6("2001:db8::1", "2001:db8::2").ipv6_ext(60).udp(5353, 53).payload("x").frame());
  EXPECT_EQ(m.family, 6);
  EXPECT_EQ(m.proto, kProtoUdp);
  EXPECT_TRUE(m.l4);
  EXPECT_EQ(m.dport, 53);
  EXPECT_EQ(m.payload_len, 1u);
  m = meta_of(test::Packet().ipv4("192.0.2.1", "192.0.2.2").fragment(3, false).udp(1, 2).frame());
  EXPECT_TRUE(m.non_first_fragment);
  EXPECT_FALSE(m.l4);
  m = meta_of(test::Packet().ipv4("192.0.2.1", "192.0.2.2").fragment(0, true).udp(1, 2).frame());
  EXPECT_TRUE(m.fragmented);
  EXPECT_TRUE(m.l4);
  test::Bytes cut = test::Packet().ipv4("192.0.2.1", "192.0.2.2").tcp(1, 2).frame();
  cut.resize(14 + 20 + 10);  // the TCP header cut short
  m = meta_of(cut);
  EXPECT_EQ(m.family, 4);
  EXPECT_TRUE(m.malformed);
  EXPECT_FALSE(m.l4);
}

// classify() is parse_packet() + classify_meta(): the same keys either way.
TEST(ParsePacket, ClassifyMetaGivesClassifysKeys) {
  for (const test::Bytes& f :
       {test::Packet().ipv4("192.0.2.1", "192.0.2.2").tcp(1234, 80).payload("GET /a HTTP/1.1\r\nHost: x.example\r\n\r\n").frame(),
        test::Packet().ipv6("2001:db8::1", "2001:db8::2").udp(999, 53).payload(test::dns_query("a.b.example")).frame(),
        test::Packet().ipv4("192.0.2.1", "192.0.2.2").tcp(1, 443).payload(test::tls_client_hello("sni.example")).frame()}) {
    PacketKeys a, b;
    classify(f.data(), f.size(), a);
    PacketMeta m;
    parse_packet(f.data(), f.size(), m);
    classify_meta(f.data(), m, b);
    ASSERT_EQ(a.n, b.n);
    ASSERT_GT(a.n, 6u);
    for (unsigned i = 0; i < a.n; ++i) {
      EXPECT_EQ(a.key[i].hash, b.key[i].hash);
      EXPECT_EQ(a.key[i].kind, b.key[i].kind);
    }
  }
}

}  // namespace
}  // namespace cg
