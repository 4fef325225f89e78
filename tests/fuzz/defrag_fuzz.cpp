// libFuzzer target for app/defrag (issue 11, item 4).
//
// First byte even: the rest is a frame. maybe_fragment() must say "maybe"
// for every frame classify_frame() calls a fragment (or one it refuses):
// the worker only asks classify_frame() when maybe_fragment() says so, so a
// miss would let a fragment be judged alone. A fragment's range must be
// non-empty and end by 65535.
//
// First byte odd: the rest is a stream of 3-byte operations on a small
// Tracker (add a fragment of one of four datagrams, or let time pass).
// Every ref added is handed back exactly once (complete, dropped with its
// datagram, or expired); a complete datagram's fragments tile [0, total)
// exactly; the counts of held fragments and datagrams stay within bounds.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <utility>
#include <vector>

#include "cuckoogate/defrag/defrag.hpp"

using namespace cg::defrag;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void frame(const uint8_t* d, std::size_t n) {
  Fragment f;
  const FrameKind k = classify_frame(d, n, &f);
  if (k != FrameKind::kWhole) check(maybe_fragment(d, n));
  if (k == FrameKind::kFragment) {
    check(f.len != 0 && f.offset + f.len <= 65535);
    check(f.key.family == 4 || f.key.family == 6);
    check(std::size_t{f.l2_len} + f.l3_len <= n);
  }
}

void tracker(const uint8_t* d, std::size_t n) {
  TrackerConfig c;
  c.datagrams = 3;
  c.fragments = 12;
  c.timeout_ticks = 50;
  Tracker t(c);
  std::set<uintptr_t> out;  // refs the tracker holds
  uintptr_t next = 1;
  uint64_t now = 0;
  auto gone = [&](void* p) { check(out.erase(reinterpret_cast<uintptr_t>(p)) == 1); };
  for (std::size_t i = 0; i + 3 <= n; i += 3) {
    const uint8_t a = d[i], b = d[i + 1], e = d[i + 2];
    if ((a & 0xc0) == 0xc0) {  // time passes; expire as the stage does
      now += e;
      t.expire(now, b, gone);
      continue;
    }
    Fragment f;
    f.key.family = 4;
    f.key.proto = 17;
    f.key.id = a >> 4 & 3;
    f.offset = (b & 0x3f) * 8u;
    f.len = (e & 7) * 8u + 8u - ((a & 1) != 0 ? (e >> 3 & 7) : 0u);
    f.more = (b & 0x80) != 0;
    void* r = reinterpret_cast<void*>(next++);
    uint32_t s = 0;
    switch (t.add(f, r, now, &s)) {
      case Add::kHeld:
        out.insert(reinterpret_cast<uintptr_t>(r));
        break;
      case Add::kComplete: {
        out.insert(reinterpret_cast<uintptr_t>(r));
        std::vector<std::pair<uint32_t, uint32_t>> parts;
        const auto refs = t.take(s);
        for (unsigned k = 0; k < refs.size(); ++k) parts.push_back({t.offset(s, k), 0});
        for (void* p : refs) gone(p);
        std::sort(parts.begin(), parts.end());
        check(!parts.empty() && parts.front().first == 0);
        for (std::size_t k = 1; k < parts.size(); ++k) check(parts[k].first > parts[k - 1].first);
        t.release(s);
        break;
      }
      case Add::kOverlap:
      case Add::kTooMany:
        for (void* p : t.take(s)) gone(p);
        t.release(s);
        break;
      case Add::kDuplicate:
      case Add::kDead:
      case Add::kFull:
        break;
    }
    check(t.fragments() == out.size());
    check(t.fragments() <= c.fragments && t.datagrams() <= c.datagrams);
  }
  t.expire(UINT64_MAX, UINT32_MAX, gone);
  check(out.empty() && t.fragments() == 0 && t.datagrams() == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  if ((data[0] & 1) == 0) {
    frame(data + 1, size - 1);
  } else {
    tracker(data + 1, size - 1);
  }
  return 0;
}
