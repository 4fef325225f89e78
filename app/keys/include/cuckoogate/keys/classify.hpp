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
};

// A host name of at most kMaxNameLen bytes has at most 127 non-empty labels,
// so the name and all of its parent domains are at most 127 keys. Longer
// names (HTTP Host) emit only their suffixes of at most kMaxNameLen bytes,
// which again number at most 127: a deep subdomain never escapes a host rule.
inline constexpr unsigned kMaxHostKeys = (kMaxNameLen + 1) / 2;
// flow, src, dst, ip (src), ip (dst), service, url, then the host keys.
inline constexpr unsigned kMaxKeysPerPacket = 7 + kMaxHostKeys;

// Longest encoding of each kind (docs/rules.md, "Key encoding").
inline constexpr std::size_t kFlowKeyMax = 1 + 1 + 1 + 16 + 2 + 16 + 2;
inline constexpr std::size_t kAddrKeyMax = 1 + 1 + 16;
inline constexpr std::size_t kServiceKeyMax = 1 + 1 + 1 + 16 + 2;
inline constexpr std::size_t kUrlKeyMax = 1 + kMaxUrlLen;
inline constexpr std::size_t kHostKeyMax = 1 + kMaxNameLen;  // parents share it
inline constexpr std::size_t kKeyBytesCapacity =
    kFlowKeyMax + 4 * kAddrKeyMax + kServiceKeyMax + kUrlKeyMax + kHostKeyMax;

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

void classify(const uint8_t* frame, std::size_t len, PacketKeys& out) noexcept;

}  // namespace cg
