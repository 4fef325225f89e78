// A byte buffer that grows without copying (issue 12, item 4: a bulk load
// holds every rule's order key in one buffer while the rules stream in, and
// a std::string doubling from nothing to ~11 MB per million rules copied
// every byte about twice and touched each new page again: ~5 % of a load).
// GrowBuffer is one private anonymous mapping; growing it is mremap with
// MREMAP_MAYMOVE, which moves page tables, not bytes. Capacity doubles, so
// appends cost O(1) amortised syscalls. Mappings of 2 MiB and more are
// advised MADV_HUGEPAGE (see huge_pages.hpp; only a hint).
//
// Not thread-safe (one owner). Control plane only (mmap/mremap are syscalls).
#pragma once

#include <cstddef>
#include <cstring>

namespace cg::mem {

class GrowBuffer {
 public:
  GrowBuffer() = default;
  ~GrowBuffer() { release(); }
  GrowBuffer(GrowBuffer&& o) noexcept : p_(o.p_), size_(o.size_), cap_(o.cap_) { o.p_ = nullptr, o.size_ = o.cap_ = 0; }
  GrowBuffer& operator=(GrowBuffer&& o) noexcept;
  GrowBuffer(const GrowBuffer&) = delete;
  GrowBuffer& operator=(const GrowBuffer&) = delete;

  // Appends n bytes; false (nothing appended) when no memory could be mapped.
  bool append(const void* src, std::size_t n) noexcept {
    if (n > cap_ - size_ && !grow(n)) return false;
    if (n != 0) std::memcpy(p_ + size_, src, n);
    size_ += n;
    return true;
  }
  // Room for `more` bytes beyond size() (appending them then cannot fail);
  // false when no memory could be mapped.
  bool reserve(std::size_t more) noexcept { return more <= cap_ - size_ || grow(more); }
  const char* data() const noexcept { return p_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return cap_; }
  // Empty, and the mapping given back.
  void release() noexcept;

 private:
  bool grow(std::size_t more) noexcept;  // capacity for `more` bytes beyond size_
  char* p_ = nullptr;
  std::size_t size_ = 0, cap_ = 0;
};

}  // namespace cg::mem
