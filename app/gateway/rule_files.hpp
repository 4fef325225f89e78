// Reading blocklist files at start-up (all or nothing).
#pragma once

#include <string>
#include <vector>

#include "cuckoogate/keys/rule.hpp"

namespace cg {

// Reads and parses every file. On any unreadable file or bad line, returns
// false with *err naming every problem as "FILE:LINE:COLUMN: expected ..."
// and leaves `out` untouched.
bool read_rule_files(const std::vector<std::string>& files, std::vector<Rule>& out, std::string* err);

}  // namespace cg
