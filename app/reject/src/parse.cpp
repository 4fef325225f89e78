// parse_frame(): the layers of a blocked frame, as app/keys/src/classify.cpp
// walks them (0-2 VLAN tags, IPv4 options, the same IPv6 extension headers
// and limit), but stricter: a reply is only built for a packet an end host
// would accept, so anything cut short or inconsistent is refused outright.
#include "frame.hpp"

namespace cg::reject::detail {
namespace {

constexpr uint16_t kEthIpv4 = 0x0800, kEthIpv6 = 0x86DD, kEthVlan = 0x8100, kEthQinQ = 0x88A8;
constexpr unsigned kMaxVlanTags = 2;
constexpr unsigned kMaxIpv6ExtHeaders = 16;  // as classify(): bounds the walk
constexpr uint8_t kOptLsrr = 131, kOptSsrr = 137;

bool ipv4_header_checksum_ok(const uint8_t* ip, std::size_t ihl) noexcept {
  uint32_t sum = 0;
  for (std::size_t i = 0; i < ihl; i += 2) sum += rd16(ip + i);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return sum == 0xffff;
}

// RFC 1812 4.3.2.7: not "a zero address, a loopback address, a broadcast
// address, a multicast address, or a Class E address".
bool ipv4_source_is_host(const uint8_t* a) noexcept {
  return a[0] != 0 && a[0] != 127 && a[0] < 224;
}

// RFC 4443 2.4 (e.5): not the unspecified address, and (as routers filter
// them) neither loopback nor multicast.
bool ipv6_source_is_host(const uint8_t* a) noexcept {
  if (a[0] == 0xff) return false;
  for (int i = 0; i < 15; ++i) {
    if (a[i] != 0) return true;
  }
  return a[15] > 1;
}

// Walks IPv4 options for source routes; false when an option is malformed.
bool ipv4_options(const uint8_t* ip, std::size_t ihl, bool& source_routed) noexcept {
  std::size_t pos = 20;
  while (pos < ihl) {
    const uint8_t type = ip[pos];
    if (type == 0) break;  // end of options list
    if (type == 1) {       // no operation
      ++pos;
      continue;
    }
    if (pos + 2 > ihl || ip[pos + 1] < 2 || pos + ip[pos + 1] > ihl) return false;
    if (type == kOptLsrr || type == kOptSsrr) source_routed = true;
    pos += ip[pos + 1];
  }
  return true;
}

Reason ipv4(const uint8_t* ip, std::size_t avail, Frame& f) noexcept {
  if (avail < 20 || (ip[0] >> 4) != 4) return Reason::kMalformed;
  const std::size_t ihl = static_cast<std::size_t>(ip[0] & 0x0f) * 4;
  const std::size_t total = rd16(ip + 2);
  if (ihl < 20 || total < ihl || total > avail) return Reason::kMalformed;
  if (!ipv4_header_checksum_ok(ip, ihl)) return Reason::kBadIpChecksum;
  if (!ipv4_options(ip, ihl, f.source_routed)) return Reason::kMalformed;
  if (!ipv4_source_is_host(ip + 12)) return Reason::kSourceNotUnicast;
  if (ip[16] >= 224) return Reason::kGroupDestination;  // multicast, class E, 255.255.255.255
  const uint16_t frag = rd16(ip + 6);
  if ((frag & 0x1fff) != 0) return Reason::kNonFirstFragment;
  f.family = 4;
  f.ip_len = total;
  f.proto = ip[9];
  f.fragmented = (frag & 0x2000) != 0;
  f.l4_off = f.l2_len + ihl;
  f.l4_len = total - ihl;
  return Reason::kNone;
}

Reason ipv6(const uint8_t* ip, std::size_t avail, Frame& f) noexcept {
  if (avail < 40 || (ip[0] >> 4) != 6) return Reason::kMalformed;
  const std::size_t end = 40 + static_cast<std::size_t>(rd16(ip + 4));
  if (end > avail) return Reason::kMalformed;
  if (!ipv6_source_is_host(ip + 8)) return Reason::kSourceNotUnicast;
  if (ip[24] == 0xff) return Reason::kGroupDestination;
  uint8_t nh = ip[6];
  std::size_t pos = 40;
  for (unsigned hops = 0;; ++hops) {
    std::size_t hl;
    switch (nh) {
      case 0:    // hop-by-hop options
      case 43:   // routing
      case 60:   // destination options
      case 135:  // mobility
      case 139:  // HIP
      case 140:  // shim6
        if (pos + 8 > end) return Reason::kMalformed;
        hl = (static_cast<std::size_t>(ip[pos + 1]) + 1) * 8;
        if (nh == 43 && ip[pos + 3] != 0) f.source_routed = true;  // segments left
        break;
      case 51:  // authentication header
        if (pos + 8 > end) return Reason::kMalformed;
        hl = (static_cast<std::size_t>(ip[pos + 1]) + 2) * 4;
        break;
      case 44: {  // fragment
        if (pos + 8 > end) return Reason::kMalformed;
        const uint16_t fo = rd16(ip + pos + 2);
        if ((fo >> 3) != 0) return Reason::kNonFirstFragment;
        f.fragmented = (fo & 1) != 0;
        hl = 8;
        break;
      }
      default:
        f.family = 6;
        f.ip_len = end;
        f.proto = nh;
        f.l4_off = f.l2_len + pos;
        f.l4_len = end - pos;
        return Reason::kNone;
    }
    if (pos + hl > end || hops + 1 > kMaxIpv6ExtHeaders) return Reason::kMalformed;
    nh = ip[pos];
    pos += hl;
  }
}

}  // namespace

Reason parse_frame(const uint8_t* frame, std::size_t len, Frame& out) noexcept {
  out = Frame{};
  out.p = frame;
  if (len < 14) return Reason::kMalformed;
  std::size_t off = 14;
  uint16_t type = rd16(frame + 12);
  for (unsigned tags = 0; type == kEthVlan || type == kEthQinQ; ++tags) {
    if (tags == kMaxVlanTags) return Reason::kNotIp;  // deeper stacks: not parsed, as classify()
    if (off + 4 > len) return Reason::kMalformed;
    type = rd16(frame + off + 2);
    off += 4;
  }
  if (type != kEthIpv4 && type != kEthIpv6) return Reason::kNotIp;
  if ((frame[0] & 1) != 0) return Reason::kGroupDestination;  // broadcast/multicast MAC
  if ((frame[6] & 1) != 0) return Reason::kSourceNotUnicast;  // no frame comes from a group
  out.l2_len = off;
  return type == kEthIpv4 ? ipv4(frame + off, len - off, out) : ipv6(frame + off, len - off, out);
}

}  // namespace cg::reject::detail
