#include "gateway/rule_files.hpp"

#include <algorithm>
#include <iterator>

#include "gateway/file_read.hpp"

namespace cg {
namespace {

// Bad lines listed per file; a binary file passed by mistake would otherwise
// print one error for each of its lines.
constexpr std::size_t kMaxErrorsShown = 20;

}  // namespace

bool read_rule_files(const std::vector<std::string>& files, std::vector<Rule>& out, std::string* err) {
  std::vector<SetRules> sets;
  if (!read_rule_files(files, {}, sets, err)) return false;
  for (SetRules& s : sets) out.insert(out.end(), std::make_move_iterator(s.rules.begin()), std::make_move_iterator(s.rules.end()));
  return true;
}

bool read_rule_files(const std::vector<std::string>& files, const std::vector<RuleFeedConfig>& feeds,
                     std::vector<SetRules>& out, std::string* err) {
  std::vector<RuleFeedConfig> all_files;
  for (const std::string& f : files) all_files.push_back({f, {}, {}});
  all_files.insert(all_files.end(), feeds.begin(), feeds.end());
  std::vector<SetRules> all;
  std::string problems;
  for (const RuleFeedConfig& spec : all_files) {
    const std::string& f = spec.path;
    std::string text, why;
    if (!read_regular_file(f, "rule file", kMaxRuleFileBytes, text, &why)) {
      problems += why + "\n";
      continue;
    }
    RuleFileParse p = feeds::parse_feed(text, spec.feed, /*skip_bad=*/false);
    const std::size_t shown = std::min(p.errors.size(), kMaxErrorsShown);
    for (std::size_t i = 0; i < shown; ++i) {
      const ParseError& e = p.errors[i];
      problems += f + ":" + std::to_string(e.line) + ":" + std::to_string(e.column) + ": expected " +
                  e.expected + "\n";
    }
    if (p.errors.size() > shown)
      problems += f + ": " + std::to_string(p.errors.size() - shown) + " more bad lines\n";
    auto into = std::find_if(all.begin(), all.end(), [&](const SetRules& s) { return s.set == spec.set; });
    if (into == all.end()) into = all.insert(all.end(), SetRules{spec.set, {}});
    into->rules.insert(into->rules.end(), std::make_move_iterator(p.rules.begin()),
                       std::make_move_iterator(p.rules.end()));
  }
  if (!problems.empty()) {
    problems.pop_back();
    *err = problems;
    return false;
  }
  out.insert(out.end(), std::make_move_iterator(all.begin()), std::make_move_iterator(all.end()));
  return true;
}

}  // namespace cg
