#include "dataplane/exact_set.hpp"

#include <rte_errno.h>
#include <rte_jhash.h>

#include <cerrno>

namespace cg {

static_assert(sizeof(Key128) == 16, "exact-set keys are two 64-bit words");

std::unique_ptr<ExactSet> ExactSet::create(const std::string& name, uint32_t capacity,
                                           rte_rcu_qsbr* qsv, int socket, std::string* err) {
  std::unique_ptr<ExactSet> s(new ExactSet());
  // rte_hash reaches ~90%+ occupancy with its cuckoo buckets; leave headroom
  // so a set of `capacity` rules never fails for lack of a cuckoo path.
  const uint32_t entries = capacity < 1024 ? 1024 : capacity + capacity / 4;
  rte_hash_parameters p{};
  p.name = name.c_str();
  p.entries = entries;
  p.key_len = sizeof(Key128);
  p.hash_func = rte_jhash;  // unused: every call passes the precomputed signature
  p.hash_func_init_val = 0;
  p.socket_id = socket;
  p.extra_flag = RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF;
  s->h_ = rte_hash_create(&p);
  if (s->h_ == nullptr) {
    *err = "rte_hash_create(" + name + "): " + rte_strerror(rte_errno);
    return nullptr;
  }
  if (qsv != nullptr) {
    rte_hash_rcu_config rc{};
    rc.v = qsv;
    rc.mode = RTE_HASH_QSBR_MODE_DQ;
    if (rte_hash_rcu_qsbr_add(s->h_, &rc) != 0) {
      *err = "rte_hash_rcu_qsbr_add: " + std::string(rte_strerror(rte_errno));
      return nullptr;
    }
  }
  s->capacity_ = capacity;
  return s;
}

ExactSet::~ExactSet() { rte_hash_free(h_); }

int ExactSet::add(const Key128& k, RuleKind kind, uint32_t slot) noexcept {
  void* data = reinterpret_cast<void*>((static_cast<uintptr_t>(slot) << 8) | static_cast<uintptr_t>(kind));
  const int rc = rte_hash_add_key_with_hash_data(h_, &k, sig(k), data);
  return rc == 0 ? 0 : (rc == -ENOSPC ? -ENOSPC : rc);
}

void ExactSet::prefetch(const Key128* const* keys, uint32_t n) const noexcept {
  const void* k[kPrefetchMax];
  hash_sig_t sigs[kPrefetchMax];
  int32_t pos[kPrefetchMax];
  n = n < kPrefetchMax ? n : kPrefetchMax;
  for (uint32_t i = 0; i < n; ++i) {
    k[i] = keys[i];
    sigs[i] = sig(*keys[i]);
  }
  (void)rte_hash_lookup_with_hash_bulk(h_, k, sigs, n, pos);
}

int64_t ExactSet::slot_of(const Key128& k) const noexcept {
  void* data = nullptr;
  if (rte_hash_lookup_with_hash_data(h_, &k, sig(k), &data) < 0) return -1;
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(data) >> 8);
}

bool ExactSet::del(const Key128& k) noexcept {
  return rte_hash_del_key_with_hash(h_, &k, sig(k)) >= 0;
}

std::size_t ExactSet::size() const noexcept {
  std::size_t n = 0;
  const void* key = nullptr;
  void* data = nullptr;
  for (uint32_t next = 0; rte_hash_iterate(h_, &key, &data, &next) >= 0;) ++n;
  return n;
}

std::size_t ExactSet::memory_bytes() const noexcept {
  // rte_hash does not report its footprint; estimate from its layout: key
  // store (key + data pointer per entry) plus 8-entry buckets of 64 bytes.
  const std::size_t entries = capacity_ + capacity_ / 4;
  return entries * (sizeof(Key128) + sizeof(void*)) + (entries / 8 + 1) * 64 * 2;
}

}  // namespace cg
