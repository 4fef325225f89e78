// Packet builder for tests and the pcap generator: assembles Ethernet frames
// layer by layer (VLAN tags, IPv4 with options, IPv6 with extension headers,
// TCP/UDP/SCTP/ICMP, payload) with correct lengths and IPv4 header checksums.
//
//   auto f = cg::test::Packet().vlan(10).ipv4("10.0.0.1", "10.0.0.2")
//                .tcp(1234, 80).payload("GET / HTTP/1.1\r\n...").frame();
//
// Addresses are given as text and parsed with inet_pton; a bad address
// throws std::invalid_argument (a test bug, not an input case).
#pragma once

#include <arpa/inet.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cg::test {

using Bytes = std::vector<uint8_t>;

inline void put16(Bytes& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}
inline void put32(Bytes& b, uint32_t v) {
  put16(b, static_cast<uint16_t>(v >> 16));
  put16(b, static_cast<uint16_t>(v));
}

class Packet {
 public:
  enum class L4 { none, tcp, udp, sctp, icmp, raw };

  Packet& eth_type(uint16_t t) { ethertype_ = t; return *this; }
  // Tags are written outermost first: vlan(100, 0x88a8).vlan(200) is QinQ.
  Packet& vlan(uint16_t vid, uint16_t tpid = 0x8100) {
    vlans_.push_back({tpid, vid});
    return *this;
  }
  Packet& ipv4(std::string_view src, std::string_view dst) {
    v6_ = false;
    parse(AF_INET, src, src_);
    parse(AF_INET, dst, dst_);
    ethertype_ = 0x0800;
    return *this;
  }
  Packet& ipv6(std::string_view src, std::string_view dst) {
    v6_ = true;
    parse(AF_INET6, src, src_);
    parse(AF_INET6, dst, dst_);
    ethertype_ = 0x86DD;
    return *this;
  }
  // IPv4 options (padded to a multiple of 4 bytes with end-of-list).
  Packet& ipv4_options(Bytes opts) { v4_opts_ = std::move(opts); return *this; }
  // IPv4 fragment: offset in 8-byte units, more-fragments flag.
  Packet& fragment(uint16_t offset_units, bool more, uint32_t id = 0x1234) {
    frag_ = true;
    frag_off_ = offset_units;
    frag_more_ = more;
    frag_id_ = id;
    return *this;
  }
  // IPv6 extension header (0 hop-by-hop, 43 routing, 60 destination options,
  // 51 authentication header with body_len bytes of ICV); 44 (fragment) is
  // added by fragment() on an IPv6 packet.
  Packet& ipv6_ext(uint8_t type, size_t body_len = 6) {
    v6_ext_.push_back({type, body_len});
    return *this;
  }
  Packet& ttl(uint8_t t) { ttl_ = t; return *this; }
  // TCP options (padded to a multiple of 4 bytes with end-of-list); the data
  // offset grows to cover them.
  Packet& tcp_options(Bytes opts) { tcp_opts_ = std::move(opts); return *this; }
  Packet& tcp(uint16_t sport, uint16_t dport, uint8_t flags = 0x18) {
    l4_ = L4::tcp; proto_ = 6; sport_ = sport; dport_ = dport; tcp_flags_ = flags;
    return *this;
  }
  // TCP sequence and acknowledgement numbers (default 1000 and 0).
  Packet& seq_ack(uint32_t seq, uint32_t ack) { seq_ = seq; ack_ = ack; return *this; }
  // The TCP urgent pointer field (set the URG flag, 0x20, in tcp() too).
  Packet& urgent(uint16_t ptr) { urg_ = ptr; return *this; }
  Packet& udp(uint16_t sport, uint16_t dport) {
    l4_ = L4::udp; proto_ = 17; sport_ = sport; dport_ = dport;
    return *this;
  }
  Packet& sctp(uint16_t sport, uint16_t dport) {
    l4_ = L4::sctp; proto_ = 132; sport_ = sport; dport_ = dport;
    return *this;
  }
  Packet& icmp() { l4_ = L4::icmp; proto_ = v6_ ? 58 : 1; return *this; }
  // Any other protocol number; the payload follows the IP header directly.
  Packet& proto(uint8_t p) { l4_ = L4::raw; proto_ = p; return *this; }
  // Fill in the TCP/UDP checksum as a sending host does (left 0 otherwise,
  // as by a host whose NIC would compute it); `delta` is added to it, so a
  // non-zero one makes it wrong on purpose.
  Packet& checksum(uint16_t delta = 0) { l4_csum_ = true; csum_delta_ = delta; return *this; }
  Packet& payload(std::string_view p) { payload_.assign(p.begin(), p.end()); return *this; }
  Packet& payload(const Bytes& p) { payload_ = p; return *this; }

  // The complete frame. Lengths and IPv4 checksum are filled in.
  Bytes frame() const {
    // Built from the MAC addresses up (not inserted into an empty vector,
    // which trips GCC 12's -Wstringop-overflow false positive at -O3).
    Bytes f = {0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01};
    f.reserve(128 + payload_.size());
    for (const auto& v : vlans_) {
      put16(f, v.tpid);
      put16(f, v.vid & 0x0fff);
    }
    put16(f, ethertype_);
    if (ethertype_ != 0x0800 && ethertype_ != 0x86DD) {
      f.insert(f.end(), payload_.begin(), payload_.end());
      return f;
    }
    Bytes l4 = transport();
    if (l4_csum_ && (l4_ == L4::tcp || l4_ == L4::udp)) fill_l4_checksum(l4);
    if (v6_) {
      append_ipv6(f, l4);
    } else {
      append_ipv4(f, l4);
    }
    return f;
  }

 private:
  struct Tag { uint16_t tpid, vid; };
  struct Ext { uint8_t type; size_t body; };

  static void parse(int af, std::string_view text, uint8_t* out) {
    std::string s(text);
    if (inet_pton(af, s.c_str(), out) != 1) throw std::invalid_argument("bad address: " + s);
  }

  Bytes transport() const {
    Bytes t;
    switch (l4_) {
      case L4::tcp:
        put16(t, sport_); put16(t, dport_);
        put32(t, seq_); put32(t, ack_);
        {
          Bytes opts = tcp_opts_;
          while (opts.size() % 4) opts.push_back(0);
          t.push_back(static_cast<uint8_t>((5 + opts.size() / 4) << 4)); t.push_back(tcp_flags_);
          put16(t, 65535); put16(t, 0); put16(t, urg_);  // window, csum, urgent pointer
          t.insert(t.end(), opts.begin(), opts.end());
        }
        break;
      case L4::udp:
        put16(t, sport_); put16(t, dport_);
        put16(t, static_cast<uint16_t>(8 + payload_.size())); put16(t, 0);
        break;
      case L4::sctp:
        put16(t, sport_); put16(t, dport_); put32(t, 0); put32(t, 0);
        break;
      case L4::icmp:
        t.push_back(8); t.push_back(0); put16(t, 0); put32(t, 0x00010001);
        break;
      case L4::raw:
      case L4::none:
        break;
    }
    t.insert(t.end(), payload_.begin(), payload_.end());
    return t;
  }

  // RFC 793/768 with the pseudo-header of RFC 791 or RFC 8200 section 8.1,
  // summed 16 bits at a time (the plain way: a reference for the product's).
  void fill_l4_checksum(Bytes& l4) const {
    const std::size_t at = l4_ == L4::tcp ? 16 : 6;
    uint32_t sum = 0;
    const std::size_t alen = v6_ ? 16 : 4;
    for (std::size_t i = 0; i < alen; i += 2) sum += (src_[i] << 8 | src_[i + 1]) + (dst_[i] << 8 | dst_[i + 1]);
    sum += proto_;
    sum += static_cast<uint32_t>(l4.size());
    for (std::size_t i = 0; i < l4.size(); i += 2)
      sum += (l4[i] << 8) | (i + 1 < l4.size() ? l4[i + 1] : 0);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    uint16_t csum = static_cast<uint16_t>(~sum);
    if (l4_ == L4::udp && csum == 0) csum = 0xffff;  // 0 means "none" in UDP
    csum = static_cast<uint16_t>(csum + csum_delta_);
    l4[at] = static_cast<uint8_t>(csum >> 8);
    l4[at + 1] = static_cast<uint8_t>(csum);
  }

  void append_ipv4(Bytes& f, const Bytes& l4) const {
    Bytes opts = v4_opts_;
    while (opts.size() % 4) opts.push_back(0);
    const size_t hl = 20 + opts.size();
    const size_t start = f.size();
    f.push_back(static_cast<uint8_t>(0x40 | (hl / 4)));
    f.push_back(0);
    put16(f, static_cast<uint16_t>(hl + l4.size()));
    put16(f, static_cast<uint16_t>(frag_ ? frag_id_ : 0));
    uint16_t fo = frag_ ? static_cast<uint16_t>((frag_more_ ? 0x2000 : 0) | (frag_off_ & 0x1fff)) : 0x4000;
    put16(f, fo);
    f.push_back(ttl_);
    f.push_back(l4_ == L4::none ? 0 : proto_);
    put16(f, 0);
    f.insert(f.end(), src_, src_ + 4);
    f.insert(f.end(), dst_, dst_ + 4);
    f.insert(f.end(), opts.begin(), opts.end());
    uint32_t sum = 0;
    for (size_t i = 0; i < hl; i += 2) sum += (f[start + i] << 8) | f[start + i + 1];
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    const uint16_t csum = static_cast<uint16_t>(~sum);
    f[start + 10] = static_cast<uint8_t>(csum >> 8);
    f[start + 11] = static_cast<uint8_t>(csum);
    f.insert(f.end(), l4.begin(), l4.end());
  }

  void append_ipv6(Bytes& f, const Bytes& l4) const {
    // Chain: listed extension headers, then the fragment header, then L4.
    std::vector<uint8_t> chain;
    for (const auto& e : v6_ext_) chain.push_back(e.type);
    if (frag_) chain.push_back(44);
    const uint8_t final_proto = l4_ == L4::none ? 59 : proto_;
    Bytes ext;
    for (size_t i = 0; i < chain.size(); ++i) {
      const uint8_t next = i + 1 < chain.size() ? chain[i + 1] : final_proto;
      if (chain[i] == 44) {
        ext.push_back(next); ext.push_back(0);
        put16(ext, static_cast<uint16_t>((frag_off_ << 3) | (frag_more_ ? 1 : 0)));
        put32(ext, frag_id_);
      } else if (chain[i] == 51) {                 // AH: length in 4-byte units - 2
        const size_t total = (12 + v6_ext_[i].body + 7) / 8 * 8;
        ext.push_back(next);
        ext.push_back(static_cast<uint8_t>(total / 4 - 2));
        put16(ext, 0); put32(ext, 0x1000); put32(ext, 1);  // reserved, SPI, sequence
        ext.resize(ext.size() + total - 12, 0xab);          // ICV
      } else {
        const size_t body = v6_ext_[i].body;       // bytes after the 2-byte header
        const size_t total = (2 + body + 7) / 8 * 8;
        ext.push_back(next);
        ext.push_back(static_cast<uint8_t>(total / 8 - 1));
        if (chain[i] == 43) {                       // routing: type 0, segments left 0
          ext.push_back(0); ext.push_back(0);
          ext.resize(ext.size() + total - 4, 0);
        } else {                                    // options: PadN filling the body
          ext.push_back(1); ext.push_back(static_cast<uint8_t>(total - 4));
          ext.resize(ext.size() + total - 4, 0);
        }
      }
    }
    put32(f, 0x60000000);
    put16(f, static_cast<uint16_t>(ext.size() + l4.size()));
    f.push_back(chain.empty() ? final_proto : chain[0]);
    f.push_back(ttl_);
    f.insert(f.end(), src_, src_ + 16);
    f.insert(f.end(), dst_, dst_ + 16);
    f.insert(f.end(), ext.begin(), ext.end());
    f.insert(f.end(), l4.begin(), l4.end());
  }

  uint16_t ethertype_ = 0x0800;
  std::vector<Tag> vlans_;
  bool v6_ = false;
  uint8_t src_[16] = {};
  uint8_t dst_[16] = {};
  Bytes v4_opts_;
  std::vector<Ext> v6_ext_;
  bool frag_ = false;
  uint16_t frag_off_ = 0;
  bool frag_more_ = false;
  uint32_t frag_id_ = 0;
  uint8_t ttl_ = 64;
  L4 l4_ = L4::none;
  uint8_t proto_ = 0;
  uint16_t sport_ = 0, dport_ = 0;
  uint16_t urg_ = 0;
  uint8_t tcp_flags_ = 0x18;
  uint32_t seq_ = 1000, ack_ = 0;
  Bytes tcp_opts_;
  Bytes payload_;
  bool l4_csum_ = false;
  uint16_t csum_delta_ = 0;
};

// A TLS 1.2 record holding a ClientHello; with an SNI extension (host_name
// `sni`) unless sni is empty. Other extensions come before it, as browsers
// send them, so parsers must walk the list.
inline Bytes tls_client_hello(std::string_view sni) {
  Bytes ext;
  put16(ext, 0x000b); put16(ext, 2); ext.push_back(1); ext.push_back(0);  // ec_point_formats
  put16(ext, 0x0017); put16(ext, 0);                                       // extended_master_secret
  if (!sni.empty()) {
    put16(ext, 0x0000);
    put16(ext, static_cast<uint16_t>(sni.size() + 5));
    put16(ext, static_cast<uint16_t>(sni.size() + 3));
    ext.push_back(0);
    put16(ext, static_cast<uint16_t>(sni.size()));
    ext.insert(ext.end(), sni.begin(), sni.end());
  }
  Bytes body;
  put16(body, 0x0303);                                  // client_version
  for (int i = 0; i < 32; ++i) body.push_back(static_cast<uint8_t>(i));  // random
  body.push_back(32);                                   // session_id
  for (int i = 0; i < 32; ++i) body.push_back(0xaa);
  put16(body, 4); put16(body, 0x1301); put16(body, 0xc02f);  // cipher_suites
  body.push_back(1); body.push_back(0);                 // compression: null
  put16(body, static_cast<uint16_t>(ext.size()));
  body.insert(body.end(), ext.begin(), ext.end());
  Bytes hs;
  hs.push_back(1);                                      // ClientHello
  hs.push_back(static_cast<uint8_t>(body.size() >> 16));
  put16(hs, static_cast<uint16_t>(body.size()));
  hs.insert(hs.end(), body.begin(), body.end());
  Bytes rec;
  rec.push_back(22); put16(rec, 0x0301);
  put16(rec, static_cast<uint16_t>(hs.size()));
  rec.insert(rec.end(), hs.begin(), hs.end());
  return rec;
}

// A DNS message with one question for `name` (dotted text, no compression).
// response sets QR; opcode is the 4-bit opcode (0 = standard query).
inline Bytes dns_query(std::string_view name, bool response = false, uint8_t opcode = 0,
                       uint16_t qtype = 1) {
  Bytes m;
  put16(m, 0x1234);
  m.push_back(static_cast<uint8_t>((response ? 0x80 : 0) | ((opcode & 0x0f) << 3) | 0x01));
  m.push_back(0);
  put16(m, 1); put16(m, response ? 1 : 0); put16(m, 0); put16(m, 0);
  size_t b = 0;
  while (b < name.size()) {
    size_t e = name.find('.', b);
    if (e == std::string_view::npos) e = name.size();
    m.push_back(static_cast<uint8_t>(e - b));
    m.insert(m.end(), name.begin() + static_cast<std::ptrdiff_t>(b),
             name.begin() + static_cast<std::ptrdiff_t>(e));
    b = e + 1;
  }
  m.push_back(0);
  put16(m, qtype); put16(m, 1);
  return m;
}

}  // namespace cg::test
