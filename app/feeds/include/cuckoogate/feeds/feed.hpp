// Feed formats: the files blocklists are published in, turned into rules of
// the rule language (docs/rules.md, "Feed formats").
//
//   rules    the rule language itself (parse_rules)
//   hosts    hosts files: `ADDRESS NAME [NAME...]`, '#' comments; every NAME
//            becomes `host NAME`, except the names a hosts file maps for the
//            machine itself (is_hosts_skip_name)
//   domains  one host name per line, '#' comments: `host NAME`
//   cidr     one address or prefix per line, '#' or ';' comments (Spamhaus
//            DROP, FireHOL netsets): `KIND ADDR[/LEN]`, KIND src, dst or ip
//
// Every produced rule goes through parse_rule, so a feed can never hold what
// the rule language refuses, and the rule language's canonical forms apply.
// Errors are ParseErrors whose line and column point into the feed's line.
//
// Thread safety: pure functions, no shared state. They allocate (control
// plane and CLI only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cuckoogate/keys/rule.hpp"

namespace cg::feeds {

enum class Format : uint8_t { kRules, kHosts, kDomains, kCidr };

// "rules", "hosts", "domains", "cidr" and back (exact, lower case).
std::string_view format_name(Format) noexcept;
std::optional<Format> format_from_name(std::string_view) noexcept;
// The rule kind a cidr feed's lines become: "src", "dst" or "ip".
std::optional<RuleKind> cidr_kind_from_name(std::string_view) noexcept;

struct Options {
  Format format = Format::kRules;
  RuleKind cidr_kind = RuleKind::kIp;  // kCidr only: kSrc, kDst or kIp
};

// True for the names a hosts file maps to the machine itself, which a hosts
// feed never turns into rules (ASCII case-insensitive): localhost,
// localhost.localdomain, localhost4, localhost4.localdomain4, localhost6,
// localhost6.localdomain6, local, broadcasthost, 0.0.0.0 and every one-label
// name starting with "ip6-" (ip6-localhost, ip6-loopback, ip6-allnodes, ...).
bool is_hosts_skip_name(std::string_view name) noexcept;

// Parses one line of a feed (without its '\n'; a trailing '\r' is blank).
// Appends the line's rules to *out (none for a blank or comment line) and
// returns true; or returns false with *err set (line = `line`) and appends
// nothing: a line is taken whole or not at all.
bool parse_feed_line(const Options& o, std::string_view text, std::size_t line,
                     std::vector<Rule>* out, ParseError* err);

// `text` without the UTF-8 byte-order mark an editor may have put at the
// start of a file (EF BB BF): callers that read a feed line by line strip it
// from line 1; parse_feed strips it itself.
inline std::string_view skip_bom(std::string_view text) noexcept {
  return text.substr(0, 3) == "\xEF\xBB\xBF" ? text.substr(3) : text;
}

// Parses a whole feed (after a byte-order mark: skip_bom), lines split at '\n' and numbered from 1, as
// parse_rules does: every bad line is reported; without skip_bad a feed with
// any bad line yields no rules (nothing is half-applied); rules that
// canonicalise alike are returned once (first occurrence kept).
RuleFileParse parse_feed(std::string_view text, const Options& o, bool skip_bad);

// One progress line for a bulk load ("12345 rules, 230000 rules/s, 42%, ETA
// 3 s"): `done` rules sent in `elapsed_s` seconds; with total_bytes > 0 the
// share of the input read so far (done_bytes) and the time left at the rate
// so far. Without bytes (a pipe) only the count and the rate.
std::string progress_text(std::size_t done, double elapsed_s, std::size_t done_bytes,
                          std::size_t total_bytes);

}  // namespace cg::feeds
