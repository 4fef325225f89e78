// libFuzzer target for the rule parser. Beyond "no crash, no UB", it checks
// the round trip on every rule that parses: parse(format(r)) == r with the
// same key encoding, and that a file with errors applies nothing unless
// skip_bad was asked for.
#include <cstdint>
#include <cstdlib>
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
    (void)cg::rule_order_key(r);
  }
  // A single line through parse_rule with an arbitrary line number.
  const cg::RuleParse one = cg::parse_rule(text.substr(0, text.find('\n')), 42);
  if (!one.rule && one.error.line != 42) std::abort();
  return 0;
}
