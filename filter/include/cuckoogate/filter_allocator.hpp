// Injected memory for the filter's table. The gateway passes NUMA-local DPDK
// memory (rte_zmalloc_socket); tests and tools use heap_allocator().
#pragma once

#include <cstddef>

namespace cg {

struct FilterAllocator {
  // Returns memory of at least `bytes`, aligned to `align` (a power of two >= 64),
  // or nullptr on failure. Need not be zeroed.
  void* (*alloc)(void* ctx, std::size_t bytes, std::size_t align);
  void (*free)(void* ctx, void* p);
  void* ctx;
};

// Aligned heap memory (std::aligned_alloc / std::free).
FilterAllocator heap_allocator() noexcept;

}  // namespace cg
