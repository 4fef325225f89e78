#include "dataplane/prefix.hpp"

#include <cstring>

namespace cg {
namespace {

// Probes per bulk filter lookup: a burst with many lengths in use is probed
// in chunks of this size (stack arrays, ~3 KiB).
constexpr std::size_t kChunk = 128;

struct Probe {
  uint16_t pkt;  // packet index in the burst
  uint16_t key;  // address key index within the packet's keys
  uint8_t len;   // prefix length probed
};

uint32_t host_order_v4(const uint8_t* b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

// Dir24's reclaimer over the workers' QSBR variable: a retired group is
// reused once every worker has reported quiescent since its retirement.
uint64_t qsbr_start(void* v) noexcept { return rte_rcu_qsbr_start(static_cast<rte_rcu_qsbr*>(v)); }
bool qsbr_check(void* v, uint64_t token, bool wait) noexcept {
  return rte_rcu_qsbr_check(static_cast<rte_rcu_qsbr*>(v), token, wait) == 1;
}

}  // namespace

int PrefixTables::table_of(RuleKind kind, uint8_t family) noexcept {
  int k;
  switch (kind) {
    case RuleKind::kSrc: k = 0; break;
    case RuleKind::kDst: k = 1; break;
    case RuleKind::kIp: k = 2; break;
    default: return -1;
  }
  if (family != 4 && family != 6) return -1;
  return k * 2 + (family == 6 ? 1 : 0);
}

PrefixTables::~PrefixTables() = default;

bool PrefixTables::add(const Rule& r, uint32_t slot) noexcept {
  const int t = table_of(r.kind, r.addr.family);
  if (t < 0 || !r.prefix_len) return false;
  if (!in_dir24(r)) {
    count(r, +1);
    ++total_;
    return true;
  }
  const auto k = static_cast<std::size_t>(t / 2);
  const std::string kind(kind_name(r.kind));
  if (slot > prefix::Dir24::kMaxValue) {
    // Slots are reused lowest-freed first; one this high means more than
    // 2^25 rules were present at some point.
    error_ = "IPv4 prefix rules need a hit-counter slot below 2^25 (33.5 M); this one got slot " +
             std::to_string(slot);
    return false;
  }
  if (v4_own_[k] == nullptr) {
    prefix::Dir24::Options o;
    o.budget = &budget_;
    if (opts_.qsv != nullptr) o.reclaim = {opts_.qsv, &qsbr_start, &qsbr_check};
    std::string err;
    v4_own_[k] = prefix::Dir24::create(o, &err);
    if (v4_own_[k] == nullptr) {
      error_ = "cannot create the IPv4 prefix table of " + kind + " rules: " + err;
      return false;
    }
    // release: a worker that loads this pointer (acquire) sees the table
    // create() initialised, on ARM as on x86.
    v4_[k].store(v4_own_[k].get(), std::memory_order_release);
  }
  switch (v4_own_[k]->add(host_order_v4(r.addr.bytes.data()), *r.prefix_len, slot)) {
    case prefix::Dir24::Status::kOk:
      ++total_;
      return true;
    case prefix::Dir24::Status::kNoMemory:
      error_ = "max_memory reached: the IPv4 prefix table of " + kind + " rules cannot grow";
      break;
    default:  // kExists/kInvalid: the exact set and the parser rule these out
      error_ = "the IPv4 prefix table of " + kind + " rules refused " + format_rule(r);
      break;
  }
  drop_if_empty(k);  // a table made for this prefix alone goes again
  return false;
}

void PrefixTables::remove(const Rule& r) noexcept {
  const int t = table_of(r.kind, r.addr.family);
  if (t < 0 || !r.prefix_len) return;
  if (!in_dir24(r)) {
    count(r, -1);
    --total_;
    return;
  }
  const auto k = static_cast<std::size_t>(t / 2);
  prefix::Dir24* d = v4_own_[k].get();
  // Dir24::remove rewrites the prefix's entries to the longest remaining
  // covering prefix (or none) entry by entry: a worker finds the old rule,
  // the covering one, or nothing, never a reused group (QSBR, above).
  if (d == nullptr || d->remove(host_order_v4(r.addr.bytes.data()), *r.prefix_len) != prefix::Dir24::Status::kOk)
    return;
  --total_;
  drop_if_empty(k);
}

void PrefixTables::drop_if_empty(std::size_t k) noexcept {
  if (v4_own_[k] == nullptr || v4_own_[k]->size() != 0) return;
  // The kind has no IPv4 prefix left: the table goes, and its memory with
  // it (a flushed feed leaves nothing behind; the next prefix makes a new
  // one). Unpublished first, freed once every worker has been quiescent
  // since, so no burst still holds it, as the Blocklist frees grown tables.
  v4_[k].store(nullptr, std::memory_order_release);
  if (opts_.qsv != nullptr) rte_rcu_qsbr_synchronize(opts_.qsv, RTE_QSBR_THRID_INVALID);
  const std::lock_guard<std::mutex> lock(memory_mu_);  // memory_bytes() on another thread
  v4_own_[k].reset();
}

std::size_t PrefixTables::memory_bytes() const noexcept {
  // Under the mutex remove() frees a table with: the telemetry thread is no
  // QSBR reader, so the grace period does not cover it.
  const std::lock_guard<std::mutex> lock(memory_mu_);
  std::size_t b = 0;
  for (const auto& v : v4_) {
    // acquire: as the workers (the table create() made).
    if (const prefix::Dir24* d = v.load(std::memory_order_acquire)) b += d->memory().total();
  }
  return b;
}

// The words are written by this thread only, so a load + store is enough.
// relaxed: a worker's probe of this length is ordered by the blocklist
// generation, not by this store: the generation bump (release) after the
// rule's filter and exact-set inserts comes after this store in program
// order, and a worker reads the generation (acquire) before lookup(). A
// worker that reads the old word misses only rules whose generation it has
// not seen: rules not acknowledged yet. See docs/concurrency.md.
void PrefixTables::count(const Rule& r, int delta) noexcept {
  const int t = table_of(r.kind, r.addr.family);
  const unsigned len = *r.prefix_len;
  uint32_t& n = count_[t][len];
  if (delta < 0 && n == 0) return;
  n = delta > 0 ? n + 1 : n - 1;
  if (n > 1 || (n == 1 && delta < 0)) return;  // the bit does not change
  std::atomic<uint64_t>& w = used_[t][len / 64];
  const uint64_t bit = uint64_t{1} << (len % 64);
  const uint64_t v = w.load(std::memory_order_relaxed);
  w.store(n != 0 ? (v | bit) : (v & ~bit), std::memory_order_relaxed);
}

// Smallest kind first (as for exact keys), then the first address key (the
// source's), then the longest prefix of that address.
static void merge(PrefixHit& h, uint8_t kind, uint16_t key, uint8_t len, uint32_t slot) noexcept {
  if (h.kind == 0 || kind < h.kind || (kind == h.kind && (key < h.key || (key == h.key && len > h.len))))
    h = {kind, len, key, slot};
}

void PrefixTables::lookup_v4(const PacketKeys* keys, const bool* classify, uint16_t n,
                             PrefixHit* out) const noexcept {
  for (std::size_t k = 0; k < v4_.size(); ++k) {
    // acquire: pairs with the release store of a new table (see add()).
    const prefix::Dir24* d = v4_[k].load(std::memory_order_acquire);
    if (d == nullptr) continue;
    const auto kind = static_cast<RuleKind>(static_cast<unsigned>(RuleKind::kSrc) + k);
    for (uint16_t i = 0; i < n; ++i) {
      if (!classify[i]) continue;
      const PacketKeys& pk = keys[i];
      for (unsigned j = 0; j < pk.n; ++j) {
        if (pk.key[j].kind != kind) continue;
        const uint8_t* kb = pk.key_bytes(j);  // [kind][family][address]
        if (kb[1] != 4) continue;
        const uint32_t e = d->lookup(host_order_v4(kb + 2));
        if (prefix::Dir24::depth(e) != 0)
          merge(out[i], static_cast<uint8_t>(kind), static_cast<uint16_t>(j),
                static_cast<uint8_t>(prefix::Dir24::depth(e)), prefix::Dir24::value(e));
      }
    }
  }
}

void PrefixTables::lookup(const PacketKeys* keys, const bool* classify, uint16_t n, bool verify,
                          PrefixHit* out, const LookupTables* lt) const noexcept {
  for (uint16_t i = 0; i < n; ++i) out[i] = {};
  lookup_v4(keys, classify, n, out);
  // One snapshot of the lengths per burst (relaxed: see add()).
  uint64_t used[kTables][kWords];
  uint64_t any = 0;
  for (unsigned t = 0; t < kTables; ++t) {
    for (unsigned w = 0; w < kWords; ++w) {
      used[t][w] = used_[t][w].load(std::memory_order_relaxed);
      any |= used[t][w];
    }
  }
  if (any == 0) return;
  // acquire: pairs with the blocklist's release of a grown pair (Growth).
  if (lt == nullptr) lt = tables_->load(std::memory_order_acquire);
  const GatewayFilter& filter = *lt->filter;
  const ExactSet& exact = *lt->exact;

  uint64_t hashes[kChunk];
  Probe probes[kChunk];
  uint64_t hit_mask[(kChunk + 63) / 64];
  std::size_t np = 0;
  uint8_t buf[kPrefixKeyMax];
  auto flush = [&] {
    if (np == 0) return;
    filter.contains_bulk(hashes, np, hit_mask);
    for (std::size_t w = 0; w < (np + 63) / 64; ++w) {
      for (uint64_t bits = hit_mask[w]; bits != 0; bits &= bits - 1) {
        const Probe& p = probes[w * 64 + static_cast<std::size_t>(__builtin_ctzll(bits))];
        const PacketKeys& pk = keys[p.pkt];
        const uint8_t* kb = pk.key_bytes(p.key);
        const RuleKind probed = pk.key[p.key].kind;
        RuleKind kind = probed;
        uint32_t slot = 0;
        if (verify) {
          const std::size_t len = encode_prefix_key(buf, probed, kb[1], kb + 2, p.len);
          if (!exact.contains(key_hash128(buf, len), &kind, &slot)) continue;  // a false positive
        }
        merge(out[p.pkt], static_cast<uint8_t>(kind), p.key, p.len, slot);
      }
    }
    np = 0;
  };
  for (uint16_t i = 0; i < n; ++i) {
    if (!classify[i]) continue;
    const PacketKeys& pk = keys[i];
    for (unsigned k = 0; k < pk.n; ++k) {
      const RuleKind kind = pk.key[k].kind;
      if (kind != RuleKind::kSrc && kind != RuleKind::kDst && kind != RuleKind::kIp) continue;
      const uint8_t* kb = pk.key_bytes(k);  // [kind][family][address]
      const int t = table_of(kind, kb[1]);
      if (t < 0) continue;
      for (unsigned w = 0; w < kWords; ++w) {
        for (uint64_t bits = used[t][w]; bits != 0; bits &= bits - 1) {
          const auto len = static_cast<uint8_t>(w * 64 + static_cast<unsigned>(__builtin_ctzll(bits)));
          hashes[np] = key_hash(buf, encode_prefix_key(buf, kind, kb[1], kb + 2, len));
          probes[np] = {i, static_cast<uint16_t>(k), len};
          if (++np == kChunk) flush();
        }
      }
    }
  }
  flush();
}

}  // namespace cg
