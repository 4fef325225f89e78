// HTTP, TLS and DNS name recognisers for classify(). Every index is checked
// against the end before it is read; no loop runs more than n iterations.
#include "app_layer.hpp"

#include <cstring>
#include <string_view>

#include "cuckoogate/h2/h2.hpp"
#include "cuckoogate/keys/request_line.hpp"
#include "encoding.hpp"

namespace cg::detail {
namespace {

inline uint16_t rd16(const uint8_t* p) noexcept {
  return static_cast<uint16_t>((p[0] << 8) | p[1]);
}

// RFC 9110 tchar: what a method token may hold. Servers accept any token
// (nginx, Node), so any token is taken as a method.
bool is_tchar(uint8_t c) noexcept {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return c != 0 && std::memchr("!#$%&'*+-.^_`|~", c, 15) != nullptr;
}

bool is_blank(uint8_t c) noexcept { return c == ' ' || c == '\t'; }

bool iequals_prefix(const uint8_t* p, std::size_t n, std::string_view lower_word) noexcept {
  if (n < lower_word.size()) return false;
  for (std::size_t i = 0; i < lower_word.size(); ++i) {
    if (ascii_lower(p[i]) != static_cast<uint8_t>(lower_word[i])) return false;
  }
  return true;
}

const uint8_t* find(const uint8_t* p, std::size_t n, uint8_t c) noexcept {
  return static_cast<const uint8_t*>(std::memchr(p, c, n));
}

// The header line starting at pos: *end where its text ends, *next where
// the next line starts; false if it has no terminator yet (cut by the
// segment's end). A line ends at LF, a CR just before it dropped (nginx,
// Node); with bare_cr also at a CR alone (CR LF is one terminator), as
// Python's http.server reads header lines (its email parser splits at CR,
// LF and CRLF).
bool header_line(const uint8_t* p, std::size_t n, std::size_t pos, bool bare_cr, std::size_t* end,
                 std::size_t* next) noexcept {
  const uint8_t* nl = find(p + pos, n - pos, '\n');
  if (bare_cr) {
    const uint8_t* cr = find(p + pos, static_cast<std::size_t>((nl != nullptr ? nl : p + n) - (p + pos)), '\r');
    if (cr != nullptr && cr + 1 != nl) {
      if (cr + 1 == p + n) return false;  // a CR LF may be cut here
      *end = static_cast<std::size_t>(cr - p);
      *next = *end + 1;
      return true;
    }
  }
  if (nl == nullptr) return false;
  *end = static_cast<std::size_t>(nl - p);
  *next = *end + 1;
  if (*end > pos && p[*end - 1] == '\r') --*end;
  return true;
}

// The value of the Host line [pos, end) (next: where the line after it
// starts) into [*b, *e): its blanks and trailing CRs trimmed; for "Host:"
// alone, the first continuation line that is not blank (obs-fold, RFC 9112
// §5.2: Apache and HAProxy unfold it and route by that name; nginx and Node
// refuse it). False if there is none.
bool host_value(const uint8_t* p, std::size_t n, bool bare_cr, std::size_t pos, std::size_t end, std::size_t next,
                std::size_t* vb, std::size_t* ve) noexcept {
  std::size_t b = pos + 5;
  while (b < end && (p[b] == ' ' || p[b] == '\t')) ++b;
  std::size_t e = end;
  // Trailing blanks and CRs: nginx reads "Host: a.example\r\r\n" as
  // a.example (its parser skips a CR before the line's end).
  while (e > b && (p[e - 1] == ' ' || p[e - 1] == '\t' || p[e - 1] == '\r')) --e;
  for (std::size_t c = next; e == b;) {
    if (c >= n || !is_blank(p[c])) return false;
    std::size_t ce = 0, after = 0;
    if (!header_line(p, n, c, bare_cr, &ce, &after)) return false;
    while (c < ce && is_blank(p[c])) ++c;
    while (ce > c && (is_blank(p[ce - 1]) || p[ce - 1] == '\r')) --ce;
    if (ce != c) {
      b = c;
      e = ce;
    }
    c = after;
  }
  *vb = b;
  *ve = e;
  return true;
}

// Finds the first Host header in the header block starting at p, lines
// split as header_line() does; the block ends at an empty line. A line
// without its terminator (cut by the segment end) is ignored. With `last`,
// the block's last Host header that names something into *last/*last_len
// too, and a first Host line that names nothing does not end the search
// (a server taking the last would route by a later one).
bool find_host_header(const uint8_t* p, std::size_t n, bool bare_cr, const uint8_t*& v, std::size_t& vlen,
                      const uint8_t** last = nullptr, std::size_t* last_len = nullptr) noexcept {
  bool first = false;
  std::size_t pos = 0;
  while (pos < n) {
    std::size_t end = 0, next = 0;
    if (!header_line(p, n, pos, bare_cr, &end, &next) || end == pos) break;  // cut, or the block's end
    if (iequals_prefix(p + pos, end - pos, "host:")) {
      std::size_t b = 0, e = 0;
      const bool has = host_value(p, n, bare_cr, pos, end, next, &b, &e);
      if (!has && !first && last == nullptr) return false;  // the first Host line names nothing: no host
      if (has && !first) {
        v = p + b;
        vlen = e - b;
        first = true;
        if (last == nullptr) return true;
      }
      if (has) {
        *last = p + b;
        *last_len = e - b;
      }
    }
    pos = next;
  }
  return first;
}

// True if the header block starting at p holds a CR not followed by LF
// before its end (an empty line, split at LF): only then may Python's
// reading of the lines find another Host than nginx's.
bool has_bare_cr(const uint8_t* p, std::size_t n) noexcept {
  for (const uint8_t* cr = find(p, n, '\r'); cr != nullptr; cr = find(cr + 1, n - (cr + 1 - p), '\r')) {
    if (cr + 1 == p + n) return false;
    if (cr[1] != '\n') return true;
    // CR LF: an empty line (the block's end) if the line began here.
    if (cr == p || cr[-1] == '\n') return false;
  }
  return false;
}

// The Host header(s) of the header block at p: the first into v/vlen; when
// a bare CR makes Python's reading find another first Host line, that one
// into req.alt_host and the last of several Host lines (another name than
// the first) into req.last_host; else that last one into req.alt_host.
void host_headers(const uint8_t* p, std::size_t n, HttpRequest& req, const uint8_t*& v, std::size_t& vlen) noexcept {
  const uint8_t* last = nullptr;
  std::size_t last_len = 0;
  find_host_header(p, n, /*bare_cr=*/false, v, vlen, &last, &last_len);
  // Several Host lines: nginx, Go and Tomcat refuse the request, Node and
  // Python take the first, and a server that takes the last would route by
  // another name (an outside check): that one is judged too.
  if (last != nullptr && v != nullptr && last_len == vlen && std::memcmp(last, v, vlen) == 0) last = nullptr;
  if (has_bare_cr(p, n)) {
    const uint8_t* a = nullptr;
    std::size_t al = 0;
    if (find_host_header(p, n, /*bare_cr=*/true, a, al) && !(a == v && al == vlen)) {
      req.alt_host = a;
      req.alt_host_len = al;
      req.last_host = last;  // (a third reading: its host keys only)
      req.last_host_len = last_len;
      return;
    }
  }
  req.alt_host = last;
  req.alt_host_len = last_len;
}

// An absolute-form target [t, t + tend) (RFC 3986 scheme: ALPHA *( ALPHA /
// DIGIT / "+" / "-" / "." ), then "://"): its authority (userinfo dropped)
// and path into req; a server takes the host from the target whatever the
// scheme (nginx: ws://, ftp://), url keys are for http only. False if the
// target is not one.
bool absolute_form(const uint8_t* t, std::size_t tend, HttpRequest& req) noexcept {
  const auto scheme_char = [](uint8_t c, bool first) {
    const bool alpha = (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
    return alpha || (!first && ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.'));
  };
  std::size_t sl = 0;
  while (sl < tend && scheme_char(t[sl], sl == 0)) ++sl;
  if (sl == 0 || sl + 3 > tend || std::memcmp(t + sl, "://", 3) != 0) return false;
  const std::size_t a0 = sl + 3;
  std::size_t a1 = a0;
  while (a1 < tend && t[a1] != '/' && t[a1] != '?') ++a1;
  std::size_t ab = a0;  // drop userinfo
  for (std::size_t i = a0; i < a1; ++i) {
    if (t[i] == '@') ab = i + 1;
  }
  req.authority = t + ab;
  req.authority_len = a1 - ab;
  req.has_url = iequals_prefix(t, tend, "http://");
  req.path = t + a1;
  req.path_len = tend - a1;
  return true;
}

}  // namespace

namespace {

// A request line: its method and target, and where the header lines start.
struct RequestLine {
  const uint8_t* method = nullptr;
  std::size_t method_len = 0;
  const uint8_t* target = nullptr;
  std::size_t target_len = 0;
  const uint8_t* headers = nullptr;  // just past the line's LF
};

// As lenient as nginx and Node (RFC 9112 §2.2): CR and LF bytes before the
// request line are skipped (each on its own, a lone CR too, as nginx and
// Node skip them), the method is any token, the three parts are separated
// by runs of spaces or tabs, and the line may end in a bare LF.
bool lenient_request_line(const uint8_t* p, std::size_t n, RequestLine& l) noexcept {
  std::size_t s = 0;
  while (s < n && (p[s] == '\n' || p[s] == '\r')) ++s;
  p += s;
  n -= s;
  std::size_t mlen = 0;
  while (mlen < n && is_tchar(p[mlen])) ++mlen;
  if (mlen == 0 || mlen == n || !is_blank(p[mlen])) return false;
  const uint8_t* nl = find(p, n, '\n');
  if (nl == nullptr) return false;
  const std::size_t lf = static_cast<std::size_t>(nl - p);
  std::size_t end = lf;  // the request line without its line end and trailing blanks
  if (end > 0 && p[end - 1] == '\r') --end;
  while (end > mlen && is_blank(p[end - 1])) --end;
  // The version: "HTTP/1." and a minor version of at most 999, leading
  // zeros allowed, as nginx reads it ("HTTP/1.01", "HTTP/1.10" and
  // "HTTP/1.0001" are HTTP/1.x there too).
  std::size_t d = end;
  while (d > mlen && p[d - 1] >= '0' && p[d - 1] <= '9') --d;
  if (d == end || d < mlen + 7 + 2) return false;  // no digit; no room for a blank and a target
  std::size_t sig = d;  // the first significant digit
  while (sig + 1 < end && p[sig] == '0') ++sig;
  if (end - sig > 3) return false;
  const uint8_t* ver = p + d - 7;
  if (std::memcmp(ver, "HTTP/1.", 7) != 0 || !is_blank(ver[-1])) return false;
  std::size_t t0 = mlen;
  while (t0 < end && is_blank(p[t0])) ++t0;
  std::size_t t1 = d - 7;
  while (t1 > t0 && is_blank(p[t1 - 1])) --t1;
  const std::size_t tlen = t1 > t0 ? t1 - t0 : 0;
  if (tlen == 0) return false;
  for (std::size_t i = t0; i < t1; ++i) {
    if (is_blank(p[i]) || p[i] == '\r') return false;  // not one target
  }
  l = {p, mlen, p + t0, tlen, p + lf + 1};
  return true;
}

// The request line as Python's http.server reads it (request_line.hpp).
bool python_request_line(const uint8_t* p, std::size_t n, RequestLine& l) noexcept {
  http::PythonLine pl;
  if (http::python_request_line(p, n, &pl) != http::PyLine::kYes) return false;
  l = {p + pl.method, pl.method_len, p + pl.target, pl.target_len, p + pl.lf + 1};
  return true;
}

// True if [b, e) holds a byte Python splits at and nginx does not.
bool python_only_space(const uint8_t* b, const uint8_t* e) noexcept {
  for (; b < e; ++b)
    if (http::python_space(*b) && *b != ' ' && *b != '\t' && *b != '\r' && *b != '\n') return true;
  return false;
}

// The request a reading of the line [l] and the header lines behind it makes.
void request_from_line(const uint8_t* p, std::size_t n, const RequestLine& l, HttpRequest& req) noexcept {
  req = HttpRequest{};
  const uint8_t* target = l.target;
  const uint8_t* const h = l.headers;
  const std::size_t hn = n - static_cast<std::size_t>(h - p);

  // The fragment (never sent by clients, and cut from url rules) is ignored.
  std::size_t tend = l.target_len;
  if (const uint8_t* f = find(target, l.target_len, '#')) tend = static_cast<std::size_t>(f - target);

  if (target[0] == '/') {  // origin-form: host from the Host header
    req.has_url = true;
    req.path = target;
    req.path_len = tend;
    req.authority_from_host = true;
    host_headers(h, hn, req, req.authority, req.authority_len);
    return;
  }
  // absolute-form: any scheme; the target's authority wins (RFC 9112
  // §3.2.2), but servers that route by the Host header (Node, Express) take
  // that: both are looked up.
  if (absolute_form(target, tend, req)) {
    host_headers(h, hn, req, req.host_header, req.host_header_len);
    return;
  }
  if (l.method_len == 7 && std::memcmp(l.method, "CONNECT", 7) == 0) {  // authority-form
    req.authority = target;
    req.authority_len = tend;
    host_headers(h, hn, req, req.host_header, req.host_header_len);
    return;
  }
  // asterisk-form and anything else: no url, host from the Host header
  req.authority_from_host = true;
  host_headers(h, hn, req, req.authority, req.authority_len);
}

}  // namespace

bool parse_http_request(const uint8_t* p, std::size_t n, HttpRequest& req, HttpRequest* python) noexcept {
  req = HttpRequest{};
  if (python != nullptr) *python = HttpRequest{};
  // nginx's and Node's reading first; where they refuse the line,
  // Python's. Where nginx's takes a line with a byte only Python splits at
  // (VT, FF, \x1c-\x1f, \x85, \xa0: "GET \x0b/secret HTTP/1.1" is a
  // target "\x0b/secret" for one and "/secret" for the other), both are.
  RequestLine l;
  if (lenient_request_line(p, n, l)) {
    request_from_line(p, n, l, req);
    RequestLine py;
    if (python != nullptr && python_only_space(p, l.headers) && python_request_line(p, n, py) &&
        (py.target_len != l.target_len || std::memcmp(py.target, l.target, l.target_len) != 0))
      request_from_line(p, n, py, *python);
    return true;
  }
  if (!python_request_line(p, n, l)) return false;
  request_from_line(p, n, l, req);
  return true;
}

H2Read parse_h2_request(const uint8_t* p, std::size_t n, HttpRequest& req, H2Scratch& scratch,
                        bool* refused) noexcept {
  req = HttpRequest{};
  *refused = false;
  if (n < h2::kPrefaceLen || !h2::begins_preface(p, n)) return H2Read::kNone;
  const h2::FirstBlock f = h2::first_header_block(p, n, SIZE_MAX, scratch.block, sizeof scratch.block);
  if (f.status == h2::Status::kTooLarge) return H2Read::kUnreadable;  // a block the scratch cannot hold
  if (f.status != h2::Status::kComplete) return H2Read::kNone;
  h2::Request r;
  h2::decode_first_block(scratch.block, f.block_len, scratch.values, sizeof scratch.values, r);
  if (r.too_long) return H2Read::kUnreadable;  // (never: every value of a block fits)
  *refused = r.malformed;
  const auto named = [](const h2::Value& v) { return v.p != nullptr && v.len != 0; };
  const auto same = [](const h2::Value& a, const h2::Value& b) {
    return a.len == b.len && (a.len == 0 || std::memcmp(a.p, b.p, a.len) == 0);
  };
  // The host a server routes by: :authority, else the first Host field.
  if (named(r.authority)) {
    req.authority = r.authority.p;
    req.authority_len = r.authority.len;
    if (named(r.host_first)) {
      req.host_header = r.host_first.p;
      req.host_header_len = r.host_first.len;
    }
  } else if (named(r.host_first)) {
    req.authority = r.host_first.p;
    req.authority_len = r.host_first.len;
    req.authority_from_host = true;
  }
  // The last Host field, when it names another host than the first (with
  // the Host field as the authority: a second reading, url included).
  if (named(r.host_last) && !same(r.host_first, r.host_last)) {
    req.alt_host = r.host_last.p;
    req.alt_host_len = r.host_last.len;
  }
  // Two :authority fields (servers refuse the request, or take one): the
  // last one's host keys as well.
  if (named(r.authority_last) && !same(r.authority, r.authority_last)) {
    req.last_host = r.authority_last.p;
    req.last_host_len = r.authority_last.len;
  }
  if (!named(r.path) || (r.path.len == 1 && r.path.p[0] == '*')) return H2Read::kRequest;  // no url
  std::size_t tend = r.path.len;  // (the fragment, never sent, is cut from url rules)
  if (const uint8_t* h = find(r.path.p, r.path.len, '#')) tend = static_cast<std::size_t>(h - r.path.p);
  HttpRequest target;
  if (absolute_form(r.path.p, tend, target)) {
    // Go reads an absolute-form :path (url.ParseRequestURI) and serves its
    // path under :authority: the url from the authority and that path, the
    // target's host judged as another host.
    req.path = target.path;
    req.path_len = target.path_len;
    req.extra_host = target.authority;
    req.extra_host_len = target.authority_len;
  } else if (r.path.p[0] == '/') {
    req.path = r.path.p;
    req.path_len = tend;
  } else {
    // No leading slash ("pkg.Service/Method": grpc-go before its 2026 fix
    // served it as "/pkg.Service/Method"): judged with one. Longer than a
    // url rule can be: read as it is (no rule matches either way).
    if (tend >= sizeof scratch.slash_path) {
      req.path = r.path.p;
      req.path_len = tend;
    } else {
      scratch.slash_path[0] = '/';
      std::memcpy(scratch.slash_path + 1, r.path.p, tend);
      req.path = scratch.slash_path;
      req.path_len = tend + 1;
    }
  }
  req.has_url = true;
  return H2Read::kRequest;
}

bool parse_tls_sni(const uint8_t* p, std::size_t n, const uint8_t*& name,
                   std::size_t& name_len) noexcept {
  // Empty handshake records first (OpenSSL skips them), and 2-byte alert
  // records (Go's crypto/tls drops warning alerts before the handshake), of
  // any version below 0x1000, as Go takes (docs/reassembly.md).
  for (;;) {
    if (n >= 5 && p[0] == 22 && p[1] < 0x10 && rd16(p + 3) == 0) {
      p += 5;
      n -= 5;
    } else if (n >= 7 && p[0] == 21 && p[1] < 0x10 && rd16(p + 3) == 2) {
      p += 7;
      n -= 7;
    } else {
      break;
    }
  }
  if (n < 9 || p[0] != 22 || p[5] != 1) return false;
  std::size_t end = 5 + static_cast<std::size_t>(rd16(p + 3));
  if (end > n) end = n;
  const std::size_t hs_len = (static_cast<std::size_t>(p[6]) << 16) | rd16(p + 7);
  if (9 + hs_len < end) end = 9 + hs_len;
  std::size_t q = 9 + 2 + 32;  // client_version, random
  if (q + 1 > end) return false;
  q += 1 + p[q];  // session_id
  if (q + 2 > end) return false;
  q += 2 + rd16(p + q);  // cipher_suites
  if (q + 1 > end) return false;
  q += 1 + p[q];  // compression_methods
  if (q + 2 > end) return false;
  std::size_t ext_end = q + 2 + rd16(p + q);
  q += 2;
  if (ext_end > end) ext_end = end;
  while (q + 4 <= ext_end) {
    const uint16_t type = rd16(p + q);
    const std::size_t len = rd16(p + q + 2);
    q += 4;
    if (q + len > ext_end) return false;
    if (type == 0) {  // server_name
      if (len < 2) return false;
      std::size_t r = q + 2;
      std::size_t list_end = r + rd16(p + q);
      if (list_end > q + len) list_end = q + len;
      while (r + 3 <= list_end) {
        const uint8_t type_byte = p[r];
        const std::size_t nlen = rd16(p + r + 1);
        r += 3;
        if (r + nlen > list_end) return false;
        if (type_byte == 0) {  // host_name
          name = p + r;
          name_len = nlen;
          return nlen > 0;
        }
        r += nlen;
      }
      return false;
    }
    q += len;
  }
  return false;
}

unsigned start_dns_questions(const uint8_t* p, std::size_t n) noexcept {
  if (n < 12) return 0;
  if ((p[2] & 0x80) != 0 || ((p[2] >> 3) & 0x0f) != 0) return 0;  // QR=0, opcode 0
  return rd16(p + 4);                                               // QDCOUNT
}

std::size_t next_dns_question(const uint8_t* p, std::size_t n, std::size_t& pos, uint8_t (&out)[kDnsNameBuf],
                              bool* ok, bool* too_deep) noexcept {
  *ok = false;
  if (too_deep != nullptr) *too_deep = false;
  std::size_t at = pos, olen = 0, wire = 1;  // wire: encoded length incl. the root label
  std::size_t after = 0;                      // where the question goes on after a pointer
  unsigned jumps = 0;
  while (true) {
    if (at >= n) return 0;
    const std::size_t l = p[at];
    if (l == 0) break;
    if ((l & 0xc0) == 0xc0) {  // a pointer: the name continues at its target
      if (at + 2 > n) return 0;
      if (++jumps > kMaxDnsJumps) {
        if (too_deep != nullptr) *too_deep = true;
        return 0;
      }
      if (after == 0) after = at + 2;
      at = (static_cast<std::size_t>(l & 0x3f) << 8) | p[at + 1];
      continue;
    }
    if ((l & 0xc0) != 0) return 0;  // reserved label types
    if (at + 1 + l > n) return 0;
    wire += 1 + l;
    if (wire > 255) return 0;
    if (olen != 0) out[olen++] = '.';
    std::memcpy(out + olen, p + at + 1, l);
    olen += l;
    at += 1 + l;
  }
  const std::size_t end = (after != 0 ? after : at + 1) + 4;  // QTYPE, QCLASS
  if (end > n) return 0;
  pos = end;
  *ok = true;
  return olen;
}

}  // namespace cg::detail
