// libFuzzer target for the client-stream inspector (app/reasm/stream.hpp): a
// client stream cut into segments at fuzzer-chosen points, sent in order or
// with neighbouring segments swapped, must give exactly the messages the
// unsegmented stream gives — segmentation never changes what is judged.
//
// Input: byte 0 options (bits 0-1: the server port, 80 / 443 / 53 / 8000;
// bit 2: swap each odd segment with the one before it; bit 3: the flow is
// picked up mid-stream instead of opened by a SYN-ACK; bit 4: a server
// segment is sent between client segments, acknowledging the client's bytes
// before the next one, from a side that varies; bit 6: one client segment,
// chosen by the cut count, arrives with another TTL; bit 7: the server's
// first byte is known, and that segment arrives alike but acknowledges a
// byte after it), byte 1 the number C of cut
// points, then C cut points of 16 bits, then the stream (at most 4096 bytes).
//
// Checked (abort on violation), for flows whose opening was seen, when
// neither run overflowed: the same messages in the same order. With a
// segment that arrives otherwise (a conflict: StreamRef::arrival), the
// messages given are a prefix of the whole stream's: a conflict only ever
// stops them. Mid-stream flows take each segment as a possible message
// start, so there only the memory safety and the bounds are checked. For
// every flow: once its reading is over, no later segment gives messages, and
// while it settles (no server segment in between), the odd segment is a
// conflict if it starts before the end of the segment that ended the reading;
// the first one, acknowledging a byte its server never sent, is a conflict if
// it begins a ClientHello (a TLS client speaks first).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cuckoogate/reasm/stream.hpp"

namespace {

using namespace cg::reasm;

void check(bool ok) {
  if (!ok) std::abort();
}

struct Run {
  std::vector<std::string> messages;
  bool overflow = false;
};

void sink(void* ctx, const uint8_t* p, std::size_t n, App, bool) {
  check(n != 0 && n <= 4096 + kTlsRecordHeader + 4);
  static_cast<Run*>(ctx)->messages.emplace_back(reinterpret_cast<const char*>(p), n);
}

struct Piece {
  uint32_t off, len;
};

Run feed(const uint8_t* stream, std::size_t n, const std::vector<Piece>& pieces, uint16_t port, bool midstream,
         bool server_noise, bool synacks = false, std::size_t odd_one = SIZE_MAX, bool acks = false) {
  // A slot budget above any stream here and an out-of-order window above any
  // swap: only message limits can overflow, never the pool.
  auto pool = Pool::create({.slots = 2, .slot_bytes = 8192, .max_pending = 4});
  std::vector<uint8_t> scratch(kTlsScratch);
  StreamInspector insp(pool.get(), scratch.data(), scratch.size());
  uint32_t handle = 0, next = 0;
  uint8_t bits = 0;
  uint8_t arrival[kArrivalBytes] = {};  // every segment arrives alike: never a conflict of its own
  const StreamRef ref{handle, next, bits, arrival};
  constexpr uint32_t kIsn = 0xffffff00u;
  stream_open(ref, midstream ? 0x10 : 0x12, 5000, kIsn + 1, /*sender_is_initiator=*/false);
  Run r;
  uint32_t settled_end = 0;  // the end of the client piece whose reading ended in a settling flow
  // Once reading is over (done, settling, dropped) it stays over: no segment
  // gives messages again. (kMessages and kOverflow may end it too: then no
  // protocol is left.)
  bool over = false;
  auto stays_over = [&](Step st) {
    check(!over || st == Step::kDone || st == Step::kConflict || st == Step::kDropped);
    over = over || st == Step::kDone || st == Step::kConflict || st == Step::kDropped || st == Step::kOverflow ||
           (st == Step::kMessages && stream_app(ref) == App::kUnknown);
  };
  static const uint8_t kServer[] = "GET / HTTP/1.1\r\nHost: server.example\r\n\r\n";
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    const Piece& p = pieces[k];
    if (server_noise) {
      // (its TTL differs from the client's: the server's segments are never
      // compared). It acknowledges the client's bytes up to this piece's
      // start, from one of the sides (also a side the caller never gives):
      // it may end a settling flow's settling, or not.
      const Segment s{5001, kServer, sizeof kServer - 1, /*forward=*/false, port, 40000, {.ttl = 1},
                      kIsn + 1 + p.off, static_cast<uint8_t>(k & 3)};
      const Step st = insp.segment(ref, s, 0, &sink, &r);
      stays_over(st);
      check(st != Step::kMessages || midstream);  // the server's bytes are messages only while the client is unknown
      r.overflow = r.overflow || st == Step::kOverflow || st == Step::kConflict;  // (kConflict: the message limit, or the segment that arrives otherwise)
    }
    if (synacks) {  // a retransmitted SYN-ACK before every segment agrees (or opens a mid-stream flow)
      const auto a = insp.syn_ack(ref, 5000, kIsn + 1, /*sender_is_initiator=*/false, /*from_handshake=*/!midstream,
                                  port, 40000);
      check(a == (midstream ? StreamInspector::Answer::kOpened : StreamInspector::Answer::kAgrees));
      midstream = false;  // opened: from now on a handshake's flow
    }
    check(p.off + p.len <= n);
    // Each segment in a buffer of its own size, so that ASan catches any
    // read past a segment's end (within the stream it would go unseen: a
    // 6-byte mid-stream segment was once read past).
    const std::unique_ptr<uint8_t[]> own(new uint8_t[std::max<uint32_t>(p.len, 1)]);
    std::memcpy(own.get(), stream + p.off, p.len);
    // With `acks` the odd one differs only by acknowledging the byte after
    // the server's first (its SYN-ACK's seq 5000 + 1).
    const bool odd_ack = acks && k == odd_one;
    const Segment s{kIsn + 1 + p.off,
                    own.get(),
                    p.len,
                    true,
                    40000,
                    port,
                    {.ttl = uint8_t(k == odd_one && !acks ? 9 : 64)},
                    odd_ack ? 5002u : 5001u,
                    kSideA,
                    acks,
                    5001};
    // A flow settling since a client segment ended its reading (no server
    // segment acknowledged its bytes: no noise) must take the odd one,
    // arriving otherwise, as a conflict if it carries any of them again.
    // The first segment of a handshake's TLS stream, beginning a ClientHello
    // (record type, a header cut short, or an alert first), must be one if
    // it acknowledges bytes its server never sent.
    // (A record header of the inspector's versions: a 2-byte alert, or a
    // handshake record of a ClientHello or empty, each possibly cut short.)
    const uint8_t* q = stream;
    const bool record = (q[0] == 21 || q[0] == 22) && (p.len < 2 || q[1] < 0x10);
    const bool hello = record && (q[0] == 21 ? (p.len < 4 || q[3] == 0) && (p.len < 5 || q[4] == 2)
                                             : p.len < 6 || q[5] == 1 || (q[3] == 0 && q[4] == 0));
    const bool must_conflict = (k == odd_one && !acks && !server_noise && stream_settles(bits) && p.off < settled_end) ||
                               (odd_ack && k == 0 && p.off == 0 && !midstream && port != 53 && hello);
    const Step st = insp.segment(ref, s, 0, &sink, &r);
    check(!must_conflict || st == Step::kConflict);
    stays_over(st);
    if (settled_end == 0 && stream_settles(bits)) settled_end = p.off + p.len;
    r.overflow = r.overflow || st == Step::kOverflow || st == Step::kConflict;  // (kConflict: the message limit, or the segment that arrives otherwise)
  }
  insp.close(ref);
  check(handle == 0 && pool->free_slots() == 2);
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const uint8_t opt = data[0];
  const std::size_t cuts = data[1];
  if (size < 2 + 2 * cuts) return 0;
  const uint8_t* stream = data + 2 + 2 * cuts;
  const std::size_t n = std::min<std::size_t>(size - 2 - 2 * cuts, 4096);
  if (n == 0) return 0;
  static const uint16_t kPorts[] = {80, 443, 53, 8000};
  const uint16_t port = kPorts[opt & 3];
  const bool swap = (opt & 4) != 0, midstream = (opt & 8) != 0, noise = (opt & 16) != 0, synacks = (opt & 32) != 0,
             odd = (opt & 64) != 0, acks = (opt & 128) != 0;

  std::vector<uint32_t> at;
  for (std::size_t i = 0; i < cuts; ++i) {
    const uint32_t c = static_cast<uint32_t>(data[2 + 2 * i] << 8 | data[3 + 2 * i]) % static_cast<uint32_t>(n);
    if (c != 0) at.push_back(c);
  }
  std::sort(at.begin(), at.end());
  at.erase(std::unique(at.begin(), at.end()), at.end());
  at.push_back(static_cast<uint32_t>(n));
  std::vector<Piece> pieces;
  uint32_t from = 0;
  for (uint32_t c : at) {
    pieces.push_back({from, c - from});
    from = c;
  }
  if (swap)
    for (std::size_t i = 1; i < pieces.size(); i += 2) std::swap(pieces[i - 1], pieces[i]);

  const Run whole = feed(stream, n, {{0, static_cast<uint32_t>(n)}}, port, midstream, false);
  const Run cut = feed(stream, n, pieces, port, midstream, noise, synacks, odd || acks ? cuts % pieces.size() : SIZE_MAX,
                       acks);
  if (!midstream && !whole.overflow && !cut.overflow) check(whole.messages == cut.messages);
  if (!midstream && !whole.overflow && (odd || acks))  // a conflict stops messages, never changes them
    check(cut.messages.size() <= whole.messages.size() &&
          std::equal(cut.messages.begin(), cut.messages.end(), whole.messages.begin()));
  return 0;
}
