// HPACK (RFC 7541) for a connection's first header block: integers (§5.1),
// string literals and their Huffman code (§5.2, Appendix B), the static
// table (Appendix A) and the dynamic table the block itself fills (§4).
#include <array>
#include <cstring>
#include <string_view>

#include "cuckoogate/h2/h2.hpp"

namespace cg::h2 {

namespace {

// ---- Huffman -------------------------------------------------------------

// Code lengths of symbols 0-255 and EOS (256), RFC 7541 Appendix B. The
// code is canonical: within a length, codes are consecutive in symbol
// order, and each length's first code follows the last of the shorter
// ones, so these lengths determine every code (h2_test checks the RFC's
// examples and strings coded by another encoder).
constexpr uint8_t kCodeLen[257] = {
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,  // 0-15
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,  // 16-31
    6,  10, 10, 12, 13, 6,  8,  11, 10, 10, 8,  11, 8,  6,  6,  6,   // 32-47
    5,  5,  5,  6,  6,  6,  6,  6,  6,  6,  7,  8,  15, 6,  12, 10,  // 48-63
    13, 6,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,   // 64-79
    7,  7,  7,  7,  7,  7,  7,  7,  8,  7,  8,  13, 19, 13, 14, 6,   // 80-95
    15, 5,  6,  5,  6,  5,  6,  6,  6,  5,  7,  7,  6,  6,  6,  5,   // 96-111
    6,  7,  6,  5,  5,  6,  7,  7,  7,  7,  7,  15, 11, 14, 13, 28,  // 112-127
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,  // 128-143
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,  // 144-159
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,  // 160-175
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,  // 176-191
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,  // 192-207
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,  // 208-223
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,  // 224-239
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,  // 240-255
    30,                                                              // EOS
};
constexpr unsigned kMaxCodeLen = 30;
constexpr uint16_t kEos = 256;

// The canonical code's decoding tables: for each length, its first code,
// how many codes it has, and where its symbols start in `sym` (the symbols
// ordered by length, then value).
struct Canonical {
  uint32_t first[kMaxCodeLen + 1] = {};
  uint16_t count[kMaxCodeLen + 1] = {};
  uint16_t start[kMaxCodeLen + 1] = {};
  uint16_t sym[257] = {};
};

constexpr Canonical make_canonical() {
  Canonical c;
  for (uint16_t s = 0; s < 257; ++s) ++c.count[kCodeLen[s]];
  uint32_t code = 0;
  uint16_t at = 0;
  for (unsigned len = 1; len <= kMaxCodeLen; ++len) {
    c.first[len] = code;
    c.start[len] = at;
    for (uint16_t s = 0; s < 257; ++s)
      if (kCodeLen[s] == len) c.sym[at++] = s;
    code = (code + c.count[len]) << 1;
  }
  return c;
}
constexpr Canonical kCanon = make_canonical();
// The 30 ones of EOS are the last code: the code is complete.
static_assert(kCanon.first[kMaxCodeLen] + kCanon.count[kMaxCodeLen] == (uint32_t{1} << kMaxCodeLen));

// ---- Static table (Appendix A) --------------------------------------------

// Which field a name is, for the request: only these are read.
enum class Name : uint8_t { kOther, kMethod, kScheme, kAuthority, kPath, kHost };

struct StaticEntry {
  std::string_view name, value;
};
constexpr std::array<StaticEntry, 62> kStatic = {{
    {"", ""},  // (index 0 is not an entry)
    {":authority", ""}, {":method", "GET"}, {":method", "POST"}, {":path", "/"}, {":path", "/index.html"},
    {":scheme", "http"}, {":scheme", "https"}, {":status", "200"}, {":status", "204"}, {":status", "206"},
    {":status", "304"}, {":status", "400"}, {":status", "404"}, {":status", "500"}, {"accept-charset", ""},
    {"accept-encoding", "gzip, deflate"}, {"accept-language", ""}, {"accept-ranges", ""}, {"accept", ""},
    {"access-control-allow-origin", ""}, {"age", ""}, {"allow", ""}, {"authorization", ""},
    {"cache-control", ""}, {"content-disposition", ""}, {"content-encoding", ""}, {"content-language", ""},
    {"content-length", ""}, {"content-location", ""}, {"content-range", ""}, {"content-type", ""},
    {"cookie", ""}, {"date", ""}, {"etag", ""}, {"expect", ""}, {"expires", ""}, {"from", ""}, {"host", ""},
    {"if-match", ""}, {"if-modified-since", ""}, {"if-none-match", ""}, {"if-range", ""},
    {"if-unmodified-since", ""}, {"last-modified", ""}, {"link", ""}, {"location", ""}, {"max-forwards", ""},
    {"proxy-authenticate", ""}, {"proxy-authorization", ""}, {"range", ""}, {"referer", ""}, {"refresh", ""},
    {"retry-after", ""}, {"server", ""}, {"set-cookie", ""}, {"strict-transport-security", ""},
    {"transfer-encoding", ""}, {"user-agent", ""}, {"vary", ""}, {"via", ""}, {"www-authenticate", ""},
}};
constexpr uint64_t kStaticCount = kStatic.size() - 1;

// Field names are lower case in HTTP/2 (RFC 9113 §8.2.1: a server refuses
// a request with an upper-case one), so they are compared as they are.
Name name_of(const uint8_t* p, std::size_t n) {
  const std::string_view s(reinterpret_cast<const char*>(p), n);
  if (s == ":authority") return Name::kAuthority;
  if (s == ":path") return Name::kPath;
  if (s == ":method") return Name::kMethod;
  if (s == ":scheme") return Name::kScheme;
  if (s == "host") return Name::kHost;
  return Name::kOther;
}

Name static_name(uint64_t index) {
  const std::string_view s = kStatic[index].name;
  return name_of(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

// ---- The block -----------------------------------------------------------

// A string: a literal of the block (raw or Huffman-coded) or a static
// table value.
struct Str {
  const uint8_t* p = nullptr;
  uint32_t len = 0;  // coded length
  bool huffman = false;
  bool set = false;
};

// A dynamic table entry (16 bytes): its name's kind and decoded length,
// its value (a literal of the block: offset, coded length, Huffman or not),
// its size (§4.1).
struct Entry {
  uint32_t value_off = 0;
  uint32_t value_len = 0;
  uint32_t size = 0;
  uint16_t name_len = 0;
  Name name = Name::kOther;
  bool huffman = false;
};
constexpr std::size_t kEntryOverhead = 32;
// Every entry is at least 32 bytes: at most this many fit the largest table.
constexpr std::size_t kMaxEntries = kMaxTableSize / kEntryOverhead;

class Block {
 public:
  Block(const uint8_t* p, std::size_t n) : p_(p), n_(n) {}

  // Walks the block; false where it does not decode.
  bool walk() {
    while (pos_ < n_) {
      const uint8_t b = p_[pos_];
      if ((b & 0x80) != 0) {  // indexed field (§6.1)
        uint64_t index = 0;
        if (!integer(7, &index) || index == 0) return false;
        Name name;
        Str value;
        if (!lookup(index, &name, &value)) return false;
        note(name, value);
      } else if ((b & 0xe0) == 0x20) {  // dynamic table size update (§6.3)
        // Servers differ: §4.2 wants it first in the block, nginx takes it
        // anywhere and ignores one before its first entry (an outside
        // check), Go evicts to it. The table keeps the largest size any of
        // them may hold, so an index any of them resolves resolves here to
        // the same entry (every decoder adds the same entries; keeping more
        // only keeps older ones).
        uint64_t size = 0;
        if (!integer(5, &size) || size > kMaxTableSize) return false;
        if (size > max_size_) max_size_ = static_cast<std::size_t>(size);
        continue;
      } else {  // literal: with incremental indexing (§6.2.1), without, never indexed
        const bool indexing = (b & 0xc0) == 0x40;
        uint64_t index = 0;
        if (!integer(indexing ? 6 : 4, &index)) return false;
        Name name = Name::kOther;
        std::size_t name_len = 0;
        if (index == 0) {
          Str s;
          if (!string(&s)) return false;
          const long len = decoded_len(s);
          if (len < 0) return false;
          name_len = static_cast<std::size_t>(len);
          uint8_t buf[16];
          if (name_len <= sizeof buf) name = name_of(buf, static_cast<std::size_t>(decode(s, buf, sizeof buf)));
        } else {
          Str unused;
          if (!lookup(index, &name, &unused, &name_len)) return false;
        }
        Str value;
        if (!string(&value)) return false;
        const long value_len = decoded_len(value);
        if (value_len < 0) return false;
        note(name, value);
        if (indexing) insert(name, name_len, value, name_len + static_cast<std::size_t>(value_len) + kEntryOverhead);
      }
    }
    return true;
  }

  // The value of a field as decoded, into [out, out + cap) from *used on
  // (a raw literal or a static value is not copied); false if it does not fit.
  static bool value(const Str& s, uint8_t* out, std::size_t cap, std::size_t* used, Value* v) {
    if (!s.set) return true;
    if (!s.huffman) {
      *v = {s.p, s.len};
      return true;
    }
    const long len = huffman_decode(s.p, s.len, out + *used, cap - *used);
    if (len < 0) return false;
    *v = {out + *used, static_cast<std::size_t>(len)};
    *used += static_cast<std::size_t>(len);
    return true;
  }

  Str method, scheme, authority, authority_last, path, host_first, host_last;

 private:
  // §5.1: an N-bit prefix integer at pos_. Values beyond 2^32 are refused
  // (no index or length of a block comes near); continuation bytes of zero
  // bits are taken, up to 64 bits' worth, as Go's decoder takes them (9;
  // quiche 10), so that padding cannot hide a field a server reads.
  bool integer(unsigned prefix, uint64_t* v) {
    const uint8_t mask = static_cast<uint8_t>((1u << prefix) - 1);
    uint64_t x = p_[pos_++] & mask;
    if (x == mask) {
      for (unsigned shift = 0;; shift += 7) {
        if (pos_ == n_ || shift > 63) return false;
        const uint8_t b = p_[pos_++];
        if ((b & 0x7fu) != 0) {
          if (shift > 32) return false;  // beyond 2^32
          x += uint64_t{b & 0x7fu} << shift;
        }
        if ((b & 0x80) == 0) break;
      }
    }
    *v = x;
    return x <= UINT32_MAX;
  }

  // §5.2: H, a 7-bit prefix length, the bytes.
  bool string(Str* s) {
    if (pos_ == n_) return false;
    const bool huffman = (p_[pos_] & 0x80) != 0;
    uint64_t len = 0;
    if (!integer(7, &len) || len > n_ - pos_) return false;
    *s = {p_ + pos_, static_cast<uint32_t>(len), huffman, true};
    pos_ += static_cast<std::size_t>(len);
    return true;
  }

  static long decoded_len(const Str& s) { return s.huffman ? huffman_decode(s.p, s.len, nullptr, SIZE_MAX) : s.len; }

  // Decodes s into buf (cap bytes; it fits: its decoded length was checked).
  static long decode(const Str& s, uint8_t* buf, std::size_t cap) {
    if (!s.huffman) {
      std::memcpy(buf, s.p, s.len);
      return s.len;
    }
    return huffman_decode(s.p, s.len, buf, cap);
  }

  // Index 1-61: the static table; 62 on: the dynamic one, newest first.
  bool lookup(uint64_t index, Name* name, Str* value, std::size_t* name_len = nullptr) {
    if (index <= kStaticCount) {
      *name = static_name(index);
      const std::string_view v = kStatic[index].value;
      *value = {reinterpret_cast<const uint8_t*>(v.data()), static_cast<uint32_t>(v.size()), false, true};
      if (name_len != nullptr) *name_len = kStatic[index].name.size();
      return true;
    }
    if (index - kStaticCount > count_) return false;
    const Entry& e = entries_[(newest_ + kMaxEntries - (index - kStaticCount - 1)) % kMaxEntries];
    *name = e.name;
    *value = {p_ + e.value_off, e.value_len, e.huffman, true};
    if (name_len != nullptr) *name_len = e.name_len;
    return true;
  }

  // The first of each pseudo-header that is not empty, the last
  // :authority; the first non-empty and the last Host field. (A Huffman
  // string of padding alone is empty too: at most 29 bits, 4 bytes.)
  void note(Name name, const Str& value) {
    const auto first = [&](Str& f) {
      if (!f.set || f.len == 0 || (f.huffman && f.len <= 4 && decoded_len(f) == 0)) f = value;
    };
    switch (name) {
      case Name::kMethod: first(method); break;
      case Name::kScheme: first(scheme); break;
      case Name::kAuthority:
        first(authority);
        authority_last = value;
        break;
      case Name::kPath: first(path); break;
      case Name::kHost:
        first(host_first);
        host_last = value;
        break;
      case Name::kOther: break;
    }
  }

  // §4.4: room is made by evicting the oldest; an entry larger than the
  // table empties it and is not added.
  void insert(Name name, std::size_t name_len, const Str& value, std::size_t size) {
    evict(size);
    if (size > max_size_) return;
    newest_ = (newest_ + 1) % kMaxEntries;
    entries_[newest_] = {static_cast<uint32_t>(value.p - p_), value.len, static_cast<uint32_t>(size),
                         static_cast<uint16_t>(name_len), name, value.huffman};
    ++count_;
    used_ += size;
  }

  // Evicts the oldest entries until `room` more bytes fit (§4.3, §4.4).
  void evict(std::size_t room) {
    while (count_ != 0 && used_ + room > max_size_) {
      used_ -= entries_[(newest_ + kMaxEntries - (count_ - 1)) % kMaxEntries].size;
      --count_;
    }
  }

  const uint8_t* p_;
  std::size_t n_;
  std::size_t pos_ = 0;
  std::size_t max_size_ = kTableSize;
  std::size_t used_ = 0;
  // A ring, newest at newest_; at most kMaxEntries fit kTableSize.
  Entry entries_[kMaxEntries];
  std::size_t newest_ = 0;
  std::size_t count_ = 0;
};

}  // namespace

long huffman_decode(const uint8_t* p, std::size_t n, uint8_t* out, std::size_t cap) noexcept {
  std::size_t len = 0;
  uint32_t code = 0;
  unsigned bits = 0;  // of the code being read
  for (std::size_t i = 0; i < n; ++i) {
    for (int b = 7; b >= 0; --b) {
      code = code << 1 | ((p[i] >> b) & 1u);
      ++bits;
      const uint32_t k = code - kCanon.first[bits];  // (wraps when code < first: no match)
      if (k >= kCanon.count[bits]) continue;
      const uint16_t s = kCanon.sym[kCanon.start[bits] + k];
      if (s == kEos) return -1;
      if (len == cap) return -1;
      if (out != nullptr) out[len] = static_cast<uint8_t>(s);
      ++len;
      code = 0;
      bits = 0;
    }
  }
  // Padding: the most significant bits of EOS (all ones). §5.2 allows at
  // most 7; nginx takes more (an outside check), so any run of ones short
  // of EOS itself is taken.
  if (code != (uint32_t{1} << bits) - 1) return -1;
  return static_cast<long>(len);
}

bool block_decodes(const uint8_t* p, std::size_t n) noexcept {
  Block b(p, n);
  return b.walk();
}

void decode_first_block(const uint8_t* p, std::size_t n, uint8_t* out, std::size_t cap, Request& req) noexcept {
  req = Request{};
  Block b(p, n);
  req.malformed = !b.walk();
  std::size_t used = 0;
  const auto take = [&](const Str& s, Value* v) {
    if (!Block::value(s, out, cap, &used, v)) req.too_long = true;
  };
  take(b.method, &req.method);
  take(b.scheme, &req.scheme);
  // (A last field that is the first one's string takes no more room.)
  const auto take_last = [&](const Str& last, const Str& first, const Value& first_value, Value* v) {
    if (last.p == first.p && last.len == first.len) {
      *v = first_value;
    } else {
      take(last, v);
    }
  };
  take(b.authority, &req.authority);
  take_last(b.authority_last, b.authority, req.authority, &req.authority_last);
  take(b.path, &req.path);
  take(b.host_first, &req.host_first);
  take_last(b.host_last, b.host_first, req.host_first, &req.host_last);
}

}  // namespace cg::h2
