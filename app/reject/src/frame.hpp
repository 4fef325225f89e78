// Internal: where the layers of a blocked frame are, as parse_frame() finds
// them, and the byte helpers the reply builders share.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuckoogate/reject/reject.hpp"

namespace cg::reject::detail {

inline constexpr uint8_t kProtoIcmp = 1, kProtoTcp = 6, kProtoUdp = 17, kProtoIcmpv6 = 58;

inline uint16_t rd16(const uint8_t* p) noexcept {
  return static_cast<uint16_t>((p[0] << 8) | p[1]);
}
inline uint32_t rd32(const uint8_t* p) noexcept {
  return (uint32_t{rd16(p)} << 16) | rd16(p + 2);
}
inline void wr16(uint8_t* p, uint32_t v) noexcept {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void wr32(uint8_t* p, uint32_t v) noexcept {
  wr16(p, v >> 16);
  wr16(p + 2, v);
}

// A blocked frame whose IP header is complete and consistent. Offsets are
// from the start of the frame; nothing beyond ip_len bytes of IP packet
// (Ethernet padding excluded) is ever looked at.
struct Frame {
  const uint8_t* p = nullptr;
  std::size_t l2_len = 0;   // MACs, VLAN tags and EtherType: where the IP header starts
  uint8_t family = 0;       // 4 or 6
  std::size_t ip_len = 0;   // the IP packet as its header gives it (header included)
  std::size_t l4_off = 0;   // the transport header (after IPv4 options / IPv6 extension headers)
  std::size_t l4_len = 0;   // transport header and payload in this packet
  uint8_t proto = 0;        // the transport protocol (the last next-header for IPv6)
  bool fragmented = false;  // the first fragment of several: the payload is incomplete
  bool source_routed = false;  // LSRR/SSRR option, or a routing header with segments left

  const uint8_t* ip() const noexcept { return p + l2_len; }
  const uint8_t* l4() const noexcept { return p + l4_off; }
  std::size_t addr_len() const noexcept { return family == 4 ? 4 : 16; }
  const uint8_t* src() const noexcept { return ip() + (family == 4 ? 12 : 8); }
  const uint8_t* dst() const noexcept { return ip() + (family == 4 ? 16 : 24); }
};

// Ethernet (0-2 VLAN tags) and IPv4/IPv6 up to the transport header, with
// the address checks every reply kind shares. Reason::kNone when `out` is
// filled in; reads only [frame, frame + len).
Reason parse_frame(const uint8_t* frame, std::size_t len, Frame& out) noexcept;

}  // namespace cg::reject::detail
