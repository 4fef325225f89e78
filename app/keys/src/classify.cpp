// parse_packet(): Ethernet/VLAN -> IPv4/IPv6 (options, extension headers,
// fragments) -> TCP/UDP/SCTP headers; classify_meta(): from there, every
// lookup key (addresses, flow, service, HTTP/TLS/DNS names) in the
// rule_key() encoding with its XXH3 hash. See docs/rules.md.
#include "cuckoogate/keys/classify.hpp"

#include <algorithm>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "app_layer.hpp"
#include "cuckoogate/h2/h2.hpp"
#include "encoding.hpp"

namespace cg {
namespace {

static_assert(kKeyBytesCapacity <= 65535, "PacketKey offsets are 16-bit");
static_assert(kMaxHostKeys == 127);
// Address, flow and service keys come first and may be written with up to
// kEncodeSlack bytes of overrun (encoding.hpp); later keys overwrite it.
static_assert(kFlowKeyMax + 8 * kAddrKeyMax + kServiceKeyMax + detail::kEncodeSlack <=
              kKeyBytesCapacity);

constexpr uint16_t kEthIpv4 = 0x0800, kEthIpv6 = 0x86DD;
constexpr uint16_t kEthVlan = 0x8100, kEthQinQ = 0x88A8, kEthVlan9100 = 0x9100;
constexpr uint16_t kEthMplsUnicast = 0x8847, kEthMplsMulticast = 0x8848, kEthPppoeSession = 0x8864;
constexpr uint16_t kPppIpv4 = 0x0021, kPppIpv6 = 0x0057;
constexpr uint16_t kEthTransparentBridging = 0x6558;  // an Ethernet frame inside GRE/GENEVE
constexpr uint8_t kProtoIpInIp = 4, kProtoIpv6InIp = 41, kProtoGre = 47;
constexpr uint16_t kGenevePort = 6081;  // (tunnel_udp_port(): VXLAN is the others)
// Tunnels inside tunnels, up to this many; a deeper packet is judged on its
// layers so far and flagged malformed.
constexpr unsigned kMaxTunnels = 4;
constexpr uint8_t kTcpUrg = 0x20;  // TCP flags: the urgent pointer is significant

inline uint16_t rd16(const uint8_t* p) noexcept {
  return static_cast<uint16_t>((p[0] << 8) | p[1]);
}

class Emitter {
 public:
  explicit Emitter(PacketKeys& out) noexcept : out_(out) {}

  uint8_t* cursor() noexcept { return out_.bytes + used_; }

  // Emits the encoding just written at cursor() (len bytes).
  void commit(RuleKind kind, std::size_t len) noexcept {
    add(kind, used_, len);
    used_ += len;
  }

  // The hash is filled in by hash_all(), once every encoding is written:
  // hashing right after writing reads bytes still in the store buffer, and
  // loads that span several smaller stores cannot be forwarded (a stall of
  // ~15 cycles per load, which dominated the 64-byte TCP case).
  void add(RuleKind kind, std::size_t off, std::size_t len) noexcept {
    PacketKey& k = out_.key[n_++];
    k.offset = static_cast<uint16_t>(off);
    k.len = static_cast<uint16_t>(len);
    k.kind = kind;
    k.same = 0;
  }

  // An ip key of the address the key `same` (src or dst, just emitted) has:
  // its hash is that key's (key_hash() of an address key leaves the kind
  // out), copied instead of computed again, and PacketKey::same says so.
  void commit_same_address(RuleKind kind, std::size_t len, unsigned same) noexcept {
    commit(kind, len);
    out_.key[n_ - 1].same = static_cast<uint8_t>(same + 1);
  }

  // Publishes the key count and fills in every hash (key_hash()); call once, last.
  void hash_all() noexcept {
    out_.n = n_;
    for (unsigned i = 0; i < n_; ++i) {
      PacketKey& k = out_.key[i];
      const uint8_t* p = out_.bytes + k.offset;
      if (k.same != 0) {
        k.hash = out_.key[k.same - 1].hash;
      } else if (is_address_kind(k.kind)) {
        k.hash = detail::address_hash(p + 1, k.len - 1u);
      } else {
        k.hash = XXH3_64bits(p, k.len);
      }
    }
  }

  unsigned size() const noexcept { return n_; }

  void flag_malformed() noexcept { out_.malformed = true; }

  // Host keys for a name (not lower-cased; trailing dot already dropped):
  // the name and every parent domain, all sharing one encoding.
  void host(const uint8_t* name, std::size_t n) noexcept {
    std::size_t start = 0;
    if (n > kMaxNameLen) {  // only suffixes of at most kMaxNameLen bytes
      std::size_t i = n - kMaxNameLen - 1;
      while (i < n && name[i] != '.' && name[i] != detail::kHostSep) ++i;
      start = i + 1;
    }
    if (start >= n) return;
    uint8_t* w = cursor();
    const std::size_t total = 1 + n - start;
    // Callers emit at most kMaxNamesPerPacket names, which the budget holds;
    // checked all the same, so that no input can write past it.
    if (used_ + total > kKeyBytesCapacity || n_ + kMaxHostKeys > kMaxKeysPerPacket) {
      out_.malformed = true;  // (never for a frame: the budget holds every name it can carry)
      return;
    }
    w[0] = detail::kHostSep;
    for (std::size_t i = start; i < n; ++i) {
      const uint8_t c = detail::ascii_lower(name[i]);
      w[1 + i - start] = c == '.' ? detail::kHostSep : c;
    }
    // A key starts at every separator followed by a non-empty label.
    for (std::size_t j = 0; j + 1 < total; ++j) {
      if (w[j] == detail::kHostSep && w[j + 1] != detail::kHostSep) {
        add(RuleKind::kHost, used_ + j, total - j);
      }
    }
    used_ += total;
  }

  // url keys from an HTTP request whose authority already split cleanly: the
  // canonical url (encoding.hpp, canonical_path) and, when it has a query,
  // the url without it too (a rule without a query matches any query).
  // The path is canonicalised before its length is checked, so padding with
  // "/./" cannot push a blocked url past kMaxUrlLen.
  // Not inlined: its 48 KiB of buffers would make every classify() call
  // probe that much stack.
  [[gnu::noinline]] void url(const detail::HttpRequest& req, const detail::AuthorityParts& a) noexcept {
    constexpr std::size_t kPathMax = 16384;
    if (req.path_len >= kPathMax) {  // longer than any frame this sees
      out_.url_too_long = true;
      return;
    }
    uint8_t path[kPathMax], tmp[kPathMax];
    std::size_t query_at = 0;
    const std::size_t plen = detail::canonical_path(req.path, req.path_len, path, tmp, &query_at);
    const std::size_t alen = detail::authority_len(a);
    if (alen + query_at > kMaxUrlLen) {  // not even the query-less url fits a rule
      out_.url_too_long = true;
      return;
    }
    url_keys(req, a, path, plen, query_at);
    // The path as nginx reads it (every escape of a character that may stand
    // raw decoded, "%2F" included, then dot segments): "/a%21b" is "/a!b",
    // "/a%2F..%2Fb" is "/b". Looked up too when it differs, so a rule written
    // either way matches; only escapes can make it differ, so the cost is
    // rare. (An escape in the path is the only way in: the plain form keeps it.)
    if (std::memchr(req.path, '%', req.path_len) == nullptr) return;
    uint8_t wide[kPathMax];
    std::size_t wide_query_at = 0;
    const std::size_t wlen = detail::canonical_path<true>(req.path, req.path_len, wide, tmp, &wide_query_at);
    if (wide_query_at == query_at && std::memcmp(wide, path, query_at) == 0) return;
    // (Too long for a rule, it is simply not looked up: the plain form was.)
    if (alen + wide_query_at <= kMaxUrlLen) url_keys(req, a, wide, wlen, wide_query_at, /*flag_long=*/false);
  }

 private:
  // With a query: the url without it first, then the whole one.
  void url_keys(const detail::HttpRequest& req, const detail::AuthorityParts& a, const uint8_t* path,
                std::size_t plen, std::size_t query_at, bool flag_long = true) noexcept {
    const std::size_t alen = detail::authority_len(a);
    const std::size_t lens[2] = {query_at, plen};
    for (unsigned k = plen != query_at ? 0 : 1; k < 2; ++k) {
      const std::size_t n = lens[k];
      if (alen + n > kMaxUrlLen) {
        if (flag_long) out_.url_too_long = true;
        continue;
      }
      // At most kMaxUrlKeys url keys fit the budget (two readings of four);
      // checked so that no input can write past it (a second reading once
      // did, before the budget held it).
      if (urls_ == kMaxUrlKeys || used_ + 1 + alen + n > kKeyBytesCapacity) {
        out_.url_too_long = true;
        continue;
      }
      ++urls_;
      uint8_t* w = cursor();
      w[0] = static_cast<uint8_t>(RuleKind::kUrl);
      detail::write_authority(req.authority, a, w + 1);
      std::memcpy(w + 1 + alen, path, n);
      commit(RuleKind::kUrl, 1 + alen + n);
    }
  }

 public:

 private:
  PacketKeys& out_;
  // Kept here rather than in out_.n: byte stores into out_.bytes may alias
  // out_.n as far as the compiler knows, which would force a reload per key.
  unsigned n_ = 0;
  unsigned urls_ = 0;  // url keys emitted (at most kMaxUrlKeys)
  std::size_t used_ = 0;
};

// The keys of one reading of an HTTP request whose authority is known: its
// host (and url), and the other Host lines servers may route by.
void http_request_keys(const detail::HttpRequest& req, Emitter& em) noexcept {
  detail::AuthorityParts a;
  // A port that is no port (":abc", ":99999"): no url, but nginx still
  // serves the name before the ':', so its host keys are looked up.
  const bool whole = detail::split_authority(req.authority, req.authority_len, a);
  if (whole && req.has_url) em.url(req, a);
  if (a.host_len != 0) em.host(req.authority, a.host_len);
  // A Host header naming another host than the target (absolute-form or
  // CONNECT): servers routing by Host serve that one, so it is judged too,
  // whatever the target's port. So is a Host line that only Python's
  // reading of the lines finds.
  auto other_host = [&](const uint8_t* v, std::size_t len) {
    if (v == nullptr) return;
    detail::AuthorityParts h;
    detail::split_authority(v, len, h);  // a bad port: the name still counts
    auto lower = [](uint8_t c) { return c >= 'A' && c <= 'Z' ? static_cast<uint8_t>(c | 0x20) : c; };
    bool same = h.host_len == a.host_len;
    for (std::size_t i = 0; same && i < h.host_len; ++i) same = lower(v[i]) == lower(req.authority[i]);
    if (h.host_len != 0 && !same) em.host(v, h.host_len);
  };
  other_host(req.host_header, req.host_header_len);
  if (!req.authority_from_host) other_host(req.alt_host, req.alt_host_len);
  other_host(req.last_host, req.last_host_len);
  other_host(req.extra_host, req.extra_host_len);
}

// The keys of an HTTP request (either version): its reading, and a second
// one where Python's reading of the header lines (a bare CR ends one) finds
// another first Host line, or a later Host field names another host: where
// the host comes from the Host header, that request is judged too, url
// included.
void request_keys(const detail::HttpRequest& req, Emitter& em) noexcept {
  if (req.authority != nullptr) http_request_keys(req, em);
  if (req.alt_host != nullptr && req.authority_from_host) {
    detail::HttpRequest alt = req;
    alt.authority = req.alt_host;
    alt.authority_len = req.alt_host_len;
    alt.alt_host = nullptr;
    alt.last_host = nullptr;
    http_request_keys(alt, em);
  }
}

// A cleartext HTTP/2 connection's start (docs/rules.md, "HTTP/2
// cleartext"). Not inlined: its 44 KiB of buffers (and the decoder's 32 KiB
// table below it) would make every classify() call probe that much stack.
[[gnu::noinline]] void app_layer_h2(const uint8_t* pl, std::size_t n, Emitter& em) noexcept {
  detail::H2Scratch scratch;
  detail::HttpRequest req;
  bool refused = false;
  switch (detail::parse_h2_request(pl, n, req, scratch, &refused)) {
    case detail::H2Read::kRequest:
      request_keys(req, em);
      if (refused) em.flag_malformed();  // (its server refuses the block: what was read is judged)
      break;
    case detail::H2Read::kUnreadable: em.flag_malformed(); break;  // a block over 16 KiB in one packet
    case detail::H2Read::kNone: break;
  }
}

void app_layer_tcp(const uint8_t* pl, std::size_t n, Emitter& em) noexcept {
  if (pl[0] == 22 || pl[0] == 21) {  // a handshake record, or an alert before it (parse_tls_sni)
    const uint8_t* name = nullptr;
    std::size_t nlen = 0;
    if (detail::parse_tls_sni(pl, n, name, nlen)) {
      if (name[nlen - 1] == '.') --nlen;
      if (nlen != 0) em.host(name, nlen);
    }
    return;
  }
  if (pl[0] == 'P' && n >= h2::kPrefaceLen && h2::begins_preface(pl, n)) {
    app_layer_h2(pl, n, em);
    return;
  }
  detail::HttpRequest req, python;
  if (!detail::parse_http_request(pl, n, req, &python)) return;
  request_keys(req, em);
  request_keys(python, em);  // (nothing when Python reads the line as nginx does)
}

// Every question's name (up to kMaxNamesPerPacket; a query with more, or
// one whose questions cannot all be read, is flagged malformed after the
// names that could be).
// A segment with URG set, read the way a Linux receiver reads it by default
// (no SO_OOBINLINE, tcp_stdurg 0): the urgent pointer points one past the
// urgent byte, which is taken out of the stream. So a Host value or SNI with
// one extra byte placed as urgent data is the name the server reads. A
// payload longer than the copy buffer, or a pointer beyond this segment, is
// parsed as it is.
[[gnu::noinline]] void app_layer_tcp_urgent(const uint8_t* tcp, const uint8_t* pl, std::size_t n,
                                            Emitter& em) noexcept {
  constexpr std::size_t kCopyMax = 16384;
  const std::size_t up = static_cast<std::size_t>(tcp[18]) << 8 | tcp[19];
  if (up == 0 || up > n || n > kCopyMax || n == 1) {
    app_layer_tcp(pl, n, em);
    return;
  }
  uint8_t copy[kCopyMax];
  std::memcpy(copy, pl, up - 1);
  std::memcpy(copy + up - 1, pl + up, n - up);
  app_layer_tcp(copy, n - 1, em);
}

void app_layer_dns(const uint8_t* pl, std::size_t n, Emitter& em, bool& malformed) noexcept {
  const unsigned count = detail::start_dns_questions(pl, n);
  uint8_t name[detail::kDnsNameBuf];
  std::size_t pos = 12;
  for (unsigned q = 0; q < count; ++q) {
    if (q == kMaxNamesPerPacket) {
      malformed = true;
      return;
    }
    bool ok = false;
    bool too_deep = false;
    const std::size_t len = detail::next_dns_question(pl, n, pos, name, &ok, &too_deep);
    if (!ok) {
      // A query with an unreadable first name is just not DNS, unless it
      // reads until its pointers run too deep: a name hidden from us that a
      // lenient resolver may still follow.
      malformed = malformed || q != 0 || too_deep;
      return;
    }
    if (len != 0) em.host(name, len);
  }
}

void addresses(uint8_t family, const uint8_t* src, const uint8_t* dst, Emitter& em) noexcept {
  const unsigned first = em.size();
  em.commit(RuleKind::kSrc, detail::encode_addr_key(em.cursor(), RuleKind::kSrc, family, src));
  em.commit(RuleKind::kDst, detail::encode_addr_key(em.cursor(), RuleKind::kDst, family, dst));
  em.commit_same_address(RuleKind::kIp, detail::encode_addr_key(em.cursor(), RuleKind::kIp, family, src), first);
  em.commit_same_address(RuleKind::kIp, detail::encode_addr_key(em.cursor(), RuleKind::kIp, family, dst), first + 1);
}

inline uint32_t rd32(const uint8_t* p) noexcept {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// Transport layer of a first fragment or unfragmented packet: m.l4_off and
// m.l4_len are set; `fragmented` means more fragments follow (so length
// fields may describe bytes that are not in this packet).
void transport(const uint8_t* frame, PacketMeta& m) noexcept {
  const uint8_t* l4 = frame + m.l4_off;
  const std::size_t l4len = m.l4_len;
  std::size_t pl = 0, pllen = 0;
  switch (m.proto) {
    case kProtoTcp: {
      if (l4len < 20) { m.malformed = true; return; }
      const std::size_t doff = static_cast<std::size_t>(l4[12] >> 4) * 4;
      if (doff < 20 || doff > l4len) { m.malformed = true; return; }
      m.tcp_seq = rd32(l4 + 4);
      m.tcp_ack = rd32(l4 + 8);
      m.tcp_flags = l4[13];
      pl = doff;
      pllen = l4len - doff;
      break;
    }
    case kProtoUdp: {
      if (l4len < 8) { m.malformed = true; return; }
      const std::size_t ulen = rd16(l4 + 4);
      if (m.fragmented) {
        pllen = l4len - 8;
      } else {
        if (ulen < 8 || ulen > l4len) { m.malformed = true; return; }
        pllen = ulen - 8;
      }
      pl = 8;
      break;
    }
    case kProtoSctp:
      if (l4len < 12) { m.malformed = true; return; }
      break;
    default:
      break;
  }
  if (proto_has_ports(m.proto)) {
    m.sport = rd16(l4);
    m.dport = rd16(l4 + 2);
  }
  m.l4 = true;
  m.payload_off = m.l4_off + static_cast<uint32_t>(pl);
  m.payload_len = static_cast<uint32_t>(pllen);
}

void ipv4(const uint8_t* frame, std::size_t off, std::size_t avail, PacketMeta& m) noexcept {
  const uint8_t* ip = frame + off;
  if (avail < 20 || (ip[0] >> 4) != 4) { m.malformed = true; return; }
  m.family = 4;
  m.addr_off = static_cast<uint32_t>(off + 12);
  const std::size_t ihl = static_cast<std::size_t>(ip[0] & 0x0f) * 4;
  const std::size_t total = rd16(ip + 2);
  if (ihl < 20 || ihl > avail || total < ihl) { m.malformed = true; return; }
  std::size_t end = total;
  if (end > avail) {  // cut short: parse what is there
    m.malformed = true;
    end = avail;
  }
  m.proto = ip[9];
  const uint16_t frag = rd16(ip + 6);
  if ((frag & 0x1fff) != 0) {
    m.non_first_fragment = true;
    return;
  }
  m.fragmented = (frag & 0x2000) != 0;
  m.l4_off = static_cast<uint32_t>(off + ihl);
  m.l4_len = static_cast<uint32_t>(end - ihl);
  transport(frame, m);
}

void ipv6(const uint8_t* frame, std::size_t off, std::size_t avail, PacketMeta& m) noexcept {
  const uint8_t* ip = frame + off;
  if (avail < 40 || (ip[0] >> 4) != 6) { m.malformed = true; return; }
  m.family = 6;
  m.addr_off = static_cast<uint32_t>(off + 8);
  std::size_t end = 40 + static_cast<std::size_t>(rd16(ip + 4));
  if (end > avail) {
    m.malformed = true;
    end = avail;
  }
  uint8_t nh = ip[6];
  std::size_t pos = 40;
  while (true) {
    std::size_t hl;
    switch (nh) {
      case 0:    // hop-by-hop options
      case 43:   // routing
      case 60:   // destination options
      case 135:  // mobility
      case 139:  // HIP
      case 140:  // shim6
        if (pos + 8 > end) { m.malformed = true; return; }
        hl = (static_cast<std::size_t>(ip[pos + 1]) + 1) * 8;
        break;
      case 51:  // authentication header
        if (pos + 8 > end) { m.malformed = true; return; }
        hl = (static_cast<std::size_t>(ip[pos + 1]) + 2) * 4;
        break;
      case 44: {  // fragment
        if (pos + 8 > end) { m.malformed = true; return; }
        const uint16_t fo = rd16(ip + pos + 2);
        if ((fo >> 3) != 0) {
          m.proto = ip[pos];
          m.non_first_fragment = true;
          return;
        }
        m.fragmented = (fo & 1) != 0;
        hl = 8;
        break;
      }
      default:
        m.proto = nh;
        m.l4_off = static_cast<uint32_t>(off + pos);
        m.l4_len = static_cast<uint32_t>(end - pos);
        transport(frame, m);
        return;
    }
    // Any number of extension headers that fits the packet (Linux walks
    // them all): each is at least 8 bytes, so the walk is linear in it.
    if (pos + hl > end) { m.malformed = true; return; }
    nh = ip[pos];
    pos += hl;
  }
}

// L2 encapsulations from `off` (the first byte after an EtherType `type`),
// any depth that fits [0, len) (each layer takes at least 4 bytes, so the
// walk is linear): VLAN tags (the outermost frame's first tag is the flow
// zone), MPLS label stacks, PPPoE sessions. On return `type` is the EtherType
// of what follows at `off`; false when it cannot be read (malformed set) or
// is not parsed further.
bool walk_l2(const uint8_t* frame, std::size_t len, std::size_t& off, uint16_t& type, PacketMeta& m,
             bool outermost) noexcept {
  bool tagged = !outermost;
  while (true) {
    if (type == kEthVlan || type == kEthQinQ || type == kEthVlan9100) {
      if (off + 4 > len) { m.malformed = true; return false; }
      if (!tagged) m.vlan = rd16(frame + off) & 0x0fff;
      tagged = true;
      type = rd16(frame + off + 2);
      off += 4;
    } else if (type == kEthMplsUnicast || type == kEthMplsMulticast) {
      if (off + 4 > len) { m.malformed = true; return false; }
      const bool bottom = (frame[off + 2] & 0x01) != 0;
      off += 4;
      if (!bottom) continue;
      // No type field after the stack: IP by its version nibble (anything
      // else, e.g. an Ethernet pseudowire's control word, is not parsed).
      if (off >= len) { m.malformed = true; return false; }
      const unsigned version = frame[off] >> 4;
      type = version == 4 ? kEthIpv4 : version == 6 ? kEthIpv6 : 0;
    } else if (type == kEthPppoeSession) {
      // ver/type 0x11, code 0 (session data), session id, length, PPP protocol.
      if (off + 8 > len) { m.malformed = true; return false; }
      if (frame[off] != 0x11 || frame[off + 1] != 0) return false;
      const uint16_t ppp = rd16(frame + off + 6);
      off += 8;
      type = ppp == kPppIpv4 ? kEthIpv4 : ppp == kPppIpv6 ? kEthIpv6 : 0;
    } else {
      return true;
    }
  }
}

// Is the packet m describes a tunnel? IPv4/IPv6 in IP (protocols 4 and 41,
// 6in4 included), GRE version 0 (checksum, key and sequence fields skipped;
// IP or transparent Ethernet inside), VXLAN (UDP to 4789) and GENEVE (UDP to
// 6081, options skipped). Sets where the inner packet starts and either its
// EtherType (type) or ether = true for an inner Ethernet frame. A cut,
// fragmented or malformed outer packet is not decapsulated.
bool tunnel(const uint8_t* frame, const PacketMeta& m, std::size_t& inner, uint16_t& type,
            bool& ether) noexcept {
  if (!m.l4 || m.malformed || m.fragmented || m.non_first_fragment) return false;
  ether = false;
  const uint8_t* l4 = frame + m.l4_off;
  auto inner_of = [&](uint16_t pt, std::size_t at) {
    inner = at;
    if (pt == kEthTransparentBridging) {
      ether = true;
      return true;
    }
    type = pt;
    return pt == kEthIpv4 || pt == kEthIpv6;
  };
  switch (m.proto) {
    case kProtoIpInIp:
      return inner_of(kEthIpv4, m.l4_off);
    case kProtoIpv6InIp:
      return inner_of(kEthIpv6, m.l4_off);
    case kProtoGre: {
      if (m.l4_len < 4) return false;
      const uint16_t flags = rd16(l4);
      if ((flags & 0x4007) != 0) return false;  // routing present, or not version 0
      const std::size_t h = 4 + ((flags & 0x8000) ? 4 : 0) + ((flags & 0x2000) ? 4 : 0) +
                            ((flags & 0x1000) ? 4 : 0);
      return h <= m.l4_len && inner_of(rd16(l4 + 2), m.l4_off + h);
    }
    case kProtoUdp: {
      const uint8_t* u = frame + m.payload_off;
      if (tunnel_udp_port(m.dport) && m.dport != kGenevePort) {  // VXLAN
        if (m.payload_len < 8 || (u[0] & 0x08) == 0) return false;  // the VNI flag
        return inner_of(kEthTransparentBridging, m.payload_off + 8);
      }
      if (m.dport == kGenevePort) {
        if (m.payload_len < 8 || (u[0] >> 6) != 0) return false;  // version 0
        const std::size_t h = 8 + static_cast<std::size_t>(u[0] & 0x3f) * 4;
        return h <= m.payload_len && inner_of(rd16(u + 2), m.payload_off + h);
      }
      return false;
    }
    default:
      return false;
  }
}

}  // namespace

void parse_packet(const uint8_t* frame, std::size_t len, PacketMeta& m) noexcept {
  PlainFrame p;
  if (!parse_plain_ipv4(frame, len, p)) {
    detail::parse_packet_walk(frame, len, m);
    return;
  }
  m = PacketMeta{};
  if (p.proto == kProtoTcp) {
    m.tcp_seq = rd32(frame + kPlainL4Off + 4);
    m.tcp_ack = rd32(frame + kPlainL4Off + 8);
    m.tcp_flags = p.tcp_flags;
  }
  m.family = 4;
  m.proto = p.proto;
  m.l4 = true;
  m.sport = p.sport;
  m.dport = p.dport;
  m.addr_off = kPlainAddrOff;
  m.l4_off = kPlainL4Off;
  m.l4_len = p.l4_len;
  m.payload_off = p.payload_off;
  m.payload_len = p.payload_len;
}

void detail::parse_packet_walk(const uint8_t* frame, std::size_t len, PacketMeta& m) noexcept {
  m = PacketMeta{};
  if (len < 14) {
    m.malformed = true;
    return;
  }
  std::size_t off = 14;
  uint16_t type = rd16(frame + 12);
  if (!walk_l2(frame, len, off, type, m, /*outermost=*/true)) return;
  std::size_t end = len;
  for (unsigned depth = 0;; ++depth) {
    if (type == kEthIpv4) {
      ipv4(frame, off, end - off, m);
    } else if (type == kEthIpv6) {
      ipv6(frame, off, end - off, m);
    } else {
      return;
    }
    std::size_t inner = 0;
    bool ether = false;
    if (!tunnel(frame, m, inner, type, ether)) return;
    if (depth == kMaxTunnels) {  // judged on what is known so far
      m.malformed = true;
      return;
    }
    // The inner packet gives every key but the outermost addresses, which
    // stay keys too; it is bounded by the outer IP packet.
    const PacketMeta outer = m;
    m = PacketMeta{};
    m.vlan = outer.vlan;
    m.tunneled = true;
    m.outer_family = outer.tunneled ? outer.outer_family : outer.family;
    m.outer_addr_off = outer.tunneled ? outer.outer_addr_off : outer.addr_off;
    end = outer.l4_off + outer.l4_len;
    off = inner;
    bool ok = true;
    if (ether) {
      ok = off + 14 <= end;
      if (ok) {
        type = rd16(frame + off + 12);
        off += 14;
        ok = walk_l2(frame, end, off, type, m, /*outermost=*/false);
      }
    }
    if (ok && (type == kEthIpv4 || type == kEthIpv6)) continue;
    // Nothing IP inside what looked like a tunnel (UDP to 4789 that is not
    // VXLAN, say): the packet is the outer one after all.
    if (m.malformed) {
      m = outer;
      m.malformed = true;
    } else {
      m = outer;
    }
    return;
  }
}

void classify_meta(const uint8_t* frame, const PacketMeta& m, PacketKeys& out, const uint8_t* app,
                   std::size_t app_len) noexcept {
  out.n = 0;
  out.malformed = m.malformed;
  out.url_too_long = false;
  out.non_first_fragment = m.non_first_fragment;
  Emitter em(out);
  // The outermost IP header's addresses are keys too, also when the
  // packet inside the tunnel is malformed (no inner addresses): a blocked
  // tunnel endpoint is not reached by wrapping junk.
  if (m.tunneled) {
    const uint8_t* osrc = frame + m.outer_addr_off;
    addresses(m.outer_family, osrc, osrc + (m.outer_family == 4 ? 4 : 16), em);
  }
  if (m.family != 0) {
    const uint8_t* src = frame + m.addr_off;
    const uint8_t* dst = src + m.addr_len();
    addresses(m.family, src, dst, em);
    if (m.l4) {
      em.commit(RuleKind::kFlow, detail::encode_flow_key(em.cursor(), m.family, m.proto, src, m.sport,
                                                         dst, m.dport));
      em.commit(RuleKind::kService,
                detail::encode_service_key(em.cursor(), m.family, m.proto, dst, m.dport));
      if (m.payload_len != 0) {
        if (m.proto == kProtoTcp && m.dport == 53) {  // DNS over TCP: a 2-byte length, then the query
          const uint8_t* pl = app != nullptr ? app : frame + m.payload_off;
          const std::size_t n = app != nullptr ? app_len : m.payload_len;
          if (n > 2) {
            const std::size_t len = rd16(pl);
            app_layer_dns(pl + 2, std::min(len, n - 2), em, out.malformed);
          }
        } else if (app != nullptr) {  // TCP, or a QUIC flow's reassembled ClientHello
          if (app_len != 0) app_layer_tcp(app, app_len, em);
        } else if (m.proto == kProtoTcp) {
          if ((m.tcp_flags & kTcpUrg) != 0) {
            app_layer_tcp_urgent(frame + m.l4_off, frame + m.payload_off, m.payload_len, em);
          } else {
            app_layer_tcp(frame + m.payload_off, m.payload_len, em);
          }
        } else if (m.proto == kProtoUdp && m.dport == 53) {
          app_layer_dns(frame + m.payload_off, m.payload_len, em, out.malformed);
        }
      }
    }
  }
  em.hash_all();
}

void classify(const uint8_t* frame, std::size_t len, PacketKeys& out) noexcept {
  PacketMeta m;
  parse_packet(frame, len, m);
  classify_meta(frame, m, out);
}

}  // namespace cg
