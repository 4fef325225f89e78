// A lock-free ordered map from byte strings to small immutable values.
//
// Keys are ordered lexicographically as unsigned bytes (memcmp order, shorter
// prefix first). Values are copied into the node at insertion and never change
// afterwards, so a reader holding a node sees a consistent value.
//
// Structure (docs/store.md has the full argument):
//   * Level 0 is a sorted singly linked list that follows Java's
//     ConcurrentSkipListMap: a delete first marks the node's value deleted
//     (the linearisation point), then appends a marker node behind it so that
//     nothing can be inserted after it, then unlinks node + marker with one CAS
//     on the predecessor. Writers (insert, erase) that meet a deleted node
//     help; readers step over deleted nodes and markers without storing.
//   * Index levels 1..kMaxHeight live in a tower inside each node and use
//     Harris/Fraser marked pointers, so a deleted node's index links are frozen
//     before they are unlinked and can never be resurrected.
//   * Memory comes back through an EpochDomain. A node is retired once it is
//     unlinked at level 0 and at every index level; a reference count of two
//     (deleter, inserter still building the tower) decides who retires it.
//
// Thread-safety: every member function except the constructor and destructor
// may be called concurrently from any number of threads. insert/erase are
// lock-free; find/contains/Cursor are lock-free and perform no allocation
// (find copies the value out; a Cursor copies its bounds when constructed:
// bounds longer than std::string's inline buffer allocate there, never in
// next()).
// A Cursor pins the epoch domain while it lives (keep it short-lived, or
// nothing is reclaimed meanwhile) and must stay on one thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "cuckoogate/store/epoch.hpp"
#include "cuckoogate/store/node_arena.hpp"

namespace cg::store {

enum class InsertResult { inserted, exists };

// Heap bytes a map value owns besides itself (SkipListMap::memory_bytes).
// Value types with heap parts declare an overload in their own namespace.
template <class V>
std::size_t value_heap_bytes(const V&) noexcept {
  return 0;
}
enum class EraseResult { erased, absent };

// The smallest string greater than every string starting with `prefix`, or
// nullopt when there is none (empty prefix or all bytes 0xff). [prefix, that)
// is the range of keys with the prefix.
std::optional<std::string> prefix_upper_bound(std::string_view prefix);

template <class V>
class SkipListMap {
 public:
  // Index levels above level 0; with p = 1/4 this suits up to ~4^16 keys.
  static constexpr int kMaxHeight = 16;

  // `seed` drives tower heights (deterministic for a given insertion order).
  // `domain` may be shared between structures; when null the map owns one.
  explicit SkipListMap(std::uint64_t seed = 0x9e3779b97f4a7c15ULL, EpochDomain* domain = nullptr)
      : owned_domain_(domain == nullptr ? std::make_unique<EpochDomain>() : nullptr),
        domain_(domain == nullptr ? owned_domain_.get() : domain),
        seed_(seed),
        arena_(NodeArena::create()),
        head_(create_head()) {}

  // Requires exclusive access: no other call in flight, no Cursor alive.
  ~SkipListMap() {
    Node* n = head_->next.load(std::memory_order_relaxed);
    while (n != nullptr) {
      Node* next = n->next.load(std::memory_order_relaxed);
      destroy(n);
      n = next;
    }
    destroy_head(head_);
    // Nodes still retired in the domain are freed into the arena later; it
    // lives until the last of them is.
    arena_->release_owner();
    if (owned_domain_) owned_domain_->drain(64);
  }

  SkipListMap(const SkipListMap&) = delete;
  SkipListMap& operator=(const SkipListMap&) = delete;

  // Inserts key -> value unless the key is present (then nothing changes).
  // Keys longer than 4 GiB - 1 are not supported.
  InsertResult insert(std::string_view key, const V& value) { return insert(key, V(value)); }
  // The same, moving the value into the node (a value with heap parts is not copied).
  InsertResult insert(std::string_view key, V&& value);

  class OrderedInserter;
  // For many inserts in increasing key order from one thread (a bulk load):
  // see OrderedInserter.
  OrderedInserter ordered_inserter() { return OrderedInserter(this, false); }
  // The same for a caller that keeps the domain pinned by `pinned` for the
  // inserter's whole life (a Guard of domain(), destroyed after it): the
  // inserter then keeps its fingers and the last node it linked for good
  // instead of dropping them every Fingers::kRepin keys. For hinted inserts
  // (OrderedInserter::insert with a Hint), where the hint of a key past the
  // end of the map is the same node for every such key and the last node is
  // what makes it one step (after a drop the walk would start at that hint).
  // A guard that does not pin domain() (released, or of another domain)
  // gives the inserter above, which pins the domain itself.
  OrderedInserter ordered_inserter(const EpochDomain::Guard& pinned) {
    return OrderedInserter(this, pinned.pins(*domain_));
  }
  class OrderedFinder;
  // For many lookups in increasing key order from one thread: see OrderedFinder.
  OrderedFinder ordered_finder() const { return OrderedFinder(this); }

  // Removes the key. When `removed` is given it receives the old value.
  EraseResult erase(std::string_view key, V* removed = nullptr);

  std::optional<V> find(std::string_view key) const;
  bool contains(std::string_view key) const;

  // Number of live entries (exact when quiescent).
  std::size_t size() const noexcept {
    const auto n = count_.load(std::memory_order_relaxed);
    return n < 0 ? 0 : static_cast<std::size_t>(n);
  }

  EpochDomain& domain() const noexcept { return *domain_; }

  // Arena bytes n new entries most likely take, len_at(i) the i-th one's
  // key length: each node's rounded size without a tower, plus the towers'
  // expected third of a link each (random_height: p = 1/4 a level). Nodes
  // too big for the arena count nothing. For prefault().
  template <class KeyLenAt>
  static std::size_t expected_arena_bytes(std::size_t n, KeyLenAt len_at) noexcept {
    std::size_t bytes = 0, in_arena = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t size = DataNode::alloc_size(0, len_at(i));
      if (!NodeArena::is_arena_size(size + kMaxHeight * sizeof(std::atomic<std::uintptr_t>))) continue;
      bytes += NodeArena::chunk_size(size);
      ++in_arena;
    }
    return bytes + (in_arena * sizeof(std::atomic<std::uintptr_t>) + 2) / 3;
  }
  // Faults in the arena's memory for `bytes` of new nodes before they are
  // inserted (NodeArena::prefault): a bulk insert does it while the journal
  // syncs. Best effort; never throws.
  void prefault(std::size_t bytes) noexcept { arena_->prefault(bytes); }

  // Bytes of the entries (retired ones waiting for the epoch domain not
  // counted): each node's size in the arena (or its malloc chunk, for the
  // rare node too big for it) plus its value's heap parts
  // (value_heap_bytes(const V&), found by argument-dependent lookup; 0 when
  // none is declared, rounded as glibc malloc rounds a chunk), plus the
  // arena's freed nodes kept for reuse. An estimate of what the map holds
  // resident, for `info` (a block's untouched tail is not counted).
  std::size_t memory_bytes() const noexcept {
    const auto n = bytes_.load(std::memory_order_relaxed);
    return (n < 0 ? 0 : static_cast<std::size_t>(n)) + arena_->stats().free_bytes;
  }

  class Cursor;
  // Weakly consistent scan of [lo, hi) (hi = nullopt: to the end). Every
  // entry present for the cursor's whole life is returned exactly once, keys
  // strictly increase, entries inserted or erased meanwhile may or may not be
  // returned.
  Cursor scan(std::string_view lo = {}, std::optional<std::string_view> hi = std::nullopt) const {
    return Cursor(this, lo, hi);
  }
  Cursor scan_prefix(std::string_view prefix) const {
    auto hi = prefix_upper_bound(prefix);
    Cursor c(this, prefix, std::nullopt);
    if (hi) c.set_hi(*hi);
    return c;
  }

  // Calls fn(key, value) for each entry of [lo, hi); fn returns false to stop.
  template <class F>
  void for_each(std::string_view lo, std::optional<std::string_view> hi, F&& fn) const {
    for (Cursor c = scan(lo, hi); c.next();) {
      if (!fn(c.key(), c.value())) break;
    }
  }

 private:
  struct Node : Retirable {
    enum Kind : std::uint8_t { kHead, kData, kMarker };
    Node(Kind k, int h) : kind(k), height(static_cast<std::uint8_t>(h)) {}
    std::atomic<Node*> next{nullptr};
    std::atomic<std::uint8_t> refs{1};     // at most 2 (deleter, inserter)
    std::atomic<std::uint8_t> deleted{0};  // data nodes: 1 once logically removed
    const Kind kind;
    const std::uint8_t height;  // number of index levels (tower size)
    std::uint32_t key_len = 0;  // data nodes: bytes of the key that follows the node
    // up()[l] is the link at index level l + 1; bit 0 set = frozen (deleted).
    // The tower lives in the same allocation, just before the node (head and
    // data nodes), so an index step touches one place in memory, not two,
    // and the node needs no pointer to it.
    std::atomic<std::uintptr_t>* up() const noexcept {
      return reinterpret_cast<std::atomic<std::uintptr_t>*>(const_cast<Node*>(this)) - height;
    }
  };
  static_assert(sizeof(Retirable) + 16 == sizeof(Node) || sizeof(void*) != 8, "a node's header is 32 bytes");
  // A data node's key takes at least this many bytes (zero-padded): its
  // first 8 bytes, read as a big-endian integer, are the key's prefix.
  static constexpr std::size_t kPrefixBytes = 8;
  struct DataNode : Node {
    // One allocation: [tower: h links][DataNode][key bytes, >= 8]. The key
    // lives in the node (no std::string: 32 bytes and, past 15 bytes, a
    // second allocation per entry saved). From the map's NodeArena, or from
    // operator new past NodeArena::kMaxChunk (decided by the size alone, so
    // destroy() needs no note of where a node came from).
    static std::size_t alloc_size(int h, std::size_t key_len) noexcept {
      return static_cast<std::size_t>(h) * sizeof(std::atomic<std::uintptr_t>) + sizeof(DataNode) +
             std::max(key_len, kPrefixBytes);
    }
    static DataNode* create(NodeArena& arena, std::string_view k, V&& v, int h) {
      const std::size_t tower = static_cast<std::size_t>(h) * sizeof(std::atomic<std::uintptr_t>);
      const std::size_t size = alloc_size(h, k.size());
      const bool in_arena = NodeArena::is_arena_size(size);
      char* mem = static_cast<char*>(in_arena ? arena.allocate(size) : ::operator new(size));
      auto* links = reinterpret_cast<std::atomic<std::uintptr_t>*>(mem);
      for (int i = 0; i < h; ++i) ::new (&links[i]) std::atomic<std::uintptr_t>(0);
      try {
        return ::new (mem + tower) DataNode(k, std::move(v), h);
      } catch (...) {
        if (in_arena) NodeArena::deallocate(mem, size);
        else ::operator delete(mem);
        throw;
      }
    }
    static void destroy(DataNode* n) noexcept {
      char* mem = reinterpret_cast<char*>(n) - static_cast<std::size_t>(n->height) *
                                                   sizeof(std::atomic<std::uintptr_t>);
      const std::size_t size = alloc_size(n->height, n->key_len);
      n->~DataNode();
      if (NodeArena::is_arena_size(size)) NodeArena::deallocate(mem, size);
      else ::operator delete(mem);
    }
    std::string_view key() const noexcept {
      return {reinterpret_cast<const char*>(this + 1), this->key_len};
    }
    // The first 8 key bytes, big-endian, zero-padded: unequal prefixes order
    // like the keys, so most comparisons end here. Read from the key itself
    // (was a copy in the header: 8 bytes a node).
    std::uint64_t prefix() const noexcept {
      std::uint64_t v;
      std::memcpy(&v, this + 1, sizeof v);
      if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap64(v);
      return v;
    }
    const V value;

   private:
    DataNode(std::string_view k, V&& v, int h)
        : Node(Node::kData, h), value(std::move(v)) {
      this->key_len = static_cast<std::uint32_t>(k.size());
      char* kb = reinterpret_cast<char*>(this + 1);
      if (!k.empty()) std::memcpy(kb, k.data(), k.size());
      if (k.size() < kPrefixBytes) std::memset(kb + k.size(), 0, kPrefixBytes - k.size());
      this->refs.store(h > 0 ? 2 : 1, std::memory_order_relaxed);
      this->reclaim = &reclaim_data;
    }
  };
  static_assert(alignof(DataNode) <= alignof(std::max_align_t) &&
                    alignof(DataNode) % alignof(std::atomic<std::uintptr_t>) == 0,
                "a node placed after its tower must be aligned");
  struct DataNodeHolder {  // owns a node until it is published
    DataNode* p = nullptr;
    ~DataNodeHolder() {
      if (p != nullptr) DataNode::destroy(p);
    }
  };

  // The head: a full tower in front of it, like a data node's.
  static Node* create_head() {
    constexpr std::size_t tower = kMaxHeight * sizeof(std::atomic<std::uintptr_t>);
    char* mem = static_cast<char*>(::operator new(tower + sizeof(Node)));
    auto* links = reinterpret_cast<std::atomic<std::uintptr_t>*>(mem);
    for (int i = 0; i < kMaxHeight; ++i) ::new (&links[i]) std::atomic<std::uintptr_t>(0);
    return ::new (mem + tower) Node(Node::kHead, kMaxHeight);
  }
  static void destroy_head(Node* h) noexcept {
    char* mem = reinterpret_cast<char*>(h->up());
    h->~Node();
    ::operator delete(mem);
  }

  struct Marker : Node {
    explicit Marker(Node* succ) : Node(Node::kMarker, 0) {
      this->next.store(succ, std::memory_order_relaxed);
      this->reclaim = &reclaim_marker;
    }
  };
  static_assert(alignof(Node) >= 2, "bit 0 of a node pointer is used as the mark");

  static void reclaim_data(Retirable* r) noexcept { DataNode::destroy(static_cast<DataNode*>(r)); }
  static void reclaim_marker(Retirable* r) noexcept { delete static_cast<Marker*>(r); }
  static void destroy(Node* n) noexcept {
    if (n->kind == Node::kData) {
      DataNode::destroy(static_cast<DataNode*>(n));
    } else {
      delete static_cast<Marker*>(n);
    }
  }

  // glibc's chunk for a request of n bytes: n + 8 (size field), rounded up
  // to 16, at least 32; 0 for no allocation.
  static std::int64_t chunk_bytes(std::size_t n) noexcept {
    if (n == 0) return 0;
    return static_cast<std::int64_t>(std::max<std::size_t>(32, (n + 8 + 15) & ~std::size_t{15}));
  }
  static std::int64_t node_bytes(const DataNode* n) noexcept {
    const std::size_t size = DataNode::alloc_size(n->height, n->key_len);
    return (NodeArena::is_arena_size(size) ? static_cast<std::int64_t>(NodeArena::chunk_size(size))
                                           : chunk_bytes(size)) +
           chunk_bytes(value_heap_bytes(n->value));
  }

  static constexpr std::uintptr_t kMark = 1;
  static Node* ptr(std::uintptr_t v) noexcept { return reinterpret_cast<Node*>(v & ~kMark); }
  static bool marked(std::uintptr_t v) noexcept { return (v & kMark) != 0; }
  static std::uintptr_t raw(Node* n) noexcept { return reinterpret_cast<std::uintptr_t>(n); }
  static std::string_view key_of(const Node* n) noexcept { return static_cast<const DataNode*>(n)->key(); }
  static std::uint64_t prefix_of(std::string_view k) noexcept {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < 8; ++i) {
      v = (v << 8) | (i < k.size() ? static_cast<unsigned char>(k[i]) : 0U);
    }
    return v;
  }
  // <0, 0, >0 as the data node's key compares with `key` (prefix kp).
  static int compare(const Node* n, std::string_view key, std::uint64_t kp) noexcept {
    const std::uint64_t np = static_cast<const DataNode*>(n)->prefix();
    if (np != kp) return np < kp ? -1 : 1;
    return key_of(n).compare(key);
  }
  static bool is_deleted(const Node* n) noexcept {
    return n->deleted.load(std::memory_order_acquire) != 0;
  }
  // From n on, the first node that is neither a marker nor deleted (or null).
  // Read-only: the readers' way past a half-finished delete.
  static Node* skip_dead(Node* n) noexcept {
    while (n != nullptr && (n->kind == Node::kMarker || is_deleted(n))) {
      n = n->next.load(std::memory_order_acquire);
    }
    return n;
  }

  int random_height() noexcept;
  // fingers (may be null): per index level, a node that was linked at that
  // level with a key < `key`, where the walk at that level may start.
  Node* search_index(std::string_view key, bool purge_equal, Node** preds, Node** succs,
                     Node* const* fingers = nullptr) const;
  void help_delete(Node* b, Node* n, Node* f);
  // Of two level-0 starts for one key (each the head or a node with a
  // smaller key), the one further along.
  Node* later_start(Node* a, Node* b) const noexcept {
    if (a == head_) return b;
    if (b == head_) return a;
    return compare(a, key_of(b), static_cast<const DataNode*>(b)->prefix()) < 0 ? b : a;
  }
  Node* seek_ge(std::string_view key) const;
  // seek_ge() with fingers (see search_index); preds receives the per-level
  // predecessors the last search found, *before0 (when given) the last node
  // the level-0 walk left behind: the head or a node with a key < `key`,
  // live when the walk passed it. The caller has pinned the domain.
  Node* seek_ge_at(std::string_view key, Node* const* fingers, Node** preds, Node** before0 = nullptr) const;
  Node* find_node(std::string_view key) const;
  void unlink_deleted(std::string_view key);
  // Returns the number of index levels it linked z into (all of them unless
  // z was deleted meanwhile).
  int build_tower(DataNode* z, Node** preds, Node** succs);
  // insert(); with fingers (see search_index), and *linked = the index levels
  // the new node was linked into (0 when not inserted). preds receives the
  // per-level predecessors of `key` the last search found; *searched says
  // whether there was one. start0 (may be null): the head or a node with a
  // key < `key` that was linked at level 0 (and is kept from being freed by
  // the caller's pin), where the level-0 walk may start: a new node without
  // a tower then needs no index search at all, one with a tower starts its
  // level-0 walk from the later of start0 and the index search's result.
  InsertResult insert_at(std::string_view key, V&& value, Node* const* fingers, Node** preds, int* linked,
                         Node** node, Node* start0 = nullptr, bool* searched = nullptr);
  void release_ref(Node* n) const noexcept {
    // acq_rel: the last owner sees every unlink the other owner performed.
    if (n->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // Leaves the byte count when retired (before the epoch domain frees it).
      bytes_.fetch_sub(node_bytes(static_cast<const DataNode*>(n)), std::memory_order_relaxed);
      domain_->retire(n);
    }
  }

  std::unique_ptr<EpochDomain> owned_domain_;
  EpochDomain* domain_;
  const std::uint64_t seed_;
  NodeArena* const arena_;  // data nodes' memory (released, not deleted, by the destructor)
  std::atomic<std::uint64_t> height_counter_{0};
  std::atomic<std::int64_t> count_{0};
  mutable std::atomic<std::int64_t> bytes_{0};  // memory_bytes(); relaxed, a statistic
  Node* const head_;

 public:
  class Cursor {
   public:
    Cursor(Cursor&&) noexcept = default;
    Cursor& operator=(Cursor&&) noexcept = default;
    // Advances to the next entry; false at the end of the range.
    bool next() {
      if (done_) return false;
      Node* n;
      if (!started_) {
        started_ = true;
        n = map_->seek_ge(lo_);
      } else {
        // Markers and deleted nodes are skipped; their next links still lead
        // forward in key order (a deleted node's link is frozen by its marker).
        n = skip_dead(cur_->next.load(std::memory_order_acquire));
      }
      if (n == nullptr || (has_hi_ && key_of(n) >= std::string_view(hi_))) {
        done_ = true;
        cur_ = nullptr;
        guard_.release();
        return false;
      }
      cur_ = n;
      return true;
    }
    // The current entry; valid until the next call to next().
    std::string_view key() const noexcept { return key_of(cur_); }
    const V& value() const noexcept { return static_cast<const DataNode*>(cur_)->value; }

   private:
    friend class SkipListMap;
    Cursor(const SkipListMap* m, std::string_view lo, std::optional<std::string_view> hi)
        : map_(m), guard_(m->domain_->pin()), lo_(lo) {
      if (hi) set_hi(*hi);
    }
    void set_hi(std::string_view hi) {
      hi_.assign(hi);
      has_hi_ = true;
    }
    const SkipListMap* map_;
    EpochDomain::Guard guard_;
    std::string lo_, hi_;
    bool has_hi_ = false;
    bool started_ = false;
    bool done_ = false;
    Node* cur_ = nullptr;
  };

  // Where a lookup of an OrderedFinder left its key at level 0 (the head or a
  // node with a smaller key, live when the walk passed it): an insert of that
  // key through an OrderedInserter may start its level-0 walk there instead
  // of searching the index (a bulk load's presence check and its insert
  // share one ordered walk; docs/store.md, "Ordered bulk insert"). Valid only
  // while the domain stays pinned from the find to the insert (the node may
  // be deleted meanwhile: the insert then searches as without it); an empty
  // Hint is no hint.
  class Hint {
   public:
    Hint() noexcept = default;
    explicit operator bool() const noexcept { return n_ != nullptr; }

   private:
    friend class SkipListMap;
    explicit Hint(Node* n) noexcept : n_(n) {}
    Node* n_ = nullptr;
  };

  // Per index level, a finger: a node that was linked at that level with a
  // key below the previous key of an increasing sequence, where the next
  // search may start instead of the head (docs/store.md, "Ordered bulk
  // insert"). The domain stays pinned while fingers are held (they point at
  // nodes that would otherwise be freed), re-pinned every kRepin steps with
  // the fingers dropped, so that reclamation is not held back for a whole
  // load. One thread; short-lived (like a Cursor).
  class Fingers {
   public:
    static constexpr std::size_t kRepin = 4096;

   protected:
    // held: the caller pins the domain for this object's life (no re-pins,
    // nothing dropped).
    explicit Fingers(EpochDomain* d, bool held = false) : domain_(d), held_(held) {}
    // Before a step for `key`: pins, and returns the fingers if they are
    // valid starts for it (key greater than the previous step's), else null.
    Node* const* begin(std::string_view key) {
      if (held_) return have_ && key > std::string_view(last_) ? fingers_ : nullptr;
      if (since_pin_ == kRepin) {
        guard_.release();
        since_pin_ = 0;
        have_ = false;
      }
      if (since_pin_++ == 0) guard_ = domain_->pin();
      return have_ && key > std::string_view(last_) ? fingers_ : nullptr;
    }
    // After it: index levels below `linked` get `node` (linked there, key =
    // this key), the others the step's predecessors there (key < this key).
    // A step that made no index search (searched false: it linked a node
    // without a tower, from a hint) leaves the fingers as they were: linked
    // with keys below the previous key, so below this one too (a hint is
    // taken without fingers only while none are held; see insert()).
    void end(std::string_view key, Node* const* preds, int linked, Node* node, bool searched = true) {
      if (searched) {
        for (int l = 0; l < kMaxHeight; ++l) fingers_[l] = l < linked ? node : preds[l];
      }
      last_node_ = node;
      have_ = true;
      last_.assign(key);
    }
    // The node the previous step linked at level 0 (null if none); like the
    // fingers, usable only when begin() returned them.
    Node* last_node() const noexcept { return last_node_; }
    bool held() const noexcept { return held_; }
    // Fingers are held (whether or not valid for the next key).
    bool holds_fingers() const noexcept { return have_; }

   private:
    EpochDomain* domain_;
    bool held_;
    EpochDomain::Guard guard_;
    Node* fingers_[kMaxHeight] = {};
    Node* last_node_ = nullptr;
    bool have_ = false;
    std::size_t since_pin_ = 0;
    std::string last_;
  };

  // Inserts keys in increasing order (a bulk load): insert() has insert()'s
  // semantics for each key, and any number of other readers and writers may
  // run meanwhile. A key not greater than the previous one is inserted with
  // a search from the head.
  class OrderedInserter : public Fingers {
   public:
    OrderedInserter(OrderedInserter&&) noexcept = default;
    InsertResult insert(std::string_view key, V&& value) { return insert(key, std::move(value), Hint()); }
    // The same, the level-0 walk starting from `at` (OrderedFinder::find's
    // hint for this key, the domain pinned since) or from the node this
    // inserter linked last, whichever is further along (both have smaller
    // keys): a node without a tower (3 in 4) is then linked without an
    // index search. An empty hint: insert(key, value).
    InsertResult insert(std::string_view key, V&& value, Hint at) {
      Node* const* fingers = this->begin(key);
      // Without a hint the last node is no start: keys far apart would
      // walk level 0 all the way between them. Nor is a hint alone right
      // after a re-pin dropped the last node: keys past the map's end share
      // one hint, and the walk from it would pass every node linked since.
      // Nor is it after a key not above the previous one while fingers are
      // held: a step from a hint leaves the fingers as they are, and they
      // lie above this key and maybe the next, whose search would start
      // there; that key searches from the head and resets them.
      Node* start = fingers != nullptr || (this->held() && !this->holds_fingers()) ? at.n_ : nullptr;
      if (Node* last = start != nullptr && fingers != nullptr ? this->last_node() : nullptr; last != nullptr)
        start = map_->later_start(start, last);
      Node* preds[kMaxHeight];
      int linked = 0;
      Node* node = nullptr;
      bool searched = false;
      const InsertResult r =
          map_->insert_at(key, std::move(value), fingers, preds, &linked, &node, start, &searched);
      this->end(key, preds, linked, r == InsertResult::inserted ? node : nullptr, searched);
      return r;
    }

   private:
    friend class SkipListMap;
    OrderedInserter(SkipListMap* m, bool held) : Fingers(m->domain_, held), map_(m) {}
    SkipListMap* map_;
  };

  // Lookups of keys in increasing order: find() is find() without the copy
  // (the value stays valid until the next call or the finder's end), each
  // search starting from the previous one's fingers. Stores to the list only
  // as find() does (the index search's helping); allocates only to keep a
  // copy of the previous key (when it is longer than any before).
  class OrderedFinder : public Fingers {
   public:
    OrderedFinder(OrderedFinder&&) noexcept = default;
    const V* find(std::string_view key) { return find(key, nullptr); }
    // The same; *at (when given) receives where the walk left the key at
    // level 0, for OrderedInserter::insert of this key.
    const V* find(std::string_view key, Hint* at) {
      Node* const* fingers = this->begin(key);
      Node* preds[kMaxHeight];
      Node* before = nullptr;
      Node* n = map_->seek_ge_at(key, fingers, preds, at != nullptr ? &before : nullptr);
      if (at != nullptr) *at = Hint(before);
      this->end(key, preds, 0, nullptr);
      past_end_ = n == nullptr;
      if (n == nullptr || compare(n, key, prefix_of(key)) != 0) return nullptr;
      return &static_cast<const DataNode*>(n)->value;
    }
    // The last find() met no live entry at or after its key. If nothing was
    // inserted since (the caller is the only writer and did not), every
    // larger key is absent too: a caller going through increasing keys may
    // skip their finds (a bulk load into an empty map, or past its end).
    bool past_end() const noexcept { return past_end_; }

   private:
    friend class SkipListMap;
    explicit OrderedFinder(const SkipListMap* m) : Fingers(m->domain_), map_(m) {}
    const SkipListMap* map_;
    bool past_end_ = false;
  };
};

// ---------------------------------------------------------------------------
// Implementation.

template <class V>
int SkipListMap<V>::random_height() noexcept {
  // splitmix64 of (seed, counter): deterministic, no hidden global RNG.
  std::uint64_t x = seed_ + 0x9e3779b97f4a7c15ULL *
                                (height_counter_.fetch_add(1, std::memory_order_relaxed) + 1);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  int h = 0;
  while ((x & 3U) == 0 && h < kMaxHeight) {  // p = 1/4 per level
    ++h;
    x >>= 2;
  }
  return h;
}

// Walks the index levels top-down, stopping at each level before the first
// node whose key is >= key. Deleted nodes met on the way are frozen (marked)
// at that level and unlinked. With purge_equal it also unlinks, at every
// level, each deleted node whose key equals `key` (the clean-up that must
// precede retiring such a node).
// Returns the level-1 predecessor (head or a data node), a good start for the
// level-0 walk. preds/succs, when given, receive per-level neighbours.
template <class V>
typename SkipListMap<V>::Node* SkipListMap<V>::search_index(std::string_view key, bool purge_equal,
                                                            Node** preds, Node** succs,
                                                            Node* const* fingers) const {
  const std::uint64_t kp = prefix_of(key);
retry:
  Node* x = head_;
  for (int l = kMaxHeight - 1; l >= 0; --l) {
    // A finger further along this level than x is a better start: both were
    // linked here with keys < key, and the level is sorted. Its link is
    // checked like x's just below (unmarked: it is still linked here).
    if (fingers != nullptr) {
      Node* f = fingers[l];
      if (f != nullptr && f != head_ && f != x && (x == head_ || compare(f, key_of(x), static_cast<const DataNode*>(x)->prefix()) > 0)) x = f;
    }
    std::uintptr_t xr = x->up()[l].load(std::memory_order_acquire);
    if (marked(xr)) {  // x is being deleted: its links are frozen
      fingers = nullptr;  // from the head from now on
      goto retry;
    }
    Node* y = ptr(xr);
    while (y != nullptr) {
      std::uintptr_t yr = y->up()[l].load(std::memory_order_acquire);
      if (!marked(yr) && is_deleted(y)) {
        // Help the deleter: freeze y's link at this level before unlinking.
        yr = y->up()[l].fetch_or(kMark, std::memory_order_acq_rel) | kMark;
      }
      if (marked(yr)) {
        std::uintptr_t expected = raw(y);
        // acq_rel: publishes the unlink; on failure x changed or was frozen.
        if (!x->up()[l].compare_exchange_strong(expected, yr & ~kMark, std::memory_order_acq_rel,
                                              std::memory_order_acquire)) {
          goto retry;
        }
        y = ptr(yr);
        continue;
      }
      if (compare(y, key, kp) < 0) {
        x = y;
        y = ptr(yr);
        continue;
      }
      break;
    }
    if (purge_equal) {
      // Nodes with this key follow x at this level (the level is sorted and x
      // is linked here). Unlink the deleted ones; live ones are stepped over.
      Node* p = x;
      Node* q = y;
      while (q != nullptr) {
        std::uintptr_t qr = q->up()[l].load(std::memory_order_acquire);
        if (!marked(qr) && is_deleted(q)) {
          qr = q->up()[l].fetch_or(kMark, std::memory_order_acq_rel) | kMark;
        }
        if (marked(qr)) {
          std::uintptr_t expected = raw(q);
          if (!p->up()[l].compare_exchange_strong(expected, qr & ~kMark, std::memory_order_acq_rel,
                                                std::memory_order_acquire)) {
            goto retry;
          }
          q = ptr(qr);
          continue;
        }
        if (compare(q, key, kp) != 0) break;
        p = q;
        q = ptr(qr);
      }
    }
    if (preds != nullptr) {
      preds[l] = x;
      succs[l] = y;
    }
  }
  return x;
}

// n was seen deleted with b -> n -> f. Either appends n's marker or unlinks
// n and its marker from b (ConcurrentSkipListMap.helpDelete). One step only.
// Writers only (it may allocate the marker).
template <class V>
void SkipListMap<V>::help_delete(Node* b, Node* n, Node* f) {
  if (f != n->next.load(std::memory_order_acquire) || n != b->next.load(std::memory_order_acquire)) {
    return;
  }
  if (f == nullptr || f->kind != Node::kMarker) {
    auto* m = new Marker(f);
    Node* expected = f;
    if (!n->next.compare_exchange_strong(expected, m, std::memory_order_acq_rel,
                                         std::memory_order_relaxed)) {
      delete m;  // never published
    }
  } else {
    Node* after = f->next.load(std::memory_order_acquire);  // a marker's next never changes
    Node* expected = n;
    if (b->next.compare_exchange_strong(expected, after, std::memory_order_acq_rel,
                                        std::memory_order_relaxed)) {
      domain_->retire(f);  // the unlinking thread owns the marker; n is refcounted
    }
  }
}

// Readers' level-0 walk: the first node with key >= `key` that was live when
// the walk reached it, or null. It stores nothing and allocates nothing: a
// deleted node or a marker is stepped over, never helped (the deleter, or the
// next writer that passes, finishes the unlink).
//
// Why stepping over is enough: the walk starts at a node b that was live
// after b.next was read, so b was linked then, and every node present for the
// whole call with a key >= `key` was reachable from b.next. Stepping along
// next links keeps it reachable: inserts and unlinks ahead of the walk keep
// present nodes reachable, and a deleted node's next is frozen by its marker
// before the node is unlinked (the Cursor argument in docs/store.md). A b
// that is already deleted may be unlinked, with nodes inserted since behind
// its back: search again (search_index unlinks it from the index on the way).
template <class V>
typename SkipListMap<V>::Node* SkipListMap<V>::seek_ge(std::string_view key) const {
  return seek_ge_at(key, nullptr, nullptr);
}

template <class V>
typename SkipListMap<V>::Node* SkipListMap<V>::seek_ge_at(std::string_view key, Node* const* fingers,
                                                          Node** preds, Node** before0) const {
  const std::uint64_t kp = prefix_of(key);
  Node* succs[kMaxHeight];
  for (;;) {
    Node* b = search_index(key, false, preds, preds != nullptr ? succs : nullptr, fingers);
    fingers = nullptr;  // a retry searches from the head
    Node* n = b->next.load(std::memory_order_acquire);
    if (b->kind == Node::kData && is_deleted(b)) continue;
    for (n = skip_dead(n); n != nullptr && compare(n, key, kp) < 0;) {
      b = n;  // live when skip_dead returned it, key < key
      n = skip_dead(n->next.load(std::memory_order_acquire));
    }
    if (before0 != nullptr) *before0 = b;
    return n;
  }
}

// The node with this key that was live when the walk reached it, or null
// (then the key was absent at some instant of the call).
template <class V>
typename SkipListMap<V>::Node* SkipListMap<V>::find_node(std::string_view key) const {
  Node* n = seek_ge(key);
  return n != nullptr && compare(n, key, prefix_of(key)) == 0 ? n : nullptr;
}

// Writers' walk for the deleter whose own unlink failed: helps every deleted
// node it meets and returns only once no deleted node with this key is linked
// at level 0 (such a node lies on the path and is helped until unlinked).
template <class V>
void SkipListMap<V>::unlink_deleted(std::string_view key) {
  const std::uint64_t kp = prefix_of(key);
  for (;;) {
    Node* b = search_index(key, false, nullptr, nullptr);
    Node* n = b->next.load(std::memory_order_acquire);
    for (;;) {
      if (n == nullptr) return;
      Node* f = n->next.load(std::memory_order_acquire);
      if (n != b->next.load(std::memory_order_acquire)) break;  // inconsistent read
      if (n->kind == Node::kMarker) break;                      // b is deleted
      if (is_deleted(n)) {
        help_delete(b, n, f);
        break;
      }
      if (b->kind == Node::kData && is_deleted(b)) break;
      if (compare(n, key, kp) >= 0) return;
      b = n;
      n = f;
    }
  }
}

template <class V>
InsertResult SkipListMap<V>::insert(std::string_view key, V&& value) {
  EpochDomain::Guard g = domain_->pin();
  Node* preds[kMaxHeight];
  int linked = 0;
  Node* node = nullptr;
  return insert_at(key, std::move(value), nullptr, preds, &linked, &node);
}

// The caller has pinned the domain.
template <class V>
InsertResult SkipListMap<V>::insert_at(std::string_view key, V&& value, Node* const* fingers, Node** preds,
                                       int* linked, Node** node_out, Node* start0, bool* searched) {
  const std::uint64_t kp = prefix_of(key);
  Node* succs[kMaxHeight];
  DataNodeHolder z;  // owned until published
  *linked = 0;
  if (searched != nullptr) *searched = false;
  // A start for level 0 must be the head or have a smaller key (a caller's
  // slip only costs the shortcut).
  if (start0 != nullptr && start0 != head_ && compare(start0, key, kp) >= 0) start0 = nullptr;
  for (;;) {
    Node* b;
    if (start0 != nullptr) {
      // The node is made first: its height decides whether the index must
      // be searched (for the tower's neighbours). With a hint the key is
      // expected absent; if present after all, the node is never published.
      if (z.p == nullptr) z.p = DataNode::create(*arena_, key, std::move(value), random_height());
      b = start0;
      start0 = nullptr;  // one try: a retry searches
      if (z.p->height > 0) {
        Node* x = search_index(key, false, preds, succs, fingers);
        fingers = nullptr;
        if (searched != nullptr) *searched = true;
        b = later_start(b, x);  // both linked at level 0 with keys < key
      }
    } else {
      b = search_index(key, false, preds, succs, fingers);
      fingers = nullptr;  // a retry searches from the head
      if (searched != nullptr) *searched = true;
    }
    Node* n = b->next.load(std::memory_order_acquire);
    for (;;) {
      if (n != nullptr) {
        Node* f = n->next.load(std::memory_order_acquire);
        if (n != b->next.load(std::memory_order_acquire)) break;
        if (n->kind == Node::kMarker) break;
        if (is_deleted(n)) {
          help_delete(b, n, f);
          break;
        }
        if (b->kind == Node::kData && is_deleted(b)) break;
        const int c = compare(n, key, kp);
        if (c < 0) {
          b = n;
          n = f;
          continue;
        }
        if (c == 0) return InsertResult::exists;
      }
      if (z.p == nullptr) z.p = DataNode::create(*arena_, key, std::move(value), random_height());
      z.p->next.store(n, std::memory_order_relaxed);
      Node* expected = n;
      // Release: the node's key, value and tower are initialised before it
      // becomes reachable.
      if (!b->next.compare_exchange_strong(expected, z.p, std::memory_order_release,
                                           std::memory_order_relaxed)) {
        break;  // b changed (insert, delete or marker): search again
      }
      DataNode* node = std::exchange(z.p, nullptr);
      count_.fetch_add(1, std::memory_order_relaxed);
      bytes_.fetch_add(node_bytes(node), std::memory_order_relaxed);  // a statistic: no ordering
      *node_out = node;
      // After build_tower the inserter's reference is dropped: a concurrent
      // erase may retire the node, so the caller's pin is what keeps it (and
      // a finger to it) valid.
      if (node->height > 0) *linked = build_tower(node, preds, succs);
      return InsertResult::inserted;
    }
  }
}

// Links z into index levels 1..height bottom-up. Stops as soon as z is
// deleted (its links frozen). Then, if z is deleted, re-runs a purging
// search so that any level it managed to link is unlinked again, and drops
// the inserter's reference.
template <class V>
int SkipListMap<V>::build_tower(DataNode* z, Node** preds, Node** succs) {
  const std::string_view key = z->key();
  int l = 0;
  for (; l < z->height; ++l) {
    for (;;) {
      if (is_deleted(z)) goto done;
      std::uintptr_t cur = z->up()[l].load(std::memory_order_acquire);
      if (marked(cur)) goto done;
      Node* succ = succs[l];
      if (ptr(cur) != succ &&
          !z->up()[l].compare_exchange_strong(cur, raw(succ), std::memory_order_acq_rel,
                                            std::memory_order_acquire)) {
        continue;  // frozen meanwhile: the check above stops us
      }
      std::uintptr_t expected = raw(succ);
      if (preds[l]->up()[l].compare_exchange_strong(expected, raw(z), std::memory_order_release,
                                                  std::memory_order_relaxed)) {
        break;
      }
      search_index(key, false, preds, succs);  // neighbours moved: refresh
    }
  }
done:
  // Store buffering against erase(): here "link CAS on pred.up[l], then load
  // z.deleted"; there "deleted CAS, then the purge's loads of the index
  // links". If both loads missed the other side's store, neither would purge
  // the level just linked and z would be retired while still linked there. A
  // seq_cst fence on each side (pairs with the one in erase()) forbids that
  // outcome; x86 and ARMv8 forbid it anyway, the C++ model and POWER do not.
  // The litmus test and a per-access table: docs/concurrency.md, "The rule
  // store's skip list: readers, and the tower race".
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (is_deleted(z)) search_index(key, true, nullptr, nullptr);
  release_ref(z);
  return l;
}

template <class V>
EraseResult SkipListMap<V>::erase(std::string_view key, V* removed) {
  const std::uint64_t kp = prefix_of(key);
  EpochDomain::Guard g = domain_->pin();
  for (;;) {
    Node* b = search_index(key, false, nullptr, nullptr);
    Node* n = b->next.load(std::memory_order_acquire);
    for (;;) {
      if (n == nullptr) return EraseResult::absent;
      Node* f = n->next.load(std::memory_order_acquire);
      if (n != b->next.load(std::memory_order_acquire)) break;
      if (n->kind == Node::kMarker) break;
      if (is_deleted(n)) {
        help_delete(b, n, f);
        break;
      }
      if (b->kind == Node::kData && is_deleted(b)) break;
      const int c = compare(n, key, kp);
      if (c > 0) return EraseResult::absent;
      if (c < 0) {
        b = n;
        n = f;
        continue;
      }
      std::uint8_t expected = 0;
      // The linearisation point of erase; exactly one thread wins it.
      if (!n->deleted.compare_exchange_strong(expected, 1, std::memory_order_acq_rel,
                                              std::memory_order_relaxed)) {
        break;  // lost to another erase: re-search (will report absent)
      }
      if (removed != nullptr) *removed = static_cast<DataNode*>(n)->value;
      count_.fetch_sub(1, std::memory_order_relaxed);

      // Level 0: append our marker and unlink n + marker in one CAS, or let
      // unlink_deleted() finish the job with helping.
      bool unlinked = false;
      auto* m = new Marker(f);
      Node* exp_f = f;
      if (n->next.compare_exchange_strong(exp_f, m, std::memory_order_acq_rel,
                                          std::memory_order_relaxed)) {
        Node* exp_n = n;
        if (b->next.compare_exchange_strong(exp_n, f, std::memory_order_acq_rel,
                                            std::memory_order_relaxed)) {
          domain_->retire(m);
          unlinked = true;
        }
      } else {
        delete m;  // someone else appended a marker (or n changed): never published
      }
      if (!unlinked) unlink_deleted(key);

      // Index levels: freeze top-down, then unlink with a purging search (a
      // re-inserted live node with the same key may stand before n at some
      // level, so stopping at the first equal key is not enough).
      if (n->height > 0) {
        for (int l = n->height - 1; l >= 0; --l) {
          n->up()[l].fetch_or(kMark, std::memory_order_acq_rel);
        }
        // Pairs with the fence before build_tower()'s final is_deleted check
        // (store buffering: our deleted CAS before the purge's link loads,
        // its link CAS before its deleted load): one of us sees the other.
        std::atomic_thread_fence(std::memory_order_seq_cst);
        search_index(key, true, nullptr, nullptr);
      }
      release_ref(n);
      return EraseResult::erased;
    }
  }
}

template <class V>
std::optional<V> SkipListMap<V>::find(std::string_view key) const {
  EpochDomain::Guard g = domain_->pin();
  Node* n = find_node(key);
  if (n == nullptr) return std::nullopt;
  return static_cast<const DataNode*>(n)->value;
}

template <class V>
bool SkipListMap<V>::contains(std::string_view key) const {
  EpochDomain::Guard g = domain_->pin();
  return find_node(key) != nullptr;
}

}  // namespace cg::store
