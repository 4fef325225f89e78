// Reject replies: what the gateway sends back for a blocked frame instead of
// dropping it silently. A TCP segment gets RSTs (to its sender and, onward, to
// its destination), a DNS query an answer with RCODE REFUSED (or NXDOMAIN),
// anything else an ICMP/ICMPv6 "administratively prohibited" error. What is
// sent for what, and what is never answered: docs/reject.md.
//
// Data-path contract: build() never allocates, never throws and makes no
// system call; it reads only [frame, frame + len), writes only into the
// buffers it is given (never past their capacity), keeps no state and may be
// called from any number of threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace cg::reject {

// At most two replies per blocked frame (the two RSTs of a TCP segment).
inline constexpr std::size_t kMaxReplies = 2;
// Replies shorter than the Ethernet minimum (60 bytes without FCS) are padded
// with zeros up to it; the IP length fields exclude the padding.
inline constexpr std::size_t kMinFrameLen = 60;
// The longest reply: an ICMPv6 error filling the IPv6 minimum MTU (1280),
// behind an Ethernet header with two VLAN tags. A buffer of this capacity
// always suffices (a 2048-byte mbuf data room does).
inline constexpr std::size_t kMaxReplyLen = 14 + 2 * 4 + 1280;

enum class Status : uint8_t {
  kBuilt,           // every reply was written
  kNotApplicable,   // nothing is to be sent for this frame; see Reason
  kBufferTooSmall,  // a reply does not fit its buffer: nothing was written
};

// Why nothing is sent (Status::kNotApplicable); kNone otherwise.
enum class Reason : uint8_t {
  kNone,
  kMalformed,         // headers cut short or inconsistent (lengths, offsets, options)
  kNotIp,             // neither IPv4 nor IPv6 (ARP, ...), or more than two VLAN tags
  kBadIpChecksum,     // IPv4 header checksum wrong: a host would discard the packet
  kNonFirstFragment,  // a fragment other than the first (RFC 1122 3.2.2)
  kIcmpError,         // an ICMP error, an ICMPv4 type not known to be a query, or IPv6 neighbour discovery
  kTcpReset,          // the segment carries RST: never answered (RFC 9293 3.10.7)
  kGroupDestination,  // multicast or broadcast destination, link or IP layer
  kSourceNotUnicast,  // the source does not name one host (0/8, 127/8, 224/4, 240/4, ::, ::1, ff00::/8, group MAC)
};

enum class Kind : uint8_t {
  kTcpReset,         // one or two RSTs
  kDnsAnswer,        // an answer with the configured RCODE
  kIcmpUnreachable,  // ICMP type 3 code 13 / ICMPv6 type 1 code 1
};

// Which way a reply goes: back out of the port the frame arrived on, to its
// sender (MACs, addresses and ports swapped), or onward out of the other
// port, to the frame's destination (the RST that lets the server go; MACs,
// addresses and ports as in the frame).
enum class Direction : uint8_t { kToSender, kToDestination };

enum class DnsRcode : uint8_t { kNxDomain = 3, kRefused = 5 };

struct Options {
  DnsRcode dns_rcode = DnsRcode::kRefused;
  // Also reset the destination of a TCP segment (Suricata's rejectboth);
  // false: only the sender is reset (nftables' reject with tcp reset).
  bool tcp_reset_destination = true;
};

struct Buffer {
  uint8_t* data = nullptr;
  std::size_t capacity = 0;
};

struct Reply {
  uint16_t len = 0;  // bytes written (kBuilt) or needed (kBufferTooSmall)
  Direction dir = Direction::kToSender;
};

struct Result {
  Status status = Status::kNotApplicable;
  Reason reason = Reason::kMalformed;
  Kind kind = Kind::kIcmpUnreachable;  // meaningful unless kNotApplicable
  uint8_t count = 0;                   // replies built or needed (kNotApplicable: 0)
  Reply reply[kMaxReplies];            // the first `count` are meaningful
};

// Builds the replies to the blocked Ethernet frame [frame, frame + len):
// reply i into out[i], the first one always to the sender. Status kBuilt:
// result.count replies written, result.reply[i].len bytes each (a complete
// frame, padded to kMinFrameLen). kBufferTooSmall: out has fewer than
// `count` buffers or one is too small; nothing is written, and count and
// reply[i] say what would be needed: build() with an empty `out` is a dry run
// that costs one parse. kNotApplicable: nothing is to be sent, `reason` says
// why, nothing is written. The frame's checksums other than the IPv4
// header's are not verified.
Result build(const uint8_t* frame, std::size_t len, std::span<const Buffer> out,
             const Options& opt = {}) noexcept;

// Short constant names for logs and stats ("icmp-error", "tcp-reset", ...).
const char* name(Reason r) noexcept;
const char* name(Kind k) noexcept;

}  // namespace cg::reject
