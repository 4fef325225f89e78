#include "cuckoogate/exact/key_table.hpp"

#include <cerrno>

namespace cg::exact {
namespace {

// Buckets a cuckoo-path search visits at most (breadth first: ~5 levels of
// three children each before it gives up).
constexpr std::size_t kMaxNodes = 512;
// Searches per insert: a path is checked as it is carried out and abandoned
// when a bucket met twice made it stale; the search then starts again.
constexpr int kMaxSearches = 4;

}  // namespace

KeyTable::KeyTable(void* mem, std::size_t capacity) noexcept
    : buckets_(static_cast<Bucket*>(mem)), n_buckets_(buckets_for(capacity)) {}

std::size_t KeyTable::slot_of(const Bucket& b, const Key128& k) noexcept {
  // Relaxed: the writer reads what it wrote itself.
  for (std::size_t i = 0; i < kSlots; ++i) {
    if (b.value[i].load(std::memory_order_relaxed) != 0 && b.key[i].lo.load(std::memory_order_relaxed) == k.lo &&
        b.key[i].hi.load(std::memory_order_relaxed) == k.hi)
      return i;
  }
  return kSlots;
}

std::size_t KeyTable::free_slot(const Bucket& b) noexcept {
  for (std::size_t i = 0; i < kSlots; ++i) {
    if (b.value[i].load(std::memory_order_relaxed) == 0) return i;
  }
  return kSlots;
}

Key128 KeyTable::key_at(const Bucket& b, std::size_t i) noexcept {
  return {b.key[i].lo.load(std::memory_order_relaxed), b.key[i].hi.load(std::memory_order_relaxed)};
}

void KeyTable::write(Bucket& b, std::size_t i, const Key128& k, uint32_t value) noexcept {
  // release: a reader whose acquire load of the version sees this bump sees
  // the entry's earlier free (value 0) and every earlier write (one writer:
  // plain load + store). Release fence: the bump before the new key words,
  // for a reader that reads any of them (it then reloads the version).
  b.version.store(b.version.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_release);
  b.key[i].lo.store(k.lo, std::memory_order_relaxed);
  b.key[i].hi.store(k.hi, std::memory_order_relaxed);
  // release: the key words before the value that publishes them.
  b.value[i].store(value, std::memory_order_release);
}

int KeyTable::insert(const Key128& k, uint32_t value) noexcept {
  const std::size_t b1 = first(k), b2 = second(k);
  for (const std::size_t b : {b1, b2}) {
    const std::size_t i = slot_of(buckets_[b], k);
    if (i < kSlots) {
      // release: as in write(); the key words are unchanged.
      buckets_[b].value[i].store(value, std::memory_order_release);
      return 0;
    }
  }
  std::size_t b = b1, i = free_slot(buckets_[b1]);
  if (i == kSlots) {
    b = b2;
    i = free_slot(buckets_[b2]);
  }
  for (int s = 0; i == kSlots && s < kMaxSearches; ++s) {
    if (!make_room(b1, b2, &b, &i)) i = kSlots;
  }
  if (i == kSlots) return -ENOSPC;
  write(buckets_[b], i, k, value);
  ++size_;
  return 0;
}

bool KeyTable::erase(const Key128& k) noexcept {
  for (const std::size_t b : {first(k), second(k)}) {
    const std::size_t i = slot_of(buckets_[b], k);
    if (i == kSlots) continue;
    // Relaxed: a free publishes nothing; the next write() of the entry
    // orders it before the new key words (its release fence).
    buckets_[b].value[i].store(0, std::memory_order_relaxed);
    --size_;
    return true;
  }
  return false;
}

bool KeyTable::make_room(std::size_t b1, std::size_t b2, std::size_t* bucket, std::size_t* slot) noexcept {
  struct Node {
    uint32_t bucket;
    int32_t parent;  // index in nodes, -1 for b1 and b2
    uint32_t slot;   // the parent's entry whose key has this bucket as its other one
  };
  Node nodes[kMaxNodes];
  std::size_t n = 0;
  nodes[n++] = {static_cast<uint32_t>(b1), -1, 0};
  nodes[n++] = {static_cast<uint32_t>(b2), -1, 0};
  // Every bucket queued was full when queued (b1 and b2 too: insert looked),
  // and nothing changes during the search.
  for (std::size_t head = 0; head < n; ++head) {
    const Bucket& hb = buckets_[nodes[head].bucket];
    for (std::size_t e = 0; e < kSlots; ++e) {
      const std::size_t alt = other(key_at(hb, e), nodes[head].bucket);
      const std::size_t f = free_slot(buckets_[alt]);
      if (f == kSlots) {
        if (n < kMaxNodes) nodes[n++] = {static_cast<uint32_t>(alt), static_cast<int32_t>(head), static_cast<uint32_t>(e)};
        continue;
      }
      // A path: entry e of head's bucket moves to alt's free entry, then
      // the parent's entry into the one just freed, up to b1 or b2. Each
      // move is checked first (a bucket met twice on the path may hold
      // another key by then): a stale path stops there, and the moves made
      // so far each put a key into its other bucket, so the table holds
      // the same keys.
      std::size_t to = alt, to_slot = f, at = head, at_slot = e;
      for (;;) {
        Bucket& src = buckets_[nodes[at].bucket];
        Bucket& dst = buckets_[to];
        const Key128 key = key_at(src, at_slot);
        const uint32_t v = src.value[at_slot].load(std::memory_order_relaxed);
        if (v == 0 || other(key, nodes[at].bucket) != to || dst.value[to_slot].load(std::memory_order_relaxed) != 0)
          return false;
        write(dst, to_slot, key, v);
        // release: the copy before the bump (a reader that loads the new
        // count with acquire sees the copy); release fence: the bump
        // before the free of the old entry (a reader that reads the free
        // sees the bump after its acquire fence). docs/concurrency.md.
        moves_.store(moves_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
        std::atomic_thread_fence(std::memory_order_release);
        src.value[at_slot].store(0, std::memory_order_relaxed);
        if (nodes[at].parent < 0) {
          *bucket = nodes[at].bucket;
          *slot = at_slot;
          return true;
        }
        to = nodes[at].bucket;
        to_slot = at_slot;
        at_slot = nodes[at].slot;
        at = static_cast<std::size_t>(nodes[at].parent);
      }
    }
  }
  return false;
}

}  // namespace cg::exact
