// Sorting many byte-string keys by position (issue 12, item 4: the bulk
// load's one sort). KeyOrder puts positions 0..n-1 in the order of their keys
// (bytewise, std::string_view's operator<), equal keys by position, so a
// batch's repeats become neighbours with the first in the input first.
//
// How: the keys are compared 8 bytes at a time as big-endian numbers held in
// a 12-byte item next to the position, never through the keys themselves. An
// in-place radix sort orders the items by (first 8 bytes, tail, position), where tail
// is how many of those bytes the key has (0-8) or 9 if it goes on; each run of
// items that agree on 8 bytes and all go on is sorted again by the next 8
// bytes, and so on. A comparison never touches key memory (the old comparator
// called memcmp for every pair whose first 8 bytes agreed: every host and url
// rule of a feed, "H" "com\0..." and "Uexample.org/...", a cache miss each),
// and a key is read once per 8-byte level it needs.
//
// Why the tail orders correctly: items of a run agree on their padded 8
// bytes. A key that ends within them (tail <= 8) is, with its zero padding,
// a prefix of every key of the run with a larger tail, so it sorts first;
// two keys with the same tail <= 8 are equal. Keys that go on are ordered by
// what follows.
//
// Not thread-safe (one owner). At most kMaxKeys keys (2^28: the position
// shares a 32-bit word with the tail; a load holds at most 512 MiB, a few
// million keys).
//
// Items are 12 bytes (packed: an unaligned 8-byte load costs nothing on x86
// and AArch64), written to fresh pages once per key: a million-rule load's
// 16-byte items were 4 MB more memory touched for the first time, each
// radix pass moving a third more bytes.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "cuckoogate/mem/huge_pages.hpp"

namespace cg::store {

// Memory for a large batch's sort items: from 2 MiB up, huge-page-advised
// anonymous pages of their own (mem::map_pages), given back whole when the
// sort is done. malloc serves such a block from a fresh mapping of 4 KiB
// pages, each one faulted in on first write: a 2 M-rule load's 24 MB of
// items were ~6 000 faults, 3.4 % of the control thread at 10 M rules on the
// reference VM, where a 2 MiB fault costs about half as much per byte.
template <class T>
struct BulkAllocator {
  using value_type = T;
  BulkAllocator() noexcept = default;
  template <class U>
  BulkAllocator(const BulkAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n > std::size_t(-1) / sizeof(T)) throw std::bad_alloc();
    const std::size_t bytes = n * sizeof(T);
    if (bytes < mem::kHugePage) return std::allocator<T>().allocate(n);
    void* p = mem::map_pages(bytes);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < mem::kHugePage) {
      std::allocator<T>().deallocate(p, n);
    } else {
      mem::unmap_pages(p, bytes);
    }
  }
  template <class U>
  bool operator==(const BulkAllocator<U>&) const noexcept { return true; }
};

class KeyOrder {
 public:
  // key_at(i) -> std::string_view: the key at position i, for i < n; called
  // once per position and 8-byte level it reaches.
  static constexpr std::size_t kMaxKeys = std::size_t{1} << 28;
  // Throws std::length_error for more than kMaxKeys keys.
  template <class KeyAt>
  KeyOrder(std::size_t n, KeyAt key_at) {
    if (n > kMaxKeys) throw std::length_error("KeyOrder: more than 2^28 keys");
    // reserve + push_back: each item written once (items_(n) zero-filled
    // 16 bytes a key first, a pass over fresh memory of its own).
    items_.reserve(n);
    for (std::size_t i = 0; i < n; ++i) items_.push_back(item(key_at(i), 0, static_cast<std::uint32_t>(i)));
    sort_level(0, n, 0, key_at);
  }
  std::size_t size() const noexcept { return items_.size(); }
  // The position whose key is j-th in order.
  std::uint32_t operator[](std::size_t j) const noexcept { return items_[j].tail_pos & kPosMask; }

 private:
  static constexpr std::uint32_t kGoesOn = 9;  // tail of a key longer than the level's 8 bytes
  static constexpr unsigned kPosBits = 28;
  static constexpr std::uint32_t kPosMask = (std::uint32_t{1} << kPosBits) - 1;
  struct __attribute__((packed)) Item {
    std::uint64_t chunk;     // the key's bytes [8 level, 8 level + 8), big-endian, zero-padded
    std::uint32_t tail_pos;  // tail << kPosBits | position
    bool operator<(const Item& o) const noexcept {
      return chunk != o.chunk ? chunk < o.chunk : tail_pos < o.tail_pos;
    }
    std::uint32_t tail() const noexcept { return tail_pos >> kPosBits; }
  };
  static_assert(sizeof(Item) == 12, "a 12-byte item");

  static Item item(std::string_view k, std::size_t level, std::uint32_t pos) noexcept {
    const std::size_t from = level * 8;
    const std::size_t have = k.size() - from;  // callers only reach levels the key goes on into
    std::uint64_t chunk = 0;
    if (have >= 8) {
      std::memcpy(&chunk, k.data() + from, 8);
      if constexpr (std::endian::native == std::endian::little) chunk = __builtin_bswap64(chunk);
    } else {
      for (std::size_t b = 0; b < 8; ++b)
        chunk = (chunk << 8) | (b < have ? static_cast<unsigned char>(k[from + b]) : 0u);
    }
    const std::uint32_t tail = have > 8 ? kGoesOn : static_cast<std::uint32_t>(have);
    return {chunk, tail << kPosBits | pos};
  }

  // Sorts items_[b, e), whose keys agree on their first 8 * level bytes and
  // all go on past them, by what follows.
  template <class KeyAt>
  void sort_level(std::size_t b, std::size_t e, std::size_t level, KeyAt& key_at) {
    struct Run {
      std::size_t b, e, level;
    };
    std::vector<Run> todo{{b, e, level}};
    while (!todo.empty()) {
      const Run r = todo.back();
      todo.pop_back();
      if (r.level != 0) {
        for (std::size_t j = r.b; j < r.e; ++j) {
          const std::uint32_t pos = items_[j].tail_pos & kPosMask;
          items_[j] = item(key_at(pos), r.level, pos);
        }
      }
      radix_sort(items_.data() + r.b, items_.data() + r.e, 0);
      // Runs that agree on this level's bytes and go on: their next level.
      for (std::size_t j = r.b; j < r.e;) {
        std::size_t k = j + 1;
        if (items_[j].tail() == kGoesOn) {
          while (k < r.e && items_[k].chunk == items_[j].chunk && items_[k].tail() == kGoesOn) ++k;
          if (k - j > 1) todo.push_back({j, k, r.level + 1});
        }
        j = k;
      }
    }
  }

  // Byte d (0-11) of an item's 12-byte sort key: the chunk, then tail_pos,
  // each most significant byte first. Comparing these bytes in turn is
  // Item::operator<.
  static unsigned byte_of(const Item& it, unsigned d) noexcept {
    if (d < 8) return static_cast<unsigned>(it.chunk >> (56 - 8 * d)) & 0xffu;
    return (it.tail_pos >> (24 - 8 * (d - 8))) & 0xffu;
  }

  // Sorts [b, e), whose items agree on their sort key's bytes before d, by
  // operator<: in place, most significant byte first (an American flag
  // sort: count each byte value, then move every item into its value's
  // range by cycles of swaps), a byte all items share costs one counting
  // pass, a range already in order one look, small ranges std::sort. Was a
  // std::sort of the whole level (~20 comparisons an item, 6 % of a
  // million-rule load); items from keys of one kind mostly differ in a few
  // bytes, so most items are moved two or three times.
  static void radix_sort(Item* b, Item* e, unsigned d) {
    constexpr std::ptrdiff_t kSmall = 64;
    for (;;) {
      if (e - b <= kSmall || d == sizeof(Item)) {  // all bytes equal (cannot happen: positions differ)
        std::sort(b, e);
        return;
      }
      if (std::is_sorted(b, e)) return;  // e.g. a feed that arrives sorted
      std::size_t count[256] = {};
      for (const Item* p = b; p < e; ++p) ++count[byte_of(*p, d)];
      if (count[byte_of(*b, d)] == static_cast<std::size_t>(e - b)) {  // one value: the next byte
        ++d;
        continue;
      }
      Item* head[256];
      Item* end[256];
      Item* p = b;
      for (unsigned v = 0; v < 256; ++v) {
        head[v] = p;
        p += count[v];
        end[v] = p;
      }
      for (unsigned v = 0; v < 256; ++v) {
        while (head[v] < end[v]) {
          Item x = *head[v];
          // Carry x to its range, taking the item there along, until one
          // belongs here.
          for (unsigned c = byte_of(x, d); c != v; c = byte_of(x, d)) std::swap(x, *head[c]++);
          *head[v]++ = x;
        }
      }
      for (unsigned v = 0; v < 256; ++v) {
        if (count[v] > 1) radix_sort(end[v] - count[v], end[v], d + 1);
      }
      return;
    }
  }

  std::vector<Item, BulkAllocator<Item>> items_;
};

}  // namespace cg::store
