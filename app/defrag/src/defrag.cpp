#include "cuckoogate/defrag/defrag.hpp"

#include <xxhash.h>

#include <cstring>
#include <type_traits>

#include "cuckoogate/keys/classify.hpp"

namespace cg::defrag {
namespace {

static_assert(sizeof(DatagramKey) == 40 && std::has_unique_object_representations_v<DatagramKey>,
              "the key is hashed as bytes");

inline uint16_t rd16(const uint8_t* p) noexcept { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
inline uint32_t rd32(const uint8_t* p) noexcept {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

constexpr uint16_t kEthIpv4 = 0x0800, kEthIpv6 = 0x86DD;
constexpr uint8_t kIpv6Frag = 44;

bool transport_or_none(uint8_t nh) noexcept {
  // TCP, UDP, ICMPv6, SCTP, no next header: nothing behind that could be a
  // fragment header or a tunnel's inner packet (UDP tunnels are checked apart).
  return nh == 6 || nh == 17 || nh == 58 || nh == 132 || nh == 59;
}

}  // namespace

bool detail::maybe_fragment_walk(const uint8_t* frame, std::size_t len) noexcept {
  if (len < 14) return false;  // not IP at all
  std::size_t off = 14;
  uint16_t type = rd16(frame + 12);
  // Up to two VLAN tags inline; deeper stacks, MPLS and PPPoE take the full walk.
  for (int tags = 0; tags < 2 && (type == 0x8100 || type == 0x88A8 || type == 0x9100); ++tags) {
    if (off + 4 > len) return false;  // cut: parse_packet calls it malformed, no fragment either
    type = rd16(frame + off + 2);
    off += 4;
  }
  if (type == kEthIpv4) {
    if (off + 20 > len) return false;
    const uint8_t* ip = frame + off;
    if ((rd16(ip + 6) & 0x3fff) != 0) return true;  // MF or an offset
    const uint8_t proto = ip[9];
    if (proto == 4 || proto == 41 || proto == 47) return true;  // IP in IP, 6in4, GRE
    if (proto == 17) {  // VXLAN, GENEVE
      const std::size_t ihl = static_cast<std::size_t>(ip[0] & 0x0f) * 4;
      if (off + ihl + 4 > len) return false;
      const uint16_t dport = rd16(ip + ihl + 2);
      return tunnel_udp_port(dport);
    }
    return false;
  }
  if (type == kEthIpv6) {
    if (off + 40 > len) return false;
    const uint8_t* ip = frame + off;
    const uint8_t nh = ip[6];
    if (nh == 17) {
      if (off + 44 > len) return false;
      const uint16_t dport = rd16(ip + 42);
      return tunnel_udp_port(dport);
    }
    return !transport_or_none(nh);  // extension headers, IP in IPv6, GRE, ...
  }
  // MPLS, PPPoE and VLAN stacks deeper than two: let the classifier's walk decide.
  return type == 0x8847 || type == 0x8848 || type == 0x8864 || type == 0x8100 || type == 0x88A8 ||
         type == 0x9100;
}

FrameKind classify_frame(const uint8_t* frame, std::size_t len, Fragment* out) noexcept {
  PacketMeta m;
  parse_packet(frame, len, m);
  if (!m.fragmented && !m.non_first_fragment) return FrameKind::kWhole;
  if (m.tunneled) return FrameKind::kUnsupported;  // the inner packet is a fragment
  Fragment f;
  f.key.family = m.family;
  f.key.vlan = m.vlan;
  if (m.family == 4) {
    const std::size_t l3 = m.addr_off - 12;
    const uint8_t* ip = frame + l3;
    const std::size_t ihl = static_cast<std::size_t>(ip[0] & 0x0f) * 4;
    const std::size_t total = rd16(ip + 2);
    // Cut, or a header that does not fit (parse_packet's `malformed` is not
    // used: it also means a transport header the tiny first fragment cuts).
    if (ihl < 20 || total <= ihl || l3 + total > len) return FrameKind::kInvalid;
    const uint16_t fo = rd16(ip + 6);
    f.key.proto = ip[9];
    f.key.id = rd16(ip + 4);
    std::memcpy(f.key.src, ip + 12, 4);
    std::memcpy(f.key.dst, ip + 16, 4);
    f.offset = static_cast<uint32_t>(fo & 0x1fff) * 8;
    f.len = static_cast<uint32_t>(total - ihl);
    f.more = (fo & 0x2000) != 0;
    f.l2_len = static_cast<uint16_t>(l3);
    f.l3_len = static_cast<uint16_t>(ihl);
  } else {
    const std::size_t l3 = m.addr_off - 8;
    const uint8_t* ip = frame + l3;
    // rte_ip_frag reassembles only a fragment header right after the fixed
    // header; per-fragment headers before it (hop-by-hop, routing,
    // destination options) are not supported.
    if (ip[6] != kIpv6Frag) return FrameKind::kUnsupported;
    const std::size_t total = 40 + static_cast<std::size_t>(rd16(ip + 4));
    if (total < 48 || l3 + total > len) return FrameKind::kInvalid;
    const uint8_t* fh = ip + 40;
    const uint16_t fo = rd16(fh + 2);
    f.key.proto = fh[0];
    f.key.id = rd32(fh + 4);
    std::memcpy(f.key.src, ip + 8, 16);
    std::memcpy(f.key.dst, ip + 24, 16);
    f.offset = static_cast<uint32_t>(fo >> 3) * 8;
    f.len = static_cast<uint32_t>(total - 48);
    f.more = (fo & 1) != 0;
    f.l2_len = static_cast<uint16_t>(l3);
    f.l3_len = 48;
  }
  // RFC 791 / 8200: every fragment but the last carries a multiple of 8
  // bytes; none is empty; a datagram ends at or before 65535.
  if (f.len == 0 || (f.more && f.len % 8 != 0) || f.offset + f.len > 65535) return FrameKind::kInvalid;
  *out = f;
  return FrameKind::kFragment;
}

struct Tracker::Slot {
  DatagramKey key;
  uint64_t born = 0;
  uint32_t chain = kNil;             // next slot in the same hash bucket
  uint32_t prev = kNil, next = kNil; // age list; `next` is also the free list
  uint32_t total = kNil;             // end of the datagram once its last fragment came
  uint32_t sum = 0;                  // bytes held
  uint8_t n = 0;                     // fragments held
  bool dead = false;                 // dropped: a tombstone until its timeout
  bool used = false;
  void* ref[kMaxFragments] = {};
  uint32_t off[kMaxFragments] = {}, len[kMaxFragments] = {};
};

Tracker::Tracker(const TrackerConfig& c) : cfg_(c) {
  if (cfg_.datagrams == 0) cfg_.datagrams = 1;
  if (cfg_.fragments == 0) cfg_.fragments = 1;
  slots_ = std::make_unique<Slot[]>(cfg_.datagrams);
  nbuckets_ = 1;
  while (nbuckets_ < cfg_.datagrams) nbuckets_ <<= 1;
  buckets_ = std::make_unique<uint32_t[]>(nbuckets_);
  for (uint32_t b = 0; b < nbuckets_; ++b) buckets_[b] = kNil;
  for (uint32_t s = 0; s < cfg_.datagrams; ++s) slots_[s].next = s + 1 < cfg_.datagrams ? s + 1 : kNil;
  free_ = 0;
}

Tracker::~Tracker() = default;

std::size_t Tracker::memory_bytes() const noexcept {
  return sizeof(Slot) * cfg_.datagrams + sizeof(uint32_t) * nbuckets_;
}

uint32_t Tracker::bucket_of(const DatagramKey& k) const noexcept {
  return static_cast<uint32_t>(XXH3_64bits_withSeed(&k, sizeof k, cfg_.seed)) & (nbuckets_ - 1);
}

uint32_t Tracker::find(const DatagramKey& k, uint32_t b) const noexcept {
  for (uint32_t s = buckets_[b]; s != kNil; s = slots_[s].chain)
    if (slots_[s].key == k) return s;
  return kNil;
}

bool Tracker::expired(uint32_t s, uint64_t now) const noexcept {
  const uint64_t born = slots_[s].born;
  return now >= born && now - born >= cfg_.timeout_ticks;
}

void Tracker::kill(uint32_t s) noexcept { slots_[s].dead = true; }

// Out of its hash chain and the age list, onto the free list.
void Tracker::unlink(uint32_t s) noexcept {
  Slot& x = slots_[s];
  uint32_t* p = &buckets_[bucket_of(x.key)];
  while (*p != s) p = &slots_[*p].chain;
  *p = x.chain;
  (x.prev != kNil ? slots_[x.prev].next : head_) = x.next;
  (x.next != kNil ? slots_[x.next].prev : tail_) = x.prev;
  held_ -= x.n;
  x = Slot{};
  x.next = free_;
  free_ = s;
  --used_;
}

void Tracker::timed_out(uint32_t s) noexcept {
  if (!slots_[s].dead) ++stats_.timeout;
  unlink(s);
}

Add Tracker::add(const Fragment& f, void* ref, uint64_t now, uint32_t* slot) noexcept {
  const uint32_t b = bucket_of(f.key);
  uint32_t s = find(f.key, b);
  // An entry past its timeout that expire() has not reached yet: a
  // tombstone (holds nothing) goes now; a datagram still holding fragments
  // needs the caller's expire() to hand them back, so until then this
  // fragment finds no room (rare: the caller expires before every burst).
  if (s != kNil && expired(s, now)) {
    if (slots_[s].n != 0) {
      ++stats_.full;
      return Add::kFull;
    }
    timed_out(s);
    s = kNil;
  }
  if (s != kNil && slots_[s].dead) return Add::kDead;
  // A new datagram needs a slot and room for its first fragment (a
  // fragment is never the whole datagram, so it cannot complete one alone).
  if (s == kNil && (free_ == kNil || held_ >= cfg_.fragments)) {
    ++stats_.full;
    return Add::kFull;
  }
  const uint32_t end = f.offset + f.len;
  if (s == kNil) {
    s = free_;
    Slot& x = slots_[s];
    free_ = x.next;
    x = Slot{};
    x.used = true;
    x.key = f.key;
    x.born = now;
    x.chain = buckets_[b];
    buckets_[b] = s;
    x.prev = tail_;
    (tail_ != kNil ? slots_[tail_].next : head_) = s;
    tail_ = s;
    ++used_;
  }
  Slot& x = slots_[s];
  *slot = s;
  for (unsigned i = 0; i < x.n; ++i) {
    if (x.off[i] == f.offset && x.len[i] == f.len) {
      // The same bytes again (a duplicate on the wire): kept once, as
      // Linux does. A last fragment duplicated is still the last.
      ++stats_.duplicate;
      return Add::kDuplicate;
    }
  }
  bool bad = false;
  for (unsigned i = 0; i < x.n; ++i) bad = bad || (f.offset < x.off[i] + x.len[i] && x.off[i] < end);
  if (!f.more) {
    bad = bad || (x.total != kNil && x.total != end);
    for (unsigned i = 0; i < x.n; ++i) bad = bad || x.off[i] + x.len[i] > end;
  } else {
    bad = bad || (x.total != kNil && end > x.total);
  }
  if (bad) {
    ++stats_.overlap;
    kill(s);
    return Add::kOverlap;
  }
  if (x.n == kMaxFragments) {
    ++stats_.too_many;
    kill(s);
    return Add::kTooMany;
  }
  // At the bound on held fragments, only one that completes its datagram
  // (and so frees them all) is taken.
  const uint32_t total = f.more ? x.total : end;
  if (held_ >= cfg_.fragments && !(total != kNil && x.sum + f.len == total)) {
    ++stats_.full;
    return Add::kFull;
  }
  x.ref[x.n] = ref;
  x.off[x.n] = f.offset;
  x.len[x.n] = f.len;
  ++x.n;
  ++held_;
  ++stats_.held;
  x.sum += f.len;
  if (!f.more) x.total = end;
  if (x.total != kNil && x.sum == x.total) {  // no overlaps, all inside [0, total): all there
    ++stats_.completed;
    return Add::kComplete;
  }
  return Add::kHeld;
}

std::span<void* const> Tracker::take(uint32_t slot) const noexcept {
  const Slot& x = slots_[slot];
  return {x.ref, x.n};
}

uint32_t Tracker::offset(uint32_t slot, unsigned i) const noexcept { return slots_[slot].off[i]; }

void Tracker::release(uint32_t slot) noexcept {
  Slot& x = slots_[slot];
  if (!x.dead) {
    unlink(slot);
    return;
  }
  held_ -= x.n;  // a tombstone: holds nothing, stays until its timeout
  x.n = 0;
}

}  // namespace cg::defrag
