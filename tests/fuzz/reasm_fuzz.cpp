// libFuzzer target for app/reasm: a stream cut into segments that arrive in
// any order, duplicated and overlapping, with copies whose bytes differ, fed
// to a Pool, and the first-flight detectors run on whatever is assembled.
//
// Input: byte 0 options (bits 0-2: max_pending - 1; bit 3: a 200-byte slot
// budget instead of 4096), bytes 1-4 the initial sequence number, byte 5 the
// number S of segments, then S descriptors of 5 bytes (offset 16 bits, length
// 16 bits, flags: bit 0 a garbage copy, bit 1 consume what is assembled
// after this segment, bit 2 consume past it to the segment's end), then the
// stream (at most 4096 bytes).
//
// Checked (abort on violation):
// - the assembled bytes are always the stream from the slot's start: the
//   first copy wins, so garbage placed only where the pool already holds the
//   stream's bytes never shows;
// - when no segment overflowed and every byte from the slot's start was sent,
//   the whole stream is assembled;
// - fast_open_data_whole() never calls bytes whole whose first message its
//   detector says needs more;
// - the detectors agree with the unsegmented stream: on any prefix they say
//   "need more" or what they say on the whole stream (the same verdict, the
//   same offsets, the same ClientHello), so segmentation never changes one.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "cuckoogate/reasm/first_flight.hpp"
#include "cuckoogate/reasm/pool.hpp"
#include "cuckoogate/reasm/stream.hpp"

namespace {

using namespace cg::reasm;

void check(bool ok) {
  if (!ok) std::abort();
}

struct Verdicts {
  TlsClientHello tls;
  std::vector<uint8_t> hello;  // the ClientHello bytes when complete
  HttpHead http;
  Frame chunked = Frame::kNeedMore;
  std::size_t chunked_end = 0;
  DnsMessage dns;
};

Verdicts detect(const uint8_t* p, std::size_t n, uint8_t* scratch) {
  Verdicts v;
  v.tls = detect_tls_client_hello(p, n, scratch, kTlsScratch);
  if (v.tls.status == Frame::kComplete) {
    check(v.tls.handshake == scratch + kTlsRecordHeader && v.tls.handshake_len >= 4);
    check(v.tls.handshake[0] == 1);
    const std::size_t len = std::size_t{v.tls.handshake[1]} << 16 |
                            std::size_t{v.tls.handshake[2]} << 8 | v.tls.handshake[3];
    check(v.tls.handshake_len == 4 + len && len <= kTlsMaxHandshake);
    check(v.tls.record == scratch && v.tls.record_len == v.tls.handshake_len + 5);
    check(v.tls.consumed > 5 && v.tls.consumed >= v.tls.handshake_len);
    v.hello.assign(v.tls.handshake, v.tls.handshake + v.tls.handshake_len);
  }
  v.http = detect_http_head(p, n, 1024);
  if (v.http.status == Frame::kComplete) {
    check(v.http.start < v.http.head_end && v.http.head_end <= n);
    check(v.http.head_end - v.http.start <= 1024);
    if (v.http.body == HttpBody::kChunked)
      v.chunked = find_chunked_end(p + v.http.head_end, n - v.http.head_end, &v.chunked_end);
    else
      check(v.http.next == v.http.head_end + v.http.content_length);
  }
  if (v.chunked == Frame::kComplete) check(v.chunked_end <= n - v.http.head_end);
  v.dns = detect_dns_tcp(p, n);
  if (v.dns.status == Frame::kComplete)
    check(v.dns.message == p + 2 && v.dns.next == v.dns.message_len + 2 && v.dns.next <= n &&
          v.dns.skip == (v.dns.message_len < kDnsHeader));
  // The same bytes as a TCP Fast Open SYN's: whole only if the first message
  // the stream would read is (its detector's verdict above, on these bytes).
  if (n != 0) {
    if (fast_open_data_whole(p, n, 53, scratch, kTlsScratch)) check(v.dns.status == Frame::kComplete);
    const bool tls = p[0] == 21 || p[0] == 22, http = p[0] != 20 && !tls;
    if (fast_open_data_whole(p, n, 443, scratch, kTlsScratch)) {
      if (tls) check(v.tls.status == Frame::kComplete || v.tls.status == Frame::kInvalid);
      if (http && n <= 1024) check(v.http.status != Frame::kNeedMore);
    }
  }
  return v;
}

// `part` was computed on a prefix of the stream `whole` was computed on.
void consistent(const Verdicts& part, const Verdicts& whole) {
  if (part.tls.status != Frame::kNeedMore) {
    check(part.tls.status == whole.tls.status);
    if (part.tls.status == Frame::kComplete)
      check(part.hello == whole.hello && part.tls.consumed == whole.tls.consumed);
  }
  if (part.http.status != Frame::kNeedMore) {
    check(part.http.status == whole.http.status);
    if (part.http.status == Frame::kComplete) {
      check(part.http.start == whole.http.start && part.http.head_end == whole.http.head_end);
      check(part.http.body == whole.http.body && part.http.next == whole.http.next);
      if (part.chunked != Frame::kNeedMore) check(part.chunked == whole.chunked);
      if (part.chunked == Frame::kComplete) check(part.chunked_end == whole.chunked_end);
    }
  }
  if (part.dns.status != Frame::kNeedMore) {
    check(part.dns.status == whole.dns.status);
    if (part.dns.status == Frame::kComplete) check(part.dns.next == whole.dns.next);
  }
}

struct Piece {  // (not Segment: stream.hpp has one)
  uint32_t off;
  uint32_t len;
  uint8_t flags;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size < 6) return 0;
  const uint8_t opts = data[0];
  uint32_t isn;
  std::memcpy(&isn, data + 1, 4);
  const std::size_t nseg = data[5];
  std::size_t pos = 6;
  if (size - pos < nseg * 5) return 0;
  const uint8_t* desc = data + pos;
  pos += nseg * 5;
  const std::size_t slen = std::min<std::size_t>(size - pos, 4096);
  if (slen == 0) return 0;
  const std::vector<uint8_t> stream(data + pos, data + pos + slen);

  PoolConfig cfg;
  cfg.slots = 1;
  cfg.slot_bytes = (opts & 8) != 0 ? 200 : 4096;
  cfg.max_pending = (opts & 7) + 1u;
  Pool::Ptr pool = Pool::create(cfg);
  check(pool != nullptr);
  const uint32_t h = pool->begin(isn);
  check(h != 0 && pool->begin(isn) == 0);  // one slot

  // Exactly the scratch the detectors are promised, so ASan sees any overrun.
  std::unique_ptr<uint8_t[]> scratch(new uint8_t[kTlsScratch]);
  std::size_t base = 0;  // stream offset of the slot's first byte
  Verdicts whole = detect(stream.data(), stream.size(), scratch.get());
  std::vector<bool> held(slen, false);  // the pool holds (or held) the stream's byte
  bool overflowed = false;
  std::vector<uint8_t> buf;
  for (std::size_t i = 0; i < nseg; ++i) {
    const uint8_t* d = desc + i * 5;
    Piece s{static_cast<uint32_t>(d[0] << 8 | d[1]) % static_cast<uint32_t>(slen),
              static_cast<uint32_t>(d[2] << 8 | d[3]), d[4]};
    s.len = std::min<uint32_t>(s.len % 1500, static_cast<uint32_t>(slen - s.off));
    buf.assign(stream.begin() + s.off, stream.begin() + s.off + s.len);
    if ((s.flags & 1) != 0)
      for (uint32_t k = 0; k < s.len; ++k)
        if (held[s.off + k]) buf[k] = static_cast<uint8_t>(~buf[k]);
    const PoolStats before = pool->stats();
    const Append r = pool->append(h, isn + s.off, buf.data(), s.len);
    const PoolStats after = pool->stats();
    check(r != Append::kBadHandle);
    check(r != Append::kConflict || (s.flags & 1) != 0);  // only a differing copy conflicts
    if (r == Append::kOverflow) overflowed = true;
    if (after.window_full == before.window_full) {
      // Everything of the segment within the budget is held now.
      for (uint32_t k = 0; k < s.len; ++k)
        if (s.off + k >= base && s.off + k < base + cfg.slot_bytes) held[s.off + k] = true;
    }
    const auto got = pool->data(h);
    check(got.size() <= slen - base && got.size() <= cfg.slot_bytes);
    check(std::memcmp(got.data(), stream.data() + base, got.size()) == 0);
    check(pool->next_seq(h) == isn + static_cast<uint32_t>(base + got.size()));
    consistent(detect(got.data(), got.size(), scratch.get()), whole);

    if ((s.flags & 6) != 0) {
      // Consume what is assembled, or up to the segment's end (a skip).
      const std::size_t to =
          (s.flags & 4) != 0 ? std::max<std::size_t>(s.off + s.len, base) : base + got.size();
      check(pool->consume(h, static_cast<uint32_t>(to - base)));
      base = to;
      check(pool->first_seq(h) == isn + static_cast<uint32_t>(base));
      whole = detect(stream.data() + base, slen - base, scratch.get());
      // Bytes the skip jumped over were never held: mark them so that
      // garbage copies there are dropped as before the slot.
      for (std::size_t k = 0; k < base; ++k) held[k] = true;
    }
  }
  // Every byte from the slot's start sent within the budget: all assembled.
  bool all = !overflowed;
  for (std::size_t k = base; k < slen && all; ++k) all = held[k];
  if (all) check(pool->data(h).size() == slen - base);
  check(pool->release(h) && !pool->release(h));
  return 0;
}
