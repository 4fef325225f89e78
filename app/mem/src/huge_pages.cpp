#include "cuckoogate/mem/huge_pages.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace cg::mem {
namespace {

// What is really mapped for `bytes`: whole huge pages from 2 MiB up, whole
// small pages below.
std::size_t mapped_length(std::size_t bytes) noexcept {
  const std::size_t unit = bytes >= kHugePage ? kHugePage : static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + unit - 1) / unit * unit;
}

void* map(std::size_t len) noexcept {
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

void* map_pages(std::size_t bytes) noexcept {
  if (bytes == 0) return nullptr;
  const std::size_t len = mapped_length(bytes);
  if (len < kHugePage) return map(len);
  // One huge page more than needed; the unaligned ends are given back.
  void* raw = map(len + kHugePage);
  if (raw == nullptr) return nullptr;
  const auto b = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = (b + kHugePage - 1) & ~(kHugePage - 1);
  if (start > b) munmap(raw, start - b);
  munmap(reinterpret_cast<void*>(start + len), b + kHugePage - start);  // the tail, never empty
  (void)madvise(reinterpret_cast<void*>(start), len, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(start);
}

void unmap_pages(void* p, std::size_t bytes) noexcept {
  if (p != nullptr) munmap(p, mapped_length(bytes));
}

}  // namespace cg::mem
