// The two structures a worker reads: the cuckoo filter (every key) and the
// exact set (only the keys the filter reports). Shared by both planes; the
// data plane only ever calls their read-only lookups.
#pragma once

#include "cuckoogate/cuckoo_filter.hpp"
#include "dataplane/exact_set.hpp"

namespace cg {

using GatewayFilter = DefaultFilter;  // 12-bit fingerprints, 4 slots per 64-bit bucket

// One generation of the lookup tables, immutable once published. The
// blocklist swaps the whole pair when it grows (docs/concurrency.md,
// "Growth"); a worker loads the pointer once per burst (acquire, after the
// generation) and uses only that pair until its next quiescent state.
struct LookupTables {
  const GatewayFilter* filter = nullptr;
  const ExactSet* exact = nullptr;
};

}  // namespace cg
