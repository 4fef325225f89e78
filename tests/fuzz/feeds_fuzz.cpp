// libFuzzer target for the feed formats (hosts, domains, cidr; docs/rules.md,
// "Feed formats"). The first byte picks the format and the cidr kind, the
// rest is the feed. Beyond "no crash, no UB": a feed with errors yields no
// rules unless skip_bad; every error names a line and a column inside it;
// every rule produced is canonical (parse(format(r)) == r); a line's rules
// are all or nothing; a hosts feed never produces a skipped name.
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "cuckoogate/feeds/feed.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  cg::feeds::Options o;
  o.format = static_cast<cg::feeds::Format>(data[0] % 4);
  o.cidr_kind = data[0] & 0x10 ? cg::RuleKind::kSrc : (data[0] & 0x20 ? cg::RuleKind::kDst : cg::RuleKind::kIp);
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const cg::RuleFileParse strict = cg::feeds::parse_feed(text, o, false);
  const cg::RuleFileParse lenient = cg::feeds::parse_feed(text, o, true);
  if (!strict.errors.empty() && !strict.rules.empty()) std::abort();
  if (strict.errors.size() != lenient.errors.size()) std::abort();
  if (strict.errors.empty() && strict.rules != lenient.rules) std::abort();
  for (const cg::ParseError& e : lenient.errors)
    if (e.line == 0 || e.column == 0 || e.expected.empty()) std::abort();
  for (const cg::Rule& r : lenient.rules) {
    const cg::RuleParse again = cg::parse_rule(cg::format_rule(r));
    if (!again.rule || !(*again.rule == r)) std::abort();
    if (o.format == cg::feeds::Format::kHosts &&
        (r.kind != cg::RuleKind::kHost || cg::feeds::is_hosts_skip_name(r.name)))
      std::abort();
    if (o.format == cg::feeds::Format::kDomains && r.kind != cg::RuleKind::kHost) std::abort();
    if (o.format == cg::feeds::Format::kCidr && r.kind != o.cidr_kind) std::abort();
  }
  // The first line alone: a failed line appends nothing.
  std::vector<cg::Rule> out;
  cg::ParseError e;
  const std::string_view first = text.substr(0, text.find('\n'));
  if (!cg::feeds::parse_feed_line(o, first, 1, &out, &e) && (!out.empty() || e.column == 0 || e.line != 1))
    std::abort();
  (void)cg::feeds::progress_text(size, static_cast<double>(data[0]) / 7, size / 2, size);
  return 0;
}
