// The Internet checksums of a parsed packet (RFC 1071, RFC 768/793 with the
// IPv4 and IPv6 pseudo-headers of RFC 8200 section 8.1): whether the
// receiver will take it. A segment the server discards, yet the gateway
// reads, is the insertion attack of Ptacek and Newsham (docs/reassembly.md,
// "Checksums"). DPDK-free, like the rest of classification; the worker
// asks only for the packets its inspectors are about to read.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuckoogate/keys/classify.hpp"

namespace cg {

enum class Checksum : uint8_t {
  kGood,       // the IPv4 header's and the transport's checksums verify
  kBad,        // a receiver drops the packet: a checksum does not verify,
               // the frame is shorter than its IP header says, or it carries
               // a source route (IPv4 options, an IPv6 routing header with
               // segments left) or IPv4 options that do not parse
  kUnchecked,  // nothing to verify (no transport header, a tunnel, a
               // fragment, UDP over IPv4 without a checksum)
};

// `m`: parse_packet(frame, len, m). TCP and UDP only; any other protocol is
// kUnchecked. The checksum covers the transport bytes to the end of the IP
// packet (m.l4_len), so a frame that holds fewer is kUnchecked.
Checksum check_checksums(const uint8_t* frame, std::size_t len, const PacketMeta& m) noexcept;

// The ones'-complement sum of `len` bytes, folded to 16 bits, in network
// byte order as read (RFC 1071): `sum` carries a partial sum in.
uint16_t ones_sum(const uint8_t* p, std::size_t len, uint32_t sum = 0) noexcept;

}  // namespace cg
