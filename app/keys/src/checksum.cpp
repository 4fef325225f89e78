#include "cuckoogate/keys/checksum.hpp"

#include <cstring>

namespace cg {

uint16_t ones_sum(const uint8_t* p, std::size_t len, uint32_t sum) noexcept {
  // 64-bit accumulator over 32-bit words: no carry is lost before the fold
  // for any length an IP packet can have (2^32 words).
  uint64_t acc = sum;
  std::size_t i = 0;
  for (; i + 4 <= len; i += 4) {
    uint32_t w;
    std::memcpy(&w, p + i, 4);
    acc += w;
  }
  // Byte order: the sum is taken over the words as they lie in memory; the
  // ones'-complement sum is byte-order independent (RFC 1071 section 2(B))
  // as long as the tail is read the same way.
  uint8_t tail[4] = {0, 0, 0, 0};
  std::memcpy(tail, p + i, len - i);
  uint32_t w;
  std::memcpy(&w, tail, 4);
  acc += w;
  while ((acc >> 16) != 0) acc = (acc & 0xffff) + (acc >> 16);
  return static_cast<uint16_t>(acc);
}

Checksum check_checksums(const uint8_t* frame, std::size_t len, const PacketMeta& m) noexcept {
  if ((m.proto != 6 && m.proto != 17) || !m.l4 || m.tunneled || m.family == 0 || m.fragmented ||
      m.non_first_fragment || m.addr_off < (m.family == 4 ? 12u : 8u))
    return Checksum::kUnchecked;
  // Shorter than its IP header says: the receiver drops it (Linux: "len <
  // tot_len"). An IPv6 payload length of 0 (a jumbogram) is not judged.
  const std::size_t ip_at = m.addr_off - (m.family == 4 ? 12 : 8);
  const uint8_t* ip = frame + ip_at;
  const std::size_t ip_len = m.family == 4 ? std::size_t{ip[2]} << 8 | ip[3] : 40 + (std::size_t{ip[4]} << 8 | ip[5]);
  if (m.family == 6 && ip_len == 40 && m.l4_off > ip_at + 40) return Checksum::kUnchecked;
  if (ip_at + ip_len > len) return Checksum::kBad;
  if (m.malformed) return Checksum::kUnchecked;
  if (std::size_t{m.l4_off} + m.l4_len > len || m.l4_len < (m.proto == 6 ? 20u : 8u)) return Checksum::kUnchecked;
  const uint8_t* l4 = frame + m.l4_off;
  if (m.family == 4) {
    const std::size_t ihl = std::size_t{ip[0] & 0x0fu} * 4;
    if (ihl < 20 || ip_at + ihl > len) return Checksum::kUnchecked;
    if (ones_sum(ip, ihl) != 0xffff) return Checksum::kBad;
    // Options a receiver refuses (Linux, accept_source_route = 0 by
    // default): a source route (LSRR 131, SSRR 137), or options that do not
    // parse. Such a packet never reaches the server's stream.
    for (std::size_t o = 20; o < ihl;) {
      const uint8_t t = ip[o];
      if (t == 0) break;  // end of options
      if (t == 1) {       // no-op
        ++o;
        continue;
      }
      if (o + 1 >= ihl || ip[o + 1] < 2 || o + ip[o + 1] > ihl) return Checksum::kBad;
      if (t == 131 || t == 137) return Checksum::kBad;
      o += ip[o + 1];
    }
    if (m.proto == 17 && l4[6] == 0 && l4[7] == 0) return Checksum::kUnchecked;  // "no checksum" (RFC 768)
  }
  if (m.family == 6) {
    // A routing header with segments left: an end host drops it (type 0 is
    // gone, RFC 5095; segment routing is off by default), so it never
    // reaches the server's stream.
    const uint8_t* ip6 = ip;
    uint8_t nh = ip6[6];
    std::size_t o = m.addr_off + 32;
    while (o + 8 <= m.l4_off && nh != m.proto) {
      const uint8_t* e = frame + o;
      if (nh == 43 && e[3] != 0) return Checksum::kBad;
      const std::size_t elen = nh == 44 ? 8 : nh == 51 ? (std::size_t{e[1]} + 2) * 4 : (std::size_t{e[1]} + 1) * 8;
      nh = e[0];
      o += elen;
    }
  }
  // The pseudo-header: both addresses, the transport length and the
  // protocol, as 16-bit words in network order (a 32-bit length and the
  // next-header byte in IPv6's; the same sum while the length fits 16 bits).
  uint8_t ph[4] = {0, m.proto, static_cast<uint8_t>(m.l4_len >> 8), static_cast<uint8_t>(m.l4_len)};
  if (m.family == 6 && m.l4_len > 0xffff) return Checksum::kUnchecked;  // a jumbogram: not on these links
  uint32_t pw;
  std::memcpy(&pw, ph, 4);
  const uint16_t addrs = ones_sum(frame + m.addr_off, 2 * m.addr_len(), pw);
  return ones_sum(l4, m.l4_len, addrs) == 0xffff ? Checksum::kGood : Checksum::kBad;
}

}  // namespace cg
