// Reading blocklist files at start-up (all or nothing).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cuckoogate/keys/rule.hpp"
#include "gateway/config.hpp"

namespace cg {

// The largest rule file read: 1 GiB, ten million rules of up to ~100
// characters a line. Larger files are refused, not truncated.
inline constexpr std::size_t kMaxRuleFileBytes = std::size_t{1} << 30;

// Reads and parses every file. Each must be a regular file of at most
// kMaxRuleFileBytes (read_regular_file in gateway/file_read.hpp: a directory,
// FIFO or device is an error, never an empty file or a hang); "-" is not
// stdin here but a file of that name, since rules at start-up come from
// files named on the command line or in the configuration (a pipe can feed a
// running gateway through `cuckoogatectl load -`).
//
// On any unreadable file or bad line, returns false with *err naming every
// problem, one a line ("FILE: is a directory", "FILE:LINE:COLUMN: expected
// ..."; after 20 bad lines of one file, "FILE: N more bad lines"), and
// leaves `out` untouched.
bool read_rule_files(const std::vector<std::string>& files, std::vector<Rule>& out, std::string* err);

// The rules of one named set ("": the default set).
struct SetRules {
  std::string set;
  std::vector<Rule> rules;
};

// The same for files in a feed format ([[rules]] in the configuration,
// docs/rules.md "Feed formats"): `files` in the rule language, then `feeds`,
// each in its own format and into its own set ([[rules]] set = ...),
// grouped by set in the order the sets first appear; errors as above.
bool read_rule_files(const std::vector<std::string>& files, const std::vector<RuleFeedConfig>& feeds,
                     std::vector<SetRules>& out, std::string* err);

}  // namespace cg
