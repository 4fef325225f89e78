// Helpers shared by the keys tests: classify a frame and ask whether a rule
// (given as text) would match it, i.e. whether some emitted key has the rule's
// exact encoding, kind and hash.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cuckoogate/keys/classify.hpp"
#include "cuckoogate/keys/rule.hpp"
#include "packet_builder.hpp"

namespace cg::test {

inline Rule rule(std::string_view text) {
  RuleParse p = parse_rule(text);
  if (!p.rule) ADD_FAILURE() << "rule '" << text << "': " << p.error.message();
  return p.rule.value_or(Rule{});
}

struct Classified {
  std::unique_ptr<PacketKeys> keys = std::make_unique<PacketKeys>();

  std::string bytes(unsigned i) const {
    return std::string(reinterpret_cast<const char*>(keys->key_bytes(i)), keys->key[i].len);
  }
  bool has(const Rule& r) const {
    const std::string k = rule_key(r);
    for (unsigned i = 0; i < keys->n; ++i) {
      if (bytes(i) == k) {
        EXPECT_EQ(keys->key[i].kind, r.kind);
        EXPECT_EQ(keys->key[i].hash, key_hash(k.data(), k.size()));
        return true;
      }
    }
    return false;
  }
  bool matches(std::string_view rule_text) const { return has(rule(rule_text)); }
  unsigned count(RuleKind kind) const {
    unsigned c = 0;
    for (unsigned i = 0; i < keys->n; ++i) c += keys->key[i].kind == kind;
    return c;
  }
  bool malformed() const { return keys->malformed; }
};

inline Classified classify_frame(const Bytes& f) {
  Classified c;
  // A copy of exactly len bytes on the heap, so ASan catches any overread.
  std::unique_ptr<uint8_t[]> copy(new uint8_t[f.size() + (f.empty() ? 1 : 0)]);
  std::copy(f.begin(), f.end(), copy.get());
  classify(copy.get(), f.size(), *c.keys);
  return c;
}

}  // namespace cg::test
