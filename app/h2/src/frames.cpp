// The client's connection start of cleartext HTTP/2: preface, frames, the
// first header block (RFC 9113 §3.4, §4.1, §6.2, §6.10).
#include <cstring>

#include "cuckoogate/h2/h2.hpp"

namespace cg::h2 {

namespace {

constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
static_assert(sizeof kPreface - 1 == kPrefaceLen);

constexpr std::size_t kFrameHeader = 9;
constexpr uint8_t kHeaders = 1, kContinuation = 9;
constexpr uint8_t kEndHeaders = 0x04, kPadded = 0x08, kPriority = 0x20;

}  // namespace

bool begins_preface(const uint8_t* p, std::size_t n) noexcept {
  return std::memcmp(p, kPreface, n < kPrefaceLen ? n : kPrefaceLen) == 0;
}

FirstBlock first_header_block(const uint8_t* p, std::size_t n, std::size_t max, uint8_t* out,
                              std::size_t cap) noexcept {
  FirstBlock r;
  if (!begins_preface(p, n)) return r.status = Status::kInvalid, r;
  if (n < kPrefaceLen) return r;
  bool in_block = false;   // a HEADERS frame without END_HEADERS was read
  uint32_t stream = 0;     // its stream
  std::size_t joined = 0;  // the block's bytes so far
  for (std::size_t pos = kPrefaceLen;;) {
    // (pos <= n here: every frame stepped over was whole.)
    if (n - pos < kFrameHeader) {
      if (pos + kFrameHeader > max) r.status = Status::kTooLarge;
      return r;
    }
    const uint8_t* f = p + pos;
    const std::size_t len = std::size_t{f[0]} << 16 | std::size_t{f[1]} << 8 | f[2];
    const uint8_t type = f[3], flags = f[4];
    const uint32_t id = (uint32_t{f[5]} << 24 | uint32_t{f[6]} << 16 | uint32_t{f[7]} << 8 | f[8]) & 0x7fffffffu;
    if (pos + kFrameHeader + len > max) return r.status = Status::kTooLarge, r;
    if (n - pos - kFrameHeader < len) return r;  // the frame is not all here
    const uint8_t* payload = f + kFrameHeader;
    std::size_t from = 0, to = len;  // the fragment within the payload
    if (!in_block) {
      if (type == kContinuation) return r.status = Status::kInvalid, r;  // continues nothing
      if (type != kHeaders) {  // stepped over, as a server takes or ignores it
        pos += kFrameHeader + len;
        continue;
      }
      if (id == 0) return r.status = Status::kInvalid, r;
      std::size_t pad = 0;
      if ((flags & kPadded) != 0) {
        if (len < 1) return r.status = Status::kInvalid, r;
        pad = payload[0];
        from = 1;
      }
      if ((flags & kPriority) != 0) from += 5;  // stream dependency, weight
      if (from + pad > len) return r.status = Status::kInvalid, r;  // §6.2: padding past the fragment
      to = len - pad;
      in_block = true;
      stream = id;
    } else if (type != kContinuation || id != stream) {
      return r.status = Status::kInvalid, r;  // §6.10: nothing may come between
    }
    if (out != nullptr) {
      if (cap - joined < to - from) return r.status = Status::kTooLarge, r;
      std::memcpy(out + joined, payload + from, to - from);
    }
    joined += to - from;
    pos += kFrameHeader + len;
    if ((flags & kEndHeaders) != 0) {
      r.status = Status::kComplete;
      r.end = pos;
      r.block_len = joined;
      return r;
    }
  }
}

}  // namespace cg::h2
