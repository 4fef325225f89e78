// First-flight completeness detectors: pure functions over the contiguous
// client-to-server bytes of a stream (Pool::data()), telling the worker
// whether the message its parsers need is complete, and where it ends.
// They frame, they do not judge: the names are read by the existing parsers
// in app/keys. Each reads only [p, p + n) (and writes only the caller's
// scratch buffer), allocates nothing, does work linear in n and never
// throws. Thread-safe (no state). Semantics: docs/reassembly.md.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cg::reasm {

enum class Frame : uint8_t {
  kNeedMore,  // a prefix of a valid message: wait for more bytes
  kComplete,  // the message is whole (see the result's fields)
  kTooLarge,  // the message is (or would be) larger than the limit
  kInvalid,   // not this protocol, or malformed framing
};

// ---- TLS ClientHello ----------------------------------------------------

inline constexpr std::size_t kTlsRecordHeader = 5;
inline constexpr std::size_t kTlsAlertLength = 2;  // an alert record's payload: level, description
inline constexpr uint8_t kTlsClientHelloType = 1;  // handshake message type
// A record version's first byte a server takes in a ClientHello's records:
// 3 is TLS; Go's crypto/tls takes any version below 0x1000 before the
// version is agreed (OpenSSL only 3), so the detector does too.
constexpr bool tls_record_major(uint8_t b) noexcept { return b < 0x10; }
inline constexpr std::size_t kTlsMaxRecord = 16384;     // plaintext record payload (RFC 8446)
inline constexpr std::size_t kTlsMaxHandshake = 16384;  // default limit on the ClientHello
// Scratch a caller needs for a ClientHello of up to kTlsMaxHandshake bytes.
inline constexpr std::size_t kTlsScratch = kTlsRecordHeader + 4 + kTlsMaxHandshake;

struct TlsClientHello {
  Frame status = Frame::kNeedMore;
  // kComplete: the handshake message (4-byte header: type 1 and the 24-bit
  // length, then the body), the record headers removed, in the scratch.
  const uint8_t* handshake = nullptr;
  std::size_t handshake_len = 0;
  // kComplete: the same bytes behind one synthesised 5-byte record header
  // (type 22, the first record's version, length = handshake_len), so parsers
  // that read a record (parse_tls_sni) can read it whatever the split.
  const uint8_t* record = nullptr;
  std::size_t record_len = 0;
  // kComplete: bytes of the input up to the end of the record that holds the
  // message's last byte.
  std::size_t consumed = 0;
};

// Looks for a ClientHello at the start of [p, n): TLS handshake records
// (type 22, a version whose first byte is below 0x10, length 1 .. 2^14), the
// first beginning with handshake type 1; the message may span any number of
// records. Empty handshake records (OpenSSL takes them) and 2-byte alert
// records (Go drops warning alerts) before the message is whole are
// skipped. Invalid: a record of another type, an alert of another length, a
// bad version or length, a first handshake type other than 1. kTooLarge: the message's
// length exceeds max_handshake, or scratch_cap < kTlsRecordHeader + 4 +
// its length. The scratch must not overlap the input.
TlsClientHello detect_tls_client_hello(const uint8_t* p, std::size_t n, uint8_t* scratch,
                                       std::size_t scratch_cap,
                                       std::size_t max_handshake = kTlsMaxHandshake) noexcept;

// ---- HTTP/1.x request head ----------------------------------------------

// Default: 16 KiB, what a slot holds (Node's whole-head limit). nginx takes
// up to 4 x 8 KiB of header lines, so a longer head still overflows (an
// outside check had nginx serve a 9.1 KB head past the 8 KiB this was).
inline constexpr std::size_t kHttpMaxHead = 16384;

enum class HttpBody : uint8_t {
  kNone,     // no body: the next request starts at head_end
  kLength,   // Content-Length: the next request starts at head_end + content_length
  kChunked,  // Transfer-Encoding ending in chunked: see find_chunked_end()
  kUnknown,  // a Content-Length or Transfer-Encoding this cannot read (two
             // lengths, "abc", "-1", a last coding other than chunked):
             // strict servers refuse the request, lenient ones serve it,
             // so it is judged; next = head_end (the stream inspector drops
             // what follows: which length the server believes is unknowable)
};

struct HttpHead {
  Frame status = Frame::kNeedMore;
  std::size_t start = 0;     // the request line (after empty lines a server skips)
  std::size_t head_end = 0;  // kComplete: offset just past the empty line
  HttpBody body = HttpBody::kNone;
  uint64_t content_length = 0;
  // kComplete and body != kChunked: where the next pipelined request starts
  // (head_end + content_length; may be beyond n: Pool::consume() skips it).
  uint64_t next = 0;
};

// A request head at the start of [p, n): leading CR and LF bytes (each on its
// own, as nginx and Node skip them), then a request line beginning with a method token
// followed by a space, then header lines, ending at the first empty line.
// Lines end in LF with an optional CR before it (bare LF as nginx and Node
// accept). kInvalid: the first line does not start with token SP.
// kComplete with body kUnknown: a head whose body length cannot be read.
// kTooLarge: no empty line within max_head bytes of `start`.
HttpHead detect_http_head(const uint8_t* p, std::size_t n,
                          std::size_t max_head = kHttpMaxHead) noexcept;

// The end of a chunked body starting at [p, n) (just after the head):
// chunk-size [; ext] line, data, CRLF, ..., the zero chunk, trailer lines,
// the empty line. kComplete with *end the offset after it; kNeedMore when
// the body goes on beyond n; kInvalid on a bad size line or missing CRLF
// after chunk data. Chunk sizes above 2^31 are kTooLarge.
Frame find_chunked_end(const uint8_t* p, std::size_t n, std::size_t* end) noexcept;

// ---- DNS over TCP --------------------------------------------------------

inline constexpr std::size_t kDnsHeader = 12;

struct DnsMessage {
  Frame status = Frame::kNeedMore;
  const uint8_t* message = nullptr;  // kComplete: the message after the length prefix
  std::size_t message_len = 0;
  std::size_t next = 0;  // kComplete: 2 + message_len, where the next message starts
  // kComplete: shorter than a DNS header (12 bytes). dnsmasq reads such a
  // message (1-11 bytes), ignores it and answers the next one on the
  // connection, so it is skipped, not taken for "not DNS" (which ended
  // inspection and let the query behind it pass: found by an outside check).
  // A length of 0 is skipped too (dnsmasq closes the connection there:
  // reading on only reads more).
  bool skip = false;
};

// A length-prefixed DNS message (RFC 1035 §4.2.2, RFC 7766) at the start of
// [p, n), of any length (see DnsMessage::skip). Never kInvalid.
DnsMessage detect_dns_tcp(const uint8_t* p, std::size_t n) noexcept;

}  // namespace cg::reasm
