// K-CAS: a lock-free multi-word compare-and-swap over 64-bit words.
//
// Harris, Fraser & Pratt (DISC 2002) built on RDCSS, with the descriptor reuse of
// Arbel-Raviv & Brown (DISC 2017): every thread owns one K-CAS descriptor and one
// RDCSS descriptor for its whole life; a word that is "locked" by an operation holds
// a reference <kind, thread slot, sequence number>, never a pointer, so nothing is
// ever reclaimed. The argument and the memory orders are in docs/concurrency.md.
//
// Word values: bit 63 is reserved. A value with bit 63 clear is a plain value; a
// value with bit 63 set is a descriptor reference. Callers store only values below
// 2^63 (kcas::kMaxValue).
//
// Thread safety: every function may be called by any number of threads at once.
// kcas::read() is read-only (it never stores to shared memory and never helps).
// kcas::cas() and kcas::read_help() help operations they meet (lock-free).
//
// Thread slots: a thread that runs kcas::cas() or has to help another operation
// needs one of kMaxThreads descriptor slots. The first such call on a thread
// acquires a slot (a CAS scan over a static table, plus the thread_local
// registration that releases it at thread exit); later calls take no slot work.
// kcas::register_thread() does that up front (call it on the control lcore at
// start-up so the first insert performs no registration). If all slots are taken,
// cas() returns Status::kNoSlot and read_help() waits (spins) for the operation
// it met: lock-freedom is guaranteed for up to kMaxThreads writer threads. The
// same holds on a thread whose slot was already released at thread exit (a
// write from a thread_local destructor that runs after the release): such a
// thread never runs on a slot it no longer owns, and takes no new one.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace cg::kcas {

using Word = std::atomic<std::uint64_t>;
static_assert(Word::is_always_lock_free, "K-CAS needs lock-free 64-bit atomics");

inline constexpr unsigned kMaxWords = 4;      // words per operation
inline constexpr unsigned kMaxThreads = 256;  // concurrent writer threads (slot table)
inline constexpr std::uint64_t kMaxValue = (std::uint64_t{1} << 63) - 1;

// Reference encoding: bit 63 = reference, bit 62 = RDCSS (1) or K-CAS (0),
// bits 54..61 = thread slot, bits 0..53 = sequence number of that slot's descriptor.
inline constexpr std::uint64_t kRefBit = std::uint64_t{1} << 63;
inline constexpr std::uint64_t kRdcssBit = std::uint64_t{1} << 62;
inline constexpr unsigned kSlotShift = 54;
inline constexpr std::uint64_t kSeqMask = (std::uint64_t{1} << kSlotShift) - 1;
static_assert(kMaxThreads <= (1u << (62 - kSlotShift)), "slot field too small");

constexpr bool is_ref(std::uint64_t v) noexcept { return (v & kRefBit) != 0; }

struct Entry {
  Word* addr;
  std::uint64_t expected;  // < 2^63
  std::uint64_t desired;   // < 2^63
};

enum class Status : std::uint8_t {
  kSucceeded,  // every word held its expected value; all now hold their desired value
  kFailed,     // some word differed; no word was changed
  kNoSlot,     // the thread could not get a descriptor slot; no word was changed
};

// Atomically: if *e[i].addr == e[i].expected for all i < n, store every desired
// value. 1 <= n <= kMaxWords, addresses distinct. The entries array may be
// reordered (sorted by address). Lock-free; no allocation, no syscalls.
Status cas(Entry* e, unsigned n) noexcept;

// Logical value of a word, read-only. Plain word: one seq_cst load. A word holding
// a reference: the value the word has at a point inside this call (old value
// unless the operation has already succeeded), taken from the owner's descriptor
// without writing anything. Linearizable with cas() and with plain CASes on words.
std::uint64_t read_slow(const Word& w, std::uint64_t seen) noexcept;
inline std::uint64_t read(const Word& w) noexcept {
  // seq_cst: all bucket loads and all writer RMWs sit in one total order S; the
  // filter's lookup re-check argument is made in S (docs/concurrency.md). On
  // x86-64 this is a plain MOV, on AArch64 an LDAR, i.e. the cost of acquire.
  const std::uint64_t v = w.load(std::memory_order_seq_cst);
  if (!is_ref(v)) [[likely]] return v;
  return read_slow(w, v);
}

// Writer's read: helps every operation found in the word until it holds a plain
// value, and returns that value (which a following plain CAS can expect).
std::uint64_t read_help(Word& w) noexcept;

// Acquire this thread's descriptor slot now (idempotent). False if none is free.
bool register_thread() noexcept;

// Number of slots currently held (for tests and stats).
unsigned slots_in_use() noexcept;

}  // namespace cg::kcas
