// Status values and counters of the cuckoo filter.
#pragma once

#include <cstdint>

#include "cuckoogate/path_search.hpp"

namespace cg {

enum class InsertResult : std::uint8_t {
  kOk,    // the fingerprint is in the table
  kFull,  // no cuckoo path found (or no K-CAS thread slot); the table holds exactly
          // the same multiset of fingerprints as before the call
};

// Per-lookup-thread counters, owned and written by the caller's thread only; the
// filter never writes shared memory on a lookup. Aggregate on the control side.
struct LookupStats {
  std::uint64_t lookups = 0;
  std::uint64_t retries = 0;  // misses re-read because bucket i1's counter moved
};

// A snapshot for the operator (relaxed reads of the writer-side counters).
struct FilterStats {
  std::uint64_t items = 0;           // fingerprints stored (inserts - erases)
  std::uint64_t capacity_slots = 0;  // buckets * 4
  std::uint64_t buckets = 0;
  std::uint64_t bytes = 0;           // table + object
  double load_factor = 0;            // items / capacity_slots
  double bits_per_item = 0;          // bytes * 8 / items (0 when empty)
  unsigned fingerprint_bits = 0;
  unsigned counter_bits = 0;
  std::uint64_t inserts = 0;          // successful
  std::uint64_t insert_failures = 0;  // kFull
  std::uint64_t erases = 0;           // successful
  std::uint64_t kicks = 0;            // fingerprints moved (one K-CAS each)
  std::uint64_t kcas_retries = 0;     // move K-CASes that failed and were retried
  std::uint64_t path_searches = 0;    // BFS runs
  std::uint64_t path_restarts = 0;    // paths broken by concurrent writers
  std::uint64_t path_len_hist[kMaxPathMoves + 1] = {};  // successful inserts by moves made
};

}  // namespace cg
