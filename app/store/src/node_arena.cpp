#include "cuckoogate/store/node_arena.hpp"

#include <sys/mman.h>

#include <cstring>
#include <new>

namespace cg::store {

// At the start of every block; nodes follow from kFirst on.
struct NodeArena::Block {
  NodeArena* arena;
  std::size_t live;  // nodes of this block not freed
  char* end;         // end of what was bumped from this block so far
  Block* next_ahead;  // while on NodeArena::ahead_: the next one there
};
namespace {
constexpr std::size_t kFirst = 64;
static_assert(kFirst % NodeArena::kGrain == 0);
}  // namespace

NodeArena* NodeArena::create() { return new NodeArena(); }

// Only reached with no live node: every block was unmapped when its last
// node was freed, but for those mapped ahead and never bumped from.
NodeArena::~NodeArena() {
  while (ahead_ != nullptr) {
    Block* b = ahead_;
    ahead_ = b->next_ahead;
    ::munmap(b, kBlockBytes);
  }
}

NodeArena::Block* NodeArena::block_of(const void* p) noexcept {
  return reinterpret_cast<Block*>(reinterpret_cast<std::uintptr_t>(p) & ~(kBlockBytes - 1));
}

NodeArena::Block* NodeArena::new_block() {
  if (ahead_ != nullptr) {
    Block* b = ahead_;
    ahead_ = b->next_ahead;
    --n_ahead_;
    return b;
  }
  Block* b = map_block();
  if (b == nullptr) throw std::bad_alloc();
  b->arena = this;
  ++blocks_;
  return b;
}

NodeArena::Block* NodeArena::map_block() noexcept {
  // Twice the size, then the unaligned ends unmapped: a block starts on a
  // kBlockBytes boundary, so block_of() is a mask, and a huge page can back it.
  void* m = ::mmap(nullptr, 2 * kBlockBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  const auto a = reinterpret_cast<std::uintptr_t>(m);
  const std::uintptr_t start = (a + kBlockBytes - 1) & ~(kBlockBytes - 1);
  if (start > a) ::munmap(m, start - a);
  const std::uintptr_t tail = start + kBlockBytes;
  if (a + 2 * kBlockBytes > tail) ::munmap(reinterpret_cast<void*>(tail), a + 2 * kBlockBytes - tail);
#ifdef MADV_HUGEPAGE
  // Advice only: without transparent huge pages the block is faulted in 4 KiB pages.
  ::madvise(reinterpret_cast<void*>(start), kBlockBytes, MADV_HUGEPAGE);
#endif
  auto* b = reinterpret_cast<Block*>(start);
  b->arena = nullptr;
  b->live = 0;
  b->end = reinterpret_cast<char*>(start) + kFirst;
  b->next_ahead = nullptr;
  return b;
}

void NodeArena::prefault(std::size_t bytes) noexcept {
  constexpr std::size_t kRoom = kBlockBytes - kFirst;  // node bytes a block holds
  std::size_t want = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::size_t room = free_bytes_ + n_ahead_ * kRoom;
    if (current_ != nullptr) room += static_cast<std::size_t>(reinterpret_cast<char*>(current_) + kBlockBytes - bump_);
    if (room < bytes) want = (bytes - room + kRoom - 1) / kRoom;
  }
  // Mapped and faulted in without the lock (frees from other threads go on).
  // Another writer prefaulting meanwhile may make these more than needed:
  // later nodes use them, ~NodeArena unmaps those never used.
  Block* got = nullptr;
  std::size_t n = 0;
  for (; n < want; ++n) {
    Block* b = map_block();
    if (b == nullptr) break;
    char* const p = reinterpret_cast<char*>(b);
    bool populated = false;
#ifdef MADV_POPULATE_WRITE
    // Linux 5.14: every page faulted in writable, as by a write to each
    // (a huge page where the kernel grants one).
    populated = ::madvise(p, kBlockBytes, MADV_POPULATE_WRITE) == 0;
#endif
    if (!populated) {
      // An older kernel: one write per 4 KiB page (a write, not a read, which
      // would map the shared zero page and fault again at the node's write).
      for (std::size_t off = 4096; off < kBlockBytes; off += 4096) {
        *reinterpret_cast<volatile char*>(p + off) = 0;
      }
    }
    b->next_ahead = got;
    got = b;
  }
  if (n == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  while (got != nullptr) {
    Block* b = got;
    got = b->next_ahead;
    b->arena = this;
    b->next_ahead = ahead_;
    ahead_ = b;
    ++n_ahead_;
    ++blocks_;
  }
}

void NodeArena::push_free(FreeChunk* c, std::size_t size) noexcept {
  FreeChunk*& head = free_[size / kGrain];
  c->size = static_cast<std::uint32_t>(size);
  c->prev = nullptr;
  c->next = head;
  if (head != nullptr) head->prev = c;
  head = c;
  free_bytes_ += size;
}

void NodeArena::unlink_free(FreeChunk* c) noexcept {
  if (c->prev != nullptr) {
    c->prev->next = c->next;
  } else {
    free_[c->size / kGrain] = c->next;
  }
  if (c->next != nullptr) c->next->prev = c->prev;
  free_bytes_ -= c->size;
}

void NodeArena::unmap_block(Block* b) noexcept {
  // Every node bumped from b is on a free list: walk them by their sizes.
  for (char* p = reinterpret_cast<char*>(b) + kFirst; p < b->end;) {
    auto* c = reinterpret_cast<FreeChunk*>(p);
    p += c->size;
    unlink_free(c);
  }
  ::munmap(b, kBlockBytes);
  --blocks_;
}

void* NodeArena::allocate(std::size_t n) {
  const std::size_t size = chunk_size(n);
  std::lock_guard<std::mutex> lock(mu_);
  void* p;
  if (FreeChunk* c = free_[size / kGrain]; c != nullptr) {
    unlink_free(c);
    p = c;
  } else {
    if (current_ == nullptr || bump_ + size > reinterpret_cast<char*>(current_) + kBlockBytes) {
      current_ = new_block();  // the old one's tail stays unused
      bump_ = current_->end;
    }
    p = bump_;
    bump_ += size;
    current_->end = bump_;
  }
  ++block_of(p)->live;
  ++live_nodes_;
  live_bytes_ += size;
  return p;
}

void NodeArena::deallocate(void* p, std::size_t n) noexcept {
  const std::size_t size = chunk_size(n);
  Block* b = block_of(p);
  NodeArena* a = b->arena;
  bool gone = false;
  {
    std::lock_guard<std::mutex> lock(a->mu_);
    a->push_free(static_cast<FreeChunk*>(p), size);
    --a->live_nodes_;
    a->live_bytes_ -= size;
    if (--b->live == 0) {
      if (b == a->current_) {  // the next node starts a new block
        a->current_ = nullptr;
        a->bump_ = nullptr;
      }
      a->unmap_block(b);
    }
    gone = !a->owner_ && a->live_nodes_ == 0;
  }
  if (gone) delete a;
}

void NodeArena::release_owner() noexcept {
  bool gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    owner_ = false;
    gone = live_nodes_ == 0;
  }
  if (gone) delete this;
}

NodeArena::Stats NodeArena::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {blocks_, live_bytes_, free_bytes_};
}

}  // namespace cg::store
