// Client-stream inspection: which side of a TCP flow is the client, where
// its messages start, and the whole messages (a TLS ClientHello, each HTTP
// request head, each DNS-over-TCP query) a segment completes. It drives a
// Pool and the first-flight detectors, and keeps its per-flow state in nine
// bytes of the caller's flow entry. Policy and its reasons: docs/reassembly.md.
//
// Thread-safety: as the Pool, one thread (the worker that owns the flows).
// Data-path contract: no allocation, syscall or exception; the work per
// segment is bounded by its length, the slot's budget and kMaxMessages.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuckoogate/reasm/first_flight.hpp"
#include "cuckoogate/reasm/pool.hpp"

namespace cg::reasm {

// The protocol of a flow's client stream, decided by its first client bytes.
// kHttp2 is a kind of message only (never a flow's phase): a cleartext
// HTTP/2 connection's first header block, its frames without the preface
// before them (stepped over as it passed: docs/reassembly.md).
enum class App : uint8_t { kUnknown = 0, kTls = 1, kHttp = 2, kDns = 3, kHttp2 = 4 };

// A flow's inspection state: nine bytes of the caller's flow entry, all zero
// when the entry is created (then: nothing known). `bits` layout (stream.cpp):
// phase (3 bits: app, HTTP chunked body, TLS after a ClientHello, done,
// dropped), next known, client known, client is the responder, tries (2
// bits; once a message was given, 3 marks a TLS connection's second
// ClientHello). Once done, next known marks a flow that settles (`next`:
// the end of the client bytes read; tries: the side they came in from).
// See StreamInspector::segment().
struct StreamRef {
  uint32_t& handle;  // the Pool slot holding an unfinished message, 0: none
  uint32_t& next;    // sequence number where the client's next message starts (if known)
  uint8_t& bits;
  // kArrivalBytes more of the caller's (zero when the entry is created): how
  // the first client segment read arrived, and the client's timestamp floor
  // (Arrival, stream_timestamp_floor; see StreamInspector::segment).
  // nullptr: not kept, every segment is read as it comes.
  uint8_t* arrival = nullptr;
};

// How a segment reached the gateway, beyond its bytes: its IP TTL (IPv6
// hop limit), the TCP options that decide whether a receiver takes it (a
// signature: MD5, RFC 2385, TCP-AO, RFC 5925; timestamps), and where and how
// its frame is delivered (next hop, IP options). A server may never get, or
// drop, a copy that arrives otherwise than the connection's other segments —
// one whose TTL runs out on the hops behind the gateway, one signed for a
// server that has no key, one a router drops — so the gateway cannot know
// that what it read of such a copy is what the server reads
// (docs/reassembly.md, "Copies that arrive otherwise").
struct Arrival {
  uint8_t ttl = 0;
  uint8_t options = 0;     // the caller's marks of the options that matter (6 bits: cg::tcp_option_marks)
  bool timestamp = false;  // it carries a timestamps option (RFC 7323) ...
  uint32_t tsval = 0;      // ... with this TSval
  uint16_t delivery = 0;   // the caller's digest of where and how the frame is delivered (cg::delivery_digest)
};
inline constexpr std::size_t kArrivalBytes = 8;

// The client's timestamp when the connection opened: its SYN's TSval, which
// the server's SYN-ACK echoes as TSecr (RFC 7323 §3.2). A server's PAWS
// check (§5) drops a later segment whose TSval is older than the latest it
// took, by more than one tick on Linux; the SYN's is a floor of that. Kept
// in StreamRef::arrival until stream_open() opens the stream anew; a later
// call (another SYN-ACK) only raises it, as does every in-order client
// segment read (segment()).
void stream_timestamp_floor(StreamRef s, uint32_t client_tsval) noexcept;
// A pure ACK (no payload, no SYN or RST) sent by the flow's initiator
// (`forward`) or responder, with sequence number `seq` and, if it carries
// timestamps, TSval `tsval`. A client's at the stream's start, before any
// of its bytes were read (the handshake's last ACK), raises the floor as an
// in-order segment read does: its server took that timestamp as its latest
// (RFC 7323 §4.3), so a copy older than it by more than the PAWS window is
// one the server drops, and a fake between the SYN's timestamp and it was
// read before. A higher floor only ever makes more copies conflicts.
void stream_pure_ack(StreamRef s, bool forward, uint32_t seq, bool timestamp, uint32_t tsval) noexcept;

// What the caller knows when it creates a flow entry from a TCP packet.
// A SYN (without ACK) opens the flow: its sender is the client and the
// stream starts at seq + 1. A SYN-ACK opens it for a table that did not keep
// the SYN: its receiver is the client (the flow's initiator, forward) and
// the stream starts at its ack number. Anything else: nothing is known.
void stream_open(StreamRef s, uint8_t tcp_flags, uint32_t seq, uint32_t ack, bool sender_is_initiator) noexcept;

// TCP Fast Open (RFC 7413): the `n` bytes `p` a client's SYN carries to
// port `dport`. The gateway judges them alone (classification, whatever the
// SYN's flow) and the flow's stream starts where the server's SYN-ACK
// acknowledges, past them if the server took them. True if they end where a message of the protocol the
// stream would read ends, as segment() decides it from the first byte, and
// hold no message that classification, which reads the first one only,
// would not judge: every TLS record whole and a ClientHello among them
// finished, in one record (after a 2-byte alert or an empty handshake
// record; a ChangeCipherSpec first, which classification does not step
// over and no client sends first, is not whole); one DNS-over-TCP
// message, whole; one HTTP request, whole with its body, and nothing behind
// it that begins another (bytes that are no request: true, no stream reads
// them). False if the rest of a message would come after the handshake,
// where the stream, starting in its middle, cannot read it, or a second
// message would go unjudged: a name there would pass (docs/reassembly.md,
// "Fast Open"). `scratch`: kTlsScratch bytes for a ClientHello split over
// records. Reads [p, p + n) only; work linear in n.
bool fast_open_data_whole(const uint8_t* p, std::size_t n, uint16_t dport, uint8_t* scratch,
                          std::size_t scratch_cap) noexcept;

// Whether a SYN-ACK sent from port `sport` to port `dport` may tell a flow's
// client and start: not one sent to a service port (below 1024, 8080, 8443,
// ...) from a port that is not one. A server answers from its service port;
// the other way round is a client forging its server's answer to swap the
// sides (or an active-mode FTP data connection, which a flow picked up
// mid-stream serves as well: its client is then told by the ports). The
// caller opens such a flow as picked up mid-stream.
bool syn_ack_tells_client(uint16_t sport, uint16_t dport) noexcept;

// Segment::side: the caller cannot tell which side of the gateway a packet
// came in from (a replayed capture), or it came in from this one or the
// other (kSideA, kSideB: a port pair's first and second port).
inline constexpr uint8_t kSideUnknown = 0, kSideA = 2, kSideB = 3;

// One TCP segment of the flow with payload (or, while the flow settles, a
// pure ACK: len 0).
struct Segment {
  uint32_t seq = 0;
  const uint8_t* p = nullptr;
  uint32_t len = 0;
  bool forward = true;       // sent by the flow's initiator
  uint16_t sport = 0, dport = 0;
  Arrival how{};
  uint32_t ack = 0;          // its acknowledgement number (the caller gives only segments with ACK)
  uint8_t side = kSideUnknown;  // where it came in (kSideA/kSideB), if the caller can tell
  // The server's first sequence number after its SYN (its SYN-ACK's seq + 1),
  // if the caller keeps it: a client segment acknowledging anything before
  // it is one its server drops (segment()).
  bool server_first_known = false;
  uint32_t server_first = 0;
};

enum class Step : uint8_t {
  kSkip,      // nothing of the client's messages starts or ends here (server
              // data, a body, bytes held for later): judge no application layer
  kMessages,  // the sink was given one or more whole messages
  kOverflow,  // a budget ran out (slot, pool, window) or a
              // segment rewrote held bytes: inspection stopped; the caller
              // applies inspect_overflow (stream_drop_all() for "drop").
              // The sink may have been given messages before it happened.
  kConflict,  // the segment rewrote held bytes with other ones: what the
              // receiver reads is unknowable, so drop it; every later segment
              // of the flow is kDropped (legitimate stacks resend the same bytes).
              // Also: more than kMaxMessages messages in one step, and a
              // client segment that arrived otherwise than the first one
              // read (StreamRef::arrival), one acknowledging bytes before
              // the server's first (Segment::server_first) or, with a first
              // ClientHello, after it, while the flow settles, a server
              // segment from the client's side, and an HTTP/2 header block
              // that decodes for no server (StreamCounters::refused).
  kDone,      // inspection of this flow is over (all its segments: kDone, but
              // while it settles a client copy of bytes read may be kConflict)
  kDropped,   // inspection stopped by stream_drop_all(): the caller drops
};

// Whether the flow settles (StreamInspector::segment()): its reading is
// over, and segment() still wants its segments, with or without payload (the
// server's pure ACKs end the settling). From StreamRef::bits alone, inline:
// the fast lane asks it of every pure ACK.
inline constexpr uint8_t kStreamSettlingMask = 0x0f, kStreamSettling = 0x0e;  // phase done, next known
inline bool stream_settles(uint8_t bits) noexcept { return (bits & kStreamSettlingMask) == kStreamSettling; }

// Does a segment of this flow in this direction need segment()? False once
// inspection is over and settled (segment()), and for the server's direction
// once the client is known, until inspection is over.
bool stream_wants(const StreamRef& s, bool forward) noexcept;
// The same from StreamRef::bits alone (all the answer depends on), for a
// caller that keeps handle and next in a line it would rather not load.
bool stream_wants(uint8_t bits, bool forward) noexcept;
// After kOverflow with inspect_overflow = "drop": every later segment of the
// flow (either direction) returns kDropped.
void stream_drop_all(StreamRef s) noexcept;
App stream_app(const StreamRef& s) noexcept;
bool stream_client_known(const StreamRef& s) noexcept;

// Messages one segment may complete (pipelining); more is kConflict: no
// client pipelines that many, and each costs its caller a classification.
// 256: a full 1500-byte segment of the smallest requests (~90), or a DNS
// forwarder's burst of queries, with room to spare.
inline constexpr unsigned kMaxMessages = 256;

struct StreamCounters {
  uint64_t started = 0;    // messages that needed a slot (more than one segment)
  uint64_t completed = 0;  // of which were completed and handed to the sink
  uint64_t overflow = 0;   // flows whose inspection stopped on a budget
  uint64_t conflicts = 0;  // flows dropped because a segment rewrote held bytes
  uint64_t refused = 0;    // flows dropped because their HTTP/2 first header block is not read (decodes for
                           // no server, frames a server refuses, beyond the head budget)
};

class StreamInspector {
 public:
  // The sink gets each whole message, in stream order: the TLS ClientHello as
  // one record (type 22) with the whole handshake, an HTTP request head from
  // its request line to its empty line, a DNS query with its 2-byte length
  // prefix. `p` stays valid only during the call. `first` is true for the
  // first message of the segment.
  using Sink = void (*)(void* ctx, const uint8_t* p, std::size_t n, App app, bool first);

  // scratch: kTlsScratch bytes, not shared with anything the sink keeps.
  StreamInspector(Pool* pool, uint8_t* scratch, std::size_t scratch_cap) noexcept
      : pool_(pool), scratch_(scratch), cap_(scratch_cap) {}

  // One segment with payload. With StreamRef::arrival, the client's
  // segments must all arrive as the first one read did (Arrival: the same
  // TTL, option marks and delivery digest), and none with a timestamp older
  // than the floor (stream_timestamp_floor): one that does is kConflict.
  // A fake first copy that expires or is dropped behind the gateway then
  // cannot pass the real one off as a retransmission of bytes already
  // judged, nor the other way round. The price: a client whose path changes
  // while its stream is inspected (the life of an HTTP keep-alive
  // connection) has its data dropped from then on.
  // When reading ends on a client segment, the client known (kDone, or
  // kMessages or kOverflow and then done), the flow **settles** until its
  // server acknowledges every client byte read: a client segment that
  // carries bytes before that end must still arrive as the first one read
  // (else kConflict), so a fake that ends the inspection itself (junk at a
  // known start, a ClientHello and another record) cannot pass the real
  // bytes behind it off as retransmissions. A server segment (a pure ACK
  // too: seg.len 0) acknowledging the end settles it. With Segment::side
  // known, a server segment from the side the client's came in from is a
  // forgery (a client sending its server's ACK; one that a router sends back
  // would come in from the other side next) and a conflict. Meanwhile
  // stream_wants() is true for both directions; every segment returns kDone
  // unless a conflict.
  // A client segment (read, or a copy while the flow settles) whose
  // acknowledgement number is before Segment::server_first acknowledges
  // bytes its server never sent before its SYN: servers drop it (RFC 5961
  // §5.2; Linux takes no ACK older than its first byte while nothing it sent
  // was acknowledged), and DPI-evasion tools' "badack" fake is one. So is a
  // client segment read with bytes of the flow's first ClientHello that
  // acknowledges anything after Segment::server_first: a TLS client speaks
  // first, so its server sent nothing more, and drops the segment (RFC 9293
  // §3.10.7.4, SEG.ACK > SND.NXT). Either is a conflict: its bytes are not
  // what the server reads, and the real copy behind it cannot follow.
  Step segment(StreamRef s, const Segment& seg, uint64_t now, Sink sink, void* ctx) noexcept;
  // Drops the flow's client data from here on, as a conflict does: its slot
  // is given back and every later segment is kDropped. Returns false (and
  // changes nothing) if the flow was dropped already, so the caller counts a
  // flow once. Not counted here: the caller knows why (urgent data).
  bool drop(StreamRef s) noexcept;
  // A SYN-ACK of a flow whose entry another packet created
  // (docs/reassembly.md, "Direction"), sent from port `sport` to `dport`.
  // `from_handshake`: the stream was opened by stream_open() from a SYN or
  // SYN-ACK (the caller keeps that bit beside the entry; StreamRef's bits are
  // all taken). A flow picked up mid-stream — forged packets sent ahead of
  // the handshake can make a flow one, and then its start is only guessed and
  // three segments that start nothing end its inspection — is opened from the
  // answer as stream_open() would, kOpened (the caller sets its bit), unless
  // its client data was dropped (that stays) or the answer cannot tell the
  // client (syn_ack_tells_client). A handshake's flow must agree
  // while none of its client's bytes has been read: a SYN-ACK from the side
  // taken for the client, or acknowledging another start, is a forgery (a
  // client spoofing its server's answer to swap the sides, or to move its
  // stream's start past its ClientHello) or a simultaneous open, which TLS,
  // HTTP and DNS clients never make, so the flow's client data is dropped as
  // a conflict would drop it: kContradicts (once). A retransmitted SYN-ACK
  // agrees.
  enum class Answer : uint8_t { kAgrees, kOpened, kContradicts };
  Answer syn_ack(StreamRef s, uint32_t seq, uint32_t ack, bool sender_is_initiator, bool from_handshake,
                 uint16_t sport, uint16_t dport) noexcept;
  // Returns the flow's slot, if any (the caller is forgetting the flow).
  void close(StreamRef s) noexcept;
  const StreamCounters& counters() const noexcept { return c_; }

 private:
  Step read(StreamRef s, const Segment& seg, uint64_t now, Sink sink, void* ctx, uint32_t* end) noexcept;
  Step settle(StreamRef s, const Segment& seg) noexcept;
  bool decide_client(StreamRef s, const Segment& seg) noexcept;
  Step frame_messages(StreamRef s, const uint8_t* p, std::size_t n, uint32_t seq, bool held, uint16_t dport,
                      uint64_t now, Sink sink, void* ctx, unsigned* given) noexcept;
  Step conflict(StreamRef s) noexcept;
  Step refuse(StreamRef s) noexcept;
  static bool in_h2(const StreamRef& s) noexcept;
  Step overflow(StreamRef s) noexcept;
  Step body_overflow(StreamRef s, unsigned given) noexcept;
  Step finish(StreamRef s) noexcept;
  Pool* pool_;
  uint8_t* scratch_;
  std::size_t cap_;
  StreamCounters c_;
};

}  // namespace cg::reasm
