// Internal: recognisers for the application-layer names classify() looks at
// (HTTP/1.x request line and Host header, TLS ClientHello SNI, DNS query
// name). Each reads only [p, p + n), allocates nothing and does work linear
// in n. Semantics are specified in docs/rules.md.
#pragma once

#include <cstddef>
#include <cstdint>

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
};

// True when the payload begins with an HTTP/1.x request line as lenient
// servers read it (docs/rules.md): empty lines first allowed, METHOD any
// token, blanks (runs of SP/HTAB) around the target, CRLF or bare LF.
bool parse_http_request(const uint8_t* p, std::size_t n, HttpRequest& req) noexcept;

// SNI host_name of a TLS ClientHello beginning the payload (record type 22,
// handshake type 1); false when absent or cut.
bool parse_tls_sni(const uint8_t* p, std::size_t n, const uint8_t*& name,
                   std::size_t& name_len) noexcept;

inline constexpr std::size_t kDnsNameBuf = 256;
// The first question name of a DNS query (QR=0, opcode 0, QDCOUNT >= 1) as
// dotted text in out (no trailing dot); returns its length, 0 when none.
// Compression pointers are not followed (they cannot be valid there).
std::size_t parse_dns_qname(const uint8_t* p, std::size_t n, uint8_t (&out)[kDnsNameBuf]) noexcept;

}  // namespace cg::detail
