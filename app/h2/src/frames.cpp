// The client's connection start of cleartext HTTP/2: preface, frames, the
// first header block (RFC 9113 §3.4, §4.1, §6.2, §6.10).
#include <cstring>

#include "cuckoogate/h2/h2.hpp"

namespace cg::h2 {

namespace {

constexpr uint8_t kEndHeaders = 0x04, kPadded = 0x08, kPriority = 0x20;

}  // namespace

bool begins_preface(const uint8_t* p, std::size_t n) noexcept {
  return n == 0 || std::memcmp(p, kPreface, n < kPrefaceLen ? n : kPrefaceLen) == 0;
}

bool frame_header(const uint8_t* p, std::size_t n, FrameHeader* h) noexcept {
  if (n < kFrameHeader) return false;
  h->len = uint32_t{p[0]} << 16 | uint32_t{p[1]} << 8 | p[2];
  h->type = p[3];
  h->flags = p[4];
  h->stream = (uint32_t{p[5]} << 24 | uint32_t{p[6]} << 16 | uint32_t{p[7]} << 8 | p[8]) & 0x7fffffffu;
  return true;
}

FirstBlock header_block(const uint8_t* p, std::size_t n, std::size_t max, uint8_t* out, std::size_t cap) noexcept {
  FirstBlock r;
  bool in_block = false;   // a HEADERS frame without END_HEADERS was read
  uint32_t stream = 0;     // its stream
  std::size_t joined = 0;  // the block's bytes so far
  for (std::size_t pos = 0;;) {
    // (pos <= n here: every frame stepped over was whole.)
    FrameHeader f;
    if (!frame_header(p + pos, n - pos, &f)) {
      if (pos + kFrameHeader > max) r.status = Status::kTooLarge;
      return r;
    }
    const uint8_t* payload = p + pos + kFrameHeader;
    const std::size_t avail = n - pos - kFrameHeader;  // of the payload
    std::size_t from = 0, to = f.len;  // the fragment within the payload
    std::size_t need = f.len;          // what must be here to go on
    if (!in_block) {
      if (f.type == kContinuation) return r.status = Status::kInvalid, r;  // continues nothing
      if (f.type != kHeaders) {  // stepped over, as a server takes or ignores it
        if (pos + kFrameHeader + f.len > max) return r.status = Status::kTooLarge, r;
        if (avail < f.len) return r;
        pos += kFrameHeader + f.len;
        continue;
      }
      if (f.stream == 0) return r.status = Status::kInvalid, r;
      std::size_t pad = 0;
      if ((f.flags & kPadded) != 0) {
        if (f.len < 1) return r.status = Status::kInvalid, r;
        if (avail < 1) return r;  // (its header fits max: checked below once more is known)
        pad = payload[0];
        from = 1;
      }
      if ((f.flags & kPriority) != 0) from += 5;  // stream dependency, weight
      if (from + pad > f.len) return r.status = Status::kInvalid, r;  // §6.2: padding past the fragment
      to = f.len - pad;
      // A server acts on a block once its fragment is there, before the
      // padding behind it (nginx served a request whose padding never came:
      // an outside check).
      if ((f.flags & kEndHeaders) != 0) need = to;
      in_block = true;
      stream = f.stream;
    } else if (f.type != kContinuation || f.stream != stream) {
      return r.status = Status::kInvalid, r;  // §6.10: nothing may come between
    }
    if (pos + kFrameHeader + need > max) return r.status = Status::kTooLarge, r;
    if (avail < need) return r;  // the frame is not all here
    if (out != nullptr) {
      if (cap - joined < to - from) return r.status = Status::kTooLarge, r;
      std::memcpy(out + joined, payload + from, to - from);
    }
    joined += to - from;
    if ((f.flags & kEndHeaders) != 0) {
      r.status = Status::kComplete;
      r.end = pos + kFrameHeader + need;
      r.block_len = joined;
      return r;
    }
    pos += kFrameHeader + f.len;
  }
}

FirstBlock first_header_block(const uint8_t* p, std::size_t n, std::size_t max, uint8_t* out,
                              std::size_t cap) noexcept {
  FirstBlock r;
  if (!begins_preface(p, n)) return r.status = Status::kInvalid, r;
  if (max < kPrefaceLen) return r.status = Status::kTooLarge, r;
  if (n < kPrefaceLen) return r;
  r = header_block(p + kPrefaceLen, n - kPrefaceLen, max - kPrefaceLen, out, cap);
  if (r.status == Status::kComplete) r.end += kPrefaceLen;
  return r;
}

}  // namespace cg::h2
