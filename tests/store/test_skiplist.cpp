#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cuckoogate/store/skiplist_map.hpp"
#include "test_util.hpp"

namespace cg::store {
namespace {

struct Meta {
  std::uint64_t id = 0;
  std::string tag;
  bool operator==(const Meta&) const = default;
};

std::string random_key(std::mt19937_64& rng) {
  // Short keys over a tiny alphabet including 0x00 and 0xff: many shared
  // prefixes, equal-prefix/shorter-key cases and byte-order edge cases.
  static const char alphabet[] = {'\0', 'a', 'b', '\x7f', '\x80', '\xff'};
  std::string k(rng() % 5, '\0');
  for (auto& c : k) c = alphabet[rng() % sizeof alphabet];
  return k;
}


template <class C>
std::vector<std::pair<std::string, Meta>> drain(C c) {
  std::vector<std::pair<std::string, Meta>> out;
  while (c.next()) out.emplace_back(std::string(c.key()), c.value());
  return out;
}

std::vector<std::pair<std::string, Meta>> model_range(const std::map<std::string, Meta>& m,
                                                      const std::string& lo,
                                                      const std::optional<std::string>& hi) {
  std::vector<std::pair<std::string, Meta>> out;
  for (auto it = m.lower_bound(lo); it != m.end(); ++it) {
    if (hi && it->first >= *hi) break;
    out.emplace_back(*it);
  }
  return out;
}

TEST(SkipListMap, KeysOrderAsUnsignedBytes) {
  SkipListMap<int> m;
  for (std::string k : {std::string("\xff"), std::string("a"), std::string(""), std::string("ab"),
                        std::string("\x80"), std::string(1, '\0'), std::string("a\0", 2)}) {
    EXPECT_EQ(m.insert(k, 1), InsertResult::inserted);
  }
  std::vector<std::string> got;
  for (auto c = m.scan(); c.next();) got.emplace_back(c.key());
  const std::vector<std::string> want = {"", std::string(1, '\0'), "a", std::string("a\0", 2),
                                         "ab", "\x80", "\xff"};
  EXPECT_EQ(got, want);
}

// A key shorter than 8 bytes is zero-padded in its node (the prefix is read
// from the key bytes): a short key placed in a freed node that held 0xff
// bytes there orders and is found exactly as a fresh one.
TEST(SkipListMap, ShortKeysInReusedNodesOrderAndFindExactly) {
  SkipListMap<int> m(11);
  ASSERT_EQ(m.insert("keep the block mapped", 0), InsertResult::inserted);
  std::vector<std::string> big;
  for (int i = 0; i < 4096; ++i) big.push_back(std::string(6, '\xff') + std::string(1, static_cast<char>(i)) +
                                               std::string(1, static_cast<char>(i >> 8)));
  for (const auto& k : big) ASSERT_EQ(m.insert(k, 1), InsertResult::inserted);
  for (const auto& k : big) ASSERT_EQ(m.erase(k), EraseResult::erased);
  m.domain().drain(16);  // freed into the arena's free lists, reused below
  std::vector<std::string> keys;
  for (int i = 0; i < 4096; ++i) {
    std::string k(static_cast<std::size_t>(i % 8), '\0');
    for (std::size_t j = 0; j < k.size(); ++j) k[j] = "\0a\x01"[(i >> (2 * j)) % 3];
    keys.push_back(k);
  }
  std::map<std::string, int> model{{"keep the block mapped", 0}};
  for (const auto& k : keys) {
    const bool fresh = model.emplace(k, 2).second;
    ASSERT_EQ(m.insert(k, 2), fresh ? InsertResult::inserted : InsertResult::exists);
  }
  std::vector<std::string> got, want;
  for (auto c = m.scan(); c.next();) got.emplace_back(c.key());
  for (const auto& [k, v] : model) want.push_back(k);
  EXPECT_EQ(got, want);
  for (const auto& [k, v] : model) EXPECT_TRUE(m.contains(k)) << testing::PrintToString(k);
  EXPECT_FALSE(m.contains(std::string(7, '\xff')));
  EXPECT_FALSE(m.contains(std::string("a\0\0\0\0\0\0\0\0", 9)));
}

TEST(SkipListMap, InsertOfPresentKeyReportsExistsAndKeepsOldValue) {
  SkipListMap<Meta> m;
  EXPECT_EQ(m.insert("k", {1, "first"}), InsertResult::inserted);
  EXPECT_EQ(m.insert("k", {2, "second"}), InsertResult::exists);
  EXPECT_EQ(m.find("k")->tag, "first");
  EXPECT_EQ(m.size(), 1U);
}

TEST(SkipListMap, EraseOfAbsentKeyReportsAbsent) {
  SkipListMap<Meta> m;
  EXPECT_EQ(m.erase("k"), EraseResult::absent);
  m.insert("k", {1, "x"});
  Meta old;
  EXPECT_EQ(m.erase("k", &old), EraseResult::erased);
  EXPECT_EQ(old.tag, "x");
  EXPECT_EQ(m.erase("k"), EraseResult::absent);
  EXPECT_FALSE(m.contains("k"));
  EXPECT_EQ(m.size(), 0U);
}

TEST(SkipListMap, PrefixUpperBound) {
  EXPECT_EQ(prefix_upper_bound("ab"), "ac");
  EXPECT_EQ(prefix_upper_bound("a\xff"), "b");
  EXPECT_EQ(prefix_upper_bound("\xff\xff"), std::nullopt);
  EXPECT_EQ(prefix_upper_bound(""), std::nullopt);
}

TEST(SkipListMap, PrefixScanReturnsExactlyTheKeysWithThePrefix) {
  SkipListMap<int> m;
  for (const char* k : {"a", "a\xff", "a\xff\xff", "ab", "abc", "b", "a\xfe"}) m.insert(k, 0);
  std::vector<std::string> got;
  for (auto c = m.scan_prefix("a\xff"); c.next();) got.emplace_back(c.key());
  EXPECT_EQ(got, (std::vector<std::string>{"a\xff", "a\xff\xff"}));
}

// Random operations against std::map, including range and prefix scans.
TEST(SkipListMap, MatchesStdMapUnderRandomOperations) {
  const std::uint64_t seed = test::test_seed();
  std::mt19937_64 rng(seed);
  SkipListMap<Meta> m(seed);
  std::map<std::string, Meta> model;
  const int ops = test::kSlowBuild ? 20000 : 100000;
  for (int i = 0; i < ops; ++i) {
    const std::string k = random_key(rng);
    switch (rng() % 6) {
      case 0:
      case 1: {
        Meta v{static_cast<std::uint64_t>(i), "v" + std::to_string(i)};
        const bool fresh = model.emplace(k, v).second;
        ASSERT_EQ(m.insert(k, v), fresh ? InsertResult::inserted : InsertResult::exists)
            << "op " << i;
        break;
      }
      case 2: {
        Meta old;
        const auto it = model.find(k);
        const EraseResult r = m.erase(k, &old);
        if (it == model.end()) {
          ASSERT_EQ(r, EraseResult::absent) << "op " << i;
        } else {
          ASSERT_EQ(r, EraseResult::erased) << "op " << i;
          ASSERT_EQ(old, it->second);
          model.erase(it);
        }
        break;
      }
      case 3: {
        const auto it = model.find(k);
        const auto got = m.find(k);
        ASSERT_EQ(got.has_value(), it != model.end()) << "op " << i;
        if (got) {
          ASSERT_EQ(*got, it->second);
        }
        break;
      }
      case 4: {
        std::string hi = random_key(rng);
        std::optional<std::string> h;
        if (rng() % 4 != 0) h = hi;
        ASSERT_EQ(drain(m.scan(k, h ? std::optional<std::string_view>(*h) : std::nullopt)),
                  model_range(model, k, h))
            << "op " << i;
        break;
      }
      case 5: {
        ASSERT_EQ(drain(m.scan_prefix(k)), model_range(model, k, prefix_upper_bound(k)))
            << "op " << i;
        break;
      }
    }
    ASSERT_EQ(m.size(), model.size());
  }
  ASSERT_EQ(drain(m.scan()), model_range(model, "", std::nullopt));
}

// OrderedInserter (the bulk load's path) against insert(): the same keys in
// the same order of calls, including repeats (exists, the first value kept),
// keys that are not increasing (searched from the head), and enough keys to
// re-pin several times, leave the same entries, and report the same result
// for every call. Then erases and lookups work on what it built (the towers
// are linked correctly: every key found, scans in order, all reclaimed).
TEST(SkipListMap, OrderedInserterMatchesSingleInserts) {
  std::mt19937_64 rng(test::test_seed());
  for (int round = 0; round < 4; ++round) {
    SkipListMap<Meta> single(round + 1), bulk(round + 1);
    std::vector<std::string> keys;
    for (int i = 0; i < 20000; ++i) {
      std::string k = "k" + std::to_string(rng() % 30000);
      if (round == 3 && i % 997 == 0) k = random_key(rng);  // odd bytes and short keys
      keys.push_back(k);
    }
    // Mostly increasing (a sorted load), with repeats and a few steps back.
    std::sort(keys.begin(), keys.end());
    for (std::size_t i = 0; i + 1 < keys.size(); i += 211) std::swap(keys[i], keys[i + 1]);
    if (round == 0) std::shuffle(keys.begin(), keys.end(), rng);  // nothing in order
    // Some keys present before the load.
    for (int i = 0; i < 3000; ++i) {
      const std::string k = "k" + std::to_string(rng() % 30000);
      ASSERT_EQ(single.insert(k, Meta{1, "pre"}), bulk.insert(k, Meta{1, "pre"}));
    }
    auto ins = bulk.ordered_inserter();
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const InsertResult a = single.insert(keys[i], Meta{i, keys[i]});
      const InsertResult b = ins.insert(keys[i], Meta{i, keys[i]});
      ASSERT_EQ(a, b) << "round " << round << " key " << i;
    }
    EXPECT_EQ(drain(bulk.scan()), drain(single.scan()));
    EXPECT_EQ(bulk.size(), single.size());
    EXPECT_EQ(bulk.memory_bytes(), single.memory_bytes());  // same towers: same seed, same order of inserts
    for (const auto& k : keys) ASSERT_TRUE(bulk.contains(k)) << k;
    for (std::size_t i = 0; i < keys.size(); i += 2) {
      ASSERT_EQ(bulk.erase(keys[i]), single.erase(keys[i]));
    }
    EXPECT_EQ(drain(bulk.scan()), drain(single.scan()));
  }
}

// OrderedFinder (the bulk load's presence checks) answers what find() does,
// for increasing keys (present and absent, past several re-pins), for a key
// not greater than the previous one, and for keys before the first and after
// the last entry.
TEST(SkipListMap, OrderedFinderMatchesFind) {
  std::mt19937_64 rng(test::test_seed());
  SkipListMap<Meta> m(3);
  for (int i = 0; i < 30000; ++i) {
    const std::string k = "k" + std::to_string(rng() % 60000);
    m.insert(k, Meta{static_cast<std::uint64_t>(i), k});
  }
  std::vector<std::string> probes = {"", std::string(1, '\0'), "a", "k", "z", "\xff\xff"};
  for (int i = 0; i < 60000; ++i) probes.push_back("k" + std::to_string(i));
  for (int i = 0; i < 200; ++i) probes.push_back(random_key(rng));
  std::sort(probes.begin(), probes.end());
  for (std::size_t i = 0; i + 1 < probes.size(); i += 501) std::swap(probes[i], probes[i + 1]);  // steps back
  probes.push_back("k1");  // far back, at the end
  auto f = m.ordered_finder();
  std::size_t found = 0;
  for (const std::string& k : probes) {
    const std::optional<Meta> want = m.find(k);
    const Meta* got = f.find(k);
    ASSERT_EQ(got != nullptr, want.has_value()) << testing::PrintToString(k);
    if (got != nullptr) {
      ASSERT_EQ(*got, *want);
      ++found;
    }
  }
  EXPECT_GT(found, m.size() / 2);
}

// A bulk load's presence check and insert share one walk: the finder leaves a
// Hint per absent key, the inserter starts its level-0 walk there (or at the
// node it linked last) and searches the index only for a node with a tower.
// Same results and the same map as insert(); also when the map changed
// between the find and the insert (hinted nodes erased, keys inserted next to
// them, hints handed to the wrong key: each case falls back to a search).
TEST(SkipListMap, HintedOrderedInsertMatchesSingleInserts) {
  std::mt19937_64 rng(test::test_seed());
  for (int round = 0; round < 4; ++round) {
    SkipListMap<Meta> single(round + 7), bulk(round + 7);
    for (int i = 0; i < 8000; ++i) {
      const std::string k = "k" + std::to_string(rng() % 40000);
      ASSERT_EQ(single.insert(k, Meta{1, "pre"}), bulk.insert(k, Meta{1, "pre"}));
    }
    std::vector<std::string> keys;
    for (int i = 0; i < 20000; ++i) keys.push_back("k" + std::to_string(rng() % 40000));
    for (int i = 0; i < 50; ++i) keys.push_back(random_key(rng));  // odd bytes, short keys
    for (int i = 0; i < 6000; ++i) keys.push_back("zz" + std::to_string(i));  // past the end: one hint, past a re-pin
    keys.push_back("");
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    using Hint = SkipListMap<Meta>::Hint;
    EpochDomain::Guard pinned = bulk.domain().pin();  // hinted nodes stay memory until the inserts
    std::vector<Hint> hints(keys.size());
    {
      auto f = bulk.ordered_finder();
      for (std::size_t i = 0; i < keys.size(); ++i) {
        if (keys[i].empty()) continue;
        if (f.find(keys[i], &hints[i]) == nullptr) {
          ASSERT_TRUE(static_cast<bool>(hints[i]));
        } else {
          hints[i] = Hint();  // present: inserted without a hint, as a bulk load does
        }
      }
    }
    if (round == 1 || round == 3) {
      // The map moves between the finds and the inserts: present keys erased
      // (hinted nodes among them), others inserted next to them.
      for (int i = 0; i < 3000; ++i) {
        const std::string k = "k" + std::to_string(rng() % 40000);
        ASSERT_EQ(single.erase(k), bulk.erase(k));
        const std::string j = "k" + std::to_string(rng() % 40000) + "a";
        ASSERT_EQ(single.insert(j, Meta{2, "mid"}), bulk.insert(j, Meta{2, "mid"}));
      }
    }
    if (round == 2) std::rotate(hints.begin(), hints.begin() + 1, hints.end());  // each key gets the next key's hint
    // Rounds 0 and 1 as a bulk load does it: the inserter under the pin.
    auto ins = round < 2 ? bulk.ordered_inserter(pinned) : bulk.ordered_inserter();
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (keys[i].empty()) continue;
      const InsertResult a = single.insert(keys[i], Meta{i, keys[i]});
      const InsertResult b = ins.insert(keys[i], Meta{i, keys[i]}, hints[i]);
      ASSERT_EQ(a, b) << "round " << round << " key " << i;
    }
    // A key not greater than the last one, with a hint of its own ("k0-":
    // no key above is made like it, "kNa" of rounds 1 and 3 may be "k0a").
    Hint back;
    ASSERT_EQ(bulk.ordered_finder().find("k0-", &back), nullptr);
    ASSERT_EQ(single.insert("k0-", Meta{9, "back"}), InsertResult::inserted);
    ASSERT_EQ(ins.insert("k0-", Meta{9, "back"}, back), InsertResult::inserted);
    // Then keys above it, far below where the load ended, without hints:
    // the fingers the load left lie above them, so these must search.
    for (char c = 'b'; c <= 'z'; ++c) {
      const std::string k = std::string("k0") + c;
      ASSERT_EQ(ins.insert(k, Meta{10, "after"}, Hint()), single.insert(k, Meta{10, "after"})) << k;
    }
    EXPECT_EQ(drain(bulk.scan()), drain(single.scan()));
    EXPECT_EQ(bulk.size(), single.size());
    // Without changes between find and insert, every hinted key is absent,
    // so the towers are drawn in the same order: the same nodes.
    if (round == 0) {
      EXPECT_EQ(bulk.memory_bytes(), single.memory_bytes());
    }
    for (const auto& k : keys) {
      if (!k.empty()) {
        ASSERT_TRUE(bulk.contains(k)) << testing::PrintToString(k);
      }
    }
    for (std::size_t i = 0; i < keys.size(); i += 3) {
      ASSERT_EQ(bulk.erase(keys[i]), single.erase(keys[i]));
    }
    EXPECT_EQ(drain(bulk.scan()), drain(single.scan()));
  }
}

// An inserter given a guard that does not pin its map's domain (another
// domain's) pins the domain itself, as an inserter without a guard does: the
// nodes its fingers point at stay memory. Here: a node erased while the
// inserter lives is not reclaimed until the inserter goes.
TEST(SkipListMap, AnInserterGivenAnotherDomainsGuardPinsItsOwn) {
  EpochDomain other;
  SkipListMap<Meta> m(5);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(m.insert("k" + std::to_string(100 + i), Meta{1, "x"}), InsertResult::inserted);
  {
    const EpochDomain::Guard foreign = other.pin();
    auto ins = m.ordered_inserter(foreign);
    ASSERT_EQ(ins.insert("k150a", Meta{2, "y"}), InsertResult::inserted);
    ASSERT_EQ(m.erase("k120"), EraseResult::erased);
    m.domain().drain();
    EXPECT_GT(m.domain().pending(), 0u) << "the inserter held no pin of the map's domain";
    ASSERT_EQ(ins.insert("k160a", Meta{3, "z"}), InsertResult::inserted);
  }
  m.domain().drain();
  EXPECT_EQ(m.domain().pending(), 0u);
  EXPECT_TRUE(m.contains("k150a"));
  EXPECT_TRUE(m.contains("k160a"));
  EXPECT_FALSE(m.contains("k120"));
}

TEST(SkipListMap, LargeSequentialInsertEraseReclaimsEverything) {
  SkipListMap<Meta> m(7);
  const int n = test::kSlowBuild ? 20000 : 100000;
  for (int i = 0; i < n; ++i) ASSERT_EQ(m.insert(std::to_string(i), {1, "x"}), InsertResult::inserted);
  for (int i = 0; i < n; i += 2) ASSERT_EQ(m.erase(std::to_string(i)), EraseResult::erased);
  for (int i = 0; i < n; ++i) ASSERT_EQ(m.contains(std::to_string(i)), i % 2 == 1);
  m.domain().drain(16);
  EXPECT_EQ(m.domain().pending(), 0U);  // nothing left waiting (LSan checks the rest at exit)
  EXPECT_EQ(m.size(), static_cast<std::size_t>(n / 2));
}

// A value that owns a heap buffer, counted by its value_heap_bytes overload.
struct Blob {
  std::string data;
};
std::size_t value_heap_bytes(const Blob& b) noexcept { return b.data.size() > 15 ? b.data.capacity() + 1 : 0; }

TEST(SkipListMap, MemoryBytesFollowsEntriesKeysAndValueHeap) {
  SkipListMap<Blob> m(11);
  EXPECT_EQ(m.memory_bytes(), 0U);
  ASSERT_EQ(m.insert("k", Blob{"short"}), InsertResult::inserted);
  const std::size_t one = m.memory_bytes();
  EXPECT_GE(one, 32U);  // at least one malloc chunk
  // A long key is stored in the node: its bytes count.
  ASSERT_EQ(m.insert(std::string(200, 'a'), Blob{"short"}), InsertResult::inserted);
  const std::size_t two = m.memory_bytes();
  EXPECT_GE(two - one, one + 200 - 1 - 16);
  // A value with a heap buffer counts that buffer too.
  ASSERT_EQ(m.insert("v", Blob{std::string(1000, 'x')}), InsertResult::inserted);
  EXPECT_GE(m.memory_bytes() - two, 1000U);
  // A present key inserts nothing.
  const std::size_t three = m.memory_bytes();
  ASSERT_EQ(m.insert("v", Blob{std::string(5000, 'y')}), InsertResult::exists);
  EXPECT_EQ(m.memory_bytes(), three);
  ASSERT_EQ(m.erase("v"), EraseResult::erased);
  EXPECT_EQ(m.memory_bytes(), two);
  ASSERT_EQ(m.erase(std::string(200, 'a')), EraseResult::erased);
  ASSERT_EQ(m.erase("k"), EraseResult::erased);
  EXPECT_EQ(m.memory_bytes(), 0U);
}

}  // namespace
}  // namespace cg::store
