#include "cuckoogate/mem/grow_buffer.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <utility>

#include "cuckoogate/mem/huge_pages.hpp"

namespace cg::mem {

GrowBuffer& GrowBuffer::operator=(GrowBuffer&& o) noexcept {
  if (this != &o) {
    release();
    p_ = std::exchange(o.p_, nullptr);
    size_ = std::exchange(o.size_, 0);
    cap_ = std::exchange(o.cap_, 0);
  }
  return *this;
}

void GrowBuffer::release() noexcept {
  if (p_ != nullptr) ::munmap(p_, cap_);
  p_ = nullptr;
  size_ = cap_ = 0;
}

bool GrowBuffer::grow(std::size_t more) noexcept {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  if (more > SIZE_MAX / 4 - size_) return false;
  std::size_t cap = cap_ != 0 ? cap_ : page * 16;  // 64 KiB first
  while (cap - size_ < more) cap *= 2;             // page multiples stay page multiples
  void* p = p_ == nullptr ? ::mmap(nullptr, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                          : ::mremap(p_, cap_, cap, MREMAP_MAYMOVE);
  if (p == MAP_FAILED) return false;  // mremap failed: the old mapping is untouched
  if (cap >= kHugePage) (void)::madvise(p, cap, MADV_HUGEPAGE);
  p_ = static_cast<char*>(p);
  cap_ = cap;
  return true;
}

}  // namespace cg::mem
