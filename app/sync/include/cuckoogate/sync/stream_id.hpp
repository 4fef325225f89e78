// A Redis stream entry ID, "<ms>-<seq>", ordered as Redis orders them.
//
// Thread safety: value type, pure functions.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cg::sync {

struct StreamId {
  uint64_t ms = 0;
  uint64_t seq = 0;
  auto operator<=>(const StreamId&) const = default;
  bool is_zero() const noexcept { return ms == 0 && seq == 0; }
  std::string str() const { return std::to_string(ms) + "-" + std::to_string(seq); }
  // "ms-seq" or "ms" (seq 0), decimal, no sign, no spaces; nullopt otherwise.
  static std::optional<StreamId> parse(std::string_view s);
};

}  // namespace cg::sync
