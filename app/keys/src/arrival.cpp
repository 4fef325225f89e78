#include "cuckoogate/keys/arrival.hpp"

#include <xxhash.h>

namespace cg {

namespace {

uint32_t rd32(const uint8_t* p) { return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3]; }

}  // namespace

uint16_t delivery_digest(const uint8_t* frame, const PacketMeta& m, uint64_t seed) noexcept {
  constexpr uint32_t kMacBytes = 6, kTagsOff = 12;  // destination MAC; then the source MAC, tags
  if (m.family == 0 || !m.l4) return 0;
  // The IP header starts 12 bytes before the source address (IPv4) or 8
  // (IPv6); its fixed part ends 8 bytes after it (20) or 32 (40). The
  // transport header starts at l4_off: what lies between is options or
  // extension headers.
  const uint32_t ip = m.addr_off - (m.family == 4 ? 12 : 8);
  const uint32_t fixed_end = m.addr_off + (m.family == 4 ? 8 : 32);
  uint64_t h = XXH3_64bits_withSeed(frame, kMacBytes, seed);
  h = XXH3_64bits_withSeed(frame + kTagsOff, ip - kTagsOff, h);
  if (m.l4_off > fixed_end) {
    // (IPv6: the first extension header's type is the fixed header's Next
    // Header, byte 6; each later one's is in the header before it.)
    if (m.family == 6) h = XXH3_64bits_withSeed(frame + ip + 6, 1, h);
    h = XXH3_64bits_withSeed(frame + fixed_end, m.l4_off - fixed_end, h);
  }
  const auto d = static_cast<uint16_t>(h ^ h >> 16 ^ h >> 32 ^ h >> 48);
  return d != 0 ? d : 1;
}

TcpOptionMarks tcp_option_marks(const uint8_t* frame, const PacketMeta& m) noexcept {
  constexpr uint32_t kTcpHeader = 20;
  TcpOptionMarks r;
  if (m.proto != 6 || !m.l4 || m.payload_off < m.l4_off + kTcpHeader) return r;
  // payload_off is the data offset's end (parse_packet checked it lies
  // within the transport bytes); the options are what precedes it.
  const uint8_t* p = frame + m.l4_off + kTcpHeader;
  const uint8_t* const end = frame + m.payload_off;
  uint8_t& marks = r.marks;
  while (p < end) {
    const uint8_t kind = p[0];
    if (kind == 0) break;  // End of option list
    if (kind == 1) {       // NOP
      ++p;
      continue;
    }
    if (end - p < 2 || p[1] < 2 || p[1] > end - p) {
      marks |= kTcpMarkCut;
      break;
    }
    const uint8_t len = p[1];
    if (kind == 19) marks |= len == 18 ? kTcpMarkMd5 : kTcpMarkOdd;
    if (kind == 29) marks |= len >= 4 ? kTcpMarkAo : kTcpMarkOdd;
    if (kind == 8 && len == 10) {
      // Two are odd; Linux takes the last one's values, so do we.
      marks |= (marks & kTcpMarkTimestamps) != 0 ? kTcpMarkOdd : kTcpMarkTimestamps;
      r.tsval = rd32(p + 2);
      r.tsecr = rd32(p + 6);
    } else if (kind == 8) {
      marks |= kTcpMarkOdd;
    }
    p += len;
  }
  return r;
}

}  // namespace cg
