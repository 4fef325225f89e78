// K-CAS implementation: Harris-Fraser-Pratt over RDCSS, descriptors reused per
// thread slot (Arbel-Raviv & Brown). See kcas.hpp for the contract and
// docs/concurrency.md for the argument.
#include "cuckoogate/kcas.hpp"

#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace cg::kcas {
namespace {

// K-CAS status, in the low 2 bits of a descriptor's state word.
constexpr std::uint64_t kUndecided = 0;
constexpr std::uint64_t kSucceeded = 1;
constexpr std::uint64_t kFailedSt = 2;

struct alignas(64) KcasDesc {
  std::atomic<std::uint64_t> state{(0u << 2) | kFailedSt};  // (seq << 2) | status
  std::atomic<std::uint32_t> n{0};
  std::atomic<Word*> addr[kMaxWords]{};
  std::atomic<std::uint64_t> old_v[kMaxWords]{};
  std::atomic<std::uint64_t> new_v[kMaxWords]{};
};

struct alignas(64) RdcssDesc {
  std::atomic<std::uint64_t> seq{0};
  std::atomic<std::uint64_t> kref{0};  // the K-CAS whose reference is being installed
  std::atomic<Word*> addr{nullptr};
  std::atomic<std::uint64_t> old_v{0};
};

struct alignas(64) SlotFlag {
  std::atomic<bool> in_use{false};
};

KcasDesc g_kcas[kMaxThreads];
RdcssDesc g_rdcss[kMaxThreads];
SlotFlag g_slot[kMaxThreads];

// This thread's slot: kNoSlotYet until the first ensure_slot(), kSlotReleased
// after the thread-exit release. A plain int (no destructor), so that it stays
// readable from thread_local destructors that run after SlotReleaser's.
constexpr int kNoSlotYet = -1;
constexpr int kSlotReleased = -2;
thread_local int t_slot = kNoSlotYet;

struct SlotReleaser {
  SlotReleaser() noexcept {}  // user-provided: declared where ensure_slot takes a slot
  ~SlotReleaser() {
    if (t_slot < 0) return;
    const int slot = t_slot;
    // Never again on this thread: a filter write from a later thread_local
    // destructor gets kNoSlot instead of a slot another thread may own by then.
    t_slot = kSlotReleased;
    // release: the next owner of the slot sees this thread's last descriptor
    // sequence numbers (its acquiring CAS is acq_rel).
    g_slot[slot].in_use.store(false, std::memory_order_release);
  }
};

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

bool ensure_slot() noexcept {
  if (t_slot >= 0) [[likely]] return true;
  if (t_slot == kSlotReleased) return false;  // the thread is exiting
  for (unsigned i = 0; i < kMaxThreads; ++i) {
    bool expected = false;
    // acq_rel: acquire the previous holder's descriptor writes (its release store).
    if (g_slot[i].in_use.compare_exchange_strong(expected, true, std::memory_order_acq_rel,
                                                 std::memory_order_relaxed)) {
      t_slot = static_cast<int>(i);
      // Constructed here, so its destructor runs at thread exit before those of
      // the thread_locals built earlier (reverse order of construction).
      thread_local SlotReleaser releaser;
      (void)releaser;
      return true;
    }
  }
  return false;
}

constexpr unsigned ref_slot(std::uint64_t ref) noexcept {
  return static_cast<unsigned>((ref >> kSlotShift) & 0xff);
}
constexpr std::uint64_t ref_seq(std::uint64_t ref) noexcept { return ref & kSeqMask; }
constexpr std::uint64_t make_ref(bool rdcss, unsigned slot, std::uint64_t seq) noexcept {
  return kRefBit | (rdcss ? kRdcssBit : 0) | (std::uint64_t{slot} << kSlotShift) | seq;
}
constexpr bool is_rdcss_ref(std::uint64_t v) noexcept { return (v & (kRefBit | kRdcssBit)) == (kRefBit | kRdcssBit); }
constexpr bool is_kcas_ref(std::uint64_t v) noexcept { return (v & (kRefBit | kRdcssBit)) == kRefBit; }
constexpr std::uint64_t next_seq(std::uint64_t seq) noexcept {
  const std::uint64_t n = (seq + 1) & kSeqMask;
  return n == 0 ? 1 : n;  // 2^54 operations per slot before the sequence wraps
}

struct KSnap {
  std::uint64_t seq;
  std::uint64_t status;
  unsigned n;
  Word* addr[kMaxWords];
  std::uint64_t old_v[kMaxWords];
  std::uint64_t new_v[kMaxWords];
};

struct RSnap {
  std::uint64_t kref;
  Word* addr;
  std::uint64_t old_v;
};

// Seqlock-style snapshot of the K-CAS descriptor named by ref. False when the
// descriptor has moved on to a later operation (then no word holds ref any more).
bool snap_kcas(std::uint64_t ref, KSnap& s) noexcept {
  KcasDesc& d = g_kcas[ref_slot(ref)];
  const std::uint64_t seq = ref_seq(ref);
  // acquire: pairs with the owner's release store of the state that opened this
  // operation, so the field loads below see at least this operation's fields.
  const std::uint64_t st = d.state.load(std::memory_order_acquire);
  if ((st >> 2) != seq) return false;
  unsigned n = d.n.load(std::memory_order_relaxed);
  if (n > kMaxWords) n = kMaxWords;  // torn by a later operation; rejected below
  for (unsigned i = 0; i < n; ++i) {
    s.addr[i] = d.addr[i].load(std::memory_order_relaxed);
    s.old_v[i] = d.old_v[i].load(std::memory_order_relaxed);
    s.new_v[i] = d.new_v[i].load(std::memory_order_relaxed);
  }
  // acquire fence: orders the field loads above before the state re-check below;
  // if any field came from a later operation, the re-check sees its sequence
  // number (fence-fence synchronisation with the owner's release fence).
  std::atomic_thread_fence(std::memory_order_acquire);
  // seq_cst, not relaxed: read_slow takes the word's value from this status
  // (new iff SUCCEEDED), and the caller's next bucket load must not be satisfied
  // before it. A relaxed load gives no such order (AArch64: LDR, then the next
  // LDAR may be satisfied first), so a lookup could pair old i1 with new i2 during
  // an i2->i1 move. seq_cst puts the load in S after the decision CAS it reads
  // from and before the caller's later seq_cst loads (acquire would order it too;
  // seq_cst keeps the lookup proof in S). Same instruction as acquire on x86-64
  // (MOV) and AArch64 (LDAR).
  const std::uint64_t st2 = d.state.load(std::memory_order_seq_cst);
  if ((st2 >> 2) != seq) return false;
  s.seq = seq;
  s.status = st2 & 3;
  s.n = n;
  return true;
}

bool snap_rdcss(std::uint64_t ref, RSnap& s) noexcept {
  RdcssDesc& d = g_rdcss[ref_slot(ref)];
  const std::uint64_t seq = ref_seq(ref);
  // acquire / fence / relaxed re-check: the same seqlock read as snap_kcas.
  if (d.seq.load(std::memory_order_acquire) != seq) return false;
  s.kref = d.kref.load(std::memory_order_relaxed);
  s.addr = d.addr.load(std::memory_order_relaxed);
  s.old_v = d.old_v.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  // relaxed is enough here, unlike snap_kcas: a reader returns the RDCSS's old
  // value, which was the word's logical value when the word itself was loaded
  // (seq_cst); this re-check only validates the fields, whenever it is satisfied.
  return d.seq.load(std::memory_order_relaxed) == seq;
}

// Second half of RDCSS: the reference becomes the K-CAS reference if that
// operation is still undecided, else the word gets its old value back.
void complete_rdcss(std::uint64_t rref, const RSnap& r) noexcept {
  const KcasDesc& kd = g_kcas[ref_slot(r.kref)];
  // seq_cst: Dekker pattern with the decision CAS and the owner's phase-2 word
  // load: either this load sees the decision, or the owner's scan sees rref.
  const std::uint64_t st = kd.state.load(std::memory_order_seq_cst);
  const bool undecided = st == ((ref_seq(r.kref) << 2) | kUndecided);
  std::uint64_t expected = rref;
  r.addr->compare_exchange_strong(expected, undecided ? r.kref : r.old_v,
                                  std::memory_order_seq_cst, std::memory_order_relaxed);
}

// RDCSS(kref's status == undecided, addr: old -> kref) with this thread's RDCSS
// descriptor. Returns old if it was installed (and completed), else the value
// found (a plain value or a K-CAS reference; RDCSS references are helped).
std::uint64_t rdcss(std::uint64_t kref, Word* addr, std::uint64_t old) noexcept {
  const unsigned slot = static_cast<unsigned>(t_slot);
  RdcssDesc& d = g_rdcss[slot];
  const std::uint64_t seq = next_seq(d.seq.load(std::memory_order_relaxed));
  d.seq.store(seq, std::memory_order_relaxed);
  // release fence: orders the sequence store before the field stores, so a
  // reader holding the previous reference that loads a new field detects it.
  std::atomic_thread_fence(std::memory_order_release);
  d.kref.store(kref, std::memory_order_relaxed);
  d.addr.store(addr, std::memory_order_relaxed);
  d.old_v.store(old, std::memory_order_relaxed);
  const std::uint64_t rref = make_ref(true, slot, seq);
  const RSnap mine{kref, addr, old};
  for (;;) {
    std::uint64_t v = old;
    // seq_cst (release part): publishes the descriptor fields with rref.
    if (addr->compare_exchange_strong(v, rref, std::memory_order_seq_cst, std::memory_order_seq_cst)) {
      complete_rdcss(rref, mine);
      return old;
    }
    if (is_rdcss_ref(v)) {
      RSnap r;
      if (snap_rdcss(v, r)) complete_rdcss(v, r);
      continue;
    }
    return v;
  }
}

// Runs (or helps) the K-CAS kref whose snapshot is s. Needs this thread's slot if
// s is undecided. Returns true iff the operation succeeded.
bool help(std::uint64_t kref, const KSnap& s) noexcept {
  KcasDesc& d = g_kcas[ref_slot(kref)];
  if (s.status == kUndecided) {
    std::uint64_t result = kSucceeded;
    for (unsigned i = 0; i < s.n && result == kSucceeded; ++i) {
      for (;;) {
        const std::uint64_t v = rdcss(kref, s.addr[i], s.old_v[i]);
        if (v == kref || v == s.old_v[i]) break;  // installed (by us or a helper)
        if (is_kcas_ref(v)) {                       // another operation: finish it first
          KSnap o;
          if (snap_kcas(v, o)) help(v, o);
          continue;
        }
        result = kFailedSt;  // plain value differs from expected
        break;
      }
    }
    std::uint64_t und = (s.seq << 2) | kUndecided;
    // seq_cst: the decision is ordered against RDCSS completions (complete_rdcss).
    d.state.compare_exchange_strong(und, (s.seq << 2) | result, std::memory_order_seq_cst,
                                    std::memory_order_seq_cst);
  }
  const std::uint64_t st = d.state.load(std::memory_order_seq_cst);
  if ((st >> 2) != s.seq) return false;  // finished and reused: nothing left to do
  const bool ok = (st & 3) == kSucceeded;
  // Phase 2: release every word. Loops until the word holds neither kref nor an
  // RDCSS reference (which could still turn into kref), so when the owner
  // returns no word refers to this operation and its descriptor can be reused.
  for (unsigned i = 0; i < s.n; ++i) {
    Word* a = s.addr[i];
    for (;;) {
      std::uint64_t v = a->load(std::memory_order_seq_cst);
      if (v == kref) {
        if (a->compare_exchange_strong(v, ok ? s.new_v[i] : s.old_v[i], std::memory_order_seq_cst,
                                       std::memory_order_seq_cst))
          break;
        continue;
      }
      if (is_rdcss_ref(v)) {
        RSnap r;
        if (snap_rdcss(v, r)) complete_rdcss(v, r);
        continue;
      }
      break;
    }
  }
  return ok;
}

}  // namespace

bool register_thread() noexcept { return ensure_slot(); }

unsigned slots_in_use() noexcept {
  unsigned n = 0;
  for (const auto& s : g_slot) n += s.in_use.load(std::memory_order_relaxed) ? 1 : 0;
  return n;
}

Status cas(Entry* e, unsigned n) noexcept {
  if (n == 0 || n > kMaxWords) return Status::kFailed;
  // Cheap early failure: no descriptor published if a word already differs.
  for (unsigned i = 0; i < n; ++i)
    if (read(*e[i].addr) != e[i].expected) return Status::kFailed;
  if (!ensure_slot()) return Status::kNoSlot;
  // Address order makes helping acyclic (HFP): insertion sort, n <= 4.
  for (unsigned i = 1; i < n; ++i)
    for (unsigned j = i; j > 0 && e[j].addr < e[j - 1].addr; --j) std::swap(e[j], e[j - 1]);
  const unsigned slot = static_cast<unsigned>(t_slot);
  KcasDesc& d = g_kcas[slot];
  const std::uint64_t seq = next_seq(d.state.load(std::memory_order_relaxed) >> 2);
  // release: a helper that reads this new sequence number also sees that the
  // previous operation's phase 2 is done (no word refers to it any more).
  d.state.store((seq << 2) | kUndecided, std::memory_order_release);
  // release fence: orders the state store before the field stores below (seqlock writer).
  std::atomic_thread_fence(std::memory_order_release);
  d.n.store(n, std::memory_order_relaxed);
  KSnap s;
  s.seq = seq;
  s.status = kUndecided;
  s.n = n;
  for (unsigned i = 0; i < n; ++i) {
    d.addr[i].store(e[i].addr, std::memory_order_relaxed);
    d.old_v[i].store(e[i].expected, std::memory_order_relaxed);
    d.new_v[i].store(e[i].desired, std::memory_order_relaxed);
    s.addr[i] = e[i].addr;
    s.old_v[i] = e[i].expected;
    s.new_v[i] = e[i].desired;
  }
  // The fields reach helpers through the seq_cst (hence release) RDCSS CAS that
  // installs the first reference.
  return help(make_ref(false, slot, seq), s) ? Status::kSucceeded : Status::kFailed;
}

std::uint64_t read_slow(const Word& w, std::uint64_t v) noexcept {
  for (;;) {
    if (!is_ref(v)) return v;
    if (is_rdcss_ref(v)) {
      RSnap r;
      // An RDCSS in progress: the word's logical value is still the old one.
      if (snap_rdcss(v, r) && r.addr == &w) return r.old_v;
    } else {
      KSnap s;
      if (snap_kcas(v, s)) {
        for (unsigned i = 0; i < s.n; ++i)
          if (s.addr[i] == &w) return s.status == kSucceeded ? s.new_v[i] : s.old_v[i];
      }
    }
    // The descriptor moved on, so the word has changed since v was loaded.
    v = w.load(std::memory_order_seq_cst);
  }
}

std::uint64_t read_help(Word& w) noexcept {
  for (;;) {
    const std::uint64_t v = w.load(std::memory_order_seq_cst);
    if (!is_ref(v)) return v;
    if (is_rdcss_ref(v)) {
      RSnap r;
      if (snap_rdcss(v, r)) complete_rdcss(v, r);
      continue;
    }
    KSnap s;
    if (!snap_kcas(v, s)) continue;
    if (s.status == kUndecided && !ensure_slot()) {
      cpu_relax();  // beyond kMaxThreads writers: wait for the owner
      continue;
    }
    help(v, s);
  }
}

}  // namespace cg::kcas
