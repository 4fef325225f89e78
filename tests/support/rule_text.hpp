// A rule from its text, in tests: a text that does not parse fails the
// running test (and gives an empty rule) instead of stopping the program.
#pragma once

#include <gtest/gtest.h>

#include <string_view>

#include "cuckoogate/keys/rule.hpp"

namespace cg::test {

inline Rule R(std::string_view text) {
  RuleParse p = parse_rule(text);
  if (!p.rule) ADD_FAILURE() << text << ": " << p.error.message();
  return p.rule.value_or(Rule{});
}

}  // namespace cg::test
