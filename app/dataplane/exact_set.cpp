#include "dataplane/exact_set.hpp"

#include <rte_eal.h>
#include <rte_malloc.h>

#include <cerrno>
#include <new>

#include "cuckoogate/mem/huge_pages.hpp"

namespace cg {

static_assert(sizeof(Key128) == 16, "exact-set keys are two 64-bit words");

std::unique_ptr<ExactSet> ExactSet::create(const std::string& name, uint32_t capacity,
                                           rte_rcu_qsbr* /*qsv*/, int socket, std::string* err) {
  std::unique_ptr<ExactSet> s(new ExactSet());
  s->bytes_ = exact::KeyTable::bytes_for(capacity);
  // EAL's hugepages when it has them (NUMA-local); with --no-huge its memory
  // is 4 KiB pages (a TLB miss per lookup, a page fault per 4 KiB an insert
  // touches first), so huge-page-advised anonymous memory instead, as the
  // filter's (cuckoogate/mem/huge_pages.hpp). Both come zeroed: every entry free.
  s->eal_ = rte_eal_has_hugepages() != 0;
  s->mem_ = s->eal_ ? rte_zmalloc_socket(name.c_str(), s->bytes_, exact::KeyTable::kBucketBytes, socket)
                    : mem::map_pages(s->bytes_);
  if (s->mem_ == nullptr) {
    *err = "cannot allocate the exact set " + name + " (" + std::to_string(s->bytes_) + " bytes)";
    return nullptr;
  }
  s->table_.reset(new (std::nothrow) exact::KeyTable(s->mem_, capacity));
  if (!s->table_) {
    *err = "cannot allocate the exact set " + name;
    return nullptr;
  }
  s->capacity_ = capacity;
  return s;
}

ExactSet::~ExactSet() {
  table_.reset();
  if (mem_ == nullptr) return;
  if (eal_) {
    rte_free(mem_);
  } else {
    mem::unmap_pages(mem_, bytes_);
  }
}

int ExactSet::add(const Key128& k, RuleKind kind, uint32_t slot) noexcept {
  if (slot >= kMaxSlots) return -ERANGE;
  return table_->insert(k, (slot << kKindBits) | static_cast<uint32_t>(kind));
}

void ExactSet::prefetch(const Key128* const* keys, uint32_t n) const noexcept {
  for (uint32_t i = 0; i < n; ++i) table_->prefetch(*keys[i]);
}

int64_t ExactSet::slot_of(const Key128& k) const noexcept {
  uint32_t v;
  if (!table_->find(k, &v)) return -1;
  return static_cast<int64_t>(v >> kKindBits);
}

bool ExactSet::del(const Key128& k) noexcept { return table_->erase(k); }

}  // namespace cg
