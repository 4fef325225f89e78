// app/h2: the Huffman code against RFC 7541's examples and another encoder,
// a connection's first header block decoded (the RFC's request examples,
// the dynamic table the block fills, every way a block fails to decode),
// and the frames from the preface to that block's end.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuckoogate/h2/h2.hpp"
#include "h2_builder.hpp"

namespace {

using Bytes = std::vector<uint8_t>;

Bytes hex(const std::string& h) {
  Bytes out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

Bytes bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

std::string huffman(const Bytes& coded) {
  std::string out(coded.size() * 2, '\0');
  const long n = cg::h2::huffman_decode(coded.data(), coded.size(), reinterpret_cast<uint8_t*>(out.data()), out.size());
  if (n < 0) return "<invalid>";
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::string str(const cg::h2::Value& v) {
  return v.p == nullptr ? "<absent>" : std::string(reinterpret_cast<const char*>(v.p), v.len);
}

// The request, and the block and output its values point into.
struct Decoded {
  cg::h2::Request req;
  Bytes block;
  uint8_t out[4096];
};

void decode(const Bytes& block, Decoded& d, std::size_t cap = sizeof(Decoded::out)) {
  d.block = block;
  cg::h2::decode_first_block(d.block.data(), d.block.size(), d.out, cap, d.req);
}

TEST(Huffman, DecodesTheRfcsExamples) {
  // RFC 7541 C.4 (requests) and C.6 (responses).
  EXPECT_EQ(huffman(hex("f1e3c2e5f23a6ba0ab90f4ff")), "www.example.com");
  EXPECT_EQ(huffman(hex("a8eb10649cbf")), "no-cache");
  EXPECT_EQ(huffman(hex("25a849e95ba97d7f")), "custom-key");
  EXPECT_EQ(huffman(hex("25a849e95bb8e8b4bf")), "custom-value");
  EXPECT_EQ(huffman(hex("6402")), "302");
  EXPECT_EQ(huffman(hex("aec3771a4b")), "private");
  EXPECT_EQ(huffman(hex("d07abe941054d444a8200595040b8166e082a62d1bff")), "Mon, 21 Oct 2013 20:13:21 GMT");
  EXPECT_EQ(huffman(hex("9d29ad171863c78f0b97c8e9ae82ae43d3")), "https://www.example.com");
  EXPECT_EQ(huffman({}), "");
}

TEST(Huffman, DecodesEveryByteAsAnotherEncoderCodesIt) {
  // Bytes 0..255 in order, coded by python3-hpack 4.0.0's Huffman encoder:
  // every one of the 256 codes (and so every length of the table) is used.
  const Bytes coded = hex(
      "ffc7fffd8fffffe2fffffe3fffffe4fffffe5fffffe6fffffe7fffffe8ffffeafffffff3fffffa7fffffabffffffdfffffebfffffec"
      "fffffedfffffeefffffefffffff0ffffff1ffffff2fffffffbfffffcffffffd3fffffd7fffffdbfffffdffffffe3fffffe7fffffeb"
      "fffffed4fe3f9ffaffcabf1febfafefe7fdfd2cbb00089969b71d79fb9f7fff20ffbff3ff50ddbd7f061c58f265cd9f469d5af66dd"
      "dbf871e5f9cff7ff7fffc3ff9ffe45fff4719242cb34e6e9d68a6a3d7dac426defe3cfaf7fffbfe7ffbffdffffffcfffe6ffff4bfff9"
      "ffffa3fffd3ffff53fffd5ffffb3fffeb7fffdaffffb7ffff73fffeeffffdeffffebffffbfffffd9ffffdbfffebffffe0ffffeeffffc3"
      "ffff8bffff1ffffe4fffee7fffb1ffff97fffd9ffffcdffff9fffffbffffdafffeeffff4ffffb7fffee7fffe8ffffd3fffdeffffd5fff"
      "eeffffbdffffe1fffdfffff7fffff5ffffecffff07fff87fffe0ffff17fffedffff87ffff77fffeffffeaffff8bfffe3ffff93ffff87"
      "fffcbffff37ffff1fffff83ffffe1fffebfffe3ffff3fffff2ffffa3ffffd9fffff17ffffc7fffff27ffffdefffffbffffff2fffff8ff"
      "fffb7fff97fff8fffffe6fffffc1fffff87ffffe7fffffc5ffffe5fffe4ffff2fffffd1fffff4ffffffefffffe3fffffc9fffff97fffb"
      "3ffffcffffb7fffcdffff4ffff9ffffd1ffffcffffeaffffafffffddffffeffffff4fffff5fffffabffffa7ffffd7fffff9bffffecff"
      "fffb7fffff3fffffe8fffffd3fffffabfffff5fffffff7ffffecfffffdbfffffbbfffff7ffffff0fffffbbf");
  std::string all(256, '\0');
  for (int i = 0; i < 256; ++i) all[static_cast<std::size_t>(i)] = static_cast<char>(i);
  EXPECT_EQ(huffman(coded), all);
  EXPECT_EQ(huffman(hex("25b650c3abbcf2e1")), "curl/7.88.1");
}

TEST(Huffman, RefusesWhatIsNoValidCode) {
  EXPECT_EQ(huffman(hex("fffffffc")), "<invalid>");        // EOS (30 ones) inside the string
  EXPECT_EQ(huffman(hex("18")), "<invalid>");              // 'a' (00011), then padding of zeros
  EXPECT_EQ(huffman(hex("1f")), "a");                      // 'a', then three ones: padding
  // Padding longer than §5.2's 7 bits: nginx takes it (an outside check), so it is taken.
  EXPECT_EQ(huffman(hex("1fff")), "a");                    // 'a', then 11 ones
  EXPECT_EQ(huffman(hex("ff")), "");                       // eight ones
  EXPECT_EQ(huffman(hex("fffffff0")), "<invalid>");        // 28 ones, then zeros
  uint8_t small[2];
  const Bytes coded = hex("f1e3c2e5f23a6ba0ab90f4ff");
  EXPECT_EQ(cg::h2::huffman_decode(coded.data(), coded.size(), small, sizeof small), -1);  // does not fit
  EXPECT_EQ(cg::h2::huffman_decode(coded.data(), coded.size(), nullptr, SIZE_MAX), 15);   // counted only
}

TEST(Hpack, DecodesTheRfcsFirstRequests) {
  Decoded d;
  // C.3.1: raw literals.
  decode(hex("828684410f7777772e6578616d706c652e636f6d"), d);
  EXPECT_FALSE(d.req.malformed);
  EXPECT_EQ(str(d.req.method), "GET");
  EXPECT_EQ(str(d.req.scheme), "http");
  EXPECT_EQ(str(d.req.path), "/");
  EXPECT_EQ(str(d.req.authority), "www.example.com");
  EXPECT_EQ(str(d.req.host_first), "<absent>");
  // C.4.1: Huffman-coded.
  decode(hex("828684418cf1e3c2e5f23a6ba0ab90f4ff"), d);
  EXPECT_FALSE(d.req.malformed);
  EXPECT_EQ(str(d.req.authority), "www.example.com");
  EXPECT_EQ(str(d.req.path), "/");
  // curl's request as python3-hpack codes it.
  decode(hex("8286418f8e8393a9645cbe474d7416e3c0781f4489610525854ff9e600ff7a8825b650c3abbcf2e15383f963e7"), d);
  EXPECT_FALSE(d.req.malformed);
  EXPECT_EQ(str(d.req.authority), "blocked.example:8080");
  EXPECT_EQ(str(d.req.path), "/secret?x=1");
  EXPECT_EQ(str(d.req.method), "GET");
}

TEST(Hpack, ReadsTheEntriesTheBlockItselfAdds) {
  Decoded d;
  // host: a.example (indexed, static name 38), :path /x (indexed, name 4),
  // then 62 (= :path /x, the newest) and 63 (= host: a.example) indexed:
  // the first :path and the first and last host are the entries.
  Bytes b = {0x66, 0x09};
  for (char c : std::string("a.example")) b.push_back(static_cast<uint8_t>(c));
  b.insert(b.end(), {0x44, 0x02, '/', 'x', 0xbe, 0xbf, 0x82});
  decode(b, d);
  EXPECT_FALSE(d.req.malformed);
  EXPECT_EQ(str(d.req.path), "/x");
  EXPECT_EQ(str(d.req.host_first), "a.example");
  EXPECT_EQ(str(d.req.host_last), "a.example");
  EXPECT_EQ(str(d.req.method), "GET");
  // A literal name, added: "host" Huffman-coded, value raw; then a literal
  // whose name is that entry's (index 62): a second Host line, the last.
  Bytes c = {0x40, 0x83, 0x9c, 0xe8, 0x4f, 0x03, 'o', 'n', 'e', 0x7e, 0x03, 't', 'w', 'o'};
  decode(c, d);
  EXPECT_FALSE(d.req.malformed);
  EXPECT_EQ(str(d.req.host_first), "one");
  EXPECT_EQ(str(d.req.host_last), "two");
  // An upper-case literal name is no Host field (a server refuses it).
  Bytes u = {0x00, 0x04, 'H', 'o', 's', 't', 0x03, 'o', 'n', 'e'};
  decode(u, d);
  EXPECT_FALSE(d.req.malformed);
  EXPECT_EQ(str(d.req.host_first), "<absent>");
}

TEST(Hpack, EvictsAsTheTableFills) {
  Decoded d;
  // An entry larger than the table (4096) empties it and is not added.
  Bytes big = {0x66, 0x01, 'a', 0x44};
  cg::test::hpack_int(big, 0x00, 7, 4096 - 32 - 5 + 1);  // :path, 5 + 4060 + 32 = 4097 bytes
  big.insert(big.end(), 4096 - 32 - 5 + 1, '/');
  Bytes emptied = big;
  emptied.push_back(0xbe);  // 62: nothing left
  decode(emptied, d);
  EXPECT_TRUE(d.req.malformed);
  EXPECT_EQ(str(d.req.host_first), "a");  // what was read before the error is kept
  // A size update below 4096 does not shrink the table (nginx ignores one
  // before its first entry; a table as large as any server's keeps every
  // entry an index of theirs may name).
  Bytes small = {0x3f, 0x13, 0x66, 0x01, 'a', 0x44, 0x02, '/', 'b', 0xbf};  // size 50, then 63 = host: a
  decode(small, d);
  EXPECT_FALSE(d.req.malformed);
  EXPECT_EQ(str(d.req.host_last), "a");
  // 130 Host fields added (4 + 1 + 32 = 37 bytes each): the table keeps
  // the newest 110 (4070 bytes), so 171 is the 21st added and 172 is gone.
  Bytes many;
  for (int i = 0; i < 130; ++i) many.insert(many.end(), {0x66, 0x01, static_cast<uint8_t>('a' + i % 26)});
  Bytes oldest = many;
  oldest.insert(oldest.end(), {0xff, 171 - 127});
  decode(oldest, d);
  EXPECT_FALSE(d.req.malformed);
  EXPECT_EQ(str(d.req.host_first), "a");
  EXPECT_EQ(str(d.req.host_last), "u");  // 'a' + 20
  many.insert(many.end(), {0xff, 172 - 127});
  decode(many, d);
  EXPECT_TRUE(d.req.malformed);
}

TEST(Hpack, MarksEveryBlockAServerCannotDecode) {
  Decoded d;
  const std::vector<std::pair<const char*, Bytes>> bad = {
      {"index 0", {0x80}},
      {"index past the tables", {0xbe}},
      {"literal name index past the tables", {0x7e, 0x01, 'a'}},
      {"size update above 65536", {0x3f, 0xe2, 0xff, 0x03}},
      {"integer padded past 64 bits", {0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}},
      {"string past the block", {0x44, 0x05, '/', 'a'}},
      {"integer past the block", {0xff}},
      {"integer beyond 2^32", {0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}},
      {"bad Huffman value", {0x44, 0x81, 0x18}},  // (padding of zeros)
      {"bad Huffman name", {0x00, 0x81, 0x00, 0x01, 'a'}},
      {"literal without its value", {0x44}},
  };
  for (const auto& [what, block] : bad) {
    decode(block, d);
    EXPECT_TRUE(d.req.malformed) << what;
  }
  decode({0x3f, 0xe1, 0x1f, 0x20, 0x82}, d);  // size updates (4096, 0) first: fine
  EXPECT_FALSE(d.req.malformed);
  EXPECT_EQ(str(d.req.method), "GET");
}

// What the most lenient server decoder (Go's x/net/http2/hpack, behind
// net/http h2c and grpc-go) takes is read, so that nothing it serves goes
// unread: a size update after fields while the table is still empty, and
// integers padded with zero continuation bytes (found by a review).
TEST(Hpack, ReadsWhatGosDecoderTakes) {
  Decoded d;
  Bytes late = {0x82, 0x86, 0x84, 0x3f, 0xe1, 0x1f, 0x01, 0x0f};
  for (char c : std::string("blocked.example")) late.push_back(static_cast<uint8_t>(c));
  decode(late, d);
  EXPECT_FALSE(d.req.malformed);
  EXPECT_EQ(str(d.req.authority), "blocked.example");
  // user-agent (index 58 = 15 + 43) with its index padded by five zero bytes.
  Bytes padded = {0x0f, 0xab, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01, 'x', 0x01, 0x0f};
  for (char c : std::string("blocked.example")) padded.push_back(static_cast<uint8_t>(c));
  decode(padded, d);
  EXPECT_FALSE(d.req.malformed);
  EXPECT_EQ(str(d.req.authority), "blocked.example");
  // A table raised to 65536 keeps what 4096 would have evicted.
  Bytes big = {0x3f, 0xe1, 0xff, 0x03};  // 65536
  for (int i = 0; i < 200; ++i) big.insert(big.end(), {0x66, 0x01, static_cast<uint8_t>('a' + i % 26)});
  big.insert(big.end(), {0xff, 0x86, 0x01});  // 127 + 6 + 128 = 261 = 62 + 199: the first added
  decode(big, d);
  EXPECT_FALSE(d.req.malformed);
  EXPECT_EQ(str(d.req.host_last), "a");
  // An empty first :authority does not hide a second one, nor does one
  // whose Huffman string is padding alone (an outside check).
  decode({0x81, 0x01, 0x0f, 'b', 'l', 'o', 'c', 'k', 'e', 'd', '.', 'e', 'x', 'a', 'm', 'p', 'l', 'e'}, d);
  EXPECT_EQ(str(d.req.authority), "blocked.example");
  decode({0x41, 0x81, 0xff, 0x01, 0x0f, 'b', 'l', 'o', 'c', 'k', 'e', 'd', '.', 'e', 'x', 'a', 'm', 'p', 'l', 'e'}, d);
  EXPECT_EQ(str(d.req.authority), "blocked.example");
  decode({}, d);
  EXPECT_FALSE(d.req.malformed);
}

TEST(Hpack, AValueThatDoesNotFitIsAbsentAndSaidSo) {
  Decoded d;
  const Bytes b = hex("828684418cf1e3c2e5f23a6ba0ab90f4ff");
  decode(b, d, 10);  // "www.example.com" is 15 bytes decoded
  EXPECT_TRUE(d.req.too_long);
  EXPECT_EQ(str(d.req.authority), "<absent>");
  EXPECT_EQ(str(d.req.path), "/");  // a static value takes no room
  decode(b, d, 15);
  EXPECT_FALSE(d.req.too_long);
  EXPECT_EQ(str(d.req.authority), "www.example.com");
}

// ---- frames --------------------------------------------------------------

const std::string kPreface(cg::test::kH2Preface);

Bytes frame(uint8_t type, uint8_t flags, uint32_t stream, const Bytes& payload) {
  return cg::test::h2_frame(type, flags, stream, payload);
}

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

constexpr uint8_t kSettings = 4, kWindowUpdate = 8, kHeaders = 1, kContinuation = 9, kPing = 6, kData = 0;
constexpr uint8_t kEndHeaders = 4, kPadded = 8, kPriority = 0x20, kEndStream = 1;

cg::h2::FirstBlock first(const Bytes& b, std::size_t max = 16384, Bytes* block = nullptr) {
  uint8_t out[16384];
  const cg::h2::FirstBlock r = cg::h2::first_header_block(b.data(), b.size(), max, out, sizeof out);
  if (block != nullptr && r.status == cg::h2::Status::kComplete) block->assign(out, out + r.block_len);
  return r;
}

TEST(Frames, FindTheFirstHeaderBlockAfterThePrefaceAtEverySplit) {
  const Bytes hdr = hex("828684418cf1e3c2e5f23a6ba0ab90f4ff");
  const Bytes conn = cat({bytes(kPreface), frame(kSettings, 0, 0, Bytes(12, 0)), frame(kWindowUpdate, 0, 0, {0, 0xff, 0, 1}),
                          frame(kHeaders, kEndHeaders | kEndStream, 1, hdr), frame(kSettings, 1, 0, {})});
  const std::size_t end = conn.size() - 9;
  Bytes block;
  const auto r = first(conn, 16384, &block);
  ASSERT_EQ(r.status, cg::h2::Status::kComplete);
  EXPECT_EQ(r.end, end);
  EXPECT_EQ(block, hdr);
  for (std::size_t n = 0; n < end; ++n)
    EXPECT_EQ(first(Bytes(conn.begin(), conn.begin() + static_cast<long>(n))).status, cg::h2::Status::kNeedMore) << n;
  EXPECT_TRUE(cg::h2::begins_preface(conn.data(), 3));
  EXPECT_FALSE(cg::h2::begins_preface(reinterpret_cast<const uint8_t*>("PRX"), 3));
}

TEST(Frames, TakePaddingPriorityAndContinuationsOff) {
  const Bytes hdr = hex("828684418cf1e3c2e5f23a6ba0ab90f4ff");
  const Bytes head(hdr.begin(), hdr.begin() + 5), mid(hdr.begin() + 5, hdr.begin() + 9), tail(hdr.begin() + 9, hdr.end());
  Bytes padded = {3, 0x80, 0, 0, 3, 200};  // pad length 3, exclusive dependency on 3, weight
  padded.insert(padded.end(), head.begin(), head.end());
  padded.insert(padded.end(), {0, 0, 0});
  const Bytes conn = cat({bytes(kPreface), frame(kSettings, 0, 0, {}), frame(kPing, 0, 0, Bytes(8, 7)),
                          frame(kHeaders, kPadded | kPriority, 5, padded), frame(kContinuation, 0, 5, mid),
                          frame(kContinuation, 0, 5, {}), frame(kContinuation, kEndHeaders, 5, tail)});
  Bytes block;
  const auto r = first(conn, 16384, &block);
  ASSERT_EQ(r.status, cg::h2::Status::kComplete);
  EXPECT_EQ(r.end, conn.size());
  EXPECT_EQ(block, hdr);
  // Cut anywhere: more is needed, never anything else.
  for (std::size_t n = 0; n < conn.size(); ++n)
    EXPECT_EQ(first(Bytes(conn.begin(), conn.begin() + static_cast<long>(n))).status, cg::h2::Status::kNeedMore) << n;
}

TEST(Frames, ABlockEndsWhereItsFragmentEndsBeforeItsPadding) {
  // nginx acts on a header block as soon as its fragment is there: a
  // request whose padding never came was served (an outside check).
  const Bytes hdr = hex("828684418cf1e3c2e5f23a6ba0ab90f4ff");
  Bytes padded = {200};
  padded.insert(padded.end(), hdr.begin(), hdr.end());
  padded.insert(padded.end(), 200, 0);
  const Bytes conn = cat({bytes(kPreface), frame(kSettings, 0, 0, {}), frame(kHeaders, kEndHeaders | kPadded, 1, padded)});
  const std::size_t fragment_end = conn.size() - 200;
  for (std::size_t n = fragment_end; n <= conn.size(); n += 50) {
    Bytes block;
    const auto r = first(Bytes(conn.begin(), conn.begin() + static_cast<long>(n)), 16384, &block);
    ASSERT_EQ(r.status, cg::h2::Status::kComplete) << n;
    EXPECT_EQ(r.end, fragment_end);
    EXPECT_EQ(block, hdr);
  }
  EXPECT_EQ(first(Bytes(conn.begin(), conn.begin() + static_cast<long>(fragment_end - 1))).status,
            cg::h2::Status::kNeedMore);
}

TEST(Frames, RefuseWhatAServerRefuses) {
  const Bytes hdr = {0x82};
  const Bytes pre = cat({bytes(kPreface), frame(kSettings, 0, 0, {})});
  const std::vector<std::pair<const char*, Bytes>> bad = {
      {"no preface", cat({bytes("GET / HTTP/1.1\r\n\r\n")})},
      {"a preface with one byte changed", cat({bytes("PRI * HTTP/2.0\r\n\r\nSM\r\n\n\n")})},
      {"HEADERS on stream 0", cat({pre, frame(kHeaders, kEndHeaders, 0, hdr)})},
      {"a CONTINUATION first", cat({pre, frame(kContinuation, kEndHeaders, 1, hdr)})},
      {"padding past the fragment", cat({pre, frame(kHeaders, kEndHeaders | kPadded, 1, {5, 0x82})})},
      {"a PADDED frame without its length", cat({pre, frame(kHeaders, kEndHeaders | kPadded, 1, {})})},
      {"a PRIORITY frame too short", cat({pre, frame(kHeaders, kEndHeaders | kPriority, 1, {0, 0, 0})})},
      {"a CONTINUATION of another stream", cat({pre, frame(kHeaders, 0, 1, hdr), frame(kContinuation, kEndHeaders, 3, hdr)})},
      {"a frame inside the block", cat({pre, frame(kHeaders, 0, 1, hdr), frame(kData, 0, 1, {1}),
                                         frame(kContinuation, kEndHeaders, 1, hdr)})},
  };
  for (const auto& [what, b] : bad) EXPECT_EQ(first(b).status, cg::h2::Status::kInvalid) << what;
}

TEST(Frames, AreBoundedByMaxAndTheOutput) {
  const Bytes conn = cat({bytes(kPreface), frame(kPing, 0, 0, Bytes(100, 0)), frame(kHeaders, kEndHeaders, 1, Bytes(50, 0x82))});
  EXPECT_EQ(first(conn, conn.size()).status, cg::h2::Status::kComplete);
  EXPECT_EQ(first(conn, conn.size() - 1).status, cg::h2::Status::kTooLarge);
  const Bytes cut(conn.begin(), conn.begin() + 24 + 9 + 100 + 4);  // the HEADERS frame's header cut
  EXPECT_EQ(first(cut, 24 + 9 + 100 + 8).status, cg::h2::Status::kTooLarge);
  EXPECT_EQ(first(cut, 24 + 9 + 100 + 9).status, cg::h2::Status::kNeedMore);
  uint8_t out[49];
  EXPECT_EQ(cg::h2::first_header_block(conn.data(), conn.size(), 16384, out, sizeof out).status,
            cg::h2::Status::kTooLarge);
  EXPECT_EQ(cg::h2::first_header_block(conn.data(), conn.size(), 16384).status, cg::h2::Status::kComplete);
}

}  // namespace
