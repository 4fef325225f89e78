// An HTTP/1 request line as Python's http.server reads it. Header-only:
// classification (app/keys) judges such a request, and the stream inspector
// (app/reasm) frames its head, by the same reading (docs/rules.md,
// "Python's request line").
//
// Python reads the bytes up to the first LF, drops trailing CRs and LFs and
// splits the rest with str.split(): at runs of whitespace, which for Latin-1
// is SP, HT, LF, VT, FF, CR, \x1c-\x1f, \x85 and \xa0, whitespace before
// the first word skipped. Three words whose last begins with "HTTP/" are a
// request, and so are two words beginning with GET (HTTP/0.9, whose header
// lines Python still reads). The version's numbers are read more loosely
// than anyone checks them here (Debian 12's Python 3.11.2 takes int()'s
// syntax: "HTTP/+1.1", "HTTP/0_1.0", any number of digits; it refuses
// 2.0 and above), so any "HTTP/" word is taken: reading a refused request
// only judges more. The method is answered through a do_<method> handler,
// so it is taken as an identifier of at most kMaxPythonMethod bytes; that
// lets bytes that are no request be told at once, before their line ends.
// nginx and Node refuse most such lines that are not also theirs; Python
// serves them, and a keep-alive connection's later requests behind them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cg::http {

inline constexpr std::size_t kMaxPythonMethod = 32;

inline bool python_space(uint8_t c) noexcept {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f) || c == 0x85 || c == 0xa0;
}

// Offsets into the line's bytes.
struct PythonLine {
  std::size_t method = 0, method_len = 0;
  std::size_t target = 0, target_len = 0;
  std::size_t lf = 0;  // the line's LF: the header lines start after it
};

enum class PyLine : uint8_t {
  kNo,        // not a request line Python serves
  kNeedMore,  // no LF yet, and what is there may begin one
  kYes,
};

// Reads [p, p + n) as Python reads a request line; work linear in the
// line, stopping at the first byte that rules one out.
inline PyLine python_request_line(const uint8_t* p, std::size_t n, PythonLine* l) noexcept {
  std::size_t wb[3] = {}, we[3] = {};
  unsigned words = 0;
  bool in_word = false;
  std::size_t i = 0;
  for (; i < n && p[i] != '\n'; ++i) {
    const uint8_t c = p[i];
    if (python_space(c)) {
      if (in_word) we[words++] = i;
      in_word = false;
      continue;
    }
    if (!in_word) {
      if (words == 3) return PyLine::kNo;  // a fourth word: 400
      wb[words] = i;
      in_word = true;
    }
    const std::size_t at = i - wb[words];
    if (words == 0) {  // the method: an identifier
      const bool alpha = (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
      if (!(alpha || c == '_' || (at != 0 && c >= '0' && c <= '9')) || at >= kMaxPythonMethod) return PyLine::kNo;
    } else if (words == 2 && at < 5 && c != static_cast<uint8_t>("HTTP/"[at])) {
      return PyLine::kNo;
    }
  }
  if (i == n) return PyLine::kNeedMore;
  if (in_word) we[words++] = i;  // (trailing CRs are whitespace: dropped or not, the words are these)
  if (words == 2) {
    if (we[0] - wb[0] != 3 || std::memcmp(p + wb[0], "GET", 3) != 0) return PyLine::kNo;  // HTTP/0.9: GET only
  } else if (words != 3 || we[2] - wb[2] < 5) {
    return PyLine::kNo;
  }
  *l = {wb[0], we[0] - wb[0], wb[1], we[1] - wb[1], i};
  return PyLine::kYes;
}

}  // namespace cg::http
