#include "cuckoogate/prefix/dir24.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <new>

#include "cuckoogate/mem/huge_pages.hpp"

namespace cg::prefix {
namespace {

uint32_t net_mask(unsigned depth) noexcept { return depth == 0 ? 0 : ~uint32_t{0} << (32 - depth); }

constexpr uint64_t kUsed = uint64_t{1} << 63;
constexpr std::size_t kMinIndex = 1024;

uint64_t pack(uint32_t addr, unsigned depth, uint32_t value) noexcept {
  return kUsed | (uint64_t{depth} << 57) | (uint64_t{value} << 32) | addr;
}
uint32_t slot_addr(uint64_t s) noexcept { return static_cast<uint32_t>(s); }
unsigned slot_depth(uint64_t s) noexcept { return static_cast<unsigned>(s >> 57) & 0x3f; }
uint32_t slot_value(uint64_t s) noexcept { return static_cast<uint32_t>(s >> 32) & Dir24::kMaxValue; }

}  // namespace

// ---- the rule index ----

Dir24::Index::~Index() { mem::unmap_pages(slots_, cap_ * sizeof(uint64_t)); }

std::size_t Dir24::Index::home(uint32_t addr, unsigned depth) const noexcept {
  // Fibonacci hashing of (depth, address): the top bits of the product.
  const uint64_t h = ((uint64_t{depth} << 32) | addr) * 0x9E3779B97F4A7C15ull;
  return static_cast<std::size_t>(h >> (64 - __builtin_ctzll(cap_)));
}

bool Dir24::Index::find(uint32_t addr, unsigned depth, uint32_t* value) const noexcept {
  if (used_ == 0) return false;
  const std::size_t mask = cap_ - 1;
  for (std::size_t i = home(addr, depth);; i = (i + 1) & mask) {
    const uint64_t s = slots_[i];
    if (s == 0) return false;
    if (slot_addr(s) == addr && slot_depth(s) == depth) {
      if (value != nullptr) *value = slot_value(s);
      return true;
    }
  }
}

bool Dir24::Index::reserve_one(std::size_t budget) noexcept {
  if ((used_ + 1) * 4 <= cap_ * 3) return true;  // load factor <= 3/4
  const std::size_t cap = cap_ == 0 ? kMinIndex : cap_ * 2;
  return cap * sizeof(uint64_t) <= budget && rehash(cap);
}

bool Dir24::Index::shrink_if_sparse() noexcept {
  if (cap_ <= kMinIndex || used_ * 8 > cap_) return false;
  std::size_t cap = cap_ / 2;
  while (cap > kMinIndex && used_ * 4 <= cap / 2) cap /= 2;  // at most 1/4 full after
  return rehash(cap);  // no memory for the smaller one: stays as it is
}

bool Dir24::Index::rehash(std::size_t cap) noexcept {
  auto* slots = static_cast<uint64_t*>(mem::map_pages(cap * sizeof(uint64_t)));  // zeroed
  if (slots == nullptr) return false;
  uint64_t* old = slots_;
  const std::size_t old_cap = cap_;
  slots_ = slots;
  cap_ = cap;
  used_ = 0;
  for (std::size_t i = 0; i < old_cap; ++i)
    if (old[i] != 0) insert(slot_addr(old[i]), slot_depth(old[i]), slot_value(old[i]));
  mem::unmap_pages(old, old_cap * sizeof(uint64_t));
  return true;
}

void Dir24::Index::insert(uint32_t addr, unsigned depth, uint32_t value) noexcept {
  const std::size_t mask = cap_ - 1;
  std::size_t i = home(addr, depth);
  while (slots_[i] != 0) i = (i + 1) & mask;
  slots_[i] = pack(addr, depth, value);
  ++used_;
}

bool Dir24::Index::erase(uint32_t addr, unsigned depth) noexcept {
  if (used_ == 0) return false;
  const std::size_t mask = cap_ - 1;
  std::size_t i = home(addr, depth);
  for (;; i = (i + 1) & mask) {
    const uint64_t s = slots_[i];
    if (s == 0) return false;
    if (slot_addr(s) == addr && slot_depth(s) == depth) break;
  }
  // Backward shift: move later entries of the run into the hole when their
  // home is not between the hole and them, so no probe sequence breaks.
  for (std::size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
    const uint64_t s = slots_[j];
    if (s == 0) break;
    const std::size_t h = home(slot_addr(s), slot_depth(s));
    if (((j - h) & mask) >= ((j - i) & mask)) {
      slots_[i] = s;
      i = j;
    }
  }
  slots_[i] = 0;
  --used_;
  return true;
}

// ---- the table ----

std::unique_ptr<Dir24> Dir24::create(const Options& o, std::string* err) {
  std::unique_ptr<Dir24> t(new Dir24(o));
  // Zeroed anonymous memory: entries of addresses no prefix covers are never
  // written, so their pages stay unbacked.
  t->tbl24_ = static_cast<std::atomic<uint32_t>*>(mem::map_pages(kTbl24 * sizeof(uint32_t)));
  t->chunks_ = static_cast<std::atomic<std::atomic<uint32_t>*>*>(
      mem::map_pages(kChunks * sizeof(std::atomic<uint32_t>*)));
  if (t->tbl24_ == nullptr || t->chunks_ == nullptr) {
    if (err != nullptr) *err = "cannot map the 64 MiB IPv4 prefix table: " + std::string(std::strerror(errno));
    return nullptr;
  }
  return t;
}

Dir24::~Dir24() {
  charge(chunk_count_ * kChunkBytes + index_.bytes(), /*add=*/false);
  if (chunks_ != nullptr) {
    for (std::size_t c = 0; c < chunk_count_; ++c)
      mem::unmap_pages(chunks_[c].load(std::memory_order_relaxed), kChunkBytes);
    mem::unmap_pages(chunks_, kChunks * sizeof(std::atomic<uint32_t>*));
  }
  mem::unmap_pages(tbl24_, kTbl24 * sizeof(uint32_t));
}

std::size_t Dir24::budget_left() const noexcept {
  const Budget* b = opts_.budget;
  if (b == nullptr || b->max == 0) return SIZE_MAX;
  return b->used >= b->max ? 0 : b->max - b->used;
}

void Dir24::charge(std::size_t bytes, bool add) noexcept {
  if (opts_.budget != nullptr) opts_.budget->used = add ? opts_.budget->used + bytes : opts_.budget->used - bytes;
}

bool Dir24::alloc_group(uint32_t* g) noexcept {
  if (!free_.empty()) {
    *g = free_.back();
    free_.pop_back();
    return true;
  }
  // The oldest retired group, if every reader has moved on since.
  if (!retired_.empty() && opts_.reclaim.check(opts_.reclaim.ctx, retired_.front().token, false)) {
    *g = retired_.front().group;
    retired_.pop_front();
    return true;
  }
  if (next_group_ < kMaxGroups) {
    const std::size_t c = next_group_ >> kChunkShift;
    bool room = c < chunk_count_;
    if (!room && kChunkBytes <= budget_left()) {
      auto* p = static_cast<std::atomic<uint32_t>*>(mem::map_pages(kChunkBytes));
      if (p != nullptr) {
        // Readers reach this pointer only through a tbl24 entry naming one
        // of the chunk's groups, whose release store (after this one)
        // orders it; release here documents that and costs nothing.
        chunks_[c].store(p, std::memory_order_release);
        ++chunk_count_;
        charge(kChunkBytes, /*add=*/true);
        group_bytes_.store(chunk_count_ * kChunkBytes, std::memory_order_relaxed);
        room = true;
      }
    }
    if (room) {
      *g = next_group_++;
      return true;
    }
  }
  // Out of budget: wait for the readers to release the oldest retired group.
  if (!retired_.empty()) {
    (void)opts_.reclaim.check(opts_.reclaim.ctx, retired_.front().token, true);
    *g = retired_.front().group;
    retired_.pop_front();
    return true;
  }
  return false;
}

void Dir24::retire_group(uint32_t g) noexcept {
  try {
    if (opts_.reclaim.start == nullptr) {
      free_.push_back(g);
    } else {
      retired_.push_back({g, opts_.reclaim.start(opts_.reclaim.ctx)});
    }
  } catch (const std::bad_alloc&) {
    // No memory for the list: the group is never reused (1 KiB lost), which
    // is safe; the table stays correct.
  }
}

template <typename Fn>
void Dir24::for_each_covered(uint32_t addr, unsigned depth, Fn&& fn) const noexcept {
  const std::size_t first = addr >> 8, n = std::size_t{1} << (24 - depth);
  for (std::size_t i = first; i < first + n; ++i) {
    const uint32_t e = tbl24_[i].load(std::memory_order_relaxed);
    if ((e & kGroupBit) == 0) {
      fn(tbl24_[i]);
    } else {
      for (uint32_t j = 0; j < 256; ++j) fn(group_entry(e & kMaxValue, j));
    }
  }
}

uint32_t Dir24::cover(uint32_t addr, unsigned depth) const noexcept {
  // Only the lengths that have prefixes, longest first: a feed of /24s
  // alone probes nothing.
  uint32_t v = 0;
  for (uint64_t lens = lengths_ & ((uint64_t{1} << depth) - 1) & ~uint64_t{1}; lens != 0;) {
    const unsigned l = 63 - static_cast<unsigned>(__builtin_clzll(lens));
    if (index_.find(addr & net_mask(l), l, &v)) return make(l, v);
    lens &= ~(uint64_t{1} << l);
  }
  return 0;
}

void Dir24::count_length(unsigned depth, int delta) noexcept {
  per_length_[depth] = static_cast<uint32_t>(static_cast<int64_t>(per_length_[depth]) + delta);
  if (per_length_[depth] != 0) {
    lengths_ |= uint64_t{1} << depth;
  } else {
    lengths_ &= ~(uint64_t{1} << depth);
  }
}

bool Dir24::find(uint32_t addr, unsigned depth, uint32_t* value) const noexcept {
  return depth >= 1 && depth <= 32 && index_.find(addr, depth, value);
}

Dir24::Status Dir24::add(uint32_t addr, unsigned depth, uint32_t value) noexcept {
  if (depth < 1 || depth > 32 || value > kMaxValue || (addr & ~net_mask(depth)) != 0) return Status::kInvalid;
  if (index_.find(addr, depth, nullptr)) return Status::kExists;
  const std::size_t left = budget_left(), before = index_.bytes();
  // The new index may take what is left plus the old one's bytes (freed
  // once it is copied).
  const bool room = index_.reserve_one(left == SIZE_MAX ? left : left + before);
  if (index_.bytes() != before) {
    charge(before, /*add=*/false);
    charge(index_.bytes(), /*add=*/true);
    index_bytes_.store(index_.bytes(), std::memory_order_relaxed);
  }
  if (!room) return Status::kNoMemory;
  const uint32_t e_new = make(depth, value);
  // Each entry is rewritten with one store (relaxed: it publishes nothing
  // but itself; the caller's generation bump orders the whole change).
  // An entry keeps a longer prefix's answer.
  auto update = [&](std::atomic<uint32_t>& a) {
    if (depth >= Dir24::depth(a.load(std::memory_order_relaxed))) a.store(e_new, std::memory_order_relaxed);
  };
  if (depth <= 24) {
    for_each_covered(addr, depth, update);
  } else {
    std::atomic<uint32_t>& t = tbl24_[addr >> 8];
    const uint32_t e = t.load(std::memory_order_relaxed);
    const bool fresh = (e & kGroupBit) == 0;
    uint32_t g = e & kMaxValue;
    if (fresh) {
      if (!alloc_group(&g)) return Status::kNoMemory;
      // The group starts as the address's /24 answer, everywhere.
      for (uint32_t j = 0; j < 256; ++j) group_entry(g, j).store(e, std::memory_order_relaxed);
    }
    const uint32_t first = addr & 0xff, n = uint32_t{1} << (32 - depth);
    for (uint32_t j = first; j < first + n; ++j) update(group_entry(g, j));
    if (fresh) {
      // release: a reader that sees this entry (acquire) sees the group's
      // entries above and its chunk pointer.
      t.store(kGroupBit | g, std::memory_order_release);
      groups_used_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  index_.insert(addr, depth, value);
  count_length(depth, +1);
  size_.fetch_add(1, std::memory_order_relaxed);
  return Status::kOk;
}

Dir24::Status Dir24::remove(uint32_t addr, unsigned depth) noexcept {
  if (depth < 1 || depth > 32 || (addr & ~net_mask(depth)) != 0) return Status::kInvalid;
  if (!index_.erase(addr, depth)) return Status::kNotFound;
  count_length(depth, -1);
  const std::size_t before = index_.bytes();
  if (index_.shrink_if_sparse()) {
    charge(before, /*add=*/false);
    charge(index_.bytes(), /*add=*/true);
    index_bytes_.store(index_.bytes(), std::memory_order_relaxed);
  }
  // Entries that carried this prefix (its length, inside its range: no other
  // prefix can have put that length there) fall back to the longest
  // remaining prefix covering it, or to "none".
  const uint32_t r = cover(addr, depth);
  auto revert = [&](std::atomic<uint32_t>& a) {
    if (Dir24::depth(a.load(std::memory_order_relaxed)) == depth) a.store(r, std::memory_order_relaxed);
  };
  if (depth <= 24) {
    for_each_covered(addr, depth, revert);
  } else {
    std::atomic<uint32_t>& t = tbl24_[addr >> 8];
    const uint32_t g = t.load(std::memory_order_relaxed) & kMaxValue;  // a group: a /25+ is in it
    const uint32_t first = addr & 0xff, n = uint32_t{1} << (32 - depth);
    for (uint32_t j = first; j < first + n; ++j) revert(group_entry(g, j));
    // No prefix longer than /24 left in the /24: every entry is the /24's
    // answer (entries of depth <= 24 are always set for the whole /24), and
    // the group goes back to being one tbl24 entry.
    bool longer = false;
    for (uint32_t j = 0; j < 256 && !longer; ++j)
      longer = Dir24::depth(group_entry(g, j).load(std::memory_order_relaxed)) > 24;
    if (!longer) {
      t.store(group_entry(g, 0).load(std::memory_order_relaxed), std::memory_order_release);
      groups_used_.fetch_sub(1, std::memory_order_relaxed);
      retire_group(g);  // readers that loaded the old entry may still read it
    }
  }
  size_.fetch_sub(1, std::memory_order_relaxed);
  return Status::kOk;
}

Dir24::Memory Dir24::memory() const noexcept {
  Memory m;
  m.groups = group_bytes_.load(std::memory_order_relaxed);
  m.index = index_bytes_.load(std::memory_order_relaxed);
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t len = kTbl24 * sizeof(uint32_t);
  unsigned char v[kTbl24 * sizeof(uint32_t) / 4096];  // one byte per page (4 KiB or larger)
  if (len / page <= sizeof v && mincore(tbl24_, len, v) == 0) {
    for (std::size_t i = 0; i < len / page; ++i) m.tbl24 += (v[i] & 1u) * page;
  } else {
    m.tbl24 = len;  // cannot tell: count it all
  }
  return m;
}

}  // namespace cg::prefix
