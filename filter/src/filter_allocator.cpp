#include "cuckoogate/filter_allocator.hpp"

#include <cstdlib>

namespace cg {
namespace {

void* heap_alloc(void*, std::size_t bytes, std::size_t align) {
  if (align < alignof(std::max_align_t)) align = alignof(std::max_align_t);
  const std::size_t rounded = (bytes + align - 1) / align * align;  // aligned_alloc needs a multiple
  return std::aligned_alloc(align, rounded == 0 ? align : rounded);
}

void heap_free(void*, void* p) { std::free(p); }

}  // namespace

FilterAllocator heap_allocator() noexcept { return FilterAllocator{&heap_alloc, &heap_free, nullptr}; }

}  // namespace cg
