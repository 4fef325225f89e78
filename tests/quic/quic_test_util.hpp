// Helpers shared by the QUIC tests: hex, a decoder, and whether app/keys
// finds a host key in a ClientHello record.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cuckoogate/keys/classify.hpp"
#include "cuckoogate/keys/rule.hpp"
#include "cuckoogate/quic/crypto_stream.hpp"
#include "cuckoogate/quic/initial.hpp"
#include "packet_builder.hpp"
#include "quic_initial_builder.hpp"

namespace cg::test::quic {

inline Bytes from_hex(std::string_view h) {
  Bytes b;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) b.push_back(static_cast<uint8_t>(std::stoul(std::string(h.substr(i, 2)), nullptr, 16)));
  return b;
}

inline std::string to_hex(const uint8_t* p, std::size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    s.push_back(d[p[i] >> 4]);
    s.push_back(d[p[i] & 15]);
  }
  return s;
}

inline cg::quic::Decoder::Ptr make_decoder() {
  const char* err = nullptr;
  cg::quic::Decoder::Ptr d = cg::quic::Decoder::create(&err);
  EXPECT_TRUE(d) << err;
  return d;
}

// Decodes a copy of exactly the datagram's bytes on the heap (so ASan sees
// an overread), with a scratch of the datagram's size.
struct Decode {
  std::unique_ptr<cg::quic::Decoded> out = std::make_unique<cg::quic::Decoded>();
  Bytes scratch;
  Bytes input;
};
inline Decode decode(cg::quic::Decoder& dec, const Bytes& dgram, std::size_t scratch_size = SIZE_MAX,
                     const Bytes* key_dcid = nullptr, int64_t largest_pn = -1) {
  Decode r;
  r.input = dgram;
  r.scratch.resize(scratch_size == SIZE_MAX ? dgram.size() : scratch_size);
  std::unique_ptr<uint8_t[]> copy(new uint8_t[dgram.size() + (dgram.empty() ? 1 : 0)]);
  std::copy(dgram.begin(), dgram.end(), copy.get());
  dec.decode(copy.get(), dgram.size(), r.scratch.data(), r.scratch.size(), *r.out,
             key_dcid != nullptr ? key_dcid->data() : nullptr, key_dcid != nullptr ? key_dcid->size() : 0,
             largest_pn);
  // The chunks point into the scratch; the input was not written.
  EXPECT_TRUE(std::equal(dgram.begin(), dgram.end(), copy.get()));
  for (unsigned i = 0; i < r.out->n_chunks; ++i) {
    const uint8_t* d = r.out->chunk[i].data;
    EXPECT_TRUE(d >= r.scratch.data() && d + r.out->chunk[i].len <= r.scratch.data() + r.out->scratch_used);
  }
  return r;
}

// The CRYPTO stream from offset 0 as the chunks of several decodes build it
// (first copy wins), or empty when there is a gap before `want` bytes.
inline Bytes assemble(const std::vector<const cg::quic::Decoded*>& ds) {
  Bytes s;
  std::vector<bool> have;
  for (const cg::quic::Decoded* d : ds) {
    for (unsigned i = 0; i < d->n_chunks; ++i) {
      const auto& c = d->chunk[i];
      if (s.size() < c.offset + c.len) {
        s.resize(c.offset + c.len);
        have.resize(c.offset + c.len);
      }
      for (uint32_t j = 0; j < c.len; ++j) {
        if (!have[c.offset + j]) s[c.offset + j] = c.data[j];
        have[c.offset + j] = true;
      }
    }
  }
  for (std::size_t i = 0; i < have.size(); ++i) {
    if (!have[i]) {
      s.resize(i);
      break;
    }
  }
  return s;
}

// Whether classify_meta(), given `record` as the application bytes of a
// client-to-server TCP/443 packet, emits the key of `host <name>`. (The
// worker passes `app` for TCP today; a UDP packet's app bytes are for the
// lead's wiring, see docs/quic.md.)
inline bool host_key_from_record(const uint8_t* record, std::size_t len, std::string_view name) {
  const Bytes frame = cg::test::Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 443).payload("x").frame();
  cg::PacketMeta meta;
  cg::parse_packet(frame.data(), frame.size(), meta);
  auto keys = std::make_unique<cg::PacketKeys>();
  cg::classify_meta(frame.data(), meta, *keys, record, len);
  std::string rule_text = "host ";
  rule_text += name;
  const cg::RuleParse p = cg::parse_rule(rule_text);
  EXPECT_TRUE(p.rule.has_value());
  if (!p.rule) return false;
  const std::string k = cg::rule_key(*p.rule);
  for (unsigned i = 0; i < keys->n; ++i) {
    if (keys->key[i].len == k.size() && std::equal(k.begin(), k.end(), keys->key_bytes(i))) return true;
  }
  return false;
}

}  // namespace cg::test::quic
