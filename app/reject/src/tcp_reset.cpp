// The RSTs for a blocked TCP segment (docs/reject.md, "TCP").
#include "reply.hpp"

namespace cg::reject::detail {
namespace {

constexpr uint8_t kFin = 0x01, kSyn = 0x02, kRst = 0x04, kAck = 0x10;

}  // namespace

std::size_t tcp_reset_len(const Frame& f) noexcept { return headers_len(f) + 20; }

void write_tcp_reset(const Frame& f, Direction d, uint8_t* out) noexcept {
  const uint8_t* seg = f.l4();
  const uint8_t flags = seg[13];
  const uint32_t seq = rd32(seg + 4);
  const uint32_t ack = rd32(seg + 8);
  const bool has_ack = (flags & kAck) != 0;
  const uint32_t syn = (flags & kSyn) != 0 ? 1 : 0;
  const uint32_t fin = (flags & kFin) != 0 ? 1 : 0;
  // build() checked 20 <= data offset <= l4_len, and the segment is not a
  // fragment: l4_len is the whole segment.
  const auto payload = static_cast<uint32_t>(f.l4_len - static_cast<std::size_t>(seg[12] >> 4) * 4);

  uint8_t* rst = out + put_headers(f, d, kProtoTcp, 20, out);
  uint32_t rst_seq, rst_ack = 0;
  uint8_t rst_flags = kRst;
  if (d == Direction::kToSender) {
    wr16(rst, rd16(seg + 2));
    wr16(rst + 2, rd16(seg));
    // RFC 9293 3.10.7.1: <SEQ=SEG.ACK><CTL=RST> when the segment has ACK,
    // else <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK> (SYN and FIN count in
    // SEG.LEN). Either way the sequence number is what the sender expects
    // next, so it accepts the reset (RFC 5961 3.2).
    if (has_ack) {
      rst_seq = ack;
    } else {
      rst_seq = 0;
      rst_ack = seq + payload + syn + fin;
      rst_flags |= kAck;
    }
  } else {
    wr16(rst, rd16(seg));
    wr16(rst + 2, rd16(seg + 2));
    // The segment is dropped, so the destination never saw it: what it
    // expects next is SEG.SEQ, not SEG.SEQ+SEG.LEN (RFC 5961 3.2 resets only
    // on an exact match; any other in-window RST draws a challenge ACK and
    // the connection stays). A SYN's +1 reaches a destination in
    // SYN-RECEIVED (a retransmitted SYN whose first copy got through); one
    // in LISTEN ignores any RST. The ACK, when the segment had one, makes
    // the RST acceptable to a destination in SYN-SENT (the segment was its
    // peer's SYN-ACK).
    rst_seq = seq + syn;
    if (has_ack) {
      rst_ack = ack;
      rst_flags |= kAck;
    }
  }
  wr32(rst + 4, rst_seq);
  wr32(rst + 8, rst_ack);
  rst[12] = 5 << 4;  // data offset: 20 bytes, no options
  rst[13] = rst_flags;
  wr16(rst + 14, 0);  // window
  wr16(rst + 16, 0);  // checksum, below
  wr16(rst + 18, 0);  // urgent pointer
  put_l4_checksum(out + f.l2_len, f.family, 16, true);
}

}  // namespace cg::reject::detail
