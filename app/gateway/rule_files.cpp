#include "gateway/rule_files.hpp"

#include <fstream>
#include <sstream>

namespace cg {

bool read_rule_files(const std::vector<std::string>& files, std::vector<Rule>& out, std::string* err) {
  std::vector<Rule> all;
  std::string problems;
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      problems += f + ": cannot open rule file\n";
      continue;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    RuleFileParse p = parse_rules(ss.str(), /*skip_bad=*/false);
    for (const ParseError& e : p.errors)
      problems += f + ":" + std::to_string(e.line) + ":" + std::to_string(e.column) + ": expected " +
                  e.expected + "\n";
    all.insert(all.end(), p.rules.begin(), p.rules.end());
  }
  if (!problems.empty()) {
    problems.pop_back();
    *err = problems;
    return false;
  }
  out.insert(out.end(), all.begin(), all.end());
  return true;
}

}  // namespace cg
