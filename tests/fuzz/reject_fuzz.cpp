// libFuzzer target for reject::build(). The first input byte chooses the
// options (bit 0: NXDOMAIN, bit 1: RSTs to the sender only), whether the
// harness fixes up an IPv4 header checksum (bit 2; random bytes rarely get
// one right, and build() answers nothing without it) and whether a buffer
// one byte short is tried first (bit 3). The rest is one Ethernet frame.
//
// Every reply goes into a heap buffer of exactly the length the dry run
// asked for, so ASan flags any write past it, and every reply is parsed back
// here, independently of the library: where it goes, its lengths and every
// checksum. Any violation aborts.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "cuckoogate/reject/reject.hpp"

namespace {

using namespace cg::reject;

uint16_t rd16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

void check(bool ok) {
  if (!ok) std::abort();
}

// Where the IP header starts (after 0-2 VLAN tags), 0 when not IPv4/IPv6.
std::size_t ip_offset(const uint8_t* f, std::size_t n, uint16_t& type) {
  std::size_t off = 12;
  for (int tags = 0; off + 2 <= n; ++tags, off += 4) {
    type = rd16(f + off);
    if (type != 0x8100 && type != 0x88a8) break;
    if (tags == 2) return 0;
  }
  if (off + 2 > n || (type != 0x0800 && type != 0x86dd)) return 0;
  return off + 2;
}

uint32_t sum(const uint8_t* p, std::size_t n, uint32_t acc = 0) {
  for (std::size_t i = 0; i < n; ++i) acc += (i % 2 == 0) ? uint32_t{p[i]} << 8 : p[i];
  return acc;
}
uint16_t folded(uint32_t acc) {
  while (acc > 0xffff) acc = (acc & 0xffff) + (acc >> 16);
  return static_cast<uint16_t>(acc);
}

void fix_ipv4_checksum(std::vector<uint8_t>& f) {
  uint16_t type = 0;
  const std::size_t ip = ip_offset(f.data(), f.size(), type);
  if (ip == 0 || type != 0x0800 || ip + 20 > f.size()) return;
  const std::size_t ihl = (f[ip] & 0x0fu) * 4;
  if (ihl < 20 || ip + ihl > f.size()) return;
  f[ip + 10] = f[ip + 11] = 0;
  const uint16_t c = static_cast<uint16_t>(~folded(sum(&f[ip], ihl)));
  f[ip + 10] = static_cast<uint8_t>(c >> 8);
  f[ip + 11] = static_cast<uint8_t>(c);
}

// Parses a reply back and checks it against the frame it answers.
void verify(const uint8_t* r, std::size_t n, const std::vector<uint8_t>& f, Kind kind,
            Direction dir, const Options& opt) {
  check(n >= kMinFrameLen && n <= kMaxReplyLen);
  uint16_t type = 0, ftype = 0;
  const std::size_t ip = ip_offset(r, n, type);
  const std::size_t fip = ip_offset(f.data(), f.size(), ftype);
  check(ip != 0 && ip == fip && type == ftype);
  const bool back = dir == Direction::kToSender;
  check(std::memcmp(r, &f[back ? 6 : 0], 6) == 0 && std::memcmp(r + 6, &f[back ? 0 : 6], 6) == 0);
  check(std::memcmp(r + 12, &f[12], ip - 12) == 0);  // VLAN tags as in the frame
  const bool v4 = type == 0x0800;
  const std::size_t hl = v4 ? 20 : 40, alen = v4 ? 4 : 16, at = v4 ? 12 : 8;
  check(ip + hl <= n);
  const std::size_t l4_len = v4 ? std::size_t{rd16(r + ip + 2)} - hl : rd16(r + ip + 4);
  check(l4_len <= 0xffff && ip + hl + l4_len <= n);
  const uint8_t proto = r[ip + (v4 ? 9 : 6)];
  if (v4) {
    check(r[ip] == 0x45 && rd16(r + ip + 6) == 0x4000 && r[ip + 8] == 64);
    check(folded(sum(r + ip, 20)) == 0xffff);
  } else {
    check(r[ip] == 0x60 && r[ip + 7] == 64);
  }
  // Addresses: swapped back to the sender, as they were onward.
  check(std::memcmp(r + ip + at, &f[fip + at + (back ? alen : 0)], alen) == 0);
  check(std::memcmp(r + ip + at + alen, &f[fip + at + (back ? 0 : alen)], alen) == 0);
  const uint8_t* l4 = r + ip + hl;
  uint32_t acc = sum(l4, l4_len);
  if (!(v4 && proto == 1)) acc = sum(r + ip + at, 2 * alen, acc) + proto + static_cast<uint32_t>(l4_len);
  check(folded(acc) == 0xffff);
  for (std::size_t i = ip + hl + l4_len; i < n; ++i) check(r[i] == 0);  // padding
  switch (kind) {
    case Kind::kTcpReset:
      check(proto == 6 && l4_len == 20 && l4[12] == 0x50 && (l4[13] & 0x04) != 0);
      break;
    case Kind::kDnsAnswer:
      check(proto == 17 && rd16(l4 + 4) == l4_len && rd16(l4) == 53 && l4_len >= 8 + 12 + 5);
      check((l4[10] & 0xf8) == 0x80 && (l4[11] & 0x0f) == static_cast<uint8_t>(opt.dns_rcode));
      check(rd16(l4 + 12) == 1 && rd16(l4 + 14) == 0 && rd16(l4 + 16) == 0 && rd16(l4 + 18) == 0);
      break;
    case Kind::kIcmpUnreachable: {
      check(proto == (v4 ? 1 : 58) && l4_len > 8);
      check(v4 ? (l4[0] == 3 && l4[1] == 13) : (l4[0] == 1 && l4[1] == 1));
      check(hl + l4_len <= (v4 ? 576u : 1280u));
      check(fip + l4_len - 8 <= f.size() && std::memcmp(l4 + 8, &f[fip], l4_len - 8) == 0);
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t ctl = data[0];
  Options opt;
  opt.dns_rcode = (ctl & 1) != 0 ? DnsRcode::kNxDomain : DnsRcode::kRefused;
  opt.tcp_reset_destination = (ctl & 2) == 0;
  // The frame in a heap block of its exact size, so reads past it are caught.
  std::vector<uint8_t> frame(data + 1, data + size);
  if ((ctl & 4) != 0) fix_ipv4_checksum(frame);
  frame.shrink_to_fit();

  const Result dry = build(frame.data(), frame.size(), {}, opt);
  if (dry.status == Status::kNotApplicable) {
    check(dry.count == 0 && dry.reason != Reason::kNone);
    return 0;
  }
  check(dry.status == Status::kBufferTooSmall && dry.reason == Reason::kNone);
  check(dry.count >= 1 && dry.count <= kMaxReplies);
  check(dry.count == 1 || (dry.kind == Kind::kTcpReset && opt.tcp_reset_destination));

  std::unique_ptr<uint8_t[]> bufs[kMaxReplies];
  Buffer out[kMaxReplies];
  for (unsigned i = 0; i < dry.count; ++i) {
    bufs[i] = std::make_unique<uint8_t[]>(dry.reply[i].len);
    out[i] = {bufs[i].get(), dry.reply[i].len};
  }
  const std::span<const Buffer> outs(out, dry.count);
  if ((ctl & 8) != 0) {
    const unsigned last = dry.count - 1u;
    --out[last].capacity;
    std::fill_n(bufs[last].get(), out[last].capacity, 0xa5);
    check(build(frame.data(), frame.size(), outs, opt).status == Status::kBufferTooSmall);
    for (std::size_t i = 0; i < out[last].capacity; ++i) check(bufs[last][i] == 0xa5);
    ++out[last].capacity;
  }
  const Result r = build(frame.data(), frame.size(), outs, opt);
  check(r.status == Status::kBuilt && r.kind == dry.kind && r.count == dry.count);
  for (unsigned i = 0; i < r.count; ++i) {
    check(r.reply[i].len == dry.reply[i].len && r.reply[i].dir == dry.reply[i].dir);
    check(r.reply[i].dir == (i == 0 ? Direction::kToSender : Direction::kToDestination));
    verify(bufs[i].get(), r.reply[i].len, frame, r.kind, r.reply[i].dir, opt);
  }
  return 0;
}
