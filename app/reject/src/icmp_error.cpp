// The ICMP/ICMPv6 "administratively prohibited" error (docs/reject.md,
// "ICMP"): RFC 1812 5.2.7.1 / RFC 4443 3.1, quoting as much of the offending
// IP packet as fits in 576 bytes (RFC 1812 4.3.2.3) / 1280 bytes (RFC 4443
// 2.4 (c)) of reply datagram.
#include <algorithm>
#include <cstring>

#include "reply.hpp"

namespace cg::reject::detail {
namespace {

constexpr std::size_t kIcmpHeader = 8;
constexpr std::size_t kMaxQuote4 = 576 - 20 - kIcmpHeader;
constexpr std::size_t kMaxQuote6 = 1280 - 40 - kIcmpHeader;
constexpr uint8_t kUnreachable4 = 3, kAdminProhibited4 = 13;
constexpr uint8_t kUnreachable6 = 1, kAdminProhibited6 = 1;

std::size_t quote_len(const Frame& f) noexcept {
  return std::min(f.ip_len, f.family == 4 ? kMaxQuote4 : kMaxQuote6);
}

}  // namespace

std::size_t icmp_error_len(const Frame& f) noexcept {
  return headers_len(f) + kIcmpHeader + quote_len(f);
}

void write_icmp_error(const Frame& f, uint8_t* out) noexcept {
  const std::size_t quote = quote_len(f);
  const bool v4 = f.family == 4;
  uint8_t* m = out + put_headers(f, Direction::kToSender, v4 ? kProtoIcmp : kProtoIcmpv6,
                                 kIcmpHeader + quote, out);
  m[0] = v4 ? kUnreachable4 : kUnreachable6;
  m[1] = v4 ? kAdminProhibited4 : kAdminProhibited6;
  wr16(m + 2, 0);  // checksum, below
  wr32(m + 4, 0);  // unused (no RFC 4884 length: nothing is appended)
  std::memcpy(m + kIcmpHeader, f.ip(), quote);
  put_l4_checksum(out + f.l2_len, f.family, 2, !v4);
}

}  // namespace cg::reject::detail
