// Epoch-based safe memory reclamation for the lock-free structures of the
// store. Works from any thread (plain std::thread, DPDK lcores, the control
// thread) without registration: a pin takes a free slot for the duration of a
// critical section and gives it back on unpin.
//
// Protocol (classic three-epoch EBR, see docs/store.md "Reclamation"):
//   * pin(): claim a slot, store "active at global epoch E" into it, full fence.
//     Every pointer into a shared structure is read after that fence and used
//     only while the Guard lives.
//   * retire(obj): called after obj was unlinked (no new reader can reach it);
//     reads the current global epoch r and pushes obj on the lock-free list of
//     r mod 3 (the object keeps no stamp). Never waits for another thread (past
//     kPendingHighWater it yields the CPU once per call: back-pressure, see there).
//   * collect(): advances the global epoch E -> E+1 when every active slot is
//     at E, then frees every object with r + 2 <= E: the whole list of
//     (E + 1) mod 3. Non-blocking: if another thread is collecting it returns
//     at once. Its cost is the slot scan plus one step per object freed; an
//     object that must still wait is never looked at.
//
// Thread-safety: pin(), retire(), collect() and the accessors may be called
// concurrently from any number of threads. A Guard must be released by the
// thread that holds it and must not outlive the domain. The destructor needs
// exclusive access (no Guard alive, no concurrent call) and frees everything
// that is still retired.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace cg::store {

// Base of every object handed to EpochDomain::retire(). The reclaim function
// deletes the object with its real type (no virtual destructor needed). 16
// bytes: it is in every skip-list node.
struct Retirable {
  Retirable* retire_next = nullptr;
  void (*reclaim)(Retirable*) noexcept = nullptr;
};

class EpochDomain {
 public:
  // Upper bound on simultaneous critical sections; pin() yields while all
  // slots are taken (each slot is one cache line).
  static constexpr std::size_t kSlots = 128;
  // retire() runs a collection attempt every kCollectEvery retirements.
  static constexpr std::size_t kCollectEvery = 64;
  // Back-pressure: while more than kPendingHighWater objects wait, every
  // retire() runs a collection attempt and, if it frees nothing, yields the
  // CPU once. On an oversubscribed machine the epoch is held back by threads
  // preempted inside a critical section; yielding lets them run to its end.
  // Retiring threads slow down, none ever waits for another.
  static constexpr std::size_t kPendingHighWater = 16384;

  EpochDomain() = default;
  ~EpochDomain();
  EpochDomain(const EpochDomain&) = delete;
  EpochDomain& operator=(const EpochDomain&) = delete;

  // A pinned critical section. Move-only; unpins on destruction.
  class Guard {
   public:
    Guard() = default;
    Guard(Guard&& o) noexcept : dom_(o.dom_), slot_(o.slot_) { o.dom_ = nullptr; }
    Guard& operator=(Guard&& o) noexcept;
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard() { release(); }
    void release() noexcept;
    bool active() const noexcept { return dom_ != nullptr; }
    // Active, and a critical section of `d` (a guard of another domain keeps
    // none of d's objects).
    bool pins(const EpochDomain& d) const noexcept { return dom_ == &d; }

   private:
    friend class EpochDomain;
    Guard(EpochDomain* d, std::size_t s) : dom_(d), slot_(s) {}
    EpochDomain* dom_ = nullptr;
    std::size_t slot_ = 0;
  };

  // Enters a critical section. Reentrant (a nested pin takes another slot).
  Guard pin() noexcept;

  // Hands an unlinked object over for deferred reclamation. obj->reclaim must
  // be set. Lock-free; may run a collection attempt and, above
  // kPendingHighWater, yield the CPU (see there).
  void retire(Retirable* obj) noexcept;

  // One reclamation step (see above). Returns the number of objects freed.
  std::size_t collect() noexcept;

  // Repeats collect() until nothing is pending or `max_rounds` rounds passed.
  // Only makes progress when no Guard is held for long (tests, shutdown, the
  // control thread between commands).
  std::size_t drain(int max_rounds = 8) noexcept;

  std::uint64_t epoch() const noexcept { return global_.load(std::memory_order_acquire); }
  // Objects retired and not yet freed (approximate under concurrency).
  std::size_t pending() const noexcept { return pending_.load(std::memory_order_relaxed); }

 private:
  struct alignas(64) Slot {
    // 0 = free; (epoch << 1) | 1 = a critical section pinned at `epoch`.
    std::atomic<std::uint64_t> state{0};
  };
  static_assert(sizeof(Slot) == 64, "one slot per cache line");

  void unpin(std::size_t slot) noexcept;
  // Reclaims every object of a retire_next chain; returns how many.
  static std::size_t free_list(Retirable* r) noexcept;

  alignas(64) std::atomic<std::uint64_t> global_{1};
  // Retired objects by the epoch r retire() read, in retired_[r % 3]. Every r
  // is a value of global_, which only collect() moves (one collector at a
  // time): during a collection at E every r is <= E, so retired_[(E + 1) % 3]
  // holds only r <= E - 2, all due. A retirer that read r and pushes late (the
  // epoch moved on meanwhile) lands in a list freed later than r + 2: safe.
  alignas(64) std::atomic<Retirable*> retired_[3] = {nullptr, nullptr, nullptr};
  std::atomic<std::size_t> pending_{0};
  std::atomic<std::size_t> retire_count_{0};
  alignas(64) std::atomic<bool> collecting_{false};
  Slot slots_[kSlots];
};

}  // namespace cg::store
