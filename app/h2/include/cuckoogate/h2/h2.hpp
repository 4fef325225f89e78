// Cleartext HTTP/2 with prior knowledge (RFC 9113 §3.3): the client's
// connection preface, the frames up to the end of its first header block,
// and that block decoded (HPACK, RFC 7541) into the request's :method,
// :scheme, :authority, :path and Host fields, which is what a server routes
// by. `curl --http2-prior-knowledge`, plaintext gRPC and h2c proxies start
// a connection this way; its request names travel HPACK-coded (Huffman
// strings, table indices), so the HTTP/1 reading finds nothing in them.
//
// Only a connection's first header block is read: its dynamic table starts
// empty (RFC 7541 §2.3.2), so the block decodes without any earlier state.
// Later blocks reference entries the earlier ones made; reading them would
// mean keeping each connection's table (docs/rules.md, "HTTP/2 cleartext").
//
// DPDK-free. Contract as app/reasm's: no allocation, no syscall, no
// exception; work linear in the input; reads only [p, p + n) and writes only
// the given output.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cg::h2 {

// The client connection preface (RFC 9113 §3.4).
inline constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
inline constexpr std::size_t kPrefaceLen = sizeof kPreface - 1;
// True if [p, p + n) is the preface or begins with it (n >= 24), or is a
// start of it (n < 24: more bytes may complete it).
bool begins_preface(const uint8_t* p, std::size_t n) noexcept;

enum class Status : uint8_t {
  kNeedMore,  // the first header block has not ended yet
  kComplete,
  kInvalid,   // no preface, or frames a server refuses (RFC 9113 §6.10, §4.1)
  kTooLarge,  // not ended within `max` bytes
};

// A frame's 9-byte header (RFC 9113 §4.1).
inline constexpr std::size_t kFrameHeader = 9;
inline constexpr uint8_t kHeaders = 1, kContinuation = 9;
struct FrameHeader {
  uint32_t len = 0;  // of the payload
  uint8_t type = 0, flags = 0;
  uint32_t stream = 0;
};
// False if [p, n) is shorter than a frame header.
bool frame_header(const uint8_t* p, std::size_t n, FrameHeader* h) noexcept;

// Frames from [p, n) on, up to the end of a header block: any frames before
// it (SETTINGS, WINDOW_UPDATE, PRIORITY, PING, types a server ignores) are
// stepped over; then a HEADERS frame (PADDED and PRIORITY fields taken off
// its payload) and the CONTINUATION frames of its stream that must follow
// it, to the one with END_HEADERS. kInvalid where a server ends the
// connection instead: HEADERS on stream 0, padding longer than its frame, a
// CONTINUATION that does not continue, another frame inside the block.
struct FirstBlock {
  Status status = Status::kNeedMore;
  std::size_t end = 0;        // kComplete: bytes of [p, n) that hold it
  std::size_t block_len = 0;  // kComplete: the block's length (its fragments joined)
};
// With `out`, the block's fragments are copied there, joined (`cap` bytes;
// a longer block is kTooLarge). kTooLarge too if it does not end within
// `max` bytes.
FirstBlock header_block(const uint8_t* p, std::size_t n, std::size_t max, uint8_t* out = nullptr,
                        std::size_t cap = 0) noexcept;
// The same from a connection's start: the preface first (kInvalid without
// it), `end` counted from the preface.
FirstBlock first_header_block(const uint8_t* p, std::size_t n, std::size_t max, uint8_t* out = nullptr,
                              std::size_t cap = 0) noexcept;

// A field of the request: its decoded value in the output buffer.
struct Value {
  const uint8_t* p = nullptr;  // nullptr: absent
  std::size_t len = 0;
};

// What a server routes the request by: the first of each pseudo-header
// that is not empty (RFC 9113 §8.3.1: a second one makes the request
// malformed; a server that takes the first, or refuses it, serves nothing
// the first did not name), the last :authority as well, and the first
// non-empty and the last Host field (HTTP/1's rule for several Host
// lines: a server taking the last would route by it).
struct Request {
  Value method, scheme, authority, authority_last, path;
  Value host_first, host_last;
  // The block does not decode as any server decodes it (an index beyond
  // the tables, a string past the block, a Huffman string that is no code,
  // a size update beyond kMaxTableSize): its server ends the connection
  // (COMPRESSION_ERROR, RFC 9113 §4.3) and serves none of it. The fields
  // read before the error are kept. The reading is as lenient as the most
  // lenient decoders known: size updates anywhere, none shrinking the table
  // below what some server keeps (nginx ignores one before its first entry),
  // integers padded with zero continuation bytes (Go), Huffman padding of
  // any length (nginx).
  bool malformed = false;
  // A value did not fit the output: it is absent here.
  bool too_long = false;
};

// Dynamic table size of a connection's first block: SETTINGS_HEADER_TABLE_SIZE's
// initial value (RFC 9113 §6.5.2), which nginx, Go and nghttp2 servers keep
// by default. A size update may raise it to what the server allows; up to
// kMaxTableSize is read (more is malformed here), and none lowers it.
inline constexpr std::size_t kTableSize = 4096;
inline constexpr std::size_t kMaxTableSize = 65536;

// True if the header block [p, n) decodes to its end as a connection's
// first (see Request::malformed).
bool block_decodes(const uint8_t* p, std::size_t n) noexcept;

// Decodes a connection's first header block [p, n) (the table empty) into
// `req`, its values written to [out, out + cap).
void decode_first_block(const uint8_t* p, std::size_t n, uint8_t* out, std::size_t cap, Request& req) noexcept;

// The Huffman code of RFC 7541 Appendix B: decodes [p, n) into out (cap
// bytes; nullptr: only counts). Returns the decoded length, or -1 if the
// string is not a valid code (EOS inside it, padding not all ones, §5.2;
// padding longer than 7 bits is taken, as nginx takes it) or does not fit
// `cap`.
long huffman_decode(const uint8_t* p, std::size_t n, uint8_t* out, std::size_t cap) noexcept;

}  // namespace cg::h2
