// The two structures a worker reads: the cuckoo filter (every key) and the
// exact set (only the keys the filter reports). Shared by both planes; the
// data plane only ever calls their read-only lookups.
#pragma once

#include "cuckoogate/cuckoo_filter.hpp"
#include "dataplane/exact_set.hpp"

namespace cg {

using GatewayFilter = DefaultFilter;  // 12-bit fingerprints, 4 slots per 64-bit bucket

}  // namespace cg
