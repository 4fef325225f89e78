// libFuzzer target for the rule parser. Beyond "no crash, no UB", it checks
// parse_address's IPv4 reader against inet_pton, and
// the round trip on every rule that parses: parse(format(r)) == r with the
// same key encoding, the listing-order key inverts (rule_from_order_key,
// also fed the raw bytes) and gives the rule's key (rule_key_of_order_key), and that a file with errors applies nothing unless
// skip_bad was asked for. For CIDR prefix rules: the length is shorter than
// the address, no host bit is set, the key inverts, and every address inside
// the prefix (here: the network with all host bits set) probes to the key.
#include <arpa/inet.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "cuckoogate/keys/rule.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const cg::RuleFileParse strict = cg::parse_rules(text, false);
  const cg::RuleFileParse lenient = cg::parse_rules(text, true);
  if (!strict.errors.empty() && !strict.rules.empty()) std::abort();
  if (strict.errors.size() != lenient.errors.size()) std::abort();
  if (strict.errors.empty() && strict.rules != lenient.rules) std::abort();
  for (const cg::ParseError& e : lenient.errors) {
    if (e.line == 0 || e.column == 0 || e.expected.empty()) std::abort();
  }
  for (const cg::Rule& r : lenient.rules) {
    const std::string canonical = cg::format_rule(r);
    const cg::RuleParse again = cg::parse_rule(canonical);
    if (!again.rule || !(*again.rule == r)) std::abort();
    if (cg::format_rule(*again.rule) != canonical) std::abort();
    const std::string key = cg::rule_key(r);
    if (key.empty() || static_cast<uint8_t>(key[0]) != static_cast<uint8_t>(r.kind)) std::abort();
    if (cg::rule_key(*again.rule) != key) std::abort();
    const std::string order = cg::rule_order_key(r);
    const auto from_order = cg::rule_from_order_key(order);
    if (!from_order || !(*from_order == r)) std::abort();
    std::string lookup;
    if (!cg::rule_key_of_order_key(order, &lookup) || lookup != key) std::abort();
    if (r.prefix_len) {
      const unsigned len = *r.prefix_len, bits = cg::address_bits(r.addr.family);
      if (len >= bits || cg::mask_address(r.addr, len) != r.addr) std::abort();
      const auto back = cg::rule_from_key(key.data(), key.size());
      if (!back || !(*back == r)) std::abort();
      cg::IpAddr top = r.addr;  // the last address inside the prefix
      for (unsigned b = len; b < bits; ++b) top.bytes[b / 8] = static_cast<uint8_t>(top.bytes[b / 8] | (0x80u >> (b % 8)));
      uint8_t buf[cg::kPrefixKeyMax];
      const std::size_t n = cg::encode_prefix_key(buf, r.kind, r.addr.family, top.bytes.data(), len);
      if (std::string_view(reinterpret_cast<const char*>(buf), n) != key) std::abort();
    }
  }
  // The raw bytes as a stored order key: refused, or exactly what the rule re-encodes to.
  const auto k = cg::rule_from_order_key(text);
  if (k && cg::rule_order_key(*k) != text) std::abort();
  // ... and rule_key_of_order_key refuses it too, or gives that rule's lookup key.
  std::string lookup;
  if (cg::rule_key_of_order_key(text, &lookup) != k.has_value() || (k && lookup != cg::rule_key(*k))) std::abort();
  // parse_address's own IPv4 reader against inet_pton (text without ':' or
  // NUL, which inet_pton would stop at).
  if (text.size() < 46 && text.find(':') == std::string_view::npos && text.find('\0') == std::string_view::npos) {
    const std::string z(text);
    uint8_t want[4];
    const bool ok = inet_pton(AF_INET, z.c_str(), want) == 1;
    const auto got = cg::parse_address(text);
    if (got.has_value() != ok || (ok && (got->family != 4 || std::memcmp(got->bytes.data(), want, 4) != 0))) std::abort();
  }
  // A single line through parse_rule with an arbitrary line number.
  const cg::RuleParse one = cg::parse_rule(text.substr(0, text.find('\n')), 42);
  if (!one.rule && one.error.line != 42) std::abort();
  return 0;
}
