// Breadth-first search for a cuckoo path (libcuckoo style), shared by the
// lock-free filter and the benchmark baselines.
//
// A path is encoded in one 32-bit code: bit 0 = which candidate bucket it starts
// from (0: i1, 1: i2), then 2 bits per hop = the slot whose fingerprint moves.
// The buckets are implied: b[j+1] = alt(b[j], fingerprint in slot s[j] of b[j]).
// The last bucket of the path has a free slot. The search only reads.
#pragma once

#include <cstdint>

#include "cuckoogate/bucket_layout.hpp"

namespace cg {

inline constexpr unsigned kMaxPathMoves = 5;  // hops; 1 + 2*5 bits of the code
static_assert(1 + 2 * kMaxPathMoves <= 32);

struct CuckooPath {
  std::uint32_t code = 0;
  unsigned moves = 0;  // 0: i1 or i2 itself has a free slot
};

// Returns true and the shortest path found, or false if none within
// kMaxPathMoves. rot (0..3) rotates the slot order, to vary tie-breaks between
// attempts. read(bucket) returns the bucket's (logical) word.
template <unsigned F, class Read>
bool find_cuckoo_path(std::uint32_t i1, std::uint32_t i2, std::uint32_t mask, unsigned rot, Read&& read,
                      CuckooPath& out, std::uint32_t* buckets_read = nullptr) noexcept {
  using L = BucketLayout<F>;
  struct Node {
    std::uint32_t bucket;
    std::uint32_t code;
    std::uint32_t depth;
  };
  // Nodes are queued only when they may still be extended (depth < max):
  // 2 * (1 + 4 + ... + 4^(max-1)) entries.
  constexpr unsigned kQueue = 2 * ((1u << (2 * kMaxPathMoves)) - 1) / 3;
  Node q[kQueue];
  unsigned head = 0, tail = 0;
  std::uint32_t reads = 0;
  const std::uint32_t roots[2] = {i1, i2};
  for (std::uint32_t r = 0; r < 2; ++r) {
    const std::uint64_t w = read(roots[r]);
    ++reads;
    if (L::has_empty(w)) {
      out = {r, 0};
      if (buckets_read) *buckets_read = reads;
      return true;
    }
    q[tail++] = {roots[r], r, 0};
  }
  while (head < tail) {
    const Node n = q[head++];
    const std::uint64_t w = read(n.bucket);
    ++reads;
    for (unsigned k = 0; k < L::kSlots; ++k) {
      const unsigned s = (k + rot) & 3;
      const std::uint64_t fp = L::slot(w, s);
      if (fp == 0) continue;  // became free meanwhile: the replay re-validates
      const std::uint32_t child = L::alt(n.bucket, fp, mask);
      const std::uint32_t code = n.code | (std::uint32_t{s} << (1 + 2 * n.depth));
      const std::uint64_t cw = read(child);
      ++reads;
      if (L::has_empty(cw)) {
        out = {code, n.depth + 1};
        if (buckets_read) *buckets_read = reads;
        return true;
      }
      if (n.depth + 1 < kMaxPathMoves && tail < kQueue) q[tail++] = {child, code, n.depth + 1};
    }
  }
  if (buckets_read) *buckets_read = reads;
  return false;
}

// Decodes a path against the current table: b[0..moves], slots s[0..moves-1] and
// the fingerprints fp[0..moves-1] now in those slots. False if a slot on the path
// is empty now (the path is broken; search again).
template <unsigned F, class Read>
bool decode_cuckoo_path(const CuckooPath& p, std::uint32_t i1, std::uint32_t i2, std::uint32_t mask, Read&& read,
                        std::uint32_t* b, unsigned* s, std::uint64_t* fp) noexcept {
  using L = BucketLayout<F>;
  b[0] = (p.code & 1) ? i2 : i1;
  for (unsigned j = 0; j < p.moves; ++j) {
    s[j] = (p.code >> (1 + 2 * j)) & 3;
    fp[j] = L::slot(read(b[j]), s[j]);
    if (fp[j] == 0) return false;
    b[j + 1] = L::alt(b[j], fp[j], mask);
  }
  return true;
}

}  // namespace cg
