// Internal: the reply builders and the headers they share. Every writer
// writes exactly the length its *_len() function returns (before padding
// to kMinFrameLen, which build() does) and reads the frame only within the
// layers parse_frame() and build() validated.
#pragma once

#include <cstddef>
#include <cstdint>

#include "frame.hpp"

namespace cg::reject::detail {

// Ethernet header (the frame's VLAN tags kept) and IP header.
inline std::size_t headers_len(const Frame& f) noexcept {
  return f.l2_len + (f.family == 4 ? 20 : 40);
}

// Writes the Ethernet and IP headers of a reply carrying `l4_len` bytes of
// protocol `proto`, addressed to the frame's sender (MACs and addresses
// swapped) or to its destination (as in the frame). IPv4: no options, ID 0,
// DF, TTL 64, TOS 0, header checksum. IPv6: traffic class and flow label 0,
// hop limit 64, no extension headers. Returns headers_len(f).
std::size_t put_headers(const Frame& f, Direction d, uint8_t proto, std::size_t l4_len,
                        uint8_t* out) noexcept;

// Fills in the Internet checksum (RFC 1071) of the transport message that
// follows the reply's IP header at `ip` (written by put_headers(); its
// length from there), at byte `field` of the message, whose checksum field
// must be zero. Over the pseudo-header (RFC 9293 3.1, RFC 8200 8.1) when
// `pseudo` (TCP, UDP, ICMPv6; not ICMPv4). A UDP checksum of zero is sent
// as 0xffff (RFC 768), which the caller asks for with `udp`.
void put_l4_checksum(uint8_t* ip, uint8_t family, std::size_t field, bool pseudo,
                     bool udp = false) noexcept;

// TCP: the RST to the sender or to the destination (20-byte header, no options).
std::size_t tcp_reset_len(const Frame& f) noexcept;
void write_tcp_reset(const Frame& f, Direction d, uint8_t* out) noexcept;

// DNS: a query's question section (after the 12-byte header), when the UDP
// payload is a query build() answers.
struct DnsQuery {
  std::size_t question_len = 0;  // QNAME, QTYPE, QCLASS
};
bool parse_dns_query(const uint8_t* msg, std::size_t len, DnsQuery& q) noexcept;
std::size_t dns_answer_len(const Frame& f, const DnsQuery& q) noexcept;
void write_dns_answer(const Frame& f, const DnsQuery& q, DnsRcode rcode, uint8_t* out) noexcept;

// ICMP/ICMPv6 administratively prohibited, quoting the frame's IP packet.
std::size_t icmp_error_len(const Frame& f) noexcept;
void write_icmp_error(const Frame& f, uint8_t* out) noexcept;

}  // namespace cg::reject::detail
