// Memory for the skip list's data nodes (docs/store.md, "Node memory").
//
// A node is one small block of a size fixed at its creation (tower, header,
// value, key bytes). malloc gives each such block an 8-byte size field and
// rounds it to 16 bytes, and on this VM every 4 KiB page a bulk load touches
// first costs a page fault; a million-rule load spent ~17 % of the control
// thread in malloc and its faults. The arena instead carves nodes out of
// 2 MiB blocks (aligned to their size, offered to transparent huge pages),
// rounds sizes to 8 bytes, keeps no per-node header and reuses freed nodes of
// the same size first.
//
//   * A freed node goes on the free list of its size (doubly linked through
//     the freed bytes themselves); allocate() takes from that list before it
//     bumps the current block.
//   * Each block counts its live nodes. A block whose count reaches zero
//     (every node in it freed: a flush, mass deletes) is unmapped, after its
//     nodes are taken off the free lists, so memory of deleted rules goes back
//     to the system once whole blocks are empty. Freed nodes in blocks that
//     still hold live ones stay for reuse (counted in Stats::free_bytes).
//   * Requests above kMaxChunk (very long keys) are not served here: the
//     caller uses operator new for them (is_arena_size tells which).
//
// Lifetime: the arena outlives its owner as long as nodes allocated from it
// are alive (a node retired to a shared epoch domain may be freed after the
// map that made it is destroyed). release_owner() marks the owner gone; the
// arena deletes itself when the owner is gone and no node is live.
//
// Thread-safety: allocate/deallocate/stats from any thread; one mutex (the
// writers' allocations and the epoch domain's frees, never the readers: the
// skip list's lookups and scans do not allocate or free). Taking it costs
// what malloc's own arena lock did before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace cg::store {

class NodeArena {
 public:
  static constexpr std::size_t kBlockBytes = std::size_t{2} << 20;
  static constexpr std::size_t kGrain = 8;
  static constexpr std::size_t kMaxChunk = 1024;

  // A new arena; the caller is its owner (release_owner() when done).
  static NodeArena* create();
  NodeArena(const NodeArena&) = delete;
  NodeArena& operator=(const NodeArena&) = delete;

  // Bytes a request of n takes here (n rounded up to kGrain, at least the
  // free-list link it holds when freed).
  static constexpr std::size_t chunk_size(std::size_t n) noexcept {
    const std::size_t r = (n + kGrain - 1) & ~(kGrain - 1);
    return r < kMinChunk ? kMinChunk : r;
  }
  static constexpr bool is_arena_size(std::size_t n) noexcept { return n != 0 && n <= kMaxChunk; }

  // n: is_arena_size(n). Aligned to 8 bytes. Throws std::bad_alloc when no
  // block can be mapped.
  void* allocate(std::size_t n);
  // p: from allocate(n) of an arena (found from p's block), n as given then.
  // May delete that arena (owner gone, last node freed).
  static void deallocate(void* p, std::size_t n) noexcept;
  // Maps and faults in blocks ahead of use until the next `bytes` of new
  // nodes (sizes as chunk_size rounds them) fit in memory already touched:
  // the rest of the current block, blocks mapped ahead earlier, freed nodes.
  // allocate() takes those blocks before it maps new ones. For a bulk
  // insert that can fault its nodes' memory in while it waits for something
  // else (the journal's fdatasync): on this VM a first touch costs ~1.5 ms
  // per MB, 11 % of a 10 M-rule load. Best effort: stops quietly when no
  // block can be mapped (allocate() reports that). At most `bytes` rounded
  // up to a block stays mapped unused if fewer nodes come.
  void prefault(std::size_t bytes) noexcept;
  // The owner is done with the arena: it is deleted now if no node is live,
  // else when the last one is freed.
  void release_owner() noexcept;

  struct Stats {
    std::size_t blocks = 0;      // mapped blocks (with those mapped ahead)
    std::size_t live_bytes = 0;  // bytes of live nodes (rounded sizes)
    std::size_t free_bytes = 0;  // bytes of freed nodes kept for reuse
  };
  Stats stats() const;

 private:
  struct Block;
  struct FreeChunk {
    FreeChunk* next;
    FreeChunk* prev;
    std::uint32_t size;
  };
  static constexpr std::size_t kMinChunk = (sizeof(FreeChunk) + kGrain - 1) & ~(kGrain - 1);
  static constexpr std::size_t kClasses = kMaxChunk / kGrain + 1;

  NodeArena() = default;
  ~NodeArena();
  static Block* block_of(const void* p) noexcept;
  Block* new_block();                 // mu_ held: a block mapped ahead, else a new one
  static Block* map_block() noexcept;  // a fresh block, or nullptr; no lock needed
  void unmap_block(Block* b) noexcept;  // mu_ held; every node in b is free
  void push_free(FreeChunk* c, std::size_t size) noexcept;
  void unlink_free(FreeChunk* c) noexcept;

  mutable std::mutex mu_;
  FreeChunk* free_[kClasses] = {};
  Block* current_ = nullptr;  // where new nodes are bumped from
  Block* ahead_ = nullptr;    // blocks prefault() mapped, not bumped from yet (Block::next_ahead)
  std::size_t n_ahead_ = 0;
  char* bump_ = nullptr;      // next free byte of current_
  std::size_t blocks_ = 0, live_bytes_ = 0, free_bytes_ = 0, live_nodes_ = 0;
  bool owner_ = true;
};

}  // namespace cg::store
