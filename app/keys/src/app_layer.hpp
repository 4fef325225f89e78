// Internal: recognisers for the application-layer names classify() looks at
// (HTTP/1.x request line and Host header, TLS ClientHello SNI, DNS query
// name). Each reads only [p, p + n), allocates nothing and does work linear
// in n. Semantics are specified in docs/rules.md.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuckoogate/keys/rule.hpp"

namespace cg::detail {

struct HttpRequest {
  // Where the host comes from: the absolute-form or authority-form target, or
  // the first Host header. nullptr when there is none.
  const uint8_t* authority = nullptr;
  std::size_t authority_len = 0;
  // origin-form and http:// absolute-form only: path and query (fragment
  // cut), possibly empty (meaning "/") or starting with '?'.
  bool has_url = false;
  const uint8_t* path = nullptr;
  std::size_t path_len = 0;
  // absolute-form and authority-form: the first Host header as well (nullptr
  // when there is none), since some servers route by it whatever the target.
  const uint8_t* host_header = nullptr;
  std::size_t host_header_len = 0;
  // The first Host header as Python's http.server reads the lines (a bare CR
  // ends one too), when a bare CR makes it another than the one above; else
  // the last Host header, when there are several (nullptr otherwise):
  // servers disagree, so both are judged.
  const uint8_t* alt_host = nullptr;
  std::size_t alt_host_len = 0;
  // The last of several Host headers when alt_host is taken by the bare-CR
  // reading (nullptr otherwise): judged by its host keys.
  const uint8_t* last_host = nullptr;
  std::size_t last_host_len = 0;
  // Another host a server may route by, judged by its host keys: an HTTP/2
  // request's absolute-form :path's (nullptr otherwise).
  const uint8_t* extra_host = nullptr;
  std::size_t extra_host_len = 0;
  // origin-form and asterisk-form: the authority is the Host header's (so an
  // alt_host is another authority, url included).
  bool authority_from_host = false;
};

// True when the payload begins with an HTTP/1.x request line as lenient
// servers read it (docs/rules.md): empty lines first allowed, METHOD any
// token, blanks (runs of SP/HTAB) around the target, CRLF or bare LF; or,
// where they refuse it, as Python's http.server reads it
// (cuckoogate/keys/request_line.hpp). *python (when given): Python's
// reading of a line both read, where its target is another (nginx's takes
// "GET \x0b/secret HTTP/1.1" for the target "\x0b/secret"); its authority
// is nullptr otherwise.
bool parse_http_request(const uint8_t* p, std::size_t n, HttpRequest& req,
                        HttpRequest* python = nullptr) noexcept;

// Cleartext HTTP/2 with prior knowledge (app/h2): the first header block
// and the values it decodes to.
inline constexpr std::size_t kH2BlockMax = 16384;  // what a slot holds, frames included
// Every value of a block decoded: a Huffman code is 5 bits a byte at least,
// and no two fields decode the same string (raw ones are not copied).
inline constexpr std::size_t kH2ValuesMax = kH2BlockMax * 8 / 5 + 1;
struct H2Scratch {
  uint8_t block[kH2BlockMax];
  uint8_t values[kH2ValuesMax];
  uint8_t slash_path[kMaxUrlLen + 1];  // a :path without its leading slash, given one
};
enum class H2Read : uint8_t {
  kNone,        // not the HTTP/2 preface, or its first header block is not all there
  kRequest,     // the first request, in req
  kUnreadable,  // its block is there but larger than the scratch, or a value is
};
// When p begins with the HTTP/2 connection preface and holds its first
// header block whole: the request it makes, as an origin-form request
// (docs/rules.md, "HTTP/2 cleartext"): the authority from :authority (its
// Host fields judged as other hosts), else from the first Host field (the
// last one, if another, as a second reading); the url from :path. req's
// pointers point into [p, p + n) and `scratch`. A block that does not
// decode (its server ends the connection) is read up to its error.
// *refused: the block does not decode to its end (its server ends the
// connection); what was read before is in req.
H2Read parse_h2_request(const uint8_t* p, std::size_t n, HttpRequest& req, H2Scratch& scratch,
                        bool* refused) noexcept;

// SNI host_name of a TLS ClientHello beginning the payload (record type 22,
// handshake type 1), after any empty handshake records and 2-byte alert
// records; false when absent or cut.
bool parse_tls_sni(const uint8_t* p, std::size_t n, const uint8_t*& name,
                   std::size_t& name_len) noexcept;

inline constexpr std::size_t kDnsNameBuf = 256;

// The questions of a DNS query (QR=0, opcode 0), one at a time, as a
// resolver reads them: labels may be compression pointers to any offset of
// the message (forward ones too, as lenient servers follow them), at most
// kMaxDnsJumps per name, so loops end. start_dns_questions() checks the
// header and returns QDCOUNT (0: not a query or no question);
// next_dns_question() writes the next name as dotted text (no trailing dot)
// and returns its length; 0 when it is malformed or the root, and then
// *ok says which (false: stop, the rest cannot be read); *too_deep, when
// given, says the name needed more than kMaxDnsJumps pointers.
// 256: what Unbound follows (dnsmasq 255); 64 let a name 65 pointers deep,
// which dnsmasq answers, through without a key.
inline constexpr unsigned kMaxDnsJumps = 256;
unsigned start_dns_questions(const uint8_t* p, std::size_t n) noexcept;
std::size_t next_dns_question(const uint8_t* p, std::size_t n, std::size_t& pos, uint8_t (&out)[kDnsNameBuf],
                              bool* ok, bool* too_deep = nullptr) noexcept;

}  // namespace cg::detail
