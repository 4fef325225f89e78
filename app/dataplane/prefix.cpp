#include "dataplane/prefix.hpp"

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

// The words are written by this thread only, so a load + store is enough.
// relaxed: a worker's probe of this length is ordered by the blocklist
// generation, not by this store: the generation bump (release) after the
// rule's filter and exact-set inserts comes after this store in program
// order, and a worker reads the generation (acquire) before lookup(). A
// worker that reads the old word misses only rules whose generation it has
// not seen: rules not acknowledged yet. See docs/concurrency.md.
void PrefixTables::add(RuleKind kind, uint8_t family, unsigned len) noexcept {
  const int t = table_of(kind, family);
  if (t < 0 || len >= address_bits(family)) return;
  ++total_;
  if (count_[t][len]++ != 0) return;
  std::atomic<uint64_t>& w = used_[t][len / 64];
  w.store(w.load(std::memory_order_relaxed) | (uint64_t{1} << (len % 64)), std::memory_order_relaxed);
}

void PrefixTables::remove(RuleKind kind, uint8_t family, unsigned len) noexcept {
  const int t = table_of(kind, family);
  if (t < 0 || len >= address_bits(family) || count_[t][len] == 0) return;
  --total_;
  if (--count_[t][len] != 0) return;
  // After the last rule of this length left the filter: a worker still
  // probing it finds nothing, one that no longer probes it misses nothing.
  std::atomic<uint64_t>& w = used_[t][len / 64];
  w.store(w.load(std::memory_order_relaxed) & ~(uint64_t{1} << (len % 64)), std::memory_order_relaxed);
}

void PrefixTables::lookup(const PacketKeys* keys, const bool* classify, uint16_t n, bool verify,
                          PrefixHit* out) const noexcept {
  for (uint16_t i = 0; i < n; ++i) out[i] = {};
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

  uint64_t hashes[kChunk];
  Probe probes[kChunk];
  uint64_t hit_mask[(kChunk + 63) / 64];
  std::size_t np = 0;
  uint8_t buf[kPrefixKeyMax];
  auto flush = [&] {
    if (np == 0) return;
    filter_->contains_bulk(hashes, np, hit_mask);
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
          if (!exact_->contains(key_hash128(buf, len), &kind, &slot)) continue;  // a false positive
        }
        PrefixHit& h = out[p.pkt];
        const auto kv = static_cast<uint8_t>(kind);
        // Smallest kind first (as for exact keys), then the longest prefix.
        if (h.kind == 0 || kv < h.kind || (kv == h.kind && p.len > h.len)) h = {kv, p.len, slot};
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
