// How a parsed packet reached the gateway, beyond its bytes: the IP TTL it
// arrived with and the TCP options that decide whether a receiver takes a
// segment at all. A TCP stream's copies that differ in these may not all
// reach, or be taken by, the server (docs/reassembly.md, "Copies that arrive
// otherwise"); the stream inspector compares each client segment with the
// first one it read (reasm::Arrival). DPDK-free, like the rest of
// classification.
#pragma once

#include <cstdint>

#include "cuckoogate/keys/classify.hpp"

namespace cg {

// The innermost IP header's TTL (IPv4) or hop limit (IPv6) of a packet
// parse_packet() described; 0 if it is not IP.
// Where the TTL (IPv4) or hop limit (IPv6) is in an IP header of `family`.
inline constexpr uint32_t ip_ttl_offset(uint8_t family) noexcept { return family == 4 ? 8 : 7; }

inline uint8_t ip_ttl(const uint8_t* frame, const PacketMeta& m) noexcept {
  // The source address is 12 bytes into an IPv4 header, 8 into an IPv6 one.
  if (m.family != 4 && m.family != 6) return 0;
  return frame[m.addr_off - (m.family == 4 ? 12 : 8) + ip_ttl_offset(m.family)];
}

// Where and how a frame is delivered, beyond its addresses, as a keyed
// 16-bit digest (never 0): its Ethernet destination, the tags up to its IP
// header (VLANs, the EtherType), and the IP header's options (IPv4) or
// extension headers (IPv6). A router ignores a frame sent to another MAC
// address; a router or host drops a packet whose options it cannot parse or
// will not honour (a Record Route with a bad pointer, an IPv6 option whose
// type says "discard if unrecognized"), which the parser steps over. Two
// copies that differ here may not both be taken. `seed`: the caller's
// secret, so a client cannot make two of them collide at will. 0 if the
// packet is not IP with a transport header.
uint16_t delivery_digest(const uint8_t* frame, const PacketMeta& m, uint64_t seed) noexcept;

// tcp_option_marks() bits.
inline constexpr uint8_t kTcpMarkMd5 = 0x01;         // kind 19 of 18 bytes: TCP MD5 signature (RFC 2385)
inline constexpr uint8_t kTcpMarkAo = 0x02;          // kind 29 of at least 4 bytes: TCP-AO (RFC 5925)
inline constexpr uint8_t kTcpMarkTimestamps = 0x04;  // kind 8 of 10 bytes (RFC 7323)
inline constexpr uint8_t kTcpMarkOdd = 0x08;         // one of those kinds at another length, or timestamps twice
inline constexpr uint8_t kTcpMarkCut = 0x10;         // the list ends at a bad length (as Linux stops reading)

// The options of a TCP segment that make a receiver drop or treat it apart:
// a signature (a server without the key drops the segment, Linux counting
// TCPMD5Unexpected), timestamps (PAWS), each at its own length or another;
// read as Linux reads options (End stops, NOP is skipped, a length below 2
// or past the header stops). `marks` is 0 for a segment without options, or
// not TCP.
struct TcpOptionMarks {
  uint8_t marks = 0;               // kTcpMark* bits
  uint32_t tsval = 0, tsecr = 0;   // with kTcpMarkTimestamps: the last timestamps option's, as Linux reads them
};
TcpOptionMarks tcp_option_marks(const uint8_t* frame, const PacketMeta& m) noexcept;

}  // namespace cg
