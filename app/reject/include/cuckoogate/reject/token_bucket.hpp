// A token bucket that limits how many reject replies a worker sends: `rate`
// tokens per second, at most `burst` saved up, starting full. Time is the
// caller's tick count (the TSC the burst loop already reads, or a fake clock
// in tests) with its ticks per second; the bucket reads no clock itself.
//
// Thread-safety: none; one bucket per worker, used by that worker only.
// Never allocates, never throws; integer arithmetic without overflow for
// rates and bursts up to kMaxTokens and clocks up to kMaxTicksPerSecond
// (larger arguments are clamped to those).
#pragma once

#include <cstdint>

namespace cg::reject {

class TokenBucket {
 public:
  static constexpr uint64_t kMaxTokens = 1'000'000;           // rate per second and burst
  static constexpr uint64_t kMaxTicksPerSecond = 1'000'000'000'000;  // 1 THz

  // rate 0: nothing beyond the first `burst`, ever. burst 0 is taken as 1;
  // ticks_per_second 0 as 1. `now` is the current tick count.
  TokenBucket(uint64_t rate, uint64_t burst, uint64_t ticks_per_second, uint64_t now) noexcept;

  // Takes `cost` tokens at tick `now` if the bucket holds that many (true),
  // else takes none (false). A `now` earlier than the last one seen adds
  // nothing and becomes the new reference (a clock that went back). Each
  // call is counted once, as allowed or suppressed, whatever its cost.
  bool allow(uint64_t now, uint64_t cost = 1) noexcept;

  uint64_t allowed() const noexcept { return allowed_; }
  uint64_t suppressed() const noexcept { return suppressed_; }
  // Whole tokens held after the last allow() (or construction).
  uint64_t tokens() const noexcept { return scaled_ / ticks_per_second_; }

 private:
  void refill(uint64_t now) noexcept;

  // Tokens are counted in 1/ticks_per_second_ units, so one tick adds
  // exactly rate_ units: no division and no rounding drift.
  uint64_t rate_;
  uint64_t ticks_per_second_;
  uint64_t capacity_;    // burst * ticks_per_second_
  uint64_t fill_ticks_;  // ticks from empty to full (all ticks when rate_ is 0)
  uint64_t scaled_;
  uint64_t last_;
  uint64_t allowed_ = 0;
  uint64_t suppressed_ = 0;
};

}  // namespace cg::reject
