// TokenBucket: integer token arithmetic in 1/ticks_per_second units.
#include "cuckoogate/reject/token_bucket.hpp"

#include <algorithm>
#include <limits>

namespace cg::reject {

// capacity_ and every intermediate sum stay below 2^63.
static_assert(TokenBucket::kMaxTokens * TokenBucket::kMaxTicksPerSecond <=
              std::numeric_limits<uint64_t>::max() / 4);

TokenBucket::TokenBucket(uint64_t rate, uint64_t burst, uint64_t ticks_per_second,
                         uint64_t now) noexcept
    : rate_(std::min(rate, kMaxTokens)),
      ticks_per_second_(std::clamp<uint64_t>(ticks_per_second, 1, kMaxTicksPerSecond)),
      capacity_(std::clamp<uint64_t>(burst, 1, kMaxTokens) * ticks_per_second_),
      fill_ticks_(rate_ == 0 ? std::numeric_limits<uint64_t>::max()
                             : (capacity_ + rate_ - 1) / rate_),
      scaled_(capacity_),
      last_(now) {}

void TokenBucket::refill(uint64_t now) noexcept {
  if (now < last_) {  // the clock went back: start again from here
    last_ = now;
    return;
  }
  const uint64_t elapsed = now - last_;
  last_ = now;
  if (elapsed >= fill_ticks_) {
    scaled_ = capacity_;
    return;
  }
  // elapsed < fill_ticks_ <= capacity_ / rate_ + 1, so the product is below
  // capacity_ + rate_: no overflow however long the bucket sat idle.
  scaled_ = std::min(capacity_, scaled_ + elapsed * rate_);
}

bool TokenBucket::allow(uint64_t now, uint64_t cost) noexcept {
  refill(now);
  if (cost <= kMaxTokens && scaled_ >= cost * ticks_per_second_) {
    scaled_ -= cost * ticks_per_second_;
    ++allowed_;
    return true;
  }
  ++suppressed_;
  return false;
}

}  // namespace cg::reject
