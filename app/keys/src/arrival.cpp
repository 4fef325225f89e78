#include "cuckoogate/keys/arrival.hpp"

namespace cg {

namespace {

uint32_t rd32(const uint8_t* p) { return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3]; }

}  // namespace

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
