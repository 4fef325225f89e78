// The rule language: parsing, canonical text, canonical key encoding and the
// key hash shared by rule insertion (control plane) and packet lookup (data
// plane). The language and the encodings are specified in docs/rules.md.
//
// Thread safety: every function here is pure (no shared state) and may be
// called from any thread. parse_*/format_rule/rule_key/rule_order_key
// allocate and are meant for the control plane; key_hash/key_hash128 are
// allocation-free and safe on the data path.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cg {

enum class RuleKind : uint8_t { kFlow = 1, kSrc, kDst, kIp, kService, kUrl, kHost };

// A rule's own action (`action=` after it in an add, docs/rules.md): what the
// workers do with a packet it blocks. kDefault follows the gateway's
// --action. Not part of the rule (its key): the blocklist keeps it per
// hit-counter slot (Blocklist::slot_actions), the rule store as a byte.
enum class RuleAction : uint8_t { kDefault = 0, kDrop = 1, kReject = 2 };
// "drop" / "reject" (nullopt for anything else, "default" included: it is
// what no action= gives); and the word of an action ("" for kDefault or a
// byte that is no action).
std::optional<RuleAction> rule_action_named(std::string_view word) noexcept;
std::string_view rule_action_name(RuleAction a) noexcept;
inline constexpr std::size_t kRuleKindCount = 7;

// "flow", "src", "dst", "ip", "service", "url", "host"; "" for a value outside
// the enum.
std::string_view kind_name(RuleKind) noexcept;
// Inverse of kind_name (exact, lower-case match).
std::optional<RuleKind> kind_from_name(std::string_view) noexcept;

// Longest canonical url text (host[:port]/path?query) a rule may have. A
// packet URL longer than this cannot equal any rule, so classify() does not
// emit it (see PacketKeys::url_too_long).
inline constexpr std::size_t kMaxUrlLen = 2048;
// Longest host name (text form, without trailing dot), as in DNS.
inline constexpr std::size_t kMaxNameLen = 253;

// An IPv4 or IPv6 address in network byte order. IPv4 uses bytes[0..3] and
// leaves the rest zero, so defaulted comparison is meaningful.
struct IpAddr {
  uint8_t family = 0;                 // 4 or 6 (0: unset)
  std::array<uint8_t, 16> bytes{};
  std::size_t size() const noexcept { return family == 4 ? 4 : 16; }
  friend bool operator==(const IpAddr&, const IpAddr&) = default;
};

// Parses an address as inet_pton does (IPv4 dotted quad or IPv6 text; an
// IPv4-mapped IPv6 address stays IPv6). No brackets, no port, no scope id.
std::optional<IpAddr> parse_address(std::string_view text);
// inet_ntop text of the address ("" for an unset address).
std::string format_address(const IpAddr&);

// IP protocol numbers that have names in rule text.
inline constexpr uint8_t kProtoIcmp = 1, kProtoTcp = 6, kProtoUdp = 17,
                         kProtoIcmpv6 = 58, kProtoSctp = 132;
// True for tcp, udp and sctp: flow/service rules and keys carry ports.
constexpr bool proto_has_ports(uint8_t proto) noexcept {
  return proto == kProtoTcp || proto == kProtoUdp || proto == kProtoSctp;
}

// One rule, in canonical form (parse_rule canonicalises; two rules that
// canonicalise alike compare equal). Fields not used by a kind stay zero/empty:
//   kFlow     proto, src, sport, dst, dport (ports 0 when !proto_has_ports)
//   kSrc      addr          kDst  addr          kIp  addr
//             (+ prefix_len for a CIDR prefix: addr has its host bits clear)
//   kService  proto, addr (destination), dport (0 when !proto_has_ports)
//   kUrl      name = canonical url text "host[:port]/path?query"
//   kHost     name = canonical host name (lower case, no trailing dot)
struct Rule {
  RuleKind kind = RuleKind::kFlow;
  uint8_t proto = 0;
  uint16_t sport = 0;
  uint16_t dport = 0;
  IpAddr src;
  IpAddr dst;
  IpAddr addr;
  std::string name;
  // kSrc/kDst/kIp only: set for a CIDR prefix rule, always shorter than the
  // address (0-31 for IPv4, 0-127 for IPv6); a full-length prefix is the
  // exact address rule and leaves this empty.
  std::optional<uint8_t> prefix_len;
  friend bool operator==(const Rule&, const Rule&) = default;
};

// Bits of an address of this family: 32 or 128.
constexpr unsigned address_bits(uint8_t family) noexcept { return family == 4 ? 32 : 128; }
// a with every bit past the first `len` cleared (len <= address_bits).
IpAddr mask_address(const IpAddr& a, unsigned len) noexcept;

// Where and why a rule did not parse. line and column are 1-based; column
// counts bytes of the line.
struct ParseError {
  std::size_t line = 0, column = 0;
  std::string expected;
  // "line 3, column 10: expected port number after ':'"
  std::string message() const;
};

struct RuleParse {
  std::optional<Rule> rule;  // empty => error is set
  ParseError error;
};

// The whitespace between a rule's words: space, tab, CR, VT and FF.
// Formats that split lines into words before handing them to parse_rule
// (the feed formats) split on exactly these, so no word they look at can
// change when parse_rule strips it.
inline constexpr bool is_rule_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

// Parses one rule. Surrounding whitespace (is_rule_space) and a '#' comment
// (which runs to the end of the text) are ignored; anything else must be a
// complete rule. `line` is only copied into the error.
RuleParse parse_rule(std::string_view text, std::size_t line = 1);

struct RuleFileParse {
  std::vector<Rule> rules;          // in file order, duplicates removed
  std::vector<ParseError> errors;   // every bad line, in file order
};

// Parses a rule file: one rule per line ('\n' or "\r\n"), '#' comments, blank
// lines ignored. When a line is bad and !skip_bad, `rules` is empty (nothing
// is half-applied) and `errors` lists every bad line; with skip_bad the good
// lines are returned as well.
RuleFileParse parse_rules(std::string_view file_text, bool skip_bad);

// Canonical text of a rule; parse_rule(format_rule(r)).rule == r.
std::string format_rule(const Rule&);

// Canonical binary key encoding (kind byte first), exactly the bytes classify()
// emits for a packet that matches the rule. A prefix rule's encoding is the
// one the workers' prefix probe builds from a packet's address (see
// encode_prefix_key). See docs/rules.md.
std::string rule_key(const Rule&);

// Inverse of rule_key(): the rule whose encoding `data` is, e.g. to name the
// key a packet matched. nullopt when the bytes are not a well-formed encoding.
// For url/host keys taken from packets the name is the packet's bytes, which
// format_rule() prints but parse_rule() may refuse (odd characters).
std::optional<Rule> rule_from_key(const void* data, std::size_t len);

// Bytes whose lexicographic order is the listing order of rules: kind, then
// addresses numerically (family, then big-endian bytes), host names compared
// label by label from the top-level domain, urls bytewise. See docs/rules.md.
std::string rule_order_key(const Rule&);
// The same bytes appended to *out (a bulk load keeps every key in one buffer).
void append_rule_order_key(const Rule&, std::string* out);
// Inverse of rule_order_key(): the rule whose listing-order key `key` is, or
// nullopt when the bytes are not one rule_order_key() produces. The rule
// store keeps only this key per rule; the rule (and its canonical text,
// format_rule) is rebuilt from it, not stored a second time.
std::optional<Rule> rule_from_order_key(std::string_view key);
// rule_key() of the rule whose listing-order key `order` is, into *out
// (replaced; its capacity reused), without building the Rule's name: what a
// bulk load needs per new rule for the lookup tables. False (and *out
// unspecified) exactly when rule_from_order_key(order) is nullopt.
bool rule_key_of_order_key(std::string_view order, std::string* out);

// Longest prefix-rule encoding: [kind][family | kPrefixFamilyBit][len][address].
inline constexpr std::size_t kPrefixKeyMax = 1 + 1 + 1 + 16;
inline constexpr uint8_t kPrefixFamilyBit = 0x80;
// Writes the encoding of the prefix of length `len` that covers `addr`
// (4 or 16 bytes, network order) into out (kPrefixKeyMax bytes); returns its
// length. Allocation-free: the data path probes with it.
std::size_t encode_prefix_key(uint8_t* out, RuleKind kind, uint8_t family, const uint8_t* addr,
                              unsigned len) noexcept;

// The filter hash of a key encoding, the same on rule insertion and packet
// lookup. For an address key (src, dst or ip of one address: [kind][4|6]
// [address]) it is the hash of the address alone, bytes 1.., with its own
// seed: a packet's src, dst and ip keys of one address share one filter
// entry's place and fingerprint, so one probe answers for all three and the
// exact set (key_hash128, over the whole encoding) tells the kinds apart
// (docs/rules.md, "Key encoding"). Every other encoding, prefix keys
// included, is hashed whole (XXH3_64bits, seed 0): its kind is folded in
// through the first byte.
uint64_t key_hash(const void* data, std::size_t len) noexcept;

inline constexpr bool is_address_kind(RuleKind k) noexcept {
  return k == RuleKind::kSrc || k == RuleKind::kDst || k == RuleKind::kIp;
}
// An exact address key, [src|dst|ip][4|6][address]: key_hash() hashes its
// address alone, one hash for the three kinds. (A prefix key's family byte
// has kPrefixFamilyBit: its hash covers the whole encoding, kind included.)
inline bool is_shared_address_key(const void* data, std::size_t len) noexcept {
  const auto* p = static_cast<const uint8_t*>(data);
  return (len == 2 + 4 || len == 2 + 16) && is_address_kind(static_cast<RuleKind>(p[0])) && p[1] == (len == 6 ? 4 : 6);
}
// Where there is no exact set to tell the kinds apart (pure-filter mode, no
// verify), each address kind gets its own filter entry: key_hash() of an
// exact address key (is_shared_address_key) XOR a constant of the kind
// (distinct place and fingerprint; a bijection, so the hashes stay uniform).
// Identity for every other kind. Only for exact address keys: a prefix key's
// hash has its kind already, and the workers' prefix probe does not salt.
inline uint64_t kind_keyed_hash(uint64_t h, RuleKind k) noexcept {
  constexpr uint64_t kSalt[] = {0x8f14e45fceea167aULL, 0x3c59dc048e885024ULL, 0xd2d2d2b5a4f5c3e1ULL};
  return is_address_kind(k) ? h ^ kSalt[static_cast<unsigned>(k) - static_cast<unsigned>(RuleKind::kSrc)] : h;
}

struct Key128 {
  uint64_t lo, hi;
  friend bool operator==(const Key128&, const Key128&) = default;
};
// XXH3_128bits (seed 0) of a key encoding, for exact confirmation of hits.
Key128 key_hash128(const void* data, std::size_t len) noexcept;

}  // namespace cg
