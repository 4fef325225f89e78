#include "cuckoogate/store/epoch.hpp"

#include <functional>
#include <utility>
#include <thread>

namespace cg::store {

EpochDomain::Guard& EpochDomain::Guard::operator=(Guard&& o) noexcept {
  if (this != &o) {
    release();
    dom_ = o.dom_;
    slot_ = o.slot_;
    o.dom_ = nullptr;
  }
  return *this;
}

void EpochDomain::Guard::release() noexcept {
  if (dom_ != nullptr) {
    dom_->unpin(slot_);
    dom_ = nullptr;
  }
}

EpochDomain::~EpochDomain() {
  for (auto& l : retired_) free_list(l.exchange(nullptr, std::memory_order_acquire));
}

std::size_t EpochDomain::free_list(Retirable* r) noexcept {
  std::size_t n = 0;
  while (r != nullptr) {
    Retirable* next = r->retire_next;
    r->reclaim(r);
    r = next;
    ++n;
  }
  return n;
}

EpochDomain::Guard EpochDomain::pin() noexcept {
  // Start the slot search at a per-thread hint so threads rarely collide.
  thread_local std::size_t hint = std::hash<std::thread::id>{}(std::this_thread::get_id());
  for (;;) {
    for (std::size_t i = 0; i < kSlots; ++i) {
      const std::size_t idx = (hint + i) % kSlots;
      std::uint64_t expected = 0;
      if (slots_[idx].state.load(std::memory_order_relaxed) != 0) continue;
      const std::uint64_t e = global_.load(std::memory_order_seq_cst);
      if (slots_[idx].state.compare_exchange_strong(expected, (e << 1) | 1U,
                                                    std::memory_order_seq_cst,
                                                    std::memory_order_relaxed)) {
        hint = idx;
        // Orders the slot store before every later load of a shared pointer:
        // a collector that did not see this slot active scanned before it in
        // the seq_cst order, so the unlinks it relied on are visible to us.
        std::atomic_thread_fence(std::memory_order_seq_cst);
        return Guard(this, idx);
      }
    }
    std::this_thread::yield();
  }
}

void EpochDomain::unpin(std::size_t slot) noexcept {
  // Release: every read done in the critical section happens before a
  // collector that observes the slot free (acquire) frees anything.
  slots_[slot].state.store(0, std::memory_order_release);
}

void EpochDomain::retire(Retirable* obj) noexcept {
  // The unlink that made obj unreachable precedes this fence; the epoch read
  // after it is therefore >= the epoch of any reader that could still see obj.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const std::uint64_t r = global_.load(std::memory_order_seq_cst);
  pending_.fetch_add(1, std::memory_order_relaxed);  // before the push: never underflows
  std::atomic<Retirable*>& list = retired_[r % 3];
  Retirable* head = list.load(std::memory_order_relaxed);
  // Release: obj's link (and the unlinks before) happen before the collector
  // that takes the list (acquire exchange; every push is in the release
  // sequence of the list's head).
  do {
    obj->retire_next = head;
  } while (!list.compare_exchange_weak(head, obj, std::memory_order_release, std::memory_order_relaxed));
  const std::size_t n = retire_count_.fetch_add(1, std::memory_order_relaxed);
  if (pending_.load(std::memory_order_relaxed) > kPendingHighWater) {
    if (collect() == 0) std::this_thread::yield();
  } else if (n % kCollectEvery == kCollectEvery - 1) {
    collect();
  }
}

std::size_t EpochDomain::collect() noexcept {
  if (collecting_.exchange(true, std::memory_order_acquire)) return 0;  // someone else collects

  // Pairs with the fence in pin(): slots loaded below are at least as new as
  // any pin that precedes this point in the seq_cst order.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  std::uint64_t e = global_.load(std::memory_order_seq_cst);
  bool all_current = true;
  for (Slot& s : slots_) {
    // Acquire: synchronises with unpin() (and the release sequence of later
    // pins), so a reader's accesses happen before our frees.
    const std::uint64_t v = s.state.load(std::memory_order_acquire);
    if ((v & 1U) != 0 && (v >> 1) != e) {
      all_current = false;
      break;
    }
  }
  if (all_current && global_.compare_exchange_strong(e, e + 1, std::memory_order_seq_cst)) {
    e = e + 1;
  }

  // The list of retire epochs congruent to e - 2 is due as a whole (see
  // retired_): free it without looking at any object that must still wait.
  const std::size_t freed = free_list(retired_[(e + 1) % 3].exchange(nullptr, std::memory_order_acquire));
  pending_.fetch_sub(freed, std::memory_order_relaxed);
  collecting_.store(false, std::memory_order_release);
  return freed;
}

std::size_t EpochDomain::drain(int max_rounds) noexcept {
  std::size_t freed = 0;
  for (int i = 0; i < max_rounds && pending() != 0; ++i) freed += collect();
  return freed;
}

}  // namespace cg::store
