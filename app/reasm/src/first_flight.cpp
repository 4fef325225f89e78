// First-flight detectors: framing of a TLS ClientHello over records, HTTP/1.x
// request heads (and what follows them) and length-prefixed DNS messages.
#include "cuckoogate/reasm/first_flight.hpp"

#include <algorithm>
#include <cstring>

#include "cuckoogate/keys/request_line.hpp"

namespace cg::reasm {

namespace {

constexpr uint8_t kTlsHandshakeRecord = 22;
constexpr uint8_t kTlsAlertRecord = 21;
constexpr uint8_t kTlsClientHello = 1;

// RFC 9110 §5.6.2 tchar.
bool is_tchar(uint8_t c) noexcept {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::memchr("!#$%&'*+-.^_`|~", c, 15) != nullptr;
}

bool is_ows(uint8_t c) noexcept { return c == ' ' || c == '\t'; }

uint8_t lower(uint8_t c) noexcept { return (c >= 'A' && c <= 'Z') ? static_cast<uint8_t>(c + 32) : c; }

// Case-insensitive: [p, p + n) equals the lower-case literal `lit`.
bool equals_lower(const uint8_t* p, std::size_t n, const char* lit) noexcept {
  if (std::strlen(lit) != n) return false;
  for (std::size_t i = 0; i < n; ++i)
    if (lower(p[i]) != static_cast<uint8_t>(lit[i])) return false;
  return true;
}

// [b, e) without leading and trailing spaces and tabs.
void trim(const uint8_t* p, std::size_t& b, std::size_t& e) noexcept {
  while (b < e && is_ows(p[b])) ++b;
  while (e > b && is_ows(p[e - 1])) --e;
}

// Where the line starting at i ends: the offset of its LF, or n if none.
std::size_t line_end(const uint8_t* p, std::size_t n, std::size_t i) noexcept {
  const void* lf = std::memchr(p + i, '\n', n - i);
  return lf != nullptr ? static_cast<std::size_t>(static_cast<const uint8_t*>(lf) - p) : n;
}

}  // namespace

// ---- TLS ---------------------------------------------------------------

TlsClientHello detect_tls_client_hello(const uint8_t* p, std::size_t n, uint8_t* scratch,
                                       std::size_t scratch_cap,
                                       std::size_t max_handshake) noexcept {
  TlsClientHello r;
  uint8_t hdr[4];
  std::size_t got = 0;    // handshake bytes collected (header included)
  std::size_t total = 0;  // 4 + its length, once the 4-byte header is known
  uint8_t version[2] = {3, 1};
  bool have_version = false;
  for (std::size_t off = 0;; ) {
    // Check what has arrived of the record header, so that a non-TLS stream
    // is recognised on its first byte.
    if (off >= n) return r;
    const uint8_t type = p[off];
    if (type != kTlsHandshakeRecord && type != kTlsAlertRecord) return r.status = Frame::kInvalid, r;
    if (off + 1 < n && !tls_record_major(p[off + 1])) return r.status = Frame::kInvalid, r;
    if (n - off < kTlsRecordHeader) return r;
    const std::size_t rlen = std::size_t{p[off + 3]} << 8 | p[off + 4];
    if (rlen > kTlsMaxRecord) return r.status = Frame::kInvalid, r;
    // An alert before the ClientHello is whole (before it, or between its
    // records): Go's crypto/tls drops warning alerts until the version is
    // agreed (Caddy, Traefik and other Go servers then serve the SNI that
    // follows), so a 2-byte alert record is skipped, not taken for "not
    // TLS" (which ended inspection: found by an outside check). Any other
    // alert length ends the handshake at every server.
    if (type == kTlsAlertRecord) {
      if (rlen != kTlsAlertLength) return r.status = Frame::kInvalid, r;
      off += kTlsRecordHeader + rlen;
      continue;
    }
    if (!have_version) {
      std::memcpy(version, p + off + 1, 2);
      have_version = true;
    }
    // An empty handshake record: RFC 8446 forbids sending one, but OpenSSL
    // takes it (and the ClientHello after it), so it is skipped, not taken
    // for "not TLS" (which ended inspection and let that ClientHello pass).
    if (rlen == 0) {
      off += kTlsRecordHeader;
      continue;
    }
    const uint8_t* q = p + off + kTlsRecordHeader;
    const std::size_t avail = std::min(rlen, n - off - kTlsRecordHeader);
    for (std::size_t i = 0; i < avail;) {
      if (total == 0) {  // still reading the handshake header
        if (got == 0 && q[i] != kTlsClientHello) return r.status = Frame::kInvalid, r;
        hdr[got++] = q[i++];
        if (got < 4) continue;
        const std::size_t len = std::size_t{hdr[1]} << 16 | std::size_t{hdr[2]} << 8 | hdr[3];
        if (len > max_handshake || scratch_cap < kTlsRecordHeader + 4 + len)
          return r.status = Frame::kTooLarge, r;
        total = 4 + len;
        std::memcpy(scratch + kTlsRecordHeader, hdr, 4);
      } else {
        const std::size_t take = std::min(avail - i, total - got);
        std::memcpy(scratch + kTlsRecordHeader + got, q + i, take);
        got += take;
        i += take;
      }
      if (total != 0 && got == total) {
        r.status = Frame::kComplete;
        r.handshake = scratch + kTlsRecordHeader;
        r.handshake_len = total;
        if (total <= 0xffff) {
          scratch[0] = kTlsHandshakeRecord;
          scratch[1] = version[0];
          scratch[2] = version[1];
          scratch[3] = static_cast<uint8_t>(total >> 8);
          scratch[4] = static_cast<uint8_t>(total);
          r.record = scratch;
          r.record_len = kTlsRecordHeader + total;
        }
        r.consumed = off + kTlsRecordHeader + rlen;
        return r;
      }
    }
    if (avail < rlen) return r;
    off += kTlsRecordHeader + rlen;
  }
}

// ---- HTTP --------------------------------------------------------------

HttpHead detect_http_head(const uint8_t* p, std::size_t n, std::size_t max_head) noexcept {
  HttpHead h;
  std::size_t i = 0;
  // Empty lines before the request line (RFC 9112 §2.2: servers skip them),
  // as nginx and Node skip them: every CR or LF byte on its own, so a lone
  // CR too (treating it as "not HTTP" ended inspection, and nginx then
  // served the request behind it: found by an outside check).
  while (i < n && (p[i] == '\n' || p[i] == '\r')) ++i;
  if (i > max_head) return h.status = Frame::kTooLarge, h;
  if (i == n) return h;
  h.start = i;
  // The method: a token, then a space or tab.
  std::size_t j = i;
  while (j < n && j - i <= max_head && is_tchar(p[j])) ++j;
  if (j - i > max_head) return h.status = Frame::kTooLarge, h;
  if (j == n) return h;
  if (j == i || !is_ows(p[j])) {
    // Not nginx's and Node's line; Python's http.server may read one here
    // (cuckoogate/keys/request_line.hpp): whitespace before the method, or
    // other separators after it. Such a line is read whole from the
    // stream's first byte, as Python reads it.
    http::PythonLine l;
    const http::PyLine py = http::python_request_line(p, n, &l);
    if (py == http::PyLine::kNo) return h.status = Frame::kInvalid, h;
    if (py == http::PyLine::kNeedMore) {
      if (n > max_head) h.status = Frame::kTooLarge;
      return h;
    }
    i = 0;
    h.start = 0;
  }

  bool have_length = false;
  uint64_t length = 0;
  bool chunked = false;
  bool bad_te = false, bad_length = false;
  std::size_t line = i;
  for (bool first = true;; first = false) {
    const std::size_t lf = line_end(p, n, line);
    if (lf == n || lf + 1 - i > max_head) {
      if (n - i > max_head) return h.status = Frame::kTooLarge, h;
      return h;
    }
    std::size_t e = lf;
    if (e > line && p[e - 1] == '\r') --e;
    if (e == line && !first) {
      h.head_end = lf + 1;
      break;
    }
    const void* colon = first ? nullptr : std::memchr(p + line, ':', e - line);
    if (colon != nullptr) {
      const auto c = static_cast<std::size_t>(static_cast<const uint8_t*>(colon) - p);
      std::size_t vb = c + 1;
      std::size_t ve = e;
      trim(p, vb, ve);
      if (equals_lower(p + line, c - line, "content-length")) {
        uint64_t v = 0;
        bool ok = vb != ve;
        for (std::size_t k = vb; ok && k < ve; ++k) {
          ok = p[k] >= '0' && p[k] <= '9' && v <= (uint64_t{1} << 58);
          v = v * 10 + (p[k] - '0');
        }
        bad_length = bad_length || !ok || (have_length && v != length);
        have_length = true;
        length = v;
      } else if (equals_lower(p + line, c - line, "transfer-encoding")) {
        // The last coding of the last Transfer-Encoding line decides.
        std::size_t lb = ve;
        while (lb > vb && p[lb - 1] != ',') --lb;
        std::size_t le = ve;
        trim(p, lb, le);
        chunked = equals_lower(p + lb, le - lb, "chunked");
        bad_te = !chunked;
      }
    }
    line = lf + 1;
  }
  // RFC 9112 §6.3: Transfer-Encoding overrides Content-Length; a final
  // coding other than chunked leaves a request without a knowable length,
  // and so does a Content-Length that does not read as one number. Servers
  // disagree on such a head (nginx and Node refuse most, Node serves
  // "identity", Python's http.server "-1"): it is a request, judged whole.
  h.status = Frame::kComplete;
  if (bad_te || (!chunked && bad_length)) {
    h.body = HttpBody::kUnknown;
    h.next = h.head_end;
  } else if (chunked) {
    h.body = HttpBody::kChunked;
    h.next = 0;
  } else if (have_length) {
    h.body = HttpBody::kLength;
    h.content_length = length;
    h.next = h.head_end + length;
  } else {
    h.next = h.head_end;
  }
  return h;
}

Frame find_chunked_end(const uint8_t* p, std::size_t n, std::size_t* end) noexcept {
  std::size_t i = 0;
  for (;;) {
    // chunk-size in hex, then optional extensions up to the line's end.
    uint64_t size = 0;
    const std::size_t digits = i;
    for (; i < n; ++i) {
      const uint8_t c = p[i];
      const int d = (c >= '0' && c <= '9') ? c - '0'
                    : (lower(c) >= 'a' && lower(c) <= 'f') ? lower(c) - 'a' + 10 : -1;
      if (d < 0) break;
      size = size * 16 + static_cast<unsigned>(d);
      if (size > (uint64_t{1} << 31)) return Frame::kTooLarge;
    }
    if (i == n) return Frame::kNeedMore;
    if (i == digits) return Frame::kInvalid;
    if (p[i] != ';' && p[i] != '\r' && p[i] != '\n' && !is_ows(p[i])) return Frame::kInvalid;
    const std::size_t lf = line_end(p, n, i);
    if (lf == n) return Frame::kNeedMore;
    i = lf + 1;
    if (size == 0) {  // the last chunk: trailer lines up to an empty line
      for (;;) {
        const std::size_t tl = line_end(p, n, i);
        if (tl == n) return Frame::kNeedMore;
        const bool empty = tl == i || (tl == i + 1 && p[i] == '\r');
        i = tl + 1;
        if (empty) {
          *end = i;
          return Frame::kComplete;
        }
      }
    }
    if (n - i < size) return Frame::kNeedMore;
    i += size;
    if (i == n) return Frame::kNeedMore;
    if (p[i] == '\r') {
      if (i + 1 == n) return Frame::kNeedMore;
      if (p[i + 1] != '\n') return Frame::kInvalid;
      i += 2;
    } else if (p[i] == '\n') {
      i += 1;
    } else {
      return Frame::kInvalid;
    }
  }
}

// ---- DNS over TCP ------------------------------------------------------

DnsMessage detect_dns_tcp(const uint8_t* p, std::size_t n) noexcept {
  DnsMessage m;
  if (n < 2) return m;
  const std::size_t len = std::size_t{p[0]} << 8 | p[1];
  if (n - 2 < len) return m;
  m.status = Frame::kComplete;
  m.skip = len < kDnsHeader;
  m.message = p + 2;
  m.message_len = len;
  m.next = 2 + len;
  return m;
}

}  // namespace cg::reasm
