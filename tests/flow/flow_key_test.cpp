// The normalised flow key: both directions give one key, and every field
// that tells flows apart (addresses, family, ports, protocol, zone) does.
#include "cuckoogate/flow/flow_key.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <array>
#include <cstring>

namespace cg::flow {
namespace {

std::array<uint8_t, 16> addr(const char* text) {
  std::array<uint8_t, 16> a{};
  if (std::strchr(text, ':') != nullptr) {
    EXPECT_EQ(inet_pton(AF_INET6, text, a.data()), 1) << text;
  } else {
    EXPECT_EQ(inet_pton(AF_INET, text, a.data()), 1) << text;
  }
  return a;
}

struct Made {
  FlowKey key;
  Side side;
};

Made make(const char* src, const char* dst, uint16_t sport, uint16_t dport, uint8_t proto = 6,
          uint16_t zone = 0) {
  const auto s = addr(src), d = addr(dst);
  FlowTuple t;
  t.src = s.data();
  t.dst = d.data();
  t.sport = sport;
  t.dport = dport;
  t.proto = proto;
  t.zone = zone;
  t.family = std::strchr(src, ':') != nullptr ? 6 : 4;
  Made m;
  std::memset(&m.key, 0xa5, sizeof m.key);  // make_flow_key must write every byte
  m.side = make_flow_key(t, m.key);
  return m;
}

TEST(FlowKey, BothDirectionsOfAnIpv4FlowGiveOneKeyAndOppositeSides) {
  const Made fwd = make("10.0.0.2", "10.0.0.1", 40000, 443);
  const Made rev = make("10.0.0.1", "10.0.0.2", 443, 40000);
  EXPECT_EQ(fwd.key, rev.key);
  EXPECT_EQ(std::memcmp(&fwd.key, &rev.key, sizeof(FlowKey)), 0);
  EXPECT_NE(fwd.side, rev.side);
  // End a is the smaller address, with its port.
  EXPECT_EQ(fwd.key.addr_a[3], 1);
  EXPECT_EQ(fwd.key.port_a, 443);
  EXPECT_EQ(fwd.key.port_b, 40000);
  EXPECT_EQ(fwd.side, Side::kB);
  EXPECT_EQ(fwd.key.family, 4);
  for (int i = 4; i < 16; ++i) EXPECT_EQ(fwd.key.addr_a[i], 0) << i;
}

TEST(FlowKey, BothDirectionsOfAnIpv6FlowGiveOneKey) {
  const Made fwd = make("2001:db8::1", "2001:db8::2", 5353, 53, 17);
  const Made rev = make("2001:db8::2", "2001:db8::1", 53, 5353, 17);
  EXPECT_EQ(fwd.key, rev.key);
  EXPECT_EQ(fwd.side, Side::kA);
  EXPECT_EQ(rev.side, Side::kB);
  EXPECT_EQ(fwd.key.family, 6);
  EXPECT_EQ(fwd.key.addr_b[15], 2);
}

TEST(FlowKey, EqualAddressesAreOrderedByPort) {
  const Made fwd = make("10.0.0.1", "10.0.0.1", 9000, 80);
  const Made rev = make("10.0.0.1", "10.0.0.1", 80, 9000);
  EXPECT_EQ(fwd.key, rev.key);
  EXPECT_EQ(fwd.key.port_a, 80);
  EXPECT_EQ(fwd.side, Side::kB);
  EXPECT_EQ(rev.side, Side::kA);
}

TEST(FlowKey, IdenticalEndpointsAreSideAInBothDirections) {
  EXPECT_EQ(make("10.0.0.1", "10.0.0.1", 80, 80).side, Side::kA);
}

TEST(FlowKey, EveryDistinguishingFieldChangesTheKey) {
  const FlowKey base = make("10.0.0.1", "10.0.0.2", 1000, 80, 6, 7).key;
  EXPECT_NE(base, make("10.0.0.1", "10.0.0.3", 1000, 80, 6, 7).key);   // address
  EXPECT_NE(base, make("10.0.0.1", "10.0.0.2", 1001, 80, 6, 7).key);   // port
  EXPECT_NE(base, make("10.0.0.1", "10.0.0.2", 1000, 80, 17, 7).key);  // protocol
  EXPECT_NE(base, make("10.0.0.1", "10.0.0.2", 1000, 80, 6, 8).key);   // zone (VLAN)
  // Swapping only the ports (not the addresses) is another flow.
  EXPECT_NE(base, make("10.0.0.1", "10.0.0.2", 80, 1000, 6, 7).key);
}

TEST(FlowKey, Ipv4AndIpv6WithTheSameLeadingBytesDiffer) {
  // 10.0.0.1 and 0a00:0001:: share their first four bytes and zero padding.
  const Made v4 = make("10.0.0.1", "10.0.0.2", 1, 2);
  const Made v6 = make("a00:1::", "a00:2::", 1, 2);
  EXPECT_EQ(std::memcmp(v4.key.addr_a, v6.key.addr_a, 16), 0);
  EXPECT_NE(v4.key, v6.key);
}

// An echo's identifier is its port (network order, as in the packet); every
// other ICMP message, and a header cut short, has none: judged alone.
TEST(FlowKey, OnlyIcmpEchoesHaveAPort) {
  auto port = [](uint8_t proto, uint8_t type, std::size_t len = 8) -> int {
    const uint8_t h[8] = {type, 0, 0xab, 0xcd, 0x12, 0x34, 0, 1};
    uint16_t p = 0;
    if (!icmp_echo_port(h, len, proto, &p)) return -1;
    uint16_t want;
    std::memcpy(&want, h + 4, 2);
    return p == want ? 1 : 0;
  };
  for (const uint8_t t : {8, 0}) EXPECT_EQ(port(kProtoIcmp, t), 1) << int{t};
  for (const uint8_t t : {128, 129}) EXPECT_EQ(port(kProtoIcmpv6, t), 1) << int{t};
  for (const uint8_t t : {3, 5, 11, 13, 128}) EXPECT_EQ(port(kProtoIcmp, t), -1) << int{t};
  for (const uint8_t t : {1, 2, 3, 133, 135, 136, 8}) EXPECT_EQ(port(kProtoIcmpv6, t), -1) << int{t};
  EXPECT_EQ(port(kProtoIcmp, 8, 7), -1);  // cut before the identifier's end
  EXPECT_EQ(port(kProtoUdp, 8), -1);
}

}  // namespace
}  // namespace cg::flow
