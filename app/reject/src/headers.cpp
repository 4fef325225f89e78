// The Ethernet and IP headers of every reply, and the checksums.
#include <cstring>

#include "reply.hpp"

namespace cg::reject::detail {
namespace {

constexpr uint8_t kTtl = 64;

// One's-complement sum of 16-bit big-endian words (RFC 1071), not folded.
// At most kMaxReplyLen bytes are summed: no overflow of 32 bits.
uint32_t sum16(const uint8_t* p, std::size_t n, uint32_t acc) noexcept {
  std::size_t i = 0;
  for (; i + 1 < n; i += 2) acc += rd16(p + i);
  if (i < n) acc += uint32_t{p[i]} << 8;  // an odd last byte, padded with zero
  return acc;
}

uint16_t fold(uint32_t acc) noexcept {
  while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
  return static_cast<uint16_t>(~acc);
}

}  // namespace

std::size_t put_headers(const Frame& f, Direction d, uint8_t proto, std::size_t l4_len,
                        uint8_t* out) noexcept {
  const bool back = d == Direction::kToSender;
  std::memcpy(out, f.p + (back ? 6 : 0), 6);       // destination MAC
  std::memcpy(out + 6, f.p + (back ? 0 : 6), 6);   // source MAC
  std::memcpy(out + 12, f.p + 12, f.l2_len - 12);  // VLAN tags and EtherType, verbatim
  uint8_t* ip = out + f.l2_len;
  const std::size_t alen = f.addr_len();
  const std::size_t addrs = f.family == 4 ? 12 : 8;
  std::memcpy(ip + addrs, back ? f.dst() : f.src(), alen);
  std::memcpy(ip + addrs + alen, back ? f.src() : f.dst(), alen);
  if (f.family == 4) {
    ip[0] = 0x45;
    ip[1] = 0;
    wr16(ip + 2, static_cast<uint32_t>(20 + l4_len));
    wr16(ip + 4, 0);       // ID 0: an atomic datagram (RFC 6864)
    wr16(ip + 6, 0x4000);  // DF
    ip[8] = kTtl;
    ip[9] = proto;
    wr16(ip + 10, 0);
    wr16(ip + 10, fold(sum16(ip, 20, 0)));
  } else {
    wr32(ip, 0x60000000);
    wr16(ip + 4, static_cast<uint32_t>(l4_len));
    ip[6] = proto;
    ip[7] = kTtl;
  }
  return headers_len(f);
}

void put_l4_checksum(uint8_t* ip, uint8_t family, std::size_t field, bool pseudo,
                     bool udp) noexcept {
  const std::size_t hl = family == 4 ? 20 : 40;
  const std::size_t l4_len = family == 4 ? rd16(ip + 2) - hl : rd16(ip + 4);
  uint8_t* l4 = ip + hl;
  uint32_t acc = sum16(l4, l4_len, 0);
  if (pseudo) {
    // Source and destination addresses, then the protocol and the length
    // (IPv4: 8-bit zero, protocol, 16-bit length; IPv6: 32-bit length, 24
    // zero bits, next header: the same one's-complement sum).
    acc = family == 4 ? sum16(ip + 12, 8, acc) + ip[9] : sum16(ip + 8, 32, acc) + ip[6];
    acc += static_cast<uint32_t>(l4_len);
  }
  uint16_t c = fold(acc);
  if (udp && c == 0) c = 0xffff;
  wr16(l4 + field, c);
}

}  // namespace cg::reject::detail
