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
inline constexpr uint8_t kProtoIcmp = 1;
inline constexpr uint8_t kProtoIcmpv6 = 58;

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
// The 8 bytes of a key from port_a on (port_a, port_b, zone, proto, family),
// as one word in the key's memory order. One 8-byte store: the flow table's
// hash reads these 8 bytes back as one word right away, and a word assembled
// from five smaller stores cannot be forwarded from the store buffer (a
// stall of a dozen cycles per packet).
inline uint64_t key_tail(uint16_t port_a, uint16_t port_b, uint16_t zone, uint8_t proto, uint8_t family) noexcept {
  if constexpr (std::endian::native == std::endian::little) {
    return uint64_t{port_a} | uint64_t{port_b} << 16 | uint64_t{zone} << 32 | uint64_t{proto} << 48 |
           uint64_t{family} << 56;
  } else {
    struct {
      uint16_t a, b, z;
      uint8_t p, f;
    } t{port_a, port_b, zone, proto, family};
    uint64_t w;
    std::memcpy(&w, &t, 8);
    return w;
  }
}

}  // namespace detail

// An IPv4 key in 16 bytes, for the data path's plain frames: the same key as
// make_flow_key() gives (expand() writes it out), without the 24 zero bytes
// of the address fields, so that it is built, hashed (FlowTable::hash_v4)
// and compared with a table entry (FlowTable::track_steady_v4) from
// registers. `a` and `b` are addr_a's and addr_b's 4 bytes (network order),
// `tail` the key's 8 bytes from port_a on (detail::key_tail).
struct FlowKeyV4 {
  uint32_t a;
  uint32_t b;
  uint64_t tail;
};
static_assert(sizeof(FlowKeyV4) == 16 && std::has_unique_object_representations_v<FlowKeyV4>);

// make_flow_key() of an IPv4 tuple into a FlowKeyV4: `src` and `dst` are
// the 4 address bytes as loaded from the packet (network order), ports in
// any one order as for make_flow_key().
inline Side make_flow_key_v4(uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport, uint16_t zone,
                             uint8_t proto, FlowKeyV4& k) noexcept {
  // Addresses compared as big-endian integers (the byte order memcmp would use).
  const uint32_t sh = __builtin_bswap32(src), dh = __builtin_bswap32(dst);
  const bool swap = sh != dh ? sh > dh : sport > dport;
  k.a = swap ? dst : src;
  k.b = swap ? src : dst;
  k.tail = swap ? detail::key_tail(dport, sport, zone, proto, 4)
              : detail::key_tail(sport, dport, zone, proto, 4);
  return swap ? Side::kB : Side::kA;
}

// The IP protocol of a compact key (FlowKey::proto, byte 6 of the tail).
inline uint8_t proto_of(const FlowKeyV4& k) noexcept {
  static_assert(offsetof(FlowKey, proto) - offsetof(FlowKey, port_a) == 6);
  uint8_t p;
  std::memcpy(&p, reinterpret_cast<const unsigned char*>(&k.tail) + 6, 1);
  return p;
}

// The full key of a compact one: every byte of `key`.
inline void expand(const FlowKeyV4& k, FlowKey& key) noexcept {
  std::memset(&key, 0, 32);
  std::memcpy(key.addr_a, &k.a, 4);
  std::memcpy(key.addr_b, &k.b, 4);
  std::memcpy(&key.port_a, &k.tail, 8);
}

// The compact form of an IPv4 key (family 4): expand(compact(k)) == k.
inline FlowKeyV4 compact(const FlowKey& key) noexcept {
  FlowKeyV4 k;
  std::memcpy(&k.a, key.addr_a, 4);
  std::memcpy(&k.b, key.addr_b, 4);
  std::memcpy(&k.tail, &key.port_a, 8);  // port_a, port_b, zone, proto, family
  return k;
}

// Writes the normalised key of `t` (every byte of `key`, padding included)
// and returns the side the packet's source is on. A packet whose source and
// destination are equal (address and port) is on side kA in both directions.
// `t.family` must be 4 or 6; anything but 6 is taken as 4. Never allocates,
// never throws.
inline Side make_flow_key(const FlowTuple& t, FlowKey& key) noexcept {
  if (t.family != 6) {
    uint32_t s, d;
    std::memcpy(&s, t.src, 4);
    std::memcpy(&d, t.dst, 4);
    FlowKeyV4 k;
    const Side side = make_flow_key_v4(s, d, t.sport, t.dport, t.zone, t.proto, k);
    expand(k, key);
    return side;
  }
  // Addresses compared as big-endian integers (the byte order memcmp would
  // use), without a call: this runs for every packet of the data path.
  uint64_t s[2], d[2];
  std::memcpy(s, t.src, 16);
  std::memcpy(d, t.dst, 16);
  const uint64_t s0 = __builtin_bswap64(s[0]), d0 = __builtin_bswap64(d[0]);
  const uint64_t s1 = __builtin_bswap64(s[1]), d1 = __builtin_bswap64(d[1]);
  const bool swap = s0 != d0 ? s0 > d0 : s1 != d1 ? s1 > d1 : t.sport > t.dport;
  std::memcpy(key.addr_a, swap ? d : s, 16);
  std::memcpy(key.addr_b, swap ? s : d, 16);
  const uint64_t tail = swap ? detail::key_tail(t.dport, t.sport, t.zone, t.proto, 6)
                              : detail::key_tail(t.sport, t.dport, t.zone, t.proto, 6);
  std::memcpy(&key.port_a, &tail, 8);
  return swap ? Side::kB : Side::kA;
}

// The "port" of an ICMP or ICMPv6 message (`l4`: its `len` bytes from the
// ICMP header on) for its flow key: an echo request or reply (ICMP 8/0,
// ICMPv6 128/129) is a flow of its own, keyed by its identifier, which is the
// same both ways (network order, as the bytes read). Every other message
// (errors, neighbour discovery, router advertisements) belongs to no flow of
// its own and should be judged alone: false then, as for a header cut short.
inline bool icmp_echo_port(const uint8_t* l4, std::size_t len, uint8_t proto, uint16_t* port) noexcept {
  if (len < 8) return false;
  const uint8_t type = l4[0];
  const bool echo = proto == kProtoIcmp ? (type == 8 || type == 0) : proto == kProtoIcmpv6 && (type == 128 || type == 129);
  if (!echo) return false;
  std::memcpy(port, l4 + 4, 2);
  return true;
}

}  // namespace cg::flow
