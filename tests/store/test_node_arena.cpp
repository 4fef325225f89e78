// NodeArena: the skip list's node memory (docs/store.md, "Node memory").
#include "cuckoogate/store/node_arena.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "cuckoogate/store/epoch.hpp"
#include "cuckoogate/store/skiplist_map.hpp"
#include "test_util.hpp"

namespace cg::store {
namespace {

// Frees the arena's owner reference at the end of a test.
struct Owned {
  NodeArena* a = NodeArena::create();
  ~Owned() { a->release_owner(); }
};

TEST(NodeArena, SizesAreRoundedToEightBytesWithoutAHeader) {
  EXPECT_EQ(NodeArena::chunk_size(94), 96U);
  EXPECT_EQ(NodeArena::chunk_size(96), 96U);
  EXPECT_EQ(NodeArena::chunk_size(97), 104U);
  EXPECT_EQ(NodeArena::chunk_size(1), 24U);  // room for the free-list link
  EXPECT_TRUE(NodeArena::is_arena_size(NodeArena::kMaxChunk));
  EXPECT_FALSE(NodeArena::is_arena_size(NodeArena::kMaxChunk + 1));
  EXPECT_FALSE(NodeArena::is_arena_size(0));
  Owned o;
  // Consecutive nodes lie back to back: no per-node header or padding.
  char* p = static_cast<char*>(o.a->allocate(94));
  char* q = static_cast<char*>(o.a->allocate(94));
  char* r = static_cast<char*>(o.a->allocate(100));
  EXPECT_EQ(q - p, 96);
  EXPECT_EQ(r - q, 96);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(r) % 8, 0U);
  EXPECT_EQ(o.a->stats().live_bytes, 96U + 96 + 104);
  EXPECT_EQ(o.a->stats().blocks, 1U);
  for (char* x : {p, q}) NodeArena::deallocate(x, 94);
  NodeArena::deallocate(r, 100);
}

TEST(NodeArena, AFreedNodeIsReusedBySameSizeOnly) {
  Owned o;
  void* keep = o.a->allocate(64);  // the block stays mapped
  void* p = o.a->allocate(120);
  NodeArena::deallocate(p, 120);
  EXPECT_EQ(o.a->stats().free_bytes, 120U);
  void* other = o.a->allocate(128);  // another size: bumped, not the freed node
  EXPECT_NE(other, p);
  EXPECT_EQ(o.a->allocate(117), p);  // 117 rounds to 120: the freed node
  EXPECT_EQ(o.a->stats().free_bytes, 0U);
  NodeArena::deallocate(p, 117);
  NodeArena::deallocate(other, 128);
  NodeArena::deallocate(keep, 64);
}

TEST(NodeArena, ABlockWhoseNodesAreAllFreedGoesBackToTheSystem) {
  Owned o;
  // Two and a half blocks of 200-byte nodes.
  const std::size_t per_block = NodeArena::kBlockBytes / 200;
  std::vector<void*> nodes;
  for (std::size_t i = 0; i < per_block * 5 / 2; ++i) nodes.push_back(o.a->allocate(200));
  EXPECT_EQ(o.a->stats().blocks, 3U);
  // Free every other node: no block is empty, the freed nodes wait for reuse.
  for (std::size_t i = 0; i < nodes.size(); i += 2) NodeArena::deallocate(nodes[i], 200);
  EXPECT_EQ(o.a->stats().blocks, 3U);
  EXPECT_EQ(o.a->stats().free_bytes, (nodes.size() + 1) / 2 * 200);
  // Then the rest of the first block's nodes: it is unmapped, and its freed
  // nodes leave the free list with it (none is handed out again).
  const NodeArena::Stats before = o.a->stats();
  std::size_t freed_before = 0;  // the first block's nodes on the free list
  const auto block = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) & ~(NodeArena::kBlockBytes - 1); };
  const std::uintptr_t first = block(nodes[0]);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (block(nodes[i]) != first) continue;
    if (i % 2 == 1) NodeArena::deallocate(nodes[i], 200);
    else ++freed_before;
    nodes[i] = nullptr;
  }
  EXPECT_EQ(o.a->stats().blocks, 2U);
  EXPECT_EQ(o.a->stats().free_bytes, before.free_bytes - freed_before * 200);
  // Everything freed: no block left.
  for (std::size_t i = 1; i < nodes.size(); i += 2) {
    if (nodes[i] != nullptr) NodeArena::deallocate(nodes[i], 200);
  }
  EXPECT_EQ(o.a->stats().blocks, 0U);
  EXPECT_EQ(o.a->stats().free_bytes, 0U);
  EXPECT_EQ(o.a->stats().live_bytes, 0U);
  // And it serves again.
  void* again = o.a->allocate(200);
  EXPECT_EQ(o.a->stats().blocks, 1U);
  NodeArena::deallocate(again, 200);
}

TEST(NodeArena, LivesUntilItsLastNodeIsFreedAfterTheOwnerLeft) {
  NodeArena* a = NodeArena::create();
  auto* p = static_cast<char*>(a->allocate(300));
  std::memset(p, 0x5a, 300);
  a->release_owner();  // a node is live: the arena stays (ASan would see a use after free below)
  EXPECT_EQ(p[299], 0x5a);
  NodeArena::deallocate(p, 300);  // the last node: the arena deletes itself (LSan: no leak)
}

// A map destroyed while its erased nodes still wait in a shared epoch domain:
// they are freed into its arena later, when the domain collects them.
TEST(NodeArena, NodesRetiredToASharedDomainOutliveTheirMap) {
  EpochDomain domain;
  {
    EpochDomain::Guard g = domain.pin();  // holds the epoch: nothing is freed yet
    {
      SkipListMap<int> m(7, &domain);
      for (int i = 0; i < 1000; ++i) ASSERT_EQ(m.insert("key" + std::to_string(i), i), InsertResult::inserted);
      for (int i = 0; i < 1000; i += 2) ASSERT_EQ(m.erase("key" + std::to_string(i)), EraseResult::erased);
    }
    EXPECT_GT(domain.pending(), 0U);
  }
  domain.drain(64);
  EXPECT_EQ(domain.pending(), 0U);
}

// prefault() maps and faults in blocks ahead, as many as the bytes asked
// for need beyond what the current block, blocks mapped ahead and freed
// nodes hold; allocate() bumps from them before it maps more, and the
// arena gives back those never used when it goes.
TEST(NodeArena, PrefaultMapsAndFaultsInBlocksThatAllocateThenUses) {
  constexpr std::size_t kNode = 96;
  constexpr std::size_t kRoom = NodeArena::kBlockBytes - 64;  // a block's node bytes
  Owned o;
  o.a->prefault(0);
  EXPECT_EQ(o.a->stats().blocks, 0U);
  o.a->prefault(2 * kRoom + 1);
  EXPECT_EQ(o.a->stats().blocks, 3U);
  o.a->prefault(3 * kRoom);  // already there: nothing more
  EXPECT_EQ(o.a->stats().blocks, 3U);
  // Every page of a block mapped ahead is resident before a node is put there
  // (where madvise reaches the kernel: under qemu-user MADV_POPULATE_WRITE is
  // accepted and ignored, so the pages fault in at first use instead).
  const bool advice_seen = test::madvise_reaches_kernel();
  char* first = static_cast<char*>(o.a->allocate(kNode));
  auto* block = reinterpret_cast<char*>(reinterpret_cast<std::uintptr_t>(first) & ~(NodeArena::kBlockBytes - 1));
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident(NodeArena::kBlockBytes / page);
  ASSERT_EQ(::mincore(block, NodeArena::kBlockBytes, resident.data()), 0);
  std::size_t in = 0;
  for (unsigned char r : resident) in += r & 1;
  if (advice_seen) {
    EXPECT_EQ(in, resident.size());
  }
  // Three blocks' worth of nodes come from the three blocks.
  std::vector<void*> nodes{first};
  while (nodes.size() < 3 * (kRoom / kNode)) nodes.push_back(o.a->allocate(kNode));
  EXPECT_EQ(o.a->stats().blocks, 3U);
  nodes.push_back(o.a->allocate(kNode));
  EXPECT_EQ(o.a->stats().blocks, 4U);
  // Room left in the current block and freed nodes count.
  for (std::size_t i = 0; i < 100; ++i) NodeArena::deallocate(nodes[i], kNode);
  o.a->prefault(100 * kNode);
  EXPECT_EQ(o.a->stats().blocks, 4U);
  for (std::size_t i = 100; i < nodes.size(); ++i) NodeArena::deallocate(nodes[i], kNode);
  // Blocks mapped ahead and never used are unmapped with the arena (the
  // sanitizer build's leak check; `blocks` counts them until then).
  o.a->prefault(5 * kRoom);
  EXPECT_GE(o.a->stats().blocks, 5U);
}

TEST(NodeArena, ThreadsAllocateAndFreeWithoutSharingANode) {
  Owned o;
  constexpr int kThreads = 4;
  const int rounds = 20000;
  std::vector<std::thread> ts;
  std::vector<int> bad(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) + 1);
      std::vector<std::pair<unsigned char*, std::size_t>> held;
      for (int i = 0; i < rounds; ++i) {
        if (held.size() < 64 && (held.empty() || rng() % 3 != 0)) {
          const std::size_t n = 24 + rng() % 400;
          auto* p = static_cast<unsigned char*>(o.a->allocate(n));
          std::memset(p, t + 1, n);
          held.emplace_back(p, n);
        } else {
          const std::size_t k = rng() % held.size();
          auto [p, n] = held[k];
          for (std::size_t b = 0; b < n; ++b) bad[t] += p[b] != t + 1;
          NodeArena::deallocate(p, n);
          held[k] = held.back();
          held.pop_back();
        }
      }
      for (auto [p, n] : held) NodeArena::deallocate(p, n);
    });
  }
  for (auto& th : ts) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t << " saw its bytes overwritten";
  EXPECT_EQ(o.a->stats().live_bytes, 0U);
  EXPECT_EQ(o.a->stats().blocks, 0U);
}

}  // namespace
}  // namespace cg::store
