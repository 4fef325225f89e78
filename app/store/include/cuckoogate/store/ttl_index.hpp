// Expiry index: the (deadline, key) pairs of rules with a time to live, in
// deadline order, on top of SkipListMap. The clock is not read here: callers
// pass `now` (the RuleStore injects its clock), so tests control time.
//
// Deadlines are milliseconds since the Unix epoch (signed). The index key is
// 8 bytes of the deadline, big-endian with the sign bit flipped (so byte order
// equals numeric order), followed by the rule key.
//
// Thread-safety: all functions may be called concurrently (lock-free). An
// entry is returned by pop_due() to exactly one caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cuckoogate/store/skiplist_map.hpp"

namespace cg::store {

class TtlIndex {
 public:
  explicit TtlIndex(std::uint64_t seed = 0x5851f42d4c957f2dULL, EpochDomain* domain = nullptr)
      : map_(seed, domain) {}

  // Adds (deadline, key). False if that exact pair is already scheduled.
  bool schedule(std::int64_t deadline_ms, std::string_view key);
  // Removes (deadline, key). False if it was not scheduled.
  bool cancel(std::int64_t deadline_ms, std::string_view key);

  // Removes and returns up to `max` entries with deadline <= now_ms, earliest
  // first, as (deadline, key).
  std::vector<std::pair<std::int64_t, std::string>> pop_due(std::int64_t now_ms,
                                                            std::size_t max = SIZE_MAX);

  // Earliest scheduled deadline, if any.
  std::optional<std::int64_t> next_deadline() const;
  std::size_t size() const noexcept { return map_.size(); }
  std::size_t memory_bytes() const noexcept { return map_.memory_bytes(); }  // estimate, see SkipListMap

  static std::string encode(std::int64_t deadline_ms, std::string_view key);
  static std::int64_t decode_deadline(std::string_view index_key);

 private:
  struct Empty {};
  SkipListMap<Empty> map_;
};

}  // namespace cg::store
