#include "cuckoogate/reasm/stream.hpp"

#include <algorithm>
#include <cstring>

#include "cuckoogate/h2/h2.hpp"

namespace cg::reasm {

namespace {

// StreamRef::bits.
constexpr uint8_t kPhaseMask = 0x07;  // an App, or one of the four below
constexpr uint8_t kChunked = 4;       // HTTP, inside a chunked body (its head was judged)
constexpr uint8_t kTlsAfterHello = 5;  // TLS after a ClientHello: a second one may follow a HelloRetryRequest
constexpr uint8_t kPhaseDone = 6;
constexpr uint8_t kPhaseDropped = 7;
constexpr uint8_t kNextKnown = 0x08;   // `next` is where a client message starts
constexpr uint8_t kClientKnown = 0x10;
constexpr uint8_t kClientRev = 0x20;   // the client is the flow's responder
constexpr uint8_t kTriesShift = 6;     // 2 bits: segments that started no message
constexpr uint8_t kTriesMask = 3u << kTriesShift;
// In kPhaseDone, kSettling marks a flow that settles (StreamInspector::
// segment()): `next` is the end of the client bytes read, and the tries bits
// the side (Segment::side) the client's segment that ended the reading came
// in from.
constexpr uint8_t kSettling = kNextKnown;
static_assert(kStreamSettling == (kPhaseDone | kSettling) && kStreamSettlingMask == (kPhaseMask | kSettling));
constexpr uint8_t kMaxTries = 3;
constexpr uint64_t kMaxSkip = uint64_t{1} << 30;  // the longest head + body a stream follows past

// StreamRef::arrival: [0] the first client segment's TTL; [1] kArrivalKnown
// and that segment's option marks shifted past it (Arrival::options: 6 bits
// of the caller's), kFloorKnown; [2, 6) the timestamp floor, [6, 8) the
// first segment's delivery digest (host order).
constexpr uint8_t kArrivalKnown = 0x01;
constexpr uint8_t kFloorKnown = 0x80;
constexpr uint32_t kPawsWindow = 1;  // Linux's TCP_PAWS_WINDOW: a tick older is still taken

uint8_t phase(const StreamRef& s) { return s.bits & kPhaseMask; }
void set_phase(StreamRef s, uint8_t p) { s.bits = static_cast<uint8_t>((s.bits & ~kPhaseMask) | p); }

// Serial-number difference a - b (RFC 1982): positive when a is after b.
int32_t seq_diff(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b); }

// A port servers listen on: the well-known range, and the usual alternative
// HTTP(S) and proxy ports.
bool service_port(uint16_t p) {
  return p < 1024 || p == 8080 || p == 8443 || p == 8000 || p == 8008 || p == 8888 || p == 3128;
}

// The first bytes of something only a client sends first: a TLS record
// carrying a ClientHello, or an HTTP request line.
bool looks_like_client(const uint8_t* p, std::size_t n) {
  // (Empty handshake records and 2-byte alerts first are skipped, as the
  // detector skips them.)
  std::size_t o = 0;
  for (;;) {  // o <= n throughout: a record is skipped only when it is whole
    if (n - o < kTlsRecordHeader || !tls_record_major(p[o + 1]) || p[o + 3] != 0) break;
    if (p[o] == 22 && p[o + 4] == 0) {
      o += kTlsRecordHeader;
    } else if (p[o] == 21 && p[o + 4] == kTlsAlertLength && n - o >= kTlsRecordHeader + kTlsAlertLength) {
      o += kTlsRecordHeader + kTlsAlertLength;
    } else {
      break;
    }
  }
  if (n - o >= 6 && p[o] == 22 && tls_record_major(p[o + 1]) && p[o + 5] == 1) return true;
  return detect_http_head(p, n).status != Frame::kInvalid;
}

// True if the client's segment arrived as the first one read did (the
// first sets the mark): the same TTL, option marks and delivery digest, and
// no timestamp older than the floor by more than the PAWS window (one the
// server drops).
bool same_arrival(const StreamRef& s, const Arrival& a) {
  if (s.arrival == nullptr) return true;
  uint8_t* const m = s.arrival;
  if ((m[1] & kFloorKnown) != 0 && a.timestamp) {
    uint32_t floor;
    std::memcpy(&floor, m + 2, sizeof floor);
    if (seq_diff(floor, a.tsval) > static_cast<int32_t>(kPawsWindow)) return false;
  }
  const auto marks = static_cast<uint8_t>(kArrivalKnown | (a.options & 0x3f) << 1);
  if ((m[1] & kArrivalKnown) == 0) {
    m[0] = a.ttl;
    m[1] = static_cast<uint8_t>(marks | (m[1] & kFloorKnown));
    std::memcpy(m + 6, &a.delivery, sizeof a.delivery);
    return true;
  }
  uint16_t delivery;
  std::memcpy(&delivery, m + 6, sizeof delivery);
  return m[0] == a.ttl && (m[1] & ~kFloorKnown) == marks && delivery == a.delivery;
}

// True if the segment acknowledges bytes before the server's first
// (Segment::server_first): its server drops it (segment()'s comment).
bool acks_before_server(const Segment& seg) {
  return seg.server_first_known && seq_diff(seg.ack, seg.server_first) < 0;
}

// The phase a client stream is read in, decided by its first byte `b` and
// its server's port. To port 53 always DNS: classify() reads port 53's
// bytes as DNS whatever they are, and a query of 0x16xx bytes begins like a
// TLS record (its length's first byte is 22), with a header that can read
// as a ClientHello's. An alert record first is TLS too (Go servers drop
// warning alerts before a ClientHello). A ChangeCipherSpec first is a TLS
// stream whose ClientHello rode in its SYN (TCP Fast Open): after a
// HelloRetryRequest, a client in middlebox-compatibility mode sends one,
// then its second ClientHello, which its server acts on; it is read as
// after a first one (an outside check found it unread). Anything else: HTTP.
uint8_t start_phase(uint8_t b, uint16_t dport) {
  if (dport == 53) return static_cast<uint8_t>(App::kDns);
  if (b == 20) return kTlsAfterHello;
  return static_cast<uint8_t>(b == 22 || b == 21 ? App::kTls : App::kHttp);
}

// Bytes at a client stream's start that frame_messages() reads as TLS and
// that may begin a ClientHello: a handshake record header (its version as
// the inspector takes one) of that type, one cut short, an empty one, or a
// 2-byte alert first (Go servers drop a warning alert before a ClientHello),
// as looks_like_client() skips them. A TLS 1.2 ClientKeyExchange (a TCP
// Fast Open client's first bytes after its SYN's ClientHello) is none, nor
// is a MySQL login whose length's first byte is 21 (a review found it; its
// fourth byte, the sequence number 1, tells it from an alert's length once
// it is there: cut in its first three bytes, it is taken for one).
bool may_begin_hello(const uint8_t* p, std::size_t n) {
  if (n == 0 || (p[0] != 21 && p[0] != 22) || (n >= 2 && !tls_record_major(p[1]))) return false;
  if (p[0] == 21) return (n < 4 || p[3] == 0) && (n < 5 || p[4] == kTlsAlertLength);
  return n < 6 || p[5] == 1 || (p[3] == 0 && p[4] == 0);
}

// True if the segment carries bytes of the client's first ClientHello (its
// TLS stream not past it yet, or not decided and the segment's bytes at the
// stream's start make it one) and acknowledges bytes after the server's first
// (Segment::server_first): a TLS client speaks first, so its server has sent
// nothing but its SYN-ACK, and drops a segment acknowledging more (RFC 9293
// §3.10.7.4: SEG.ACK > SND.NXT; Linux too). Not HTTP: a TCP Fast Open
// client's second request acknowledges the answer to the first, which rode in
// its SYN; nor a protocol whose server speaks first (its client's first bytes
// are no ClientHello).
bool hello_acks_unsent(const StreamRef& s, const Segment& seg) {
  if (!seg.server_first_known || seq_diff(seg.ack, seg.server_first) <= 0) return false;
  const uint8_t ph = phase(s);
  // (kTls with tries 3: a second ClientHello after a HelloRetryRequest,
  // split over segments, which acknowledges the server's answer.)
  if (ph == static_cast<uint8_t>(App::kTls)) return (s.bits & kTriesMask) != kTriesMask;
  if (ph != 0 || (s.bits & kNextKnown) == 0 || seg.dport == 53) return false;
  const int32_t off = seq_diff(s.next, seg.seq);
  return off >= 0 && static_cast<uint32_t>(off) < seg.len && may_begin_hello(seg.p + off, seg.len - off);
}

}  // namespace

void stream_open(StreamRef s, uint8_t tcp_flags, uint32_t seq, uint32_t ack, bool sender_is_initiator) noexcept {
  s.handle = 0;
  s.next = 0;
  s.bits = 0;
  if (s.arrival != nullptr) s.arrival[1] = 0;  // the client may be the other side now (the floor goes too)
  constexpr uint8_t kSyn = 0x02, kAck = 0x10;
  if ((tcp_flags & (kSyn | kAck)) == kSyn) {  // the client's SYN: its data starts after it
    s.next = seq + 1;
    s.bits = static_cast<uint8_t>(kNextKnown | kClientKnown | (sender_is_initiator ? 0 : kClientRev));
  } else if ((tcp_flags & (kSyn | kAck)) == (kSyn | kAck)) {  // the server's answer
    s.next = ack;
    s.bits = static_cast<uint8_t>(kNextKnown | kClientKnown | (sender_is_initiator ? kClientRev : 0));
  }
}

void stream_timestamp_floor(StreamRef s, uint32_t client_tsval) noexcept {
  if (s.arrival == nullptr) return;
  uint32_t floor;
  std::memcpy(&floor, s.arrival + 2, sizeof floor);
  if ((s.arrival[1] & kFloorKnown) != 0 && seq_diff(client_tsval, floor) <= 0) return;  // only ever raised
  std::memcpy(s.arrival + 2, &client_tsval, sizeof client_tsval);
  s.arrival[1] |= kFloorKnown;
}

void stream_pure_ack(StreamRef s, bool forward, uint32_t seq, bool timestamp, uint32_t tsval) noexcept {
  // Before any client byte was read or held (phase undecided, no slot, no
  // arrival marked): later, a pure ACK handled ahead of its burst's data
  // segments (the worker tracks a whole burst first) could raise the floor
  // past a segment sent before it.
  if (!timestamp || s.arrival == nullptr || (s.arrival[1] & kArrivalKnown) != 0) return;
  if ((s.bits & (kClientKnown | kNextKnown | kPhaseMask)) != (kClientKnown | kNextKnown) || s.handle != 0) return;
  if (forward != ((s.bits & kClientRev) == 0) || seq != s.next) return;  // the client's, at the stream's start
  stream_timestamp_floor(s, tsval);
}

namespace {

// Every TLS record in [p, n) whole (5-byte header, its length's bytes).
bool tls_records_whole(const uint8_t* p, std::size_t n) {
  std::size_t pos = 0;
  while (n - pos >= kTlsRecordHeader) {
    const std::size_t len = std::size_t{p[pos + 3]} << 8 | p[pos + 4];
    if (n - pos - kTlsRecordHeader < len) return false;
    pos += kTlsRecordHeader + len;
  }
  return pos == n;
}

// Whether the first record of [p, ...) that is not skipped before a
// ClientHello (a 2-byte alert, an empty handshake record: as
// detect_tls_client_hello() skips them) holds the whole handshake message of
// `len` bytes. The records are whole (tls_records_whole()) and the message
// complete.
bool hello_in_one_record(const uint8_t* p, std::size_t len) {
  std::size_t pos = 0;
  for (;;) {
    const std::size_t rlen = std::size_t{p[pos + 3]} << 8 | p[pos + 4];
    if (!(p[pos] == 21 && rlen == kTlsAlertLength) && !(p[pos] == 22 && rlen == 0)) return rlen >= len;
    pos += kTlsRecordHeader + rlen;
  }
}

// The request at the start of [p, n) whole, head and body, and nothing
// behind it that begins another: the SYN is judged by classification, which
// reads its first request only, so a second one pipelined behind it would
// reach its server unjudged. A head whose body length cannot be read is not
// whole (the stream drops what follows one; a stream that starts after the
// SYN would not know to). Cleartext HTTP/2: the preface and frames up to
// the end of the first header block, which classification reads (what
// follows it no stream reads either); frames a server refuses: no request.
bool http_request_whole(const uint8_t* p, std::size_t n) {
  if (h2::begins_preface(p, n)) {
    const h2::Status st = h2::first_header_block(p, n, kHttpMaxHead).status;
    return st == h2::Status::kComplete || st == h2::Status::kInvalid;
  }
  const HttpHead h = detect_http_head(p, n);
  if (h.status == Frame::kInvalid) return true;  // no request: no stream reads it
  if (h.status != Frame::kComplete || h.body == HttpBody::kUnknown) return false;
  std::size_t end = 0;
  if (h.body == HttpBody::kChunked) {
    std::size_t body = 0;
    const Frame f = find_chunked_end(p + h.head_end, n - h.head_end, &body);
    if (f != Frame::kComplete) return false;
    end = h.head_end + body;
  } else {
    if (h.next > n) return false;  // the body goes on after the SYN
    end = static_cast<std::size_t>(h.next);
  }
  return end == n || detect_http_head(p + end, n - end).status == Frame::kInvalid;
}

// One DNS-over-TCP message, whole, and nothing behind it (as above: a
// second query would go unjudged, and a message too short to be one, which
// dnsmasq skips, would be the one judged).
bool dns_message_whole(const uint8_t* p, std::size_t n) {
  const DnsMessage d = detect_dns_tcp(p, n);
  return d.status == Frame::kComplete && !d.skip && d.next == n;
}

}  // namespace

bool fast_open_data_whole(const uint8_t* p, std::size_t n, uint16_t dport, uint8_t* scratch,
                          std::size_t scratch_cap) noexcept {
  if (n == 0) return true;
  // As the stream would read them (start_phase()).
  const uint8_t ph = start_phase(p[0], dport);
  if (ph == static_cast<uint8_t>(App::kDns)) return dns_message_whole(p, n);
  // A ChangeCipherSpec first: classification does not step over one to a
  // ClientHello behind it, and no client sends one before its first.
  if (ph == kTlsAfterHello) return false;
  if (ph == static_cast<uint8_t>(App::kTls)) {
    // A ClientHello split over records must be finished too: the stream
    // would take the record holding its rest for the start of another. And
    // it must be in one record: classification reads the SYN's first
    // record, so a name in a later one went unjudged (an outside check).
    const TlsClientHello ch = detect_tls_client_hello(p, n, scratch, scratch_cap);
    if (ch.status == Frame::kNeedMore || ch.status == Frame::kTooLarge || !tls_records_whole(p, n)) return false;
    return ch.status != Frame::kComplete || hello_in_one_record(p, ch.handshake_len);
  }
  return http_request_whole(p, n);
}

bool syn_ack_tells_client(uint16_t sport, uint16_t dport) noexcept {
  return !service_port(dport) || service_port(sport);
}

bool stream_wants(uint8_t bits, bool forward) noexcept {
  const uint8_t ph = bits & kPhaseMask;
  if (ph == kPhaseDropped) return true;
  if (ph == kPhaseDone) return (bits & kSettling) != 0;  // both sides: the client's copies, the server's ACK
  if ((bits & kClientKnown) == 0) return true;
  return forward == ((bits & kClientRev) == 0);
}

bool stream_wants(const StreamRef& s, bool forward) noexcept { return stream_wants(s.bits, forward); }

void stream_drop_all(StreamRef s) noexcept { set_phase(s, kPhaseDropped); }

App stream_app(const StreamRef& s) noexcept {
  const uint8_t ph = phase(s);
  if (ph == kChunked) return App::kHttp;
  if (ph == kTlsAfterHello) return App::kTls;
  return ph <= static_cast<uint8_t>(App::kDns) ? static_cast<App>(ph) : App::kUnknown;
}

bool stream_client_known(const StreamRef& s) noexcept { return (s.bits & kClientKnown) != 0; }

void StreamInspector::close(StreamRef s) noexcept {
  if (s.handle != 0) pool_->release(s.handle);
  s.handle = 0;
}

bool StreamInspector::drop(StreamRef s) noexcept {
  if (phase(s) == kPhaseDropped) return false;
  close(s);
  set_phase(s, kPhaseDropped);
  return true;
}

StreamInspector::Answer StreamInspector::syn_ack(StreamRef s, uint32_t seq, uint32_t ack, bool sender_is_initiator,
                                                 bool from_handshake, uint16_t sport, uint16_t dport) noexcept {
  if (!from_handshake) {
    if (phase(s) == kPhaseDropped || !syn_ack_tells_client(sport, dport)) return Answer::kAgrees;
    close(s);
    stream_open(s, 0x12, seq, ack, sender_is_initiator);
    return Answer::kOpened;
  }
  if (phase(s) != 0) return Answer::kAgrees;  // past its start (or done, or dropped): nothing to anchor
  const bool sender_is_client = sender_is_initiator == ((s.bits & kClientRev) == 0);
  if (!sender_is_client && ack == s.next) return Answer::kAgrees;
  drop(s);
  return Answer::kContradicts;
}

Step StreamInspector::finish(StreamRef s) noexcept {
  close(s);
  set_phase(s, kPhaseDone);
  return Step::kDone;
}

// An unfinished message that cannot be held. A chunked body is not a
// message: the connection's inspection ends as pass (a large upload must not
// be dropped), and the requests after it are not read (docs/reassembly.md).
Step StreamInspector::body_overflow(StreamRef s, unsigned given) noexcept {
  if (phase(s) != kChunked) return overflow(s);
  finish(s);
  return given != 0 ? Step::kMessages : Step::kDone;
}

// The flow's client data is dropped from here on (every later segment:
// kDropped), counted as a conflict.
Step StreamInspector::conflict(StreamRef s) noexcept {
  ++c_.conflicts;
  close(s);
  set_phase(s, kPhaseDropped);
  return Step::kConflict;
}

// An HTTP/2 connection whose first header block is not read: one that
// decodes for no server, frames a server refuses, or a block beyond the
// head budget (nginx takes one padded with size updates and empty
// CONTINUATION frames, which count against none of its limits: an outside
// check). The flow's client data is dropped (fails closed), counted.
Step StreamInspector::refuse(StreamRef s) noexcept {
  ++c_.refused;
  close(s);
  set_phase(s, kPhaseDropped);
  return Step::kConflict;
}

// In HTTP/2 between the preface and the end of its first header block
// (frame_messages()).
bool StreamInspector::in_h2(const StreamRef& s) noexcept {
  return phase(s) == static_cast<uint8_t>(App::kHttp) && (s.bits & kTriesMask) == kTriesMask;
}

Step StreamInspector::overflow(StreamRef s) noexcept {
  ++c_.overflow;
  close(s);
  set_phase(s, kPhaseDone);
  return Step::kOverflow;
}

// Which side is the client of a flow whose opening was not seen: the side
// talking to a service port, else the side whose bytes look like a request
// or ClientHello. False (and a try counted) while it cannot tell.
bool StreamInspector::decide_client(StreamRef s, const Segment& seg) noexcept {
  const bool to_service = service_port(seg.dport), from_service = service_port(seg.sport);
  bool sender_is_client;
  if (to_service != from_service) {
    sender_is_client = to_service;
  } else if (looks_like_client(seg.p, seg.len)) {
    sender_is_client = true;
  } else {
    const auto tries = static_cast<uint8_t>((s.bits >> kTriesShift) + 1);
    if (tries >= kMaxTries) {
      finish(s);
    } else {
      s.bits = static_cast<uint8_t>((s.bits & ~(3u << kTriesShift)) | (tries << kTriesShift));
    }
    return false;
  }
  const bool client_forward = sender_is_client == seg.forward;
  s.bits = static_cast<uint8_t>(s.bits | kClientKnown | (client_forward ? 0 : kClientRev));
  return true;
}

// Frames the client's messages in [p, p + n), whose first byte is stream
// sequence number `seq` and starts a message (or a chunked body). `held`:
// the bytes are the flow's slot's data(); else a segment's, and an
// unfinished message goes into a new slot. Leaves `next` at the start of
// the first message not yet whole.
Step StreamInspector::frame_messages(StreamRef s, const uint8_t* p, std::size_t n, uint32_t seq, bool held,
                                     uint16_t dport, uint64_t now, Sink sink, void* ctx,
                                     unsigned* given) noexcept {
  const bool sure = (s.bits & kNextKnown) != 0;  // else a guess at a mid-stream boundary
  std::size_t pos = 0;
  // Not this protocol after all: a flow whose start was seen is done; at a
  // guessed boundary, the next segment may be one.
  // Ends the flow's inspection; messages given before in this call stand.
  auto end_inspection = [&]() -> Step {
    finish(s);
    return *given != 0 ? Step::kMessages : Step::kDone;
  };
  auto invalid = [&]() -> Step {
    if (sure || *given != 0) return end_inspection();
    set_phase(s, 0);
    const auto tries = static_cast<uint8_t>((s.bits >> kTriesShift) + 1);
    if (tries >= kMaxTries) return finish(s);
    s.bits = static_cast<uint8_t>((s.bits & ~(3u << kTriesShift)) | (tries << kTriesShift));
    close(s);
    return Step::kSkip;
  };
  auto message = [&](const uint8_t* m, std::size_t len, App app) {
    sink(ctx, m, len, app, *given == 0);
    ++*given;
    s.bits = static_cast<uint8_t>((s.bits & ~(3u << kTriesShift)) | kNextKnown);
  };
  while (pos < n) {
    if (*given >= kMaxMessages) {
      // More messages in one step than any client pipelines: judging each
      // costs a classification, so the work stays bounded, and what follows
      // cannot pass unread (inspect_overflow = "pass" let a blocked request
      // behind 64 others through): the flow's client data is dropped, as a
      // conflict drops it.
      return conflict(s);
    }
    const uint8_t* q = p + pos;
    const std::size_t left = n - pos;
    uint8_t ph = phase(s);
    if (ph == 0) {  // the flow's port, else its first client bytes say what it speaks
      ph = start_phase(q[0], dport);
      set_phase(s, ph);
    }
    if (ph == kTlsAfterHello) {
      // After a ClientHello the client's next records are its second flight:
      // TLS 1.3's ChangeCipherSpec and encrypted records, or TLS 1.2's
      // ClientKeyExchange. Only after a HelloRetryRequest is it a second
      // ClientHello, in plaintext, and that one is what the server acts on
      // (nginx took a second one naming another server: found by an outside
      // check). So a ChangeCipherSpec, a 2-byte alert or an empty handshake
      // record is stepped over, a second ClientHello is judged, and anything
      // else ends inspection (0-RTT data right behind the ClientHello too:
      // the ClientHello was given).
      // A handshake record is taken for a ClientHello by its type byte and,
      // when the record holds them, its legacy_version 3,3 (RFC 8446 4.1.2:
      // a retried ClientHello has it): an encrypted TLS 1.2 Finished, also a
      // handshake record, begins with a 1 once in 256 and would otherwise be
      // read as a ClientHello too large to hold (an overflow).
      constexpr std::size_t kHelloVersionEnd = kTlsRecordHeader + 6;  // type, length, legacy_version
      if (left < kTlsRecordHeader) break;  // wait for the record's header
      const std::size_t rlen = std::size_t{q[3]} << 8 | q[4];
      const bool step_over = (q[0] == 20 && rlen == 1) || (q[0] == 21 && rlen == kTlsAlertLength) ||
                             (q[0] == 22 && rlen == 0 && tls_record_major(q[1]));
      if (step_over) {
        if (left < kTlsRecordHeader + rlen) break;  // wait for the whole record
        pos += kTlsRecordHeader + rlen;
        continue;
      }
      if (q[0] != 22 || !tls_record_major(q[1])) return end_inspection();
      if (left < std::min(kTlsRecordHeader + rlen, kHelloVersionEnd)) break;
      if (q[kTlsRecordHeader] != kTlsClientHelloType ||
          (rlen >= kHelloVersionEnd - kTlsRecordHeader && (q[9] != 3 || q[10] != 3)))
        return end_inspection();
      // Read as the first one was; the tries bits (unused once a message
      // was given) mark it the second: after it, inspection ends.
      set_phase(s, static_cast<uint8_t>(App::kTls));
      s.bits = static_cast<uint8_t>(s.bits | (3u << kTriesShift));
      ph = static_cast<uint8_t>(App::kTls);
    }
    std::size_t advance = 0;  // bytes of this message (may reach past n: a body)
    bool need_more = false;
    if (ph == static_cast<uint8_t>(App::kTls)) {
      const TlsClientHello t = detect_tls_client_hello(q, left, scratch_, cap_);
      if (t.status == Frame::kComplete) {
        if (held) ++c_.completed;
        // What follows the first is the client's second flight
        // (kTlsAfterHello), which ends inspection unless it is a ClientHello
        // again; after the second (one HelloRetryRequest per connection,
        // RFC 8446 4.1.4) inspection ends.
        const bool second = ((s.bits >> kTriesShift) & 3u) == 3u;
        message(t.record, t.record_len, App::kTls);
        if (second) return end_inspection();
        set_phase(s, kTlsAfterHello);
        advance = t.consumed;
      } else if (t.status == Frame::kTooLarge) {
        return overflow(s);
      } else if (t.status == Frame::kInvalid) {
        return invalid();
      } else {
        need_more = true;
      }
    } else if (ph == static_cast<uint8_t>(App::kDns)) {
      const DnsMessage d = detect_dns_tcp(q, left);
      if (d.status == Frame::kComplete) {
        // At a guessed mid-stream boundary a length below a header says the
        // guess is wrong: the next segment is tried as a start, as before.
        if (d.skip && !sure && *given == 0) return invalid();
        if (held) ++c_.completed;
        if (!d.skip) message(q, d.next, App::kDns);  // (a server ignores one shorter than a header)
        advance = d.next;
      } else {
        need_more = true;
      }
    } else if (ph == kChunked) {
      std::size_t end = 0;
      const Frame f = find_chunked_end(q, left, &end);
      if (f == Frame::kComplete) {
        advance = end;
        set_phase(s, static_cast<uint8_t>(App::kHttp));
      } else if (f == Frame::kNeedMore) {
        need_more = true;
      } else {
        return finish(s);  // a broken body: the server closes; nothing more to read
      }
    } else if (in_h2(s)) {
      // Cleartext HTTP/2, between its preface and its first header block
      // (the tries bits, unused in HTTP once a start is known, mark it):
      // frames before the block are stepped over without holding them (a
      // gRPC client sends its preface and SETTINGS, then may stay idle for
      // minutes before its first call), the block is held and given whole,
      // and then inspection ends: the blocks after it need the connection's
      // HPACK table (docs/rules.md, "HTTP/2 cleartext").
      h2::FrameHeader fh;
      if (!h2::frame_header(q, left, &fh)) {
        need_more = true;
      } else if (fh.type == h2::kContinuation) {
        return refuse(s);  // continues nothing: servers end the connection; a lenient one might not
      } else if (fh.type != h2::kHeaders) {
        advance = h2::kFrameHeader + fh.len;  // (past n: the rest is skipped as it comes)
      } else {
        const h2::FirstBlock f = h2::header_block(q, left, kHttpMaxHead, scratch_, cap_);
        if (f.status == h2::Status::kComplete) {
          // A block that no server decodes is refused by every one known;
          // should one decode it otherwise, what it serves went unread: the
          // flow's client data is dropped (fails closed), counted. (Asked
          // before the sink runs, which may use the scratch.)
          const bool decodes = h2::block_decodes(scratch_, f.block_len);
          if (held) ++c_.completed;
          message(q, f.end, App::kHttp2);
          if (!decodes) return refuse(s);
          return end_inspection();
        }
        if (f.status != h2::Status::kNeedMore) return refuse(s);  // too large, or frames a server refuses
        need_more = true;
      }
    } else if (h2::begins_preface(q, left)) {
      // The preface of cleartext HTTP/2 (prior knowledge, or after an
      // Upgrade: h2c request): the frames behind it are read as above.
      if (left < h2::kPrefaceLen) {
        need_more = true;
      } else {
        advance = h2::kPrefaceLen;
        s.bits = static_cast<uint8_t>(s.bits | kNextKnown | kTriesMask);
      }
    } else {  // HTTP/1
      const HttpHead h = detect_http_head(q, left);
      if (h.status == Frame::kComplete) {
        if (held) ++c_.completed;
        message(q + h.start, h.head_end - h.start, App::kHttp);
        if (h.body == HttpBody::kUnknown) {
          // A body length this cannot read: the head is judged (lenient
          // servers serve it), but where the next request starts depends on
          // which length the server believes, so what the client sends
          // after it is dropped, counted as a conflict (docs/reassembly.md).
          conflict(s);
          return Step::kMessages;
        }
        if (h.body == HttpBody::kChunked) {
          advance = h.head_end;
          set_phase(s, kChunked);
        } else if (h.next - h.start > kMaxSkip) {
          // A body the 32-bit sequence space cannot skip (serial arithmetic
          // holds to 2^31; the slot's consume() to 2^30): where the next
          // request starts is not followed, and the connection's inspection
          // ends as pass (a large upload is not dropped). Taking the length
          // modulo 2^32 misplaced it: a 2^32 + 41-byte body let the next
          // request be read 41 bytes in (found by an outside check).
          return end_inspection();  // (the head was given)
        } else {
          advance = static_cast<std::size_t>(h.next);
        }
      } else if (h.status == Frame::kTooLarge) {
        return overflow(s);
      } else if (h.status == Frame::kInvalid) {
        return invalid();
      } else {
        need_more = true;
      }
    }
    if (need_more) break;
    pos += advance;
  }
  // pos: where the unfinished message starts (or, past n, where the next one
  // will, after a body this segment does not hold).
  s.next = seq + static_cast<uint32_t>(pos);
  s.bits |= kNextKnown;
  const Step done = *given != 0 ? Step::kMessages : Step::kSkip;
  if (held) {
    if (pos >= n && pool_->held_out_of_order(s.handle) == 0) {
      close(s);  // nothing held: the next message starts without a slot
    } else if (pos != 0 && !pool_->consume(s.handle, static_cast<uint32_t>(pos))) {
      return overflow(s);
    }
    return done;
  }
  if (pos >= n) return done;
  // An unfinished message in a segment: hold it from its first byte.
  ++c_.started;
  s.handle = pool_ != nullptr ? pool_->begin(s.next, now) : 0;
  if (s.handle == 0) return overflow(s);
  const Append a = pool_->append(s.handle, s.next, p + pos, static_cast<uint32_t>(n - pos), now);
  if (a == Append::kOverflow || a == Append::kBadHandle) return body_overflow(s, *given);
  return done;
}

Step StreamInspector::segment(StreamRef s, const Segment& seg, uint64_t now, Sink sink, void* ctx) noexcept {
  const uint8_t ph = phase(s);
  if (ph == kPhaseDropped) return Step::kDropped;
  if (ph == kPhaseDone) return settle(s, seg);
  if (seg.len == 0) return Step::kSkip;
  uint32_t end = seg.seq + seg.len;
  const Step r = read(s, seg, now, sink, ctx, &end);
  if (phase(s) == kPhaseDone) {
    s.bits = static_cast<uint8_t>(s.bits & ~(kSettling | kTriesMask));
    // Reading ended on a client segment: the flow settles until its server
    // has acknowledged every byte read (segment()'s comment;
    // docs/reassembly.md, "A fake that ends the inspection").
    if ((s.bits & kClientKnown) != 0 && seg.forward == ((s.bits & kClientRev) == 0)) {
      s.next = end;
      s.bits = static_cast<uint8_t>(s.bits | kSettling | (seg.side & 3u) << kTriesShift);
    }
  }
  return r;
}

// A segment of a flow whose reading is over: kDone, unless it settles and
// the segment is a client copy of bytes read that arrives otherwise than the
// first one read, or a server segment from the client's side (kConflict:
// the flow's client data is dropped from here on). A server segment
// acknowledging every byte read ends the settling.
Step StreamInspector::settle(StreamRef s, const Segment& seg) noexcept {
  if ((s.bits & kSettling) == 0) return Step::kDone;
  if (seg.forward != ((s.bits & kClientRev) == 0)) {  // the server's
    const auto client_side = static_cast<uint8_t>((s.bits & kTriesMask) >> kTriesShift);
    if (client_side != kSideUnknown && seg.side == client_side) return conflict(s);  // forged on the client's side
    if (client_side != kSideUnknown && seg.side == kSideUnknown) return Step::kDone;  // (not believed)
    if (seq_diff(seg.ack, s.next) >= 0) s.bits = static_cast<uint8_t>(s.bits & ~(kSettling | kTriesMask));
    return Step::kDone;
  }
  // A copy that starts before the end read holds bytes the server may not
  // have taken from the copy read; one that starts at or after it is new.
  if (seg.len != 0 && seq_diff(seg.seq, s.next) < 0 && (!same_arrival(s, seg.how) || acks_before_server(seg)))
    return conflict(s);
  return Step::kDone;
}

// segment() while the flow's messages are read; *end: raised to the end of
// the client bytes held for a message (beyond this segment's when a held
// gap was filled).
Step StreamInspector::read(StreamRef s, const Segment& seg, uint64_t now, Sink sink, void* ctx,
                           uint32_t* end) noexcept {
  if ((s.bits & kClientKnown) == 0 && !decide_client(s, seg)) return phase(s) == kPhaseDone ? Step::kDone : Step::kSkip;
  const bool client_forward = (s.bits & kClientRev) == 0;
  if (seg.forward != client_forward) return Step::kSkip;  // the server's bytes are never parsed
  if (!same_arrival(s, seg.how) || acks_before_server(seg) || hello_acks_unsent(s, seg)) {
    // Before anything else, a retransmission too: a copy its server may
    // never take, or the real one behind such a copy (segment()'s comment).
    return conflict(s);
  }
  // The server takes an in-order segment's timestamp as its latest (RFC
  // 7323 §4.3: SEG.SEQ <= Last.ACK.sent), so the floor follows the stream:
  // a connection inspected for weeks never reads as older than its SYN (its
  // clock passes 2^31 ticks in ~25 days at 1 kHz).
  if (seg.how.timestamp && (s.bits & kNextKnown) != 0 && seq_diff(seg.seq, s.next) <= 0)
    stream_timestamp_floor(s, seg.how.tsval);
  unsigned given = 0;
  if (s.handle == 0) {
    if ((s.bits & kNextKnown) == 0) s.next = seg.seq;  // picked up mid-stream: try this segment as a start
    const int32_t gap = seq_diff(seg.seq, s.next);
    if (gap > 0) {  // the segment holding the message's start is missing: hold this one
      ++c_.started;
      s.handle = pool_ != nullptr ? pool_->begin(s.next, now) : 0;
      if (s.handle == 0) return overflow(s);
      const Append a = pool_->append(s.handle, seg.seq, seg.p, seg.len, now);
      if (a == Append::kOverflow || a == Append::kBadHandle) return overflow(s);
      s.bits |= kNextKnown;
      return Step::kSkip;
    }
    const auto off = static_cast<uint32_t>(-gap);
    if (off >= seg.len) return Step::kSkip;  // all before the message: a retransmission or a body
    return frame_messages(s, seg.p + off, seg.len - off, s.next, /*held=*/false, seg.dport, now, sink, ctx,
                          &given);
  }
  const Append a = pool_->append(s.handle, seg.seq, seg.p, seg.len, now);
  if (a == Append::kBadHandle) {  // the slot was taken back while the flow was idle
    s.handle = 0;
    return overflow(s);
  }
  if (seq_diff(pool_->next_seq(s.handle), *end) > 0) *end = pool_->next_seq(s.handle);
  if (a == Append::kConflict) {
    // Two different copies of the same bytes: which one the server reads is
    // unknowable (the first may never reach it), and whatever was judged may
    // not be what it reads. Legitimate stacks retransmit the same bytes, so
    // the flow's client data is dropped from here on.
    return conflict(s);
  }
  if (a == Append::kNothing || a == Append::kHeld) return Step::kSkip;
  const std::span<const uint8_t> held = pool_->data(s.handle);
  const Step r = frame_messages(s, held.data(), held.size(), pool_->first_seq(s.handle), /*held=*/true,
                                seg.dport, now, sink, ctx, &given);
  // Bytes that did not fit, and the message still unfinished: it cannot be read.
  if (a == Append::kOverflow && s.handle != 0 && phase(s) != kPhaseDone)
    return in_h2(s) ? refuse(s) : body_overflow(s, given);
  return r;
}

}  // namespace cg::reasm
