// IPv4 longest-prefix match for the data path: a DIR-24-8 table whose
// readers never block while one writer adds and removes prefixes, whose rules
// are indexed by hash (adds and removes in O(1) plus the entries the prefix
// covers), and which grows until a byte budget, not a rule count, stops it.
//
// Why not rte_lpm (issue 12; docs/PERFORMANCE.md, "Loading IPv4 prefixes"):
// rte_lpm finds a rule among those of its length by a linear scan, so
// loading N prefixes of one length is O(N^2) (80 000 /24s: 5.4 s; 1.1 M: not
// done after 15 minutes), and its rule and tbl8 arrays are sized at creation.
// Lookups are the same two reads: tbl24[addr >> 8], and if that entry names a
// group of 256 entries, group[addr & 0xff].
//
// An entry (32 bits): bit 31 "names a group", bits 25-30 the length of the
// prefix it came from (0: no prefix covers the address), bits 0-24 the
// prefix's value (or the group's index).
//
// Thread safety: add()/remove() from ONE writer thread; memory() and the
// counts from any thread (relaxed counters: a report, not a sync); lookup()
// and lookup_bulk() from any number of readers at the same time, lock-free
// and wait-free. Every entry changes with one 32-bit atomic store, so a
// reader sees an address's old or new answer, never a mix. A new group is
// filled before the tbl24 entry naming it is stored (release; readers load
// tbl24 entries with acquire). A group that stops being needed is retired
// through the Reclaimer (the gateway's: the workers' rte_rcu_qsbr) and reused
// only once every reader has been quiescent since: no reader ever reads a
// group that was refilled under it. docs/concurrency.md, "Prefix rules".
//
// DPDK-free; the writer's operations allocate (mmap), readers never do.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace cg::prefix {

// How retired groups wait for readers: start() returns a token; check(token,
// wait) is true once every reader has been quiescent since start() returned
// it (wait: block until then). No start(): there are no concurrent readers
// (tests, tools), and a retired group is reused at once.
struct Reclaimer {
  void* ctx = nullptr;
  uint64_t (*start)(void* ctx) noexcept = nullptr;
  bool (*check)(void* ctx, uint64_t token, bool wait) noexcept = nullptr;
};

// A byte budget that several tables share (the gateway's three kinds: one
// limit for all their groups and rule indexes). Writer thread only; it must
// outlive the tables charged to it.
struct Budget {
  std::size_t max = 0;   // 0: no limit
  std::size_t used = 0;  // what the tables charged to it hold now
};

class Dir24 {
 public:
  static constexpr unsigned kValueBits = 25;
  static constexpr uint32_t kMaxValue = (uint32_t{1} << kValueBits) - 1;
  static constexpr uint32_t kMaxGroups = uint32_t{1} << kValueBits;

  struct Options {
    // What the groups and the rule index are charged to (nullptr: no limit
    // but address space). The 64 MiB tbl24 is mapped at create(), resident
    // only where prefixes are, and not charged.
    Budget* budget = nullptr;
    Reclaimer reclaim;
  };
  enum class Status { kOk, kExists, kNotFound, kInvalid, kNoMemory };

  // nullptr when the tbl24 cannot be mapped (err says so).
  static std::unique_ptr<Dir24> create(const Options& o, std::string* err);
  ~Dir24();
  Dir24(const Dir24&) = delete;
  Dir24& operator=(const Dir24&) = delete;

  // Writer. addr in host byte order, depth 1..32, no host bits set, value <=
  // kMaxValue (else kInvalid). kExists: this prefix is present (unchanged);
  // kNoMemory: the budget or mmap (no lookup changed; the index may have
  // grown).
  Status add(uint32_t addr, unsigned depth, uint32_t value) noexcept;
  // kNotFound: not present. Addresses it covered now get the longest
  // remaining prefix covering them, or none.
  Status remove(uint32_t addr, unsigned depth) noexcept;
  // Writer: the value of exactly this prefix, if present.
  bool find(uint32_t addr, unsigned depth, uint32_t* value) const noexcept;
  std::size_t size() const noexcept { return size_.load(std::memory_order_relaxed); }
  // Groups holding prefixes longer than /24 (in use, not retired).
  std::size_t groups_in_use() const noexcept { return groups_used_.load(std::memory_order_relaxed); }
  struct Memory {
    std::size_t tbl24 = 0;   // resident pages of the tbl24 (mincore)
    std::size_t groups = 0;  // mapped group memory (chunks of 256 groups)
    std::size_t index = 0;   // the rule index
    std::size_t total() const noexcept { return tbl24 + groups + index; }
  };
  Memory memory() const noexcept;

  // Readers. The entry for addr (host byte order): depth(e) == 0 means no
  // prefix covers it; else value(e) is the longest covering prefix's value.
  static unsigned depth(uint32_t e) noexcept { return (e >> kValueBits) & 0x3f; }
  static uint32_t value(uint32_t e) noexcept { return e & kMaxValue; }
  uint32_t lookup(uint32_t addr) const noexcept {
    // acquire: pairs with the release store that published a group, so
    // its entries and its chunk pointer are visible (ARM as x86).
    const uint32_t e = tbl24_[addr >> 8].load(std::memory_order_acquire);
    if ((e & kGroupBit) == 0) return e;
    return group_entry(e & kMaxValue, addr & 0xff).load(std::memory_order_relaxed);
  }
  void lookup_bulk(const uint32_t* addrs, uint32_t* entries, std::size_t n) const noexcept {
    for (std::size_t i = 0; i < n; ++i) entries[i] = lookup(addrs[i]);
  }

 private:
  static constexpr uint32_t kGroupBit = uint32_t{1} << 31;
  static constexpr std::size_t kTbl24 = std::size_t{1} << 24;
  static constexpr unsigned kChunkShift = 8;  // 256 groups (256 KiB) per chunk
  static constexpr std::size_t kChunkGroups = std::size_t{1} << kChunkShift;
  static constexpr std::size_t kChunks = kMaxGroups / kChunkGroups;
  static constexpr std::size_t kChunkBytes = kChunkGroups * 256 * sizeof(uint32_t);

  // The rule index: open addressing, linear probing, backward-shift
  // deletion. A slot packs a rule: bit 63 used, bits 57-62 depth, 32-56
  // value, 0-31 address. Writer only.
  class Index {
   public:
    ~Index();
    bool find(uint32_t addr, unsigned depth, uint32_t* value) const noexcept;
    // Room for one more (may grow); false: budget or mmap.
    bool reserve_one(std::size_t budget_left) noexcept;
    // Halved while at most 1/8 full (so at most 1/4 after: no oscillation
    // with the growth at 3/4); false when nothing was done.
    bool shrink_if_sparse() noexcept;
    void insert(uint32_t addr, unsigned depth, uint32_t value) noexcept;  // absent; room reserved
    bool erase(uint32_t addr, unsigned depth) noexcept;
    std::size_t bytes() const noexcept { return cap_ * sizeof(uint64_t); }

   private:
    std::size_t home(uint32_t addr, unsigned depth) const noexcept;
    bool rehash(std::size_t cap) noexcept;  // into a new table of cap slots
    uint64_t* slots_ = nullptr;
    std::size_t cap_ = 0, used_ = 0;
  };

  struct Retired {
    uint32_t group;
    uint64_t token;
  };

  explicit Dir24(const Options& o) : opts_(o) {}
  std::atomic<uint32_t>& group_entry(uint32_t g, uint32_t i) const noexcept {
    return chunks_[g >> kChunkShift].load(std::memory_order_relaxed)[((g & (kChunkGroups - 1)) << 8) | i];
  }
  static uint32_t make(unsigned depth, uint32_t value) noexcept {
    return (static_cast<uint32_t>(depth) << kValueBits) | value;
  }
  std::size_t budget_left() const noexcept;
  void charge(std::size_t bytes, bool add) noexcept;  // to the budget, if any
  bool alloc_group(uint32_t* g) noexcept;
  void retire_group(uint32_t g) noexcept;
  uint32_t cover(uint32_t addr, unsigned depth) const noexcept;  // longest rule shorter than depth
  // Calls fn on every entry a prefix of at most /24 covers: its tbl24
  // entries, or all 256 entries of the group one of them points to.
  template <typename Fn>
  void for_each_covered(uint32_t addr, unsigned depth, Fn&& fn) const noexcept;
  void count_length(unsigned depth, int delta) noexcept;

  Options opts_;
  std::atomic<uint32_t>* tbl24_ = nullptr;
  // Chunk pointers: stored (release) before any tbl24 entry names a group
  // in the chunk; never changed afterwards until the destructor.
  std::atomic<std::atomic<uint32_t>*>* chunks_ = nullptr;  // kChunks, mapped at create()
  Index index_;
  uint32_t per_length_[33] = {};  // prefixes per length (writer)
  uint64_t lengths_ = 0;           // bit L: per_length_[L] != 0
  std::size_t chunk_count_ = 0;
  // Mirrors for memory()/size() on other threads (written by the writer,
  // relaxed both ways: counts for a report, ordering nothing).
  std::atomic<std::size_t> size_{0}, groups_used_{0}, group_bytes_{0}, index_bytes_{0};
  uint32_t next_group_ = 0;           // groups never used yet start here
  std::vector<uint32_t> free_;        // reusable now (no concurrent readers)
  std::deque<Retired> retired_;       // waiting for readers, oldest first
};

}  // namespace cg::prefix
