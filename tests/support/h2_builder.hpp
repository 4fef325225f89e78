// Test helper: the start of a cleartext HTTP/2 connection with prior
// knowledge (RFC 9113 §3.4) as a client sends it, and HPACK fields with raw
// (not Huffman-coded) strings (RFC 7541 §6.2). Huffman-coded blocks come
// from another encoder, as hex (tests/h2/h2_test.cpp).
//
//   Bytes block;
//   hpack_field(block, ":method", "GET");
//   hpack_field(block, ":authority", "blocked.example");
//   Bytes start = h2_start(block);   // preface, SETTINGS, WINDOW_UPDATE, HEADERS
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace cg::test {

using H2Bytes = std::vector<uint8_t>;

inline constexpr std::string_view kH2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
inline constexpr uint8_t kH2Data = 0, kH2Headers = 1, kH2Settings = 4, kH2Ping = 6, kH2WindowUpdate = 8,
                         kH2Continuation = 9;
inline constexpr uint8_t kH2EndStream = 1, kH2EndHeaders = 4, kH2Padded = 8, kH2Priority = 0x20;

// §5.1: v with an N-bit prefix, the byte's other bits `high`.
inline void hpack_int(H2Bytes& b, uint8_t high, unsigned prefix, uint64_t v) {
  const uint64_t max = (1u << prefix) - 1;
  if (v < max) {
    b.push_back(static_cast<uint8_t>(high | v));
    return;
  }
  b.push_back(static_cast<uint8_t>(high | max));
  for (v -= max; v >= 128; v >>= 7) b.push_back(static_cast<uint8_t>(0x80 | (v & 0x7f)));
  b.push_back(static_cast<uint8_t>(v));
}

inline void hpack_string(H2Bytes& b, std::string_view s) {
  hpack_int(b, 0, 7, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

// A literal field with a literal name: without indexing, or (index) with
// incremental indexing (it then becomes dynamic entry 62).
inline void hpack_field(H2Bytes& b, std::string_view name, std::string_view value, bool index = false) {
  b.push_back(index ? 0x40 : 0x00);
  hpack_string(b, name);
  hpack_string(b, value);
}

inline H2Bytes h2_frame(uint8_t type, uint8_t flags, uint32_t stream, const H2Bytes& payload) {
  H2Bytes f = {static_cast<uint8_t>(payload.size() >> 16), static_cast<uint8_t>(payload.size() >> 8),
               static_cast<uint8_t>(payload.size()), type, flags, static_cast<uint8_t>(stream >> 24),
               static_cast<uint8_t>(stream >> 16), static_cast<uint8_t>(stream >> 8), static_cast<uint8_t>(stream)};
  f.insert(f.end(), payload.begin(), payload.end());
  return f;
}

// What curl sends first: the preface, SETTINGS (3 settings), WINDOW_UPDATE,
// then the request's HEADERS on stream 1 (END_HEADERS, END_STREAM).
inline H2Bytes h2_start(const H2Bytes& block) {
  H2Bytes b(kH2Preface.begin(), kH2Preface.end());
  const H2Bytes settings = {0, 3, 0, 0, 0, 100, 0, 4, 0, 0x60, 0, 0, 0, 2, 0, 0, 0, 0};
  for (const H2Bytes& f : {h2_frame(kH2Settings, 0, 0, settings), h2_frame(kH2WindowUpdate, 0, 0, {0x3e, 0x7f, 0, 1}),
                           h2_frame(kH2Headers, kH2EndHeaders | kH2EndStream, 1, block)})
    b.insert(b.end(), f.begin(), f.end());
  return b;
}

}  // namespace cg::test
