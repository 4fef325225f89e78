// Memory for tables read at random on the data path (the flow table, the
// cuckoo filter) when EAL has no hugepages: EAL's --no-huge memory is a
// shared memfd in 4 KiB pages that the kernel never backs with transparent
// huge pages, so such a table costs a TLB miss on almost every access.
// These mappings are private anonymous memory, aligned to 2 MiB and advised
// with MADV_HUGEPAGE (a hint: a kernel without THP, or out of contiguous
// memory, gives small pages and nothing else changes). DPDK-free; setup
// time only (mmap/munmap are syscalls).
#pragma once

#include <cstddef>

namespace cg::mem {

inline constexpr std::size_t kHugePage = std::size_t{2} << 20;

// `bytes` (> 0) of zeroed memory, page-aligned, and 2 MiB-aligned and advised
// when bytes >= 2 MiB; nullptr on failure. Release with unmap_pages(p, bytes).
void* map_pages(std::size_t bytes) noexcept;
void unmap_pages(void* p, std::size_t bytes) noexcept;

}  // namespace cg::mem
