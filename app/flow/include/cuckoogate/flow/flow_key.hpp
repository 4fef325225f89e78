// The key of a flow: the 5-tuple plus a VLAN/zone, normalised so that both
// directions of a flow give the same 40 bytes. DPDK-free and allocation-free;
// the caller parses the headers and hands the fields to make_flow_key().
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace cg::flow {

// IP protocol numbers the flow table tracks with their own states.
inline constexpr uint8_t kProtoTcp = 6;
inline constexpr uint8_t kProtoUdp = 17;

// Both endpoints in a canonical order: end "a" is the smaller of the two
// (address, port) pairs, compared address bytes first, then port value. An
// IPv4 address fills addr_*[0..3] and leaves the rest zero; `family` keeps
// 10.0.0.1 apart from the IPv6 address 0a00:0001::. Ports are whatever the
// caller passes (network order as read from the packet is fine) as long as
// it is always the same order; 0 for protocols without ports. For ICMP and
// ICMPv6 echo request/reply pass the identifier as both ports (it is the
// same in both directions), 0 for other ICMP types.
struct FlowKey {
  uint8_t addr_a[16];
  uint8_t addr_b[16];
  uint16_t port_a;
  uint16_t port_b;
  uint16_t zone;   // VLAN id or any other 16-bit zone; 0 if unused
  uint8_t proto;   // IP protocol number (IPv6: the upper-layer protocol)
  uint8_t family;  // 4 or 6
  friend bool operator==(const FlowKey&, const FlowKey&) = default;
};
static_assert(sizeof(FlowKey) == 40, "the flow entry budget assumes a 40-byte key");
// No padding: the table hashes and compares keys as bytes.
static_assert(std::has_unique_object_representations_v<FlowKey>);
static_assert(std::is_trivially_copyable_v<FlowKey>);
static_assert(offsetof(FlowKey, port_b) == 34 && offsetof(FlowKey, zone) == 36 && offsetof(FlowKey, proto) == 38 &&
              offsetof(FlowKey, family) == 39);

// Which end of the key a packet's source is.
enum class Side : uint8_t { kA = 0, kB = 1 };

// The fields of one packet, as parsed by the caller.
struct FlowTuple {
  const uint8_t* src = nullptr;  // 4 (family 4) or 16 (family 6) bytes, network order
  const uint8_t* dst = nullptr;
  uint16_t sport = 0;
  uint16_t dport = 0;
  uint16_t zone = 0;
  uint8_t proto = 0;
  uint8_t family = 4;
};

namespace detail {
// The fields after the addresses, in the order the addresses were put.
// One 8-byte store: the flow table's hash reads these 8 bytes back as one
// word right away, and a word assembled from five smaller stores cannot be
// forwarded from the store buffer (a stall of a dozen cycles per packet).
inline Side finish_flow_key(const FlowTuple& t, bool swap, uint8_t family, FlowKey& key) noexcept {
  const uint16_t a = swap ? t.dport : t.sport, b = swap ? t.sport : t.dport;
  if constexpr (std::endian::native == std::endian::little) {
    const uint64_t w = uint64_t{a} | uint64_t{b} << 16 | uint64_t{t.zone} << 32 | uint64_t{t.proto} << 48 |
                       uint64_t{family} << 56;
    std::memcpy(&key.port_a, &w, 8);
  } else {
    key.port_a = a;
    key.port_b = b;
    key.zone = t.zone;
    key.proto = t.proto;
    key.family = family;
  }
  return swap ? Side::kB : Side::kA;
}
}  // namespace detail

// Writes the normalised key of `t` (every byte of `key`, padding included)
// and returns the side the packet's source is on. A packet whose source and
// destination are equal (address and port) is on side kA in both directions.
// `t.family` must be 4 or 6; anything but 6 is taken as 4. Never allocates,
// never throws.
inline Side make_flow_key(const FlowTuple& t, FlowKey& key) noexcept {
  // Addresses compared as big-endian integers (the byte order memcmp would
  // use), without a call: this runs for every packet of the data path.
  if (t.family != 6) {
    // IPv4 in scalars: zero-padded arrays, filled by 4-byte copies and read
    // back as 8-byte words, stalled store forwarding on every packet.
    uint32_t s, d;
    std::memcpy(&s, t.src, 4);
    std::memcpy(&d, t.dst, 4);
    const uint32_t sh = __builtin_bswap32(s), dh = __builtin_bswap32(d);
    const bool swap = sh != dh ? sh > dh : t.sport > t.dport;
    std::memset(&key, 0, 32);
    const uint32_t a = swap ? d : s, b = swap ? s : d;
    std::memcpy(key.addr_a, &a, 4);
    std::memcpy(key.addr_b, &b, 4);
    return detail::finish_flow_key(t, swap, 4, key);
  }
  uint64_t s[2], d[2];
  std::memcpy(s, t.src, 16);
  std::memcpy(d, t.dst, 16);
  const uint64_t s0 = __builtin_bswap64(s[0]), d0 = __builtin_bswap64(d[0]);
  const uint64_t s1 = __builtin_bswap64(s[1]), d1 = __builtin_bswap64(d[1]);
  const bool swap = s0 != d0 ? s0 > d0 : s1 != d1 ? s1 > d1 : t.sport > t.dport;
  std::memcpy(key.addr_a, swap ? d : s, 16);
  std::memcpy(key.addr_b, swap ? s : d, 16);
  return detail::finish_flow_key(t, swap, 6, key);
}

}  // namespace cg::flow
