/*
 * The cuckoo filter's lookup/insert/erase/move protocol, for spin.
 * docs/concurrency.md ("The model") says what is abstracted and how the C++ maps
 * to it. In short: memory is sequentially consistent (every load and RMW of the
 * C++ code is one atomic step here), a K-CAS is one atomic step (its
 * linearizability is the K-CAS's own argument and tests), the table is tiny.
 *
 * A bucket word, as in bucket_layout.hpp but small:
 *   w = slot0 + 4 * slot1 + 16 * counter    slots hold fingerprints 1..3, 0 = empty
 * The counter counts modulo CMOD (2 or 4 here, 2^11 .. 2^31 in the C++), small so
 * that wraps happen within a few operations.
 *
 * Processes: one lookup of a key K that is present throughout (never erased), and
 * WRITERS writers doing up to OPS operations each, chosen nondeterministically:
 * insert a key of the pool, erase a key that this writer inserted, or move any
 * fingerprint to the other bucket of its pair. Checked (spin -a, pan):
 *   - the lookup finds K                    (no false negative)
 *   - erase of an inserted key never misses (the lookup rule in erase)
 *   - at the end the table holds exactly the inserted-and-not-erased multiset,
 *     per (fingerprint, bucket pair): an erased copy is gone, no other copy
 *     disappeared, no copy was duplicated.
 *
 * Mutations (compile-time): NO_RECHECK (a miss is accepted without re-reading
 * i1), NO_INSERT_BUMP (insert does not bump the counter), NO_WRAP_CHECK (the
 * wrap word is ignored). Each must produce an assertion violation.
 */

#ifndef NB
#define NB 2            /* buckets: 2 or 4 */
#endif
#ifndef CMOD
#define CMOD 2          /* counter modulus */
#endif
#ifndef WRITERS
#define WRITERS 1
#endif
#ifndef OPS
#define OPS 3           /* operations per writer */
#endif

/* alt(b, fp) = b XOR d(fp), d(fp) != 0: with 2 buckets always the other one,
 * with 4 buckets fingerprint f pairs b with b ^ f. An involution, as in the C++. */
#define D(f)        (((f) - 1) % (NB - 1) + 1)
#define ALT(b, f)   ((b) ^ D(f))

#define S0(w)       ((w) % 4)
#define S1(w)       (((w) / 4) % 4)
#define CNT(w)      ((w) / 16)
#define HAS(w, f)   (S0(w) == (f) || S1(w) == (f))
#define FREE(w)     (S0(w) == 0 || S1(w) == 0)
/* w with fingerprint f in its first free slot, and w with slot j cleared */
#define PUT(w, f)   (S0(w) == 0 -> (w) + (f) : (w) + 4 * (f))
#define CLR(w, j)   ((j) == 0 -> (w) - S0(w) : (w) - 4 * S1(w))
#define SLOT(w, j)  ((j) == 0 -> S0(w) : S1(w))
/* the counter bumped modulo CMOD, and whether that bump wraps it to 0 */
#define BUMP(w)     ((w) % 16 + 16 * ((CNT(w) + 1) % CMOD))
#define WRAPS(w)    (CNT(w) == CMOD - 1)
#ifdef NO_INSERT_BUMP
#define IBUMP(w)    (w)
#define IWRAPS(w)   false
#else
#define IBUMP(w)    BUMP(w)
#define IWRAPS(w)   WRAPS(w)
#endif

/* The looked-up key K: fingerprint 1, first bucket 0 (so i2 = 1). */
#define KFP 1
#define KI1 0
#define KI2 ALT(KI1, KFP)

/* The writers' key pool: (fingerprint, first bucket). Key 0 has K's fingerprint
 * with K's i2 as its first bucket (the insert+erase "teleport"); key 1 has K's
 * buckets in K's order; key 2 another fingerprint. */
#define NK 3
byte kfp[NK];
byte khome[NK];

byte B[NB];             /* the bucket words */
byte W;                 /* the wrap word (wraps_ in the C++) */
byte ghost[4 * NB];     /* inserted-and-not-erased copies per (fp, smaller bucket of the pair) */
#define CLS(f, b)   ((f) * NB + ((b) < ALT(b, f) -> (b) : ALT(b, f)))
bool lookup_done;

/* A CAS retry loop on one word (or a K-CAS retry loop on several) changes shared
 * memory only by its successful attempt, and its failed attempts only lead to
 * another attempt: it is modelled as that attempt, one atomic step. What is not
 * one step in the C++ stays separate steps here: the two buckets an insert or an
 * erase tries, and every load of the lookup and of erase's miss check. */

/* try_add on bucket b (cas_wrapping when the bump wraps the counter). */
inline try_add() {
  atomic {
    v = B[b];
    if
    :: FREE(v) ->
       B[b] = IBUMP(PUT(v, f));
       if
       :: IWRAPS(v) -> W++
       :: else -> skip
       fi;
       ghost[CLS(f, b)]++; held[k]++; r = 1
    :: else -> r = 0
    fi
  }
}

inline do_insert() {
  b = h;
  try_add();
  if
  :: r == 0 -> b = ALT(h, f); try_add()
  :: else -> skip
  fi
  /* both full: the C++ searches a cuckoo path, whose hops are moves (below) */
}

/* try_remove on bucket b: one copy of f out, no bump; v is the value seen. */
inline try_remove() {
  atomic {
    v = B[b];
    if
    :: S0(v) == f -> B[b] = CLR(v, 0); ghost[CLS(f, b)]--; held[k]--; r = 1
    :: S0(v) != f && S1(v) == f -> B[b] = CLR(v, 1); ghost[CLS(f, b)]--; held[k]--; r = 1
    :: else -> r = 0
    fi
  }
}

inline do_erase() {
  do
  :: true ->
     g = W;
     b = h;
     try_remove();
     if
     :: r == 1 -> break
     :: else -> w1 = v; b = ALT(h, f); try_remove()
     fi;
     if
     :: r == 1 -> break
     :: else -> skip
     fi;
     v = B[h];
     g2 = W;
     /* this writer inserted the key and has not erased it: a miss is wrong */
     assert(!(CNT(v) == CNT(w1) && g2 == g))
  od;
  w1 = 0; v = 0; g = 0; g2 = 0
}

/* move_one: fingerprint f in slot j of b to the other bucket of its pair, in one
 * K-CAS bumping both counters (and wraps_ if a bump wraps). */
inline do_move() {
  select(b : 0 .. NB - 1);
  select(j : 0 .. 1);
  atomic {
    v = B[b];
    f = SLOT(v, j);
    if
    :: f != 0 && FREE(B[ALT(b, f)]) ->
       if
       :: WRAPS(v) || WRAPS(B[ALT(b, f)]) -> W++
       :: else -> skip
       fi;
       B[ALT(b, f)] = BUMP(PUT(B[ALT(b, f)], f));
       B[b] = BUMP(CLR(v, j))
    :: else -> skip       /* nothing to move, or no room: the path is broken */
    fi;
    v = 0; f = 0; j = 0; b = 0
  }
}

proctype Writer() {
  byte ops, k, h, b, f, v, w1, g, g2, j, r;
  byte held[NK];
  do
  :: ops == OPS -> break
  :: ops < OPS -> ops++;
     if
     :: select(k : 0 .. NK - 1); f = kfp[k]; h = khome[k]; do_insert()
     :: select(k : 0 .. NK - 1);
        if
        :: held[k] > 0 -> f = kfp[k]; h = khome[k]; do_erase()
        :: else -> skip
        fi
     :: do_move()
     fi;
     atomic { k = 0; h = 0; b = 0; f = 0; v = 0; r = 0 }
  :: ops < OPS -> break       /* writers may stop at any point */
  od
}

/* When a lookup that saw no copy may answer "absent". */
#if defined(NO_RECHECK)
#define ACCEPT_MISS true
#elif defined(NO_WRAP_CHECK)
#define ACCEPT_MISS (CNT(w3) == CNT(w1))
#else
#define ACCEPT_MISS (CNT(w3) == CNT(w1) && g1 == g0)
#endif

/* contains() with lookup_fast: the wrap word, i1, i2, i1 again, the wrap word. */
proctype Lookup() {
  byte g0, w1, w2, w3, g1;
  bool found = false;
  do
  :: true ->
     g0 = W;
     w1 = B[KI1];
     w2 = B[KI2];
     w3 = B[KI1];
     g1 = W;
     if
     :: HAS(w1, KFP) || HAS(w2, KFP) -> found = true; break
     :: !(HAS(w1, KFP) || HAS(w2, KFP)) && ACCEPT_MISS -> break
     :: !(HAS(w1, KFP) || HAS(w2, KFP)) && !ACCEPT_MISS -> skip  /* i1 changed or a counter wrapped: again */
     fi
  od;
  assert(found);          /* K is present for the whole lookup */
  lookup_done = true
}

init {
  byte b, s, f, n;
  kfp[0] = KFP; khome[0] = KI2;
  kfp[1] = KFP; khome[1] = KI1;
  kfp[2] = 2;   khome[2] = KI1;
  /* K's one copy starts in i2 or in i1 */
  if
  :: B[KI2] = KFP
  :: B[KI1] = KFP
  fi;
  ghost[CLS(KFP, KI1)] = 1;
  atomic {
    run Lookup();
    n = 0;
    do
    :: n < WRITERS -> run Writer(); n++
    :: else -> break
    od
  }
  (_nr_pr == 1);
  /* the final table, per (fingerprint, pair), against the inserted multiset */
  f = 1;
  do
  :: f <= 3 ->
     b = 0;
     do
     :: b < NB ->
        if
        :: b < ALT(b, f) ->
           s = (S0(B[b]) == f) + (S1(B[b]) == f) + (S0(B[ALT(b, f)]) == f) + (S1(B[ALT(b, f)]) == f);
           assert(s == ghost[CLS(f, b)])
        :: else -> skip
        fi;
        b++
     :: else -> break
     od;
     f++
  :: else -> break
  od;
  assert(lookup_done)
}
