// The DNS answer to a blocked query (docs/reject.md, "DNS"): the query's ID
// and question, RCODE REFUSED or NXDOMAIN, no records.
#include <cstring>

#include "reply.hpp"

namespace cg::reject::detail {
namespace {

constexpr std::size_t kHeader = 12;
constexpr std::size_t kMaxNameWire = 255;  // RFC 1035 2.3.4, length octets included

}  // namespace

bool parse_dns_query(const uint8_t* msg, std::size_t len, DnsQuery& q) noexcept {
  if (len < kHeader) return false;
  const bool qr = (msg[2] & 0x80) != 0;
  const unsigned opcode = (msg[2] >> 3) & 0x0f;
  if (qr || opcode != 0 || rd16(msg + 4) != 1) return false;  // a standard query, one question
  std::size_t pos = kHeader;
  for (;;) {  // QNAME: labels of 1-63 bytes up to the root label, no pointers
    if (pos >= len || pos - kHeader >= kMaxNameWire) return false;
    const uint8_t label = msg[pos];
    if (label == 0) break;
    if ((label & 0xc0) != 0) return false;  // compression pointer or reserved label type
    pos += 1 + static_cast<std::size_t>(label);
  }
  ++pos;  // the root label
  if (pos - kHeader > kMaxNameWire || pos + 4 > len) return false;
  q.question_len = pos + 4 - kHeader;  // QTYPE and QCLASS follow the name
  return true;
}

std::size_t dns_answer_len(const Frame& f, const DnsQuery& q) noexcept {
  return headers_len(f) + 8 + kHeader + q.question_len;
}

void write_dns_answer(const Frame& f, const DnsQuery& q, DnsRcode rcode, uint8_t* out) noexcept {
  const uint8_t* udp = f.l4();
  const uint8_t* query = udp + 8;
  const std::size_t udp_len = 8 + kHeader + q.question_len;
  uint8_t* r = out + put_headers(f, Direction::kToSender, kProtoUdp, udp_len, out);
  wr16(r, rd16(udp + 2));  // from port 53
  wr16(r + 2, rd16(udp));
  wr16(r + 4, static_cast<uint32_t>(udp_len));
  wr16(r + 6, 0);
  uint8_t* m = r + 8;
  m[0] = query[0];  // ID
  m[1] = query[1];
  m[2] = static_cast<uint8_t>(0x80 | (query[2] & 0x01));  // QR, opcode 0 (QUERY), AA 0, TC 0, RD copied
  m[3] = static_cast<uint8_t>((query[3] & 0x10) | static_cast<uint8_t>(rcode));  // RA, Z, AD 0; CD copied
  wr16(m + 4, 1);  // QDCOUNT
  wr16(m + 6, 0);  // ANCOUNT
  wr16(m + 8, 0);  // NSCOUNT
  wr16(m + 10, 0);  // ARCOUNT: the query's OPT record is not echoed (no EDNS)
  std::memcpy(m + kHeader, query + kHeader, q.question_len);
  put_l4_checksum(out + f.l2_len, f.family, 6, true, true);
}

}  // namespace cg::reject::detail
