// Packet classification: the lookup keys of one raw Ethernet frame, in the
// same encoding as rule_key() and hashed with key_hash(). What is extracted
// from which packet is specified in docs/rules.md.
//
// Data-path contract: classify() never allocates, never throws, does work
// bounded by the frame length and never reads outside [frame, frame + len).
// It writes only `out`; one PacketKeys per packet of a burst (per worker).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuckoogate/keys/rule.hpp"

namespace cg {

struct PacketKey {
  uint64_t hash;    // key_hash() of the encoding
  uint16_t offset;  // encoding at PacketKeys::bytes + offset
  uint16_t len;
  RuleKind kind;
  // An ip key: 1 + the index of the src or dst key of the same address,
  // which has the same hash (key_hash() of an address key leaves the kind
  // out); 0 for every other key. A lookup can probe the filter once for both.
  uint8_t same;
};

// A host name of at most kMaxNameLen bytes has at most 127 non-empty labels,
// so the name and all of its parent domains are at most 127 keys. Longer
// names (HTTP Host) emit only their suffixes of at most kMaxNameLen bytes,
// which again number at most 127: a deep subdomain never escapes a host rule.
inline constexpr unsigned kMaxHostKeys = (kMaxNameLen + 1) / 2;
// Names per packet: one for HTTP and TLS; a DNS query yields every question's
// name, up to this many (more questions: the first ones, flagged malformed).
inline constexpr unsigned kMaxNamesPerPacket = 4;
// An HTTP request gives up to four url keys (with and without the query,
// each also for the path as servers decode it) for each of its readings:
// two for nginx's request line (a Host line that only Python's splitting
// at a bare CR finds, or the last of several), two more where Python's
// reading of the line finds another target.
inline constexpr unsigned kMaxUrlKeys = 16;
// flow, src, dst, ip (src), ip (dst), service, the url keys, the outer
// packet's four address keys when tunneled, then the host keys.
inline constexpr unsigned kMaxKeysPerPacket = 6 + kMaxUrlKeys + 4 + kMaxNamesPerPacket * kMaxHostKeys;

// Longest encoding of each kind (docs/rules.md, "Key encoding").
inline constexpr std::size_t kFlowKeyMax = 1 + 1 + 1 + 16 + 2 + 16 + 2;
inline constexpr std::size_t kAddrKeyMax = 1 + 1 + 16;
inline constexpr std::size_t kServiceKeyMax = 1 + 1 + 1 + 16 + 2;
inline constexpr std::size_t kUrlKeyMax = 1 + kMaxUrlLen;
inline constexpr std::size_t kHostKeyMax = 1 + kMaxNameLen;  // parents share it
inline constexpr std::size_t kKeyBytesCapacity =
    kFlowKeyMax + 8 * kAddrKeyMax + kServiceKeyMax + kMaxUrlKeys * kUrlKeyMax + kMaxNamesPerPacket * kHostKeyMax;

struct PacketKeys {
  unsigned n = 0;
  // Truncated or inconsistent headers. The keys of the layers that were valid
  // are still emitted (e.g. the addresses when the TCP header is cut).
  bool malformed = false;
  // An HTTP request whose url text is longer than kMaxUrlLen: no url key was
  // emitted (no rule can be that long, so none could have matched).
  bool url_too_long = false;
  // A non-first IP fragment: only src, dst and ip keys were emitted.
  bool non_first_fragment = false;
  PacketKey key[kMaxKeysPerPacket];
  uint8_t bytes[kKeyBytesCapacity];
  const uint8_t* key_bytes(unsigned i) const noexcept { return bytes + key[i].offset; }
};

// The header walk of one frame (Ethernet/VLAN -> IPv4/IPv6 -> transport),
// without any key: what a flow lookup needs, and where classify_meta() finds
// the addresses, ports and payload. Offsets are from the start of the frame.
struct PacketMeta {
  uint8_t family = 0;          // 4 or 6: the addresses are valid; 0: not IP (or not parsed)
  uint8_t proto = 0;           // IP protocol (after IPv6 extension headers)
  bool malformed = false;      // truncated or inconsistent headers
  bool l4 = false;             // the transport header parsed: ports (if any) are valid
  bool fragmented = false;     // a first fragment with more to come
  bool non_first_fragment = false;
  uint8_t tcp_flags = 0;       // TCP only (FIN 0x01, SYN 0x02, RST 0x04, ACK 0x10)
  uint16_t vlan = 0;           // outer VLAN id, 0 if untagged
  uint16_t sport = 0, dport = 0;
  uint32_t addr_off = 0;       // source address; the destination follows (4 or 16 bytes on)
  uint32_t l4_off = 0;         // transport header
  uint32_t l4_len = 0;         // transport bytes present (to the end of the IP packet)
  uint32_t payload_off = 0;    // TCP/UDP payload
  uint32_t payload_len = 0;
  uint32_t tcp_seq = 0, tcp_ack = 0;
  // Decapsulated (docs/rules.md, "Layers"): every field above describes the
  // innermost packet; the outermost IP header's addresses are here.
  bool tunneled = false;
  uint8_t outer_family = 0;
  uint32_t outer_addr_off = 0;
  std::size_t addr_len() const noexcept { return family == 4 ? 4 : 16; }
  bool operator==(const PacketMeta&) const = default;
};

// Same data-path contract as classify(); writes only `meta`.
void parse_packet(const uint8_t* frame, std::size_t len, PacketMeta& meta) noexcept;

// UDP to a tunnel's port: VXLAN (IANA's 4789, and 8472, the port Linux's
// vxlan driver used first and flannel still uses) or GENEVE (6081). The
// classifier decapsulates these; what else must know them asks here.
inline constexpr bool tunnel_udp_port(uint16_t dport) noexcept {
  return dport == 4789 || dport == 8472 || dport == 6081;
}

// The frame nearly every packet is: untagged Ethernet, IPv4 without
// options, whole (not a fragment), TCP, or UDP to a port that is no tunnel
// (tunnel_udp_port()), with consistent lengths. Its addresses are at
// kPlainAddrOff, its transport header at kPlainL4Off. parse_packet()
// describes it from this with a fraction of the general walk's branches
// (and classify_fuzz checks the two agree on every input); the worker's
// flow lane reads only this for it, no PacketMeta.
inline constexpr uint32_t kPlainAddrOff = 14 + 12, kPlainL4Off = 14 + 20;
struct PlainFrame {
  uint32_t l4_len;       // transport bytes (to the end of the IP packet)
  uint32_t payload_off;  // TCP/UDP payload
  uint32_t payload_len;
  uint16_t sport, dport;  // host order
  uint8_t proto;          // 6 or 17
  uint8_t tcp_flags;      // 0 for UDP
};

// False (and `p` unspecified) for any other frame. Same data-path contract
// as classify(); inline: the worker calls it for every packet.
inline bool parse_plain_ipv4(const uint8_t* frame, std::size_t len, PlainFrame& p) noexcept {
  const auto rd16 = [](const uint8_t* b) { return static_cast<uint16_t>(b[0] << 8 | b[1]); };
  if (len < kPlainL4Off + 8 || rd16(frame + 12) != 0x0800) return false;
  const uint8_t* ip = frame + 14;
  const uint8_t proto = ip[9];
  if (ip[0] != 0x45 || (rd16(ip + 6) & 0x3fff) != 0 || (proto != kProtoTcp && proto != kProtoUdp)) return false;
  const std::size_t total = rd16(ip + 2);
  if (total < 20 + 8 || total > len - 14) return false;
  const uint8_t* l4 = ip + 20;
  const std::size_t l4len = total - 20;
  std::size_t hl, pllen;
  p.sport = rd16(l4);
  p.dport = rd16(l4 + 2);
  if (proto == kProtoTcp) {
    if (l4len < 20) return false;
    hl = static_cast<std::size_t>(l4[12] >> 4) * 4;
    if (hl < 20 || hl > l4len) return false;
    pllen = l4len - hl;
    p.tcp_flags = l4[13];
  } else {
    const std::size_t ulen = rd16(l4 + 4);
    if (ulen < 8 || ulen > l4len || tunnel_udp_port(p.dport)) return false;
    hl = 8;
    pllen = ulen - 8;
    p.tcp_flags = 0;
  }
  p.proto = proto;
  p.l4_len = static_cast<uint32_t>(l4len);
  p.payload_off = static_cast<uint32_t>(kPlainL4Off + hl);
  p.payload_len = static_cast<uint32_t>(pllen);
  return true;
}

namespace detail {
// parse_packet() without its shortcut for plain IPv4 TCP/UDP frames: the
// general header walk, which must describe those frames identically
// (classify_fuzz compares the two on every input).
void parse_packet_walk(const uint8_t* frame, std::size_t len, PacketMeta& meta) noexcept;
}  // namespace detail

// The keys of a frame parse_packet() described (the same frame, unchanged).
// classify(f, n, out) is parse_packet(f, n, meta) then classify_meta(f, meta, out).
// `app`, when set, is what a TCP packet's application layer is read from
// instead of its own payload: the reassembled first flight of its stream
// (a ClientHello split over several segments, behind one TLS record header;
// an HTTP request head; a DNS query with its length prefix, to port 53), or
// a QUIC flow's ClientHello for a UDP packet. Set with app_len 0: no
// application layer at all (a segment that starts no message).
void classify_meta(const uint8_t* frame, const PacketMeta& meta, PacketKeys& out,
                   const uint8_t* app = nullptr, std::size_t app_len = 0) noexcept;

void classify(const uint8_t* frame, std::size_t len, PacketKeys& out) noexcept;

}  // namespace cg
