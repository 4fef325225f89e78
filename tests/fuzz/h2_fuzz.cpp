// libFuzzer target for app/h2: the connection start, the first header
// block's HPACK and the Huffman code, on any bytes.
//
// The input is used three ways: as a connection start (the preface is put
// in front when byte 0 is odd), as a header block, and as a Huffman string.
// Checked (abort on violation):
// - first_header_block() stays within [p, n) (ASan) and its output;
//   a complete block ends within the input and is no longer than the bytes
//   that hold it; with the block copied out or not, the verdict is the same;
// - segmentation never changes the verdict: every prefix of the input says
//   "need more", or exactly what the whole input says (the same end), and a
//   prefix that reaches the block's end says complete;
// - decode_first_block() gives values inside the block, the output or the
//   static table's strings, never longer than their source allows (a
//   Huffman string decodes to at most 8/5 of its bytes);
// - huffman_decode() counts what it decodes, and refuses a buffer one byte
//   short.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuckoogate/h2/h2.hpp"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

using cg::h2::Status;

bool inside(const cg::h2::Value& v, const uint8_t* b, std::size_t n) {
  return v.p >= b && v.p + v.len <= b + n;
}

void check_values(const cg::h2::Request& r, const uint8_t* block, std::size_t n, const uint8_t* out, std::size_t cap) {
  for (const cg::h2::Value* v : {&r.method, &r.scheme, &r.authority, &r.authority_last, &r.path, &r.host_first, &r.host_last}) {
    if (v->p == nullptr) continue;
    // A value from the block (raw), the output (Huffman) or the static
    // table (at most 13 bytes: "gzip, deflate").
    check(inside(*v, block, n) || inside(*v, out, cap) || v->len <= 13);
    check(v->len <= n * 8 / 5 + 13);
    if (v->len != 0) check(v->p[v->len - 1] == v->p[v->len - 1]);  // readable (ASan)
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 20000) return 0;
  static uint8_t block[16384], block2[16384], values[16384];

  // 1. The connection start.
  std::vector<uint8_t> conn;
  if ((data[0] & 1) != 0) conn.assign(reinterpret_cast<const uint8_t*>("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
                                      reinterpret_cast<const uint8_t*>("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + 24);
  conn.insert(conn.end(), data + 1, data + size);
  const std::size_t n = conn.size();
  const cg::h2::FirstBlock whole = cg::h2::first_header_block(conn.data(), n, SIZE_MAX, block, sizeof block);
  const cg::h2::FirstBlock framed = cg::h2::first_header_block(conn.data(), n, SIZE_MAX);
  if (whole.status != Status::kTooLarge) check(framed.status == whole.status && framed.end == whole.end);
  if (whole.status == Status::kComplete) {
    check(whole.end <= n && whole.block_len <= whole.end);
    cg::h2::Request r;
    cg::h2::decode_first_block(block, whole.block_len, values, sizeof values, r);
    check_values(r, block, whole.block_len, values, sizeof values);
  }
  for (std::size_t cut = 0; cut < n; cut += 1 + cut / 8) {
    const cg::h2::FirstBlock part = cg::h2::first_header_block(conn.data(), cut, SIZE_MAX, block2, sizeof block2);
    if (whole.status == Status::kComplete && cut >= whole.end) {
      check(part.status == Status::kComplete && part.end == whole.end && part.block_len == whole.block_len);
      check(std::memcmp(block, block2, whole.block_len) == 0);
    } else if (whole.status == Status::kComplete) {
      check(part.status == Status::kNeedMore);
    } else if (part.status != Status::kNeedMore) {
      check(part.status == whole.status);
    }
  }

  // 2. The input as a header block, into outputs of two sizes.
  cg::h2::Request a, b;
  cg::h2::decode_first_block(data, size, values, sizeof values, a);
  check_values(a, data, size, values, sizeof values);
  cg::h2::decode_first_block(data, size, values, 16, b);
  check(b.malformed == a.malformed);  // (the output's size changes only what fits)
  check_values(b, data, size, values, 16);

  // 3. The input as a Huffman string.
  static uint8_t text[20000 * 8 / 5 + 1];
  const long counted = cg::h2::huffman_decode(data, size, nullptr, SIZE_MAX);
  const long decoded = cg::h2::huffman_decode(data, size, text, sizeof text);
  check(counted == decoded);
  if (decoded > 0) {
    check(static_cast<std::size_t>(decoded) <= size * 8 / 5);
    check(cg::h2::huffman_decode(data, size, text, static_cast<std::size_t>(decoded) - 1) == -1);
  }
  return 0;
}
