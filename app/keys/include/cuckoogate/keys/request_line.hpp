// An HTTP/1 request line as Python's http.server reads it. Header-only:
// classification (app/keys) judges such a request, and the stream inspector
// (app/reasm) frames its head, by the same reading (docs/rules.md,
// "Python's request line").
//
// Python reads the bytes up to the first LF, drops trailing CRs and LFs and
// splits the rest with str.split(): at runs of whitespace, which for Latin-1
// is SP, HT, LF, VT, FF, CR, \x1c-\x1f, \x85 and \xa0, whitespace before
// the first word skipped. Three words whose last is "HTTP/" and two numbers
// of 1 to 10 digits below 2.0 are a request (any method: an unknown one is
// answered 501), and so are two words beginning with GET (HTTP/0.9, whose
// header lines Python still reads). nginx and Node refuse most such lines
// that are not also theirs; Python serves them, and a keep-alive
// connection's later requests behind them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cg::http {

inline bool python_space(uint8_t c) noexcept {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f) || c == 0x85 || c == 0xa0;
}

// Offsets into the line's bytes.
struct PythonLine {
  std::size_t method = 0, method_len = 0;
  std::size_t target = 0, target_len = 0;
  std::size_t lf = 0;  // the line's LF: the header lines start after it
};

// True if [p, p + n) begins with a request line Python reads (its LF
// included); work linear in the line. Bytes that begin with neither
// whitespace nor a letter are refused at once (a handler's methods are
// do_<letters>: Python answers anything else 501), so that binary payloads
// are not searched for a line end.
inline bool python_request_line(const uint8_t* p, std::size_t n, PythonLine* l) noexcept {
  if (n == 0 || !(python_space(p[0]) || ((p[0] | 0x20) >= 'a' && (p[0] | 0x20) <= 'z'))) return false;
  const void* nl = std::memchr(p, '\n', n);
  if (nl == nullptr) return false;
  const auto lf = static_cast<std::size_t>(static_cast<const uint8_t*>(nl) - p);
  std::size_t end = lf;
  while (end > 0 && p[end - 1] == '\r') --end;
  std::size_t wb[3] = {}, we[3] = {};
  unsigned words = 0;
  for (std::size_t i = 0; i < end;) {
    while (i < end && python_space(p[i])) ++i;
    if (i == end) break;
    if (words == 3) return false;  // a fourth: 400
    wb[words] = i;
    while (i < end && !python_space(p[i])) ++i;
    we[words++] = i;
  }
  if (words == 2) {
    if (we[0] - wb[0] != 3 || std::memcmp(p + wb[0], "GET", 3) != 0) return false;  // HTTP/0.9: GET only
  } else if (words == 3) {
    const uint8_t* v = p + wb[2];
    const std::size_t vlen = we[2] - wb[2];
    if (vlen < 5 || std::memcmp(v, "HTTP/", 5) != 0) return false;
    std::size_t i = 5, digits = 0;
    uint64_t major = 0;  // (10 digits at most: no overflow)
    for (; i < vlen && v[i] >= '0' && v[i] <= '9'; ++i, ++digits) major = major * 10 + (v[i] - '0');
    if (digits == 0 || digits > 10 || i == vlen || v[i] != '.') return false;
    std::size_t minor = 0;
    for (++i; i < vlen && v[i] >= '0' && v[i] <= '9'; ++i) ++minor;
    if (minor == 0 || minor > 10 || i != vlen) return false;
    if (major >= 2) return false;  // 505
  } else {
    return false;
  }
  *l = {wb[0], we[0] - wb[0], wb[1], we[1] - wb[1], lf};
  return true;
}

}  // namespace cg::http
