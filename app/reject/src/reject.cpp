// build(): which reply a blocked frame gets, then the buffers, then the
// bytes. The decision table is docs/reject.md; the verdict for anything
// unexpected is "no reply" with a reason, never a guess.
#include "cuckoogate/reject/reject.hpp"

#include <algorithm>
#include <cstring>

#include "reply.hpp"

namespace cg::reject {
namespace {

using detail::Frame;

static_assert(kMaxReplyLen <= 65535, "Reply::len is 16-bit");

// ICMPv4 types that are not errors: echo reply/request, timestamp, info and
// address mask (RFC 792, RFC 950). Anything else (errors, router discovery,
// types not assigned) is not answered, as Linux's icmp_send() decides.
bool icmp4_is_query(uint8_t type) noexcept {
  return type == 0 || type == 8 || (type >= 13 && type <= 18);
}

// ICMPv6: types below 128 are errors (RFC 4443 2.1); 133-137 are neighbour
// discovery (RFC 4861), link-local signalling a host never answers.
bool icmp6_answerable(uint8_t type) noexcept {
  return type >= 128 && !(type >= 133 && type <= 137);
}

struct Decision {
  Reason reason = Reason::kNone;
  Kind kind = Kind::kIcmpUnreachable;
  detail::DnsQuery dns;
};

Decision no_reply(Reason r) noexcept {
  Decision d;
  d.reason = r;
  return d;
}

Decision decide(const Frame& f) noexcept {
  Decision d;
  const uint8_t* l4 = f.l4();
  // The transport-level replies (RST, DNS answer) need the whole transport
  // message and its real endpoints: a first fragment, or a source-routed
  // packet (whose destination is an intermediate hop) gets the ICMP error.
  const bool whole = !f.fragmented && !f.source_routed;
  switch (f.proto) {
    case detail::kProtoTcp: {
      if (f.l4_len < 20) return no_reply(Reason::kMalformed);
      const std::size_t doff = static_cast<std::size_t>(l4[12] >> 4) * 4;
      if (doff < 20 || doff > f.l4_len) return no_reply(Reason::kMalformed);
      if ((l4[13] & 0x04) != 0) return no_reply(Reason::kTcpReset);
      if (whole) d.kind = Kind::kTcpReset;
      return d;
    }
    case detail::kProtoUdp: {
      if (f.l4_len < 8) return no_reply(Reason::kMalformed);
      if (f.fragmented) return d;  // UDP length covers bytes not in this packet
      const std::size_t ulen = detail::rd16(l4 + 4);
      if (ulen < 8 || ulen > f.l4_len) return no_reply(Reason::kMalformed);
      // A query from port 0 expects no answer (RFC 768): the ICMP error.
      if (whole && detail::rd16(l4 + 2) == 53 && detail::rd16(l4) != 0 &&
          detail::parse_dns_query(l4 + 8, ulen - 8, d.dns)) {
        d.kind = Kind::kDnsAnswer;
      }
      return d;
    }
    case detail::kProtoIcmp:
    case detail::kProtoIcmpv6: {
      const bool own = f.proto == (f.family == 4 ? detail::kProtoIcmp : detail::kProtoIcmpv6);
      if (!own) return d;  // ICMPv6 in IPv4 or ICMP in IPv6: some other protocol
      if (f.l4_len < 1) return no_reply(Reason::kMalformed);
      const bool answer = f.family == 4 ? icmp4_is_query(l4[0]) : icmp6_answerable(l4[0]);
      if (!answer) return no_reply(Reason::kIcmpError);
      return d;
    }
    default:
      return d;
  }
}

}  // namespace

Result build(const uint8_t* frame, std::size_t len, std::span<const Buffer> out,
             const Options& opt) noexcept {
  Result r;
  Frame f;
  r.reason = detail::parse_frame(frame, len, f);
  if (r.reason != Reason::kNone) return r;
  const Decision d = decide(f);
  r.reason = d.reason;
  if (r.reason != Reason::kNone) return r;
  r.kind = d.kind;

  std::size_t n = 0;
  switch (d.kind) {
    case Kind::kTcpReset:
      n = detail::tcp_reset_len(f);
      r.count = opt.tcp_reset_destination ? 2 : 1;
      break;
    case Kind::kDnsAnswer:
      n = detail::dns_answer_len(f, d.dns);
      r.count = 1;
      break;
    case Kind::kIcmpUnreachable:
      n = detail::icmp_error_len(f);
      r.count = 1;
      break;
  }
  const std::size_t padded = std::max(n, kMinFrameLen);
  bool fits = out.size() >= r.count;
  for (unsigned i = 0; i < r.count; ++i) {
    r.reply[i].len = static_cast<uint16_t>(padded);
    r.reply[i].dir = i == 0 ? Direction::kToSender : Direction::kToDestination;
    fits = fits && out[i].data != nullptr && out[i].capacity >= padded;
  }
  if (!fits) {
    r.status = Status::kBufferTooSmall;
    return r;
  }

  for (unsigned i = 0; i < r.count; ++i) {
    uint8_t* o = out[i].data;
    switch (d.kind) {
      case Kind::kTcpReset:
        detail::write_tcp_reset(f, r.reply[i].dir, o);
        break;
      case Kind::kDnsAnswer:
        detail::write_dns_answer(f, d.dns, opt.dns_rcode, o);
        break;
      case Kind::kIcmpUnreachable:
        detail::write_icmp_error(f, o);
        break;
    }
    std::memset(o + n, 0, padded - n);
  }
  r.status = Status::kBuilt;
  return r;
}

const char* name(Reason r) noexcept {
  switch (r) {
    case Reason::kNone: return "none";
    case Reason::kMalformed: return "malformed";
    case Reason::kNotIp: return "not-ip";
    case Reason::kBadIpChecksum: return "bad-ip-checksum";
    case Reason::kNonFirstFragment: return "non-first-fragment";
    case Reason::kIcmpError: return "icmp-error";
    case Reason::kTcpReset: return "tcp-reset";
    case Reason::kGroupDestination: return "group-destination";
    case Reason::kSourceNotUnicast: return "source-not-unicast";
  }
  return "?";
}

const char* name(Kind k) noexcept {
  switch (k) {
    case Kind::kTcpReset: return "tcp-reset";
    case Kind::kDnsAnswer: return "dns-answer";
    case Kind::kIcmpUnreachable: return "icmp-unreachable";
  }
  return "?";
}

}  // namespace cg::reject
