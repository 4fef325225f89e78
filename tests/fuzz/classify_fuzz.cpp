// libFuzzer target for classify(): the input is one raw Ethernet frame.
// libFuzzer hands over a heap buffer of exactly `size` bytes, so ASan flags
// any read past the frame. The header walk and decapsulation chain (VLAN,
// MPLS, PPPoE, IPv6 extensions, GRE, IP-in-IP, VXLAN, GENEVE; seeds from
// gen_classify_corpus) must describe only bytes of the frame, the inner
// packet after the outer one; the output must stay within its bounds,
// every key must carry its kind byte and its hash, and classification is
// deterministic.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "cuckoogate/keys/arrival.hpp"
#include "cuckoogate/keys/classify.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto a = std::make_unique<cg::PacketKeys>();
  static auto b = std::make_unique<cg::PacketKeys>();
  cg::PacketMeta m;
  cg::parse_packet(data, size, m);
  cg::PacketMeta walked;  // the shortcut for plain IPv4 frames must agree with the general walk
  cg::detail::parse_packet_walk(data, size, walked);
  if (!(walked == m)) std::abort();
  if (m.family != 0 && (m.family != 4 && m.family != 6)) std::abort();
  if (m.family != 0 && m.addr_off + 2 * m.addr_len() > size) std::abort();
  if (m.l4 && (m.l4_off < m.addr_off + 2 * m.addr_len() || std::size_t{m.l4_off} + m.l4_len > size)) std::abort();
  if (m.payload_len != 0 && (m.payload_off < m.l4_off || std::size_t{m.payload_off} + m.payload_len > size))
    std::abort();
  // What the stream inspector compares between a client's segments reads
  // only the headers parse_packet found (ASan checks; options end at the data offset).
  if (m.family != 0) (void)cg::ip_ttl(data, m);
  if ((cg::delivery_digest(data, m, 1) != 0) != (m.family != 0 && m.l4)) std::abort();
  if (cg::tcp_option_marks(data, m).marks != 0 && (m.proto != 6 || !m.l4)) std::abort();
  if (m.tunneled) {  // the outermost addresses come before the inner packet
    const std::size_t olen = m.outer_family == 4 ? 4 : 16;
    if ((m.outer_family != 4 && m.outer_family != 6) || m.outer_addr_off + 2 * olen > size) std::abort();
    if (m.family != 0 && m.outer_addr_off + 2 * olen > m.addr_off) std::abort();
  }
  cg::classify(data, size, *a);
  if (a->n > cg::kMaxKeysPerPacket) std::abort();
  for (unsigned i = 0; i < a->n; ++i) {
    const cg::PacketKey& k = a->key[i];
    if (k.len == 0 || std::size_t{k.offset} + k.len > cg::kKeyBytesCapacity) std::abort();
    if (a->key_bytes(i)[0] != static_cast<uint8_t>(k.kind)) std::abort();
    if (k.hash != cg::key_hash(a->key_bytes(i), k.len)) std::abort();
  }
  // Every emitted key decodes to a rule whose rule_key() is the same bytes;
  // address/port rules also survive a round trip through the rule text.
  for (unsigned i = 0; i < a->n; ++i) {
    const auto r = cg::rule_from_key(a->key_bytes(i), a->key[i].len);
    if (!r || r->kind != a->key[i].kind) std::abort();
    const std::string k = cg::rule_key(*r);
    if (k.size() != a->key[i].len || std::memcmp(k.data(), a->key_bytes(i), k.size()) != 0)
      std::abort();
    if (r->kind != cg::RuleKind::kUrl && r->kind != cg::RuleKind::kHost) {
      const cg::RuleParse p = cg::parse_rule(cg::format_rule(*r));
      if (!p.rule || !(*p.rule == *r)) std::abort();
    }
  }
  cg::classify(data, size, *b);
  if (a->n != b->n || a->malformed != b->malformed) std::abort();
  for (unsigned i = 0; i < a->n; ++i) {
    if (a->key[i].len != b->key[i].len ||
        std::memcmp(a->key_bytes(i), b->key_bytes(i), a->key[i].len) != 0)
      std::abort();
  }
  return 0;
}
