// libFuzzer target for app/prefix: Dir24 driven by any sequence of adds and
// removes, checked against a brute-force model of longest-prefix match.
//
// Input: 4 bytes per operation. Byte 0: bit 7 remove (else add), bits 0-6
// the length: 8 + (bits mod 25), so /8../32 (shorter ones rewrite millions
// of entries per operation, which under ASan made 10 inputs a second;
// Dir24.WholeSpacePrefixesAndHostRoutes tests them). Bytes 1-2:
// the address's bits inside 10.0.0.0/20 (a small region, so that prefixes
// nest and overlap, groups are made, shared and retired); lengths below 20
// take 10.0.0.0 masked to them. Byte 3: bits 0-6 the value, bit 7 "the
// readers are quiescent now" (a fake QSBR: retired groups become reusable).
//
// One table for the whole run (a 64 MiB mapping per input would make the
// fuzzer slow), emptied at the end of every input by removing what is left.
// Its budget is one chunk (256 groups): retired groups the fake readers
// have not released pile up across inputs until the table must take one
// back, waiting (the fake wait releases it), so every reclamation path runs.
//
// Checked (abort on violation): every add/remove's status is the model's
// (kOk, kExists, kNotFound; host bits are cleared before, so never
// kInvalid); after each operation the prefix's first and last address and
// their neighbours, and after the input every address of the region, look up
// as the model says (length and value); size() and groups_in_use() agree.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "cuckoogate/prefix/dir24.hpp"

namespace {

using cg::prefix::Dir24;
using Model = std::map<std::pair<uint32_t, unsigned>, uint32_t>;

constexpr uint32_t kBase = 10u << 24;  // 10.0.0.0/20
constexpr unsigned kRegionBits = 12;

uint32_t mask(unsigned len) { return len == 0 ? 0 : ~uint32_t{0} << (32 - len); }

void check(const Dir24& t, const Model& m, uint32_t addr) {
  unsigned want_len = 0;
  uint32_t want_value = 0;
  for (unsigned l = 32; l >= 1; --l) {
    auto it = m.find({addr & mask(l), l});
    if (it != m.end()) {
      want_len = l;
      want_value = it->second;
      break;
    }
  }
  const uint32_t e = t.lookup(addr);
  if (Dir24::depth(e) != want_len || (want_len != 0 && Dir24::value(e) != want_value)) std::abort();
}

// Groups the model needs: /24 networks holding a prefix longer than /24.
std::size_t groups(const Model& m) {
  std::map<uint32_t, bool> nets;
  for (const auto& [k, v] : m)
    if (k.second > 24) nets[k.first >> 8] = true;
  return nets.size();
}

struct FakeQsbr {
  uint64_t started = 0, quiescent_up_to = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static FakeQsbr q;
  static cg::prefix::Budget budget{256 * 1024 + 64 * 1024, 0};
  static std::unique_ptr<Dir24> t = [] {
    Dir24::Options o;
    o.budget = &budget;
    o.reclaim.ctx = &q;
    o.reclaim.start = [](void* c) noexcept { return ++static_cast<FakeQsbr*>(c)->started; };
    o.reclaim.check = [](void* c, uint64_t token, bool wait) noexcept {
      auto* f = static_cast<FakeQsbr*>(c);
      if (wait && token > f->quiescent_up_to) f->quiescent_up_to = token;
      return token <= f->quiescent_up_to;
    };
    std::string err;
    auto d = Dir24::create(o, &err);
    if (d == nullptr) std::abort();
    return d;
  }();
  Model m;
  for (size_t i = 0; i + 4 <= size && i < 4 * 512; i += 4) {
    const bool remove = (data[i] & 0x80) != 0;
    const unsigned len = 8 + (data[i] & 0x7f) % 25;
    const uint32_t low = (uint32_t{data[i + 1]} << 8 | data[i + 2]) & ((1u << kRegionBits) - 1);
    const uint32_t addr = (kBase | low) & mask(len);
    const uint32_t value = data[i + 3] & 0x7f;
    if ((data[i + 3] & 0x80) != 0) q.quiescent_up_to = q.started;
    const auto key = std::make_pair(addr, len);
    const bool present = m.count(key) != 0;
    if (remove) {
      if (t->remove(addr, len) != (present ? Dir24::Status::kOk : Dir24::Status::kNotFound)) std::abort();
      m.erase(key);
    } else {
      if (t->add(addr, len, value) != (present ? Dir24::Status::kExists : Dir24::Status::kOk)) std::abort();
      if (!present) m[key] = value;
    }
    const uint32_t last = addr | ~mask(len);
    for (uint32_t a : {addr, last, addr - 1, last + 1}) check(*t, m, a);
    if (t->size() != m.size() || t->groups_in_use() != groups(m)) std::abort();
  }
  for (uint32_t a = 0; a < (1u << kRegionBits); ++a) check(*t, m, kBase | a);
  for (const auto& [k, v] : m)
    if (t->remove(k.first, k.second) != Dir24::Status::kOk) std::abort();
  if (t->size() != 0 || t->groups_in_use() != 0) std::abort();
  for (uint32_t a = 0; a < (1u << kRegionBits); a += 255) check(*t, Model{}, kBase | a);
  return 0;
}
