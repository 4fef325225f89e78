// Test-side reading of frames, independent of the library: its own layer
// walk and its own Internet checksum, so the reject tests check the replies
// against a second implementation rather than against the code under test.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "cuckoogate/reject/reject.hpp"
#include "packet_builder.hpp"

namespace cg::test {

inline uint16_t be16(const Bytes& b, size_t at) {
  return static_cast<uint16_t>(b.at(at) << 8 | b.at(at + 1));
}
inline uint32_t be32(const Bytes& b, size_t at) {
  return uint32_t{be16(b, at)} << 16 | be16(b, at + 2);
}
inline void set32(Bytes& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.at(at + i) = static_cast<uint8_t>(v >> (24 - 8 * i));
}
inline Bytes slice(const Bytes& b, size_t at, size_t n) {
  return Bytes(b.begin() + static_cast<std::ptrdiff_t>(at),
               b.begin() + static_cast<std::ptrdiff_t>(at + n));
}

// RFC 1071 written out the long way: a 64-bit sum of every 16-bit word,
// folded at the end, complemented.
inline uint16_t internet_checksum(const Bytes& data) {
  uint64_t sum = 0;
  for (size_t i = 0; i < data.size(); i += 2) {
    const uint64_t hi = data[i];
    const uint64_t lo = i + 1 < data.size() ? data[i + 1] : 0;
    sum += hi * 256 + lo;
  }
  while (sum > 0xffff) sum = (sum % 65536) + (sum / 65536);
  return static_cast<uint16_t>(0xffff - sum);
}

// The layers of an Ethernet frame as a test reads them.
struct Layers {
  Bytes dst_mac, src_mac;
  std::vector<std::pair<uint16_t, uint16_t>> tags;  // TPID, TCI
  uint16_t ethertype = 0;
  size_t ip = 0;       // offset of the IP header
  int family = 0;      // 4 or 6, 0 when not IP
  size_t ip_len = 0;   // from the IP header
  uint8_t proto = 0;   // transport protocol (after IPv6 extension headers)
  size_t l4 = 0;       // offset of the transport header
  size_t l4_len = 0;
  Bytes src, dst;      // addresses
};

inline Layers layers(const Bytes& f) {
  Layers l;
  l.dst_mac = slice(f, 0, 6);
  l.src_mac = slice(f, 6, 6);
  size_t off = 12;
  while (be16(f, off) == 0x8100 || be16(f, off) == 0x88a8) {
    l.tags.push_back({be16(f, off), be16(f, off + 2)});
    off += 4;
  }
  l.ethertype = be16(f, off);
  l.ip = off + 2;
  if (l.ethertype == 0x0800) {
    l.family = 4;
    const size_t ihl = (f.at(l.ip) & 0x0f) * 4u;
    l.ip_len = be16(f, l.ip + 2);
    l.proto = f.at(l.ip + 9);
    l.l4 = l.ip + ihl;
    l.l4_len = l.ip_len - ihl;
    l.src = slice(f, l.ip + 12, 4);
    l.dst = slice(f, l.ip + 16, 4);
  } else if (l.ethertype == 0x86dd) {
    l.family = 6;
    l.ip_len = 40u + be16(f, l.ip + 4);
    l.src = slice(f, l.ip + 8, 16);
    l.dst = slice(f, l.ip + 24, 16);
    uint8_t nh = f.at(l.ip + 6);
    size_t pos = l.ip + 40;
    while (nh == 0 || nh == 43 || nh == 60 || nh == 44 || nh == 51) {
      const size_t len = nh == 44 ? 8 : nh == 51 ? (f.at(pos + 1) + 2u) * 4 : (f.at(pos + 1) + 1u) * 8;
      nh = f.at(pos);
      pos += len;
    }
    l.proto = nh;
    l.l4 = pos;
    l.l4_len = l.ip + l.ip_len - pos;
  }
  return l;
}

// The IPv4 header checksum verifies (sums to zero over the header).
inline bool ipv4_header_ok(const Bytes& f, const Layers& l) {
  return internet_checksum(slice(f, l.ip, (f.at(l.ip) & 0x0f) * 4u)) == 0;
}

// The transport checksum verifies, over the pseudo-header when `pseudo`.
inline bool l4_checksum_ok(const Bytes& f, const Layers& l, bool pseudo = true) {
  Bytes sum;
  if (pseudo) {
    sum = l.src;
    sum.insert(sum.end(), l.dst.begin(), l.dst.end());
    if (l.family == 4) {
      sum.push_back(0);
      sum.push_back(l.proto);
      put16(sum, static_cast<uint16_t>(l.l4_len));
    } else {
      put32(sum, static_cast<uint32_t>(l.l4_len));
      put32(sum, l.proto);
    }
  }
  const Bytes msg = slice(f, l.l4, l.l4_len);
  sum.insert(sum.end(), msg.begin(), msg.end());
  return internet_checksum(sum) == 0;
}

inline Bytes addr(int family, const char* text) {
  Bytes b(family == 4 ? 4 : 16);
  if (inet_pton(family == 4 ? AF_INET : AF_INET6, text, b.data()) != 1) ADD_FAILURE() << text;
  return b;
}

// The MACs the packet builder puts in every frame.
inline const Bytes kBuilderDstMac = {0x02, 0, 0, 0, 0, 0x02};
inline const Bytes kBuilderSrcMac = {0x02, 0, 0, 0, 0, 0x01};

// build() into two buffers of kMaxReplyLen; the replies as byte vectors.
struct Built {
  reject::Result result;
  std::vector<Bytes> replies;
};

inline Built build(const Bytes& frame, const reject::Options& opt = {}) {
  std::array<std::array<uint8_t, reject::kMaxReplyLen>, reject::kMaxReplies> bufs{};
  const reject::Buffer out[] = {{bufs[0].data(), bufs[0].size()}, {bufs[1].data(), bufs[1].size()}};
  Built b;
  b.result = reject::build(frame.data(), frame.size(), out, opt);
  if (b.result.status == reject::Status::kBuilt) {
    for (unsigned i = 0; i < b.result.count; ++i) {
      b.replies.emplace_back(bufs[i].begin(), bufs[i].begin() + b.result.reply[i].len);
    }
  }
  return b;
}

// Checks what every reply shares: IP version and header fields, checksums,
// the padding, and where it goes (MACs, VLAN tags, addresses) relative to
// the frame it answers. Returns the reply's layers for the caller's checks.
inline Layers check_reply(const Bytes& reply, const Bytes& frame, reject::Direction dir,
                          uint8_t proto) {
  const Layers o = layers(frame);
  const Layers r = layers(reply);
  const bool back = dir == reject::Direction::kToSender;
  EXPECT_EQ(r.dst_mac, back ? o.src_mac : o.dst_mac);
  EXPECT_EQ(r.src_mac, back ? o.dst_mac : o.src_mac);
  EXPECT_EQ(r.tags, o.tags);
  EXPECT_EQ(r.family, o.family);
  EXPECT_EQ(r.src, back ? o.dst : o.src);
  EXPECT_EQ(r.dst, back ? o.src : o.dst);
  EXPECT_EQ(r.proto, proto);
  if (r.family == 4) {
    EXPECT_EQ(reply.at(r.ip), 0x45);          // no options
    EXPECT_EQ(reply.at(r.ip + 1), 0);         // TOS
    EXPECT_EQ(be16(reply, r.ip + 4), 0);      // ID
    EXPECT_EQ(be16(reply, r.ip + 6), 0x4000); // DF, not a fragment
    EXPECT_EQ(reply.at(r.ip + 8), 64);        // TTL
    EXPECT_TRUE(ipv4_header_ok(reply, r));
  } else {
    EXPECT_EQ(be32(reply, r.ip), 0x60000000u);  // traffic class, flow label 0
    EXPECT_EQ(reply.at(r.ip + 6), proto);       // no extension headers
    EXPECT_EQ(reply.at(r.ip + 7), 64);          // hop limit
  }
  EXPECT_TRUE(l4_checksum_ok(reply, r, !(r.family == 4 && proto == 1)));
  const size_t end = r.ip + r.ip_len;
  EXPECT_EQ(reply.size(), std::max<size_t>(end, 60));
  for (size_t i = end; i < reply.size(); ++i) EXPECT_EQ(reply[i], 0) << "padding byte " << i;
  return r;
}

}  // namespace cg::test
