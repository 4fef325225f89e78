#include "dataplane/worker.hpp"

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_pause.h>
#include <rte_prefetch.h>

#include <xxhash.h>

#include <array>

#include "cuckoogate/flow/flow_table.hpp"
#include "cuckoogate/h2/h2.hpp"
#include "cuckoogate/keys/arrival.hpp"
#include "cuckoogate/keys/checksum.hpp"
#include "cuckoogate/keys/classify.hpp"
#include "cuckoogate/mem/huge_pages.hpp"
#include "cuckoogate/reasm/first_flight.hpp"
#include "cuckoogate/reasm/pool.hpp"
#include "cuckoogate/reasm/stream.hpp"
#include "cuckoogate/quic/crypto_stream.hpp"
#include "cuckoogate/quic/initial.hpp"
#include "cuckoogate/reject/reject.hpp"
#include "cuckoogate/reject/token_bucket.hpp"

namespace cg {

inline constexpr std::size_t kMaxBurstKeys = std::size_t{kBurst} * kMaxKeysPerPacket;

// A packet's rule verdict: the smallest confirmed rule kind (0 = none) and,
// with verify, the slot of that rule (for its hit counter and the flow).
struct RuleHit {
  uint8_t kind = 0;
  uint32_t slot = 0;

  // Takes the rule (kind k, slot sl) if it is a hit (k != 0) of a smaller
  // kind than the one held: the smallest kind decides the packet.
  void keep(uint8_t k, uint32_t sl) {
    if (k != 0 && (kind == 0 || k < kind)) *this = {k, sl};
  }
  void keep(RuleKind k, uint32_t sl) { keep(static_cast<uint8_t>(k), sl); }
};

// Whether kind k has rules in the burst's mask (bit k of `kinds`).
inline bool has_rules(uint32_t kinds, RuleKind k) { return ((kinds >> static_cast<unsigned>(k)) & 1u) != 0; }

// What the fast lane reads of a tracked packet besides its flow key: for a
// plain frame (parse_plain_ipv4) this and its compact key are all the burst
// parses unless the packet leaves the lane.
struct LaneInfo {
  uint32_t payload_len;
  uint16_t dport;  // host order
  uint8_t proto;
  flow::Side side;
  // Not beside proto: GCC built the two bytes as one 16-bit value through a
  // stack slot (a byte store, then a 16-bit load: a store-forwarding stall
  // on every plain frame, ~9 % of the steady-state worker).
  uint8_t tcp_flags;
  bool malformed;
  bool compact;  // a plain frame: its key is k4[], fp[] is written if it leaves the lane
};

struct WorkerScratch {
  PacketMeta meta[kBurst];
  PacketKeys keys[kBurst];
  bool classify[kBurst];          // judged by classification (not by its flow's cache)
  int16_t flow[kBurst];           // index into fp/fr, -1: no flow entry
  flow::FlowPacket fp[kBurst];
  flow::FlowKeyV4 k4[kBurst];     // by flow index, as fp: a plain frame's key
  LaneInfo lane[kBurst];          // by flow index, as fp
  bool parsed[kBurst];            // meta[i] written (else a plain frame, parsed if it leaves the lane)
  uint64_t fh[kBurst];            // the flow table's hash of fp[j].key
  flow::FlowResult fr[kBurst];
  RuleHit hit[kBurst];
  bool by_rule[kBurst];           // drop[i] was dropped by a rule (not as malformed)
  uint64_t hashes[kMaxBurstKeys];
  uint16_t owner[kMaxBurstKeys];  // packet index of each key
  uint16_t slot[kMaxBurstKeys];   // key index within its packet
  uint64_t hit_mask[(kMaxBurstKeys + 63) / 64];
  bool inspect_drop[kBurst];      // dropped by inspect_overflow = "drop"
  Key128 names[kBurst][2];        // the first and the latest name packet i's inspection read (note_names)
  uint8_t nnames[kBurst];
  bool control_bad[kBurst];       // a FIN, RST or SYN-ACK whose bad checksum ignore_bad_control() found
  bool fast_open_cut[kBurst];     // a SYN whose data cannot be judged whole (fast_open()): dropped
  PacketKeys extra;               // a second (pipelined) message of one segment
  uint8_t quic[quic::kMaxDatagram];  // the plaintext of a datagram's QUIC Initials
  uint8_t tls[reasm::kTlsScratch];  // a reassembled ClientHello behind one record header
  // A cleartext HTTP/2 connection's first header block behind its preface
  // (the stream steps over the preface; classification reads both).
  uint8_t h2_start[h2::kPrefaceLen + reasm::kHttpMaxHead];
};

namespace {

void* flow_alloc(std::size_t size, std::size_t align, void* ctx) {
  return rte_zmalloc_socket("cg_flows", size, static_cast<unsigned>(align),
                            static_cast<int>(reinterpret_cast<intptr_t>(ctx)));
}
void flow_free(void* p, std::size_t, void*) { rte_free(p); }

// FlowEntry::flags bits (spare ones of the flow table's; kFlowBlocked is 0x01).
// kJudgingFwd/Rev: a packet of the flow in that direction is being
// classified in this burst (set in from_cache, cleared in step 3). kPassFwd/kPassRev: "pass" was computed for
// that direction at FlowEntry::generation (a pass generation; a blocked
// flow's is the full generation) — src/dst/flow/service rules read
// a packet's direction, so each direction is judged once per generation.
constexpr uint8_t kPassFwd = 0x02, kPassRev = 0x04;
constexpr uint8_t kJudgingFwd = 0x40, kJudgingRev = 0x80;
// kHandshake: a TCP flow's stream was opened by its SYN-ACK (or SYN), so its
// client and start are known, not guessed (StreamInspector::syn_ack).
constexpr uint8_t kHandshake = 0x08;
// kNamed: the flow's cold state holds names its inspection read
// (Worker::flow_name).
constexpr uint8_t kNamed = 0x10;
// Until a name is kept there (kNamed), the first name slot of a TCP flow's
// cold state may hold the server's first sequence number after its SYN,
// from the flow's first SYN-ACK (reasm::Segment::server_first): in its low
// word, marked by kServerStartMark in its high one (zero when the entry is
// created).
constexpr uint64_t kServerStartMark = 0x5345525645525354ULL;
bool server_start_known(const flow::FlowEntry& e, const flow::FlowCold& c) {
  return (e.flags & kNamed) == 0 && c.name[0][1] == kServerStartMark;
}
// kFwdSideB: the flow's forward direction comes in from side B
// (reasm::kSideB; only where links have sides: run). Set when the entry is
// created; a packet that comes in from the other side than its direction's
// is a forgery (Worker::wrong_side).
constexpr uint8_t kFwdSideB = 0x20;

// A TCP flow's client-stream inspection state (app/reasm/stream.hpp): the
// state bits in its entry, the reassembly slot and where the next message
// starts in its cold state (read only while the flow is inspected).
reasm::StreamRef stream_of(const flow::FlowTable& t, flow::FlowEntry& e) {
  flow::FlowCold& c = t.cold(e);
  return {c.stream[0], c.stream[1], e.inspect, c.arrival};
}

uint8_t pass_bit(flow::Dir d) { return d == flow::Dir::kForward ? kPassFwd : kPassRev; }
uint8_t judging_bit(flow::Dir d) { return d == flow::Dir::kForward ? kJudgingFwd : kJudgingRev; }

// Does this packet of a tracked flow need its application layer looked at?
// Only what the client sends: the first flight of a TCP connection (a TLS
// ClientHello, an HTTP request; every later request of an HTTP keep-alive
// connection; every DNS query over TCP) and every DNS query over UDP.
// Answers, pure ACKs and the rest of a TLS stream are judged by the flow's
// cached verdict. The stream knows which side the client is (or does not
// yet, for a flow picked up mid-stream: then both sides are looked at).
//
// A QUIC flow (UDP to port 443) keeps its own state in `inspect`: the
// client's Initials are read until its ClientHello is whole (kQuicDone), or
// every client datagram is dropped (kQuicDropped: quic = "block", a
// conflict, inspect_overflow = "drop").
constexpr uint8_t kQuicInspecting = 0, kQuicDone = 1, kQuicDropped = 2;

// What a QUIC flow being inspected keeps in its reassembly slot's tag
// (reasm::Pool::tag, zeroed by begin()): the DCID whose keys its Initials are
// opened with — a client keeps its first Initial's keys after a server
// Initial made it switch DCID (RFC 9001 §5.2), or those of a Retry's DCID —
// and the largest packet number opened, which truncated ones are decoded
// against (RFC 9000 §A.3).
struct QuicTag {
  uint64_t largest_pn_plus1;  // 0: none yet
  uint8_t has_key;
  uint8_t dcid_len;
  uint8_t dcid[quic::kMaxCidLen];
};
static_assert(sizeof(QuicTag) <= reasm::kSlotTagBytes);


// Does a TCP receiver take this segment's payload into its stream? Not
// without ACK (RFC 9293 3.10.7.4, "check the ACK field": dropped once
// synchronized; Linux drops it in every state past SYN-SENT), nor with RST
// (the connection is reset or the RST ignored; its bytes are never read),
// nor with SYN (data in a SYN — TCP Fast Open — is the one exception; such a
// SYN is judged alone, not read: docs/reassembly.md, "Fast Open"). A client
// could otherwise send a ClientHello naming a fine host in such a segment,
// which the gateway would judge and its server drop, and then the real one
// at the same sequence number, taken for a retransmission.
bool payload_taken(uint8_t tcp_flags) {
  return (tcp_flags & (flow::kTcpAck | flow::kTcpSyn | flow::kTcpRst)) == flow::kTcpAck;
}

// A SYN with data (TCP Fast Open): a server that takes it reads it as its
// client's first bytes. Judged alone by classification, whether or not it
// finds a flow entry (Worker::fast_open, docs/reassembly.md "Fast Open").
bool fast_open_syn(const PacketMeta& m) {
  return m.proto == kProtoTcp && m.payload_len != 0 &&
         (m.tcp_flags & (flow::kTcpSyn | flow::kTcpAck | flow::kTcpRst)) == flow::kTcpSyn;
}

// Mixed into the worker's secret for delivery_digest(), apart from dcid_tag()'s use of it.
constexpr uint64_t kDeliverySeed = 0x9e3779b97f4a7c15ULL;

// A keyed 32-bit tag of a QUIC version and connection ID, which together
// give a connection's Initial keys (a client cannot choose a second DCID
// whose tag is the first's without the worker's seed).
uint32_t dcid_tag(uint64_t seed, uint32_t version, const uint8_t* dcid, std::size_t len) {
  const uint64_t h = XXH3_64bits_withSeed(dcid, len, seed ^ version);
  return static_cast<uint32_t>(h ^ (h >> 32));
}

// `first_byte()`: the payload's first byte (called only for a datagram to
// 443 of a QUIC flow that is done: with the long-header bit, a new
// connection's Initial on the same ports may follow, inspect_quic;
// short-header 1-RTT packets never have it). A callback so that no other
// packet reads it: computing it for every frame cost the steady lane ~5 %.
template <class FirstByte>
bool inspects(flow::FlowEntry& e, const LaneInfo& m, flow::Dir dir, QuicMode quic, FirstByte first_byte) {
  // A segment with URG set moves the urgent pointer, payload or not (a bare
  // ACK may announce a byte of a later segment): see inspect_stream().
  if (m.payload_len == 0 && (m.proto != kProtoTcp || (m.tcp_flags & flow::kTcpUrg) == 0))
    // A pure ACK only while its flow settles: the server's may end it
    // (StreamInspector::segment()).
    return m.proto == kProtoTcp && reasm::stream_settles(e.inspect) && payload_taken(m.tcp_flags);
  if (m.proto == kProtoUdp) {  // every DNS query, whoever the flow's first packet was; QUIC Initials
    return m.dport == 53 || (m.dport == 443 && quic != QuicMode::kPass &&
                             (e.inspect != kQuicDone || (quic == QuicMode::kInspect && (first_byte() & 0x80) != 0)));
  }
  return m.proto == kProtoTcp && reasm::stream_wants(e.inspect, dir == flow::Dir::kForward);
}

// A TCP FIN (no payload) in a direction whose stream is still read: it goes
// to the stream inspector, which drops it if it would cut an unfinished
// message (Worker::fin_cuts_message). Not in inspects(): the lane never
// sees a FIN (track_steady() leaves it to the general way).
bool fin_while_read(const flow::FlowEntry& e, const LaneInfo& m, flow::Dir dir) {
  return m.proto == kProtoTcp && (m.tcp_flags & flow::kTcpFin) != 0 && !reasm::stream_settles(e.inspect) &&
         reasm::stream_wants(e.inspect, dir == flow::Dir::kForward);
}

// True when packet m's rule hit is a name from a DNS query over UDP: a
// verdict for that query, not for its flow. (A host key of a UDP datagram
// to port 53 comes only from its questions; an address or flow rule that
// matches too wins as the smaller kind, and then the flow is blocked.)
bool dns_query_name_hit(const PacketMeta& m, RuleHit h) {
  return m.proto == kProtoUdp && m.dport == 53 && h.kind == static_cast<uint8_t>(RuleKind::kHost);
}

}  // namespace

// What a frame may add to the MTU: the Ethernet header and two VLAN tags
// (QinQ). The CRC is not in the mbuf.
inline constexpr uint32_t kL2Overhead = 14 + 2 * 4;

bool Worker::prepare(const WorkerConfig& cfg, int socket) {
  cfg_ = cfg;
  checksums_trusted_ = cfg.checksums == ChecksumMode::kVerify;
  server_checksums_trusted_ = checksums_trusted_;
  max_frame_.clear();
  for (const QueueLink& l : cfg.links) {
    uint16_t mtu = 1500;
    if (rte_eth_dev_get_mtu(l.rx_port, &mtu) != 0) mtu = 1500;
    max_frame_.push_back(uint32_t{mtu} + kL2Overhead);
  }
  // The burst's scratch (~1.1 MiB: every packet's key arrays) in EAL
  // hugepages, or with --no-huge in huge-page-advised memory (app/mem), as
  // the flow table: 4 KiB pages would cost TLB misses on every burst.
  scratch_in_eal_ = rte_eal_has_hugepages() != 0;
  s_ = static_cast<WorkerScratch*>(
      scratch_in_eal_
          ? rte_zmalloc_socket("cg_worker_scratch", sizeof(WorkerScratch), RTE_CACHE_LINE_SIZE, socket)
          : mem::map_pages(sizeof(WorkerScratch)));
  if (s_ == nullptr) return false;
  const uint64_t hz = rte_get_tsc_hz();
  if (cfg.flows != 0) {
    flow::FlowTableConfig fc;
    fc.capacity = cfg.flows;
    fc.ticks_per_second = hz;
    fc.seed = rte_rdtsc() * 0x9e3779b97f4a7c15ULL ^ cfg.id;  // not predictable from outside
    dcid_seed_ = (rte_rdtsc() ^ cfg.id) * 0xc2b2ae3d27d4eb4fULL;
    fc.track_bare_syn = false;  // a SYN flood must not reach the table (docs/dataplane.md)
    // EAL memory when it is hugepages; with --no-huge it is a shared memfd
    // in 4 KiB pages that the kernel will not back with transparent huge
    // pages, so the table's own default (anonymous memory, THP advised).
    flow::FlowAllocator fa;
    if (rte_eal_has_hugepages())
      fa = {&flow_alloc, &flow_free, reinterpret_cast<void*>(static_cast<intptr_t>(socket))};
    flows_ = flow::FlowTable::create(fc, fa).release();
    if (flows_ == nullptr) return false;
    if (cfg.reasm_slots != 0) {
      reasm::PoolConfig pc;
      pc.slots = cfg.reasm_slots;
      // A slot whose flow went quiet (or was evicted) for as long as a
      // handshake may stall is taken back.
      pc.idle_ticks = 30 * hz;
      reasm::PoolAllocator pa;
      pa.allocate = [](std::size_t size, std::size_t, void*) { return mem::map_pages(size); };
      pa.release = [](void* p, std::size_t size, void*) { mem::unmap_pages(p, size); };
      pool_ = reasm::Pool::create(pc, pa).release();
      if (pool_ == nullptr) return false;
    }
    stream_ = new reasm::StreamInspector(pool_, s_->tls, sizeof s_->tls);
    if (cfg.quic == QuicMode::kInspect) {
      quic_ = quic::Decoder::create().release();
      if (quic_ == nullptr) return false;
    }
  }
  if (cfg.reject || cfg.rule_actions != nullptr) {  // a rule may say action=reject at any time
    // Enough for two ports' tx rings full of replies not yet freed by their
    // drivers, plus a burst's worth: replies never wait for a pool refill.
    static std::atomic<unsigned> pools{0};  // unique names: several engines in one process (tests)
    const std::string name = "cg_reply_" + std::to_string(pools.fetch_add(1, std::memory_order_relaxed));
    reply_pool_ = rte_pktmbuf_pool_create(name.c_str(), 4095, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, socket);
    if (reply_pool_ == nullptr) return false;
    bucket_ = new reject::TokenBucket(cfg.reject_rate, cfg.reject_burst, hz, rte_rdtsc());
  }
  if (cfg.frags.enabled) {
    frag_ = FragStage::create(cfg.frags, socket, hz, cfg.stats);
    if (frag_ == nullptr) return false;
  }
  return true;
}

Worker::~Worker() {
  delete frag_;  // first: it gives held mbufs back to their pools
  if (scratch_in_eal_) {
    rte_free(s_);
  } else {
    mem::unmap_pages(s_, sizeof(WorkerScratch));
  }
  if (flows_ != nullptr) flow::FlowTable::Deleter{}(flows_);
  delete stream_;
  if (quic_ != nullptr) quic::Decoder::Deleter{}(quic_);
  if (pool_ != nullptr) reasm::Pool::Deleter{}(pool_);
  delete bucket_;
  rte_mempool_free(reply_pool_);
}

flow::FlowStats Worker::flow_stats() const {
  return flows_ != nullptr ? flows_->stats() : flow::FlowStats{};
}

int Worker::main(void* arg) {
  static_cast<Worker*>(arg)->loop();
  return 0;
}

// Parses every packet and, with a flow table, builds its flow key and hash
// and starts loading its home slot's entry, the one line pass_cached()
// reads for a flow at home (a bare SYN: its bucket's header instead, where
// its lookup ends). The headers of packets that leave the lane are read by
// track_flows() without a prefetch: prefetching them after the lane was
// measured no faster (docs/PERFORMANCE.md, "Session 13").
// A plain frame (untagged IPv4 TCP/UDP, no options, no fragment, no tunnel)
// gets only its flow key and LaneInfo here: its PacketMeta is written by
// process() if it leaves the fast lane, so a passing flow's packets never
// pay for one (docs/PERFORMANCE.md, "Pipeline, session 7").
// IP fragments go to `frags` (FragStage::take) as they are met and leave
// pkts[], which keeps the others in order: a plain frame is none, so only
// the others are asked (one pass over the burst, not two). `frags` is
// nullptr for a frame the stage reassembled: it is judged, never taken again
// (a tunnel's reassembled outer datagram may carry an inner fragment).
// Returns the packets left in pkts[]; *tracked: how many of them have a
// flow (s.flow[i] numbers them in order).
uint16_t Worker::parse_burst(rte_mbuf** pkts, uint16_t n, FragStage* frags, uint64_t now, uint16_t* tracked) {
  WorkerScratch& s = *s_;
  const bool tracking = flows_ != nullptr;
  const flow::FlowTable::Probe probe = tracking ? flows_->probe() : flow::FlowTable::Probe{};
  uint16_t nf = 0, i = 0;  // i: where packet r stays
  for (uint16_t r = 0; r < n; ++r) {
    if (r + 1 < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[r + 1], const void*));
    rte_mbuf* const mb = pkts[r];
    const uint8_t* frame = rte_pktmbuf_mtod(mb, const uint8_t*);
    const uint32_t len = rte_pktmbuf_data_len(mb);
    PlainFrame pf;
    if (tracking && parse_plain_ipv4(frame, len, pf)) {
      // The common frame: what the flow and the lane need, its key in the
      // compact form, no PacketMeta (written only if the packet leaves the lane).
      uint32_t addr[2];
      uint16_t ports[2];  // network order, as below
      std::memcpy(addr, frame + kPlainAddrOff, 8);
      std::memcpy(ports, frame + kPlainL4Off, 4);
      flow::FlowKeyV4 k;
      const flow::Side side = flow::make_flow_key_v4(addr[0], addr[1], ports[0], ports[1], 0, pf.proto, k);
      s.k4[nf] = k;
      s.lane[nf] = {.payload_len = pf.payload_len, .dport = pf.dport, .proto = pf.proto, .side = side,
                    .tcp_flags = pf.tcp_flags, .malformed = false, .compact = true};
      s.parsed[i] = false;
      const uint64_t h = probe.hash_v4(k);
      s.fh[nf] = h;
      // A bare SYN seldom has an entry (a new connection; bare SYNs make
      // none): its lookup ends at the header's signatures, so the home
      // entry's line would be loaded for nothing.
      if (pf.proto == kProtoTcp && (pf.tcp_flags & (flow::kTcpSyn | flow::kTcpAck)) == flow::kTcpSyn) {
        probe.prefetch_header(h);
      } else {
        probe.prefetch(h);
      }
      s.flow[i] = static_cast<int16_t>(nf++);
      pkts[i++] = mb;
      continue;
    }
    if (frags != nullptr && frags->take(mb, frame, len, now)) continue;  // held, dropped, or completes a datagram
    pkts[i] = mb;
    PacketMeta& m = s.meta[i];
    s.parsed[i] = true;
    // Headers come from the first segment; a frame split across segments is
    // judged on what the first segment holds (headers are always there).
    parse_packet(frame, len, m);
    s.flow[i] = -1;
    // Fragments (with the stage off) and non-IP are judged alone; so are
    // tunneled packets: their flow key is the inner 5-tuple, which another
    // tunnel may carry too, and a verdict cached for one tunnel must not pass
    // another's packets (an outer-address rule would then be skipped).
    // ICMP: an echo is a flow keyed by its identifier; any other message
    // (an error, neighbour discovery) is judged alone, so that one blocked
    // ping does not take the hosts' other ICMP along (flow_key.hpp).
    uint16_t ports[2] = {0, 0};
    const bool icmp = m.proto == kProtoIcmp || m.proto == kProtoIcmpv6;
    if (flows_ == nullptr || m.family == 0 || !m.l4 || m.tunneled ||
        (icmp && !flow::icmp_echo_port(frame + m.l4_off, m.l4_len, m.proto, &ports[0]))) {
      ++i;
      continue;
    }
    ports[1] = ports[0];  // (an echo's identifier, or 0)
    flow::FlowPacket& fp = s.fp[nf];
    // The ports straight from the frame (network order: the table only needs
    // one order), not from m: parse_packet has just stored them as two
    // 16-bit fields and reading them back as one word stalls store forwarding.
    if (proto_has_ports(m.proto)) std::memcpy(ports, frame + m.l4_off, 4);  // l4: the header is there
    fp.side = flow::make_flow_key({frame + m.addr_off, frame + m.addr_off + m.addr_len(), ports[0], ports[1],
                                   m.vlan, m.proto, m.family},
                                  fp.key);
    fp.tcp_flags = m.tcp_flags;
    fp.no_state = false;
    s.lane[nf] = {.payload_len = m.payload_len, .dport = m.dport, .proto = m.proto, .side = fp.side,
                  .tcp_flags = m.tcp_flags, .malformed = m.malformed, .compact = false};
    s.fh[nf] = flows_->hash(fp.key);
    flows_->prefetch(s.fh[nf]);
    s.flow[i++] = static_cast<int16_t>(nf++);
  }
  *tracked = nf;
  return i;
}

// The first payload byte of packet i, whose payload is not empty: at a
// fixed offset in a plain frame (UDP: only datagrams ask, inspects()),
// where its PacketMeta says in another (parsed by then).
uint8_t Worker::first_payload_byte(uint16_t i, const rte_mbuf* mb, bool plain) const {
  const uint8_t* frame = rte_pktmbuf_mtod(mb, const uint8_t*);
  if (plain) return frame[kPlainL4Off + 8];
  const PacketMeta& m = s_->meta[i];
  return m.payload_off < rte_pktmbuf_data_len(mb) ? frame[m.payload_off] : 0;
}

// Packet i, a SYN with data (TCP Fast Open; docs/reassembly.md, "Fast
// Open"). The SYN is judged alone (classification reads its first message,
// in its first record) and the flow's stream starts past its bytes, so if
// they leave a message unfinished its rest would start the stream in its
// middle and go unread, and a second message would reach the server
// unjudged: such a SYN is marked to be dropped (a Linux client then sends a
// SYN without data, and its data after the handshake, where it is read
// whole). So is one whose bytes classification may read otherwise than its
// server: with URG (the inspector takes the urgent byte out, a server's
// Fast Open queue does not), malformed, or not all in the first segment.
void Worker::fast_open(uint16_t i, const rte_mbuf* mb, const PacketMeta& m) {
  const uint32_t len = rte_pktmbuf_data_len(mb);
  const bool readable = !m.malformed && (m.tcp_flags & flow::kTcpUrg) == 0 && mb->nb_segs == 1 &&
                        m.payload_off <= len && m.payload_len <= len - m.payload_off;
  s_->fast_open_cut[i] = !readable || !reasm::fast_open_data_whole(rte_pktmbuf_mtod(mb, const uint8_t*) + m.payload_off,
                                                                   m.payload_len, m.dport, s_->tls, sizeof s_->tls);
}

// The fast lane. From the head of the burst, every packet whose flow holds
// a current pass for its direction and that needs nothing looked at — the
// steady state of a passing connection: a segment without SYN, FIN or RST,
// no first-flight bytes to inspect — is passed with one flow-table
// track_steady(), no classification and no per-packet scratch. The lane ends at the first
// packet that needs more (untracked, a new or expired flow, SYN/FIN/RST, a
// blocked or unjudged flow or direction, an inspecting state, a malformed or
// oversized frame); it and every later packet take the general way, in
// order, so the burst ends exactly as the general path alone would leave it
// (an earlier packet's flow update is never reordered after a later one's).
// Returns the packets passed: pass[0..k) = pkts[0..k).
uint16_t Worker::pass_cached(rte_mbuf** pkts, uint16_t n, uint32_t max_frame, uint64_t pass_gen, uint64_t now,
                             rte_mbuf** pass) {
  WorkerScratch& s = *s_;
  // Where links have sides, a packet must come in from its direction's
  // (kFwdSideB): the flag is compared with the others.
  const uint8_t side_mask = side_ != 0 ? kFwdSideB : 0;
  const uint8_t want_fwd = side_bit(flow::Dir::kForward), want_rev = side_bit(flow::Dir::kReverse);
  uint16_t i = 0;
  for (; i < n; ++i) {
    if (s.flow[i] != static_cast<int16_t>(i)) break;  // untracked (every earlier one was tracked)
    const LaneInfo& m = s.lane[i];
    flow::Dir d;
    // Refreshes the entry as track() would; if the lane ends at this packet,
    // track_flows() tracks it again, which changes nothing more.
    flow::FlowEntry* e = m.compact ? flows_->track_steady_v4(s.k4[i], s.fh[i], m.side, m.tcp_flags, now, &d)
                                   : flows_->track_steady(s.fp[i].key, s.fh[i], m.side, m.tcp_flags, now, &d);
    if (e == nullptr) break;
    constexpr uint8_t kBlockedOrJudging = flow::kFlowBlocked | kJudgingFwd | kJudgingRev;
    const uint8_t want = pass_bit(d) | (d == flow::Dir::kForward ? want_fwd : want_rev);
    if ((e->flags & (kBlockedOrJudging | pass_bit(d) | side_mask)) != want || !e->verdict_current(pass_gen) ||
        m.malformed || rte_pktmbuf_pkt_len(pkts[i]) > max_frame ||
        inspects(*e, m, d, cfg_.quic, [&] { return first_payload_byte(i, pkts[i], m.compact); }))
      break;
    pass[i] = pkts[i];
  }
  flows_->count_hits(i);
  return i;
}

// The general way for packets first..n-1 (parse_burst() has run; the
// first nf - first tracked ones among them have flows first..nf-1): looks
// their flows up, creating them, in one pass over the flow table.
void Worker::track_flows(rte_mbuf* const* pkts, uint16_t first, uint16_t n, uint16_t nf, uint64_t now) {
  WorkerScratch& s = *s_;
  if (nf == first) return;
  flows_->track_burst(s.fp + first, s.fh + first, nf - first, now, s.fr + first);
  constexpr uint8_t kSynAck = flow::kTcpSyn | flow::kTcpAck;
  for (uint16_t i = first; i < n; ++i) {
    if (s.flow[i] < 0) continue;
    const flow::FlowResult& r = s.fr[s.flow[i]];
    const PacketMeta& m = s.meta[i];
    if (fast_open_syn(m)) fast_open(i, pkts[i], m);
    // The side each direction comes in from: the creating packet's tells.
    if (r.entry != nullptr && r.created) r.entry->flags |= side_bit(r.dir);
    if (r.entry == nullptr || m.proto != kProtoTcp || s.fp[s.flow[i]].no_state) continue;
    // A SYN-ACK from the other side than its direction's (a forgery) moves
    // no stream state: it is judged apart (from_wrong_side).
    if (!r.created && wrong_side(*r.entry, r.dir)) continue;
    // Which side is the client, and where its bytes start, is known when the
    // handshake opened the flow (docs/reassembly.md, "Direction"); a later
    // SYN-ACK must agree with it.
    const bool fwd = r.dir == flow::Dir::kForward;
    flow::FlowEntry& e = *r.entry;
    if (r.created) {
      // (A SYN-ACK to a service port from one that is not: a client's
      // forgery, opened as a flow picked up mid-stream.)
      const bool trusted = (m.tcp_flags & kSynAck) != kSynAck || reasm::syn_ack_tells_client(m.sport, m.dport);
      reasm::stream_open(stream_of(*flows_, e), trusted ? m.tcp_flags : flow::kTcpAck, m.tcp_seq, m.tcp_ack, fwd);
      if (trusted && (m.tcp_flags & flow::kTcpSyn) != 0) {
        e.flags |= kHandshake;
        timestamp_floor(rte_pktmbuf_mtod(pkts[i], const uint8_t*), m, e);
        if ((m.tcp_flags & kSynAck) == kSynAck) server_start(e, m.tcp_seq);
      }
    } else if ((m.tcp_flags & kSynAck) == kSynAck) {
      using Answer = reasm::StreamInspector::Answer;
      const Answer a = stream_->syn_ack(stream_of(*flows_, e), m.tcp_seq, m.tcp_ack, fwd, (e.flags & kHandshake) != 0,
                                        m.sport, m.dport);
      if (a == Answer::kOpened) e.flags |= kHandshake;
      if (a != Answer::kContradicts) timestamp_floor(rte_pktmbuf_mtod(pkts[i], const uint8_t*), m, e);  // raised
      if (a != Answer::kContradicts && (e.flags & kHandshake) != 0) server_start(e, m.tcp_seq);
      if (a == Answer::kContradicts) bump(cfg_.stats->reasm_conflicts);
    } else if (m.payload_len == 0 && payload_taken(m.tcp_flags) && (e.flags & kHandshake) != 0 &&
               reasm::stream_wants(e.inspect, fwd)) {
      // (The handshake's last ACK, chiefly: a flow's first packet of its
      // initiator's direction is always classified, off the fast lane.)
      const TcpOptionMarks o = tcp_option_marks(rte_pktmbuf_mtod(pkts[i], const uint8_t*), m);
      reasm::stream_pure_ack(stream_of(*flows_, e), fwd, m.tcp_seq, (o.marks & kTcpMarkTimestamps) != 0, o.tsval);
    }
  }
}

// Keeps the server's first sequence number after its SYN (`syn_ack_seq` +
// 1) from the flow's first SYN-ACK of a handshake; a later one (a
// retransmission, or a client's forgery from either side) never moves it, so
// a forgery can only make its own connection's segments conflicts. Not kept
// once a name took the slot (server_start_known).
void Worker::server_start(flow::FlowEntry& e, uint32_t syn_ack_seq) {
  flow::FlowCold& c = flows_->cold(e);
  if ((e.flags & kNamed) != 0 || server_start_known(e, c)) return;
  c.name[0][0] = uint64_t{syn_ack_seq} + 1;
  c.name[0][1] = kServerStartMark;
}

// What kFwdSideB says of a flow whose packet of direction `dir` comes in
// from this link's side: set if that makes side B its forward direction's.
// 0 where links have no sides.
uint8_t Worker::side_bit(flow::Dir dir) const {
  return side_ != 0 && (side_ == reasm::kSideB) == (dir == flow::Dir::kForward) ? kFwdSideB : 0;
}

// True if a packet of direction `dir` came in from the other side than the
// flow's packets of that direction, where links have sides.
bool Worker::wrong_side(const flow::FlowEntry& e, flow::Dir dir) const {
  return side_ != 0 && (e.flags & kFwdSideB) != side_bit(dir);
}

// Packet i came in from the other side than its direction's: a forgery, as
// a client sending its server's packets from its own side (one a router may
// send back through the gateway from the right side: docs/reassembly.md,
// "A fake that ends the inspection"). While the flow's TCP stream is read
// or settles, or was dropped, the packet is dropped, and so is the flow's
// client data from here on (a conflict, counted once). Otherwise it is
// judged on its headers as any other.
void Worker::from_wrong_side(uint16_t i, const uint8_t* frame) {
  WorkerScratch& s = *s_;
  const PacketMeta& m = s.meta[i];
  classify_meta(frame, m, s.keys[i], frame, 0);
  if (m.proto != kProtoTcp) return;
  const reasm::StreamRef ref = stream_of(*flows_, *s.fr[s.flow[i]].entry);
  if (!reasm::stream_wants(ref, true) && !reasm::stream_wants(ref, false)) return;  // done and settled
  if (stream_->drop(ref)) bump(cfg_.stats->reasm_conflicts);
  s.inspect_drop[i] = true;
}

// The client's timestamp when the SYN or SYN-ACK `m` that opened its
// flow's stream was sent: the SYN's own TSval, or the TSecr with which the
// SYN-ACK echoes it. The stream inspector takes no client segment older
// (PAWS; docs/reassembly.md, "Copies that arrive otherwise").
void Worker::timestamp_floor(const uint8_t* frame, const PacketMeta& m, flow::FlowEntry& e) {
  const TcpOptionMarks o = tcp_option_marks(frame, m);
  const uint32_t client_tsval = (m.tcp_flags & flow::kTcpAck) != 0 ? o.tsecr : o.tsval;
  // (0: a SYN-ACK echoing nothing, as RFC 7323 §3.2 has a TSecr without a
  // TSval to echo; taken as a floor, it would make half the clock "older".)
  if ((o.marks & kTcpMarkTimestamps) == 0 || client_tsval == 0) return;
  reasm::stream_timestamp_floor(stream_of(*flows_, e), client_tsval);
}

// True if packet i is decided by its flow's state: s.hit[i] is then its
// verdict (a kind for a blocked flow, 0 to pass), or, for a flow an earlier
// packet of this burst is being classified for, step 3 of process() takes
// the verdict that packet gives the flow.
[[gnu::always_inline]] inline bool Worker::from_cache(uint16_t i, const rte_mbuf* pkt, uint64_t gen,
                                                     uint64_t pass_gen, bool spoofed) {
  WorkerScratch& s = *s_;
  if (s.flow[i] < 0) return false;
  const flow::FlowResult& r = s.fr[s.flow[i]];
  flow::FlowEntry* e = r.entry;
  if (e == nullptr) return false;
  // `spoofed`: from the other side than its direction's (wrong_side()),
  // judged apart (process(), step 1) unless its flow is blocked.
  auto first = [&] { return first_payload_byte(i, pkt, false); };
  // A SYN with data is judged on its data whatever its flow passed (a Fast
  // Open server takes it as a new connection's first bytes).
  const bool syn_data = fast_open_syn(s.meta[i]);
  if (!spoofed && !syn_data && (e->flags & judging_bit(r.dir)) != 0 &&
      !inspects(*e, s.lane[s.flow[i]], r.dir, cfg_.quic, first)) {
    s.hit[i] = {};
    return true;  // follows the earlier packet's verdict (step 3)
  }
  if (e->blocked()) {
    // The rule that blocked the flow at generation G is still there iff its
    // slot was not freed since G (acquire: pairs with the control lcore's
    // release store before the generation bump; see Blocklist).
    if (e->generation == gen ||
        (cfg_.verify && cfg_.slot_removed_at[e->rule_slot].load(std::memory_order_acquire) < e->generation)) {
      // Still its rule's: from now on compared at this generation (a later
      // removal stores a value >= gen, so the check stays sound).
      e->generation = gen;
      s.hit[i] = {e->rule_kind, e->rule_slot};
      return true;
    }
    e->set_verdict(flow::Verdict::kUnknown, 0);  // its rule went: judge the flow afresh
    e->flags |= judging_bit(r.dir);
    return false;
  }
  if (spoofed || syn_data || !e->verdict_current(pass_gen) || (e->flags & pass_bit(r.dir)) == 0 ||
      inspects(*e, s.lane[s.flow[i]], r.dir, cfg_.quic, first) || fin_while_read(*e, s.lane[s.flow[i]], r.dir)) {
    // Later packets of this flow and direction in this burst follow this
    // one's verdict (step 3).
    e->flags |= judging_bit(r.dir);
    return false;
  }
  s.hit[i] = {};
  return true;
}

// What the stream inspector hands back for packet i: its first whole
// message is classified as the packet's application layer; a second one in
// the same segment (pipelining) is classified apart and looked up at once.
struct Worker::MessageSink {
  Worker* w;
  uint16_t i;
  const uint8_t* frame;
  uint32_t kinds;
  bool classified;
};

void Worker::on_message(void* ctx, const uint8_t* p, std::size_t n, reasm::App app, bool first) {
  MessageSink& k = *static_cast<MessageSink*>(ctx);
  WorkerScratch& s = *k.w->s_;
  const PacketMeta& m = s.meta[k.i];
  if (app == reasm::App::kHttp2 && n <= reasm::kHttpMaxHead) {
    // The frames of an HTTP/2 header block: classified behind the preface,
    // as a connection's start (docs/rules.md, "HTTP/2 cleartext").
    std::memcpy(s.h2_start, h2::kPreface, h2::kPrefaceLen);
    std::memcpy(s.h2_start + h2::kPrefaceLen, p, n);
    p = s.h2_start;
    n += h2::kPrefaceLen;
  }
  if (first) {
    // The packet's own payload, from its start: classified as it is (an
    // urgent byte taken out the way the receiver does).
    const bool own = p == k.frame + m.payload_off;
    classify_meta(k.frame, m, s.keys[k.i], own ? nullptr : p, own ? 0 : n);
    k.w->note_names(k.i, s.keys[k.i]);
    k.classified = true;
    return;
  }
  k.w->judge_extra(k.i, k.frame, p, n, k.kinds);
}

// A further message of packet i's segment: its names and url, looked up
// one by one (rare: pipelined requests); a confirmed rule joins s.hit[i].
void Worker::judge_extra(uint16_t i, const uint8_t* frame, const uint8_t* p, std::size_t n, uint32_t kinds) {
  WorkerScratch& s = *s_;
  classify_meta(frame, s.meta[i], s.extra, p, n);
  note_names(i, s.extra);  // names the flow carried (flow_name): a later rule finds them
  const PacketKeys& pk = s.extra;
  for (unsigned k = 0; k < pk.n; ++k) {
    const PacketKey& key = pk.key[k];
    if (key.kind != RuleKind::kHost && key.kind != RuleKind::kUrl) continue;  // the packet's own are judged
    if (!has_rules(kinds, key.kind) || !burst_.filter->contains(key.hash)) continue;
    RuleKind kind = key.kind;
    uint32_t rule = 0;
    if (cfg_.verify && !burst_.exact->contains(key_hash128(pk.key_bytes(k), key.len), &kind, &rule)) continue;
    s.hit[i].keep(kind, rule);
  }
}

// Classifies packet i of a tracked TCP flow the stream inspector looks at
// (docs/reassembly.md): only whole client messages are read, from the
// packet, or from its stream's slot when this segment completes one; a
// segment that starts or ends none (server data, a body, bytes held for
// later) is judged on its headers alone. When a budget runs out, the flow's
// inspection stops and inspect_overflow decides: pass, or drop the flow. A
// segment that rewrites held bytes with other ones drops the flow's client data.
// A client FIN while the stream holds the client's unfinished message:
// Python's http.server takes the end of the stream for the end of a head
// (a request line and Host line, then FIN, is served), so bytes the
// inspector waits on would be served unread. Such a FIN (with any bytes it
// carries, which the slot keeps) is dropped; the client sends it again, and
// it passes once the message is whole and judged (docs/reassembly.md,
// "A FIN inside a message").
bool Worker::fin_cuts_message(const reasm::StreamRef& ref, const PacketMeta& m, bool forward) const {
  return (m.tcp_flags & flow::kTcpFin) != 0 && ref.handle != 0 && reasm::stream_wants(ref, forward) &&
         !reasm::stream_settles(ref.bits);
}

void Worker::inspect_stream(uint16_t i, const uint8_t* frame, uint64_t now, uint32_t kinds) {
  WorkerScratch& s = *s_;
  WorkerStats& st = *cfg_.stats;
  const PacketMeta& m = s.meta[i];
  const flow::FlowResult& r = s.fr[s.flow[i]];
  const reasm::StreamRef ref = stream_of(*flows_, *r.entry);
  const flow::FlowCold& cold = flows_->cold(*r.entry);
  // How it arrived: the inspector reads a client's segments only while each
  // arrives as the first one did (docs/reassembly.md, "Copies that arrive otherwise").
  const TcpOptionMarks o = tcp_option_marks(frame, m);
  const reasm::Segment seg{m.tcp_seq,
                           frame + m.payload_off,
                           m.payload_len,
                           r.dir == flow::Dir::kForward,
                           m.sport,
                           m.dport,
                           {.ttl = ip_ttl(frame, m),
                            .options = o.marks,
                            .timestamp = (o.marks & kTcpMarkTimestamps) != 0,
                            .tsval = o.tsval,
                            .delivery = delivery_digest(frame, m, dcid_seed_ ^ kDeliverySeed)},
                           m.tcp_ack,
                           side_,
                           server_start_known(*r.entry, cold),
                           static_cast<uint32_t>(cold.name[0][0])};
  if ((m.tcp_flags & flow::kTcpUrg) != 0 && reasm::stream_wants(ref, seg.forward) && !reasm::stream_settles(ref.bits)) {
    // Urgent data in a first flight: the server takes the urgent byte out of
    // the stream, possibly a byte of a later segment, while the inspector
    // reads the bytes as sent, so a name could be spelled past it. TLS, HTTP
    // and DNS clients send none: the flow's client data is dropped, counted
    // as a conflict (docs/reassembly.md, "Urgent data"), once per flow; a
    // slot holding part of a message is given back.
    if (stream_->drop(ref)) bump(st.reasm_conflicts);
    classify_meta(frame, m, s.keys[i], frame, 0);  // headers only
    s.inspect_drop[i] = true;
    return;
  }
  if (m.payload_len == 0 && !reasm::stream_settles(ref.bits)) {  // URG or FIN alone: nothing to read
    classify_meta(frame, m, s.keys[i], frame, 0);
    if (fin_cuts_message(ref, m, seg.forward)) s.inspect_drop[i] = true;
    return;
  }
  const reasm::StreamCounters before = stream_->counters();
  MessageSink sink{this, i, frame, kinds, false};
  const reasm::Step step = stream_->segment(ref, seg, now, &Worker::on_message, &sink);
  if (!sink.classified) classify_meta(frame, m, s.keys[i], frame, 0);  // headers only
  const reasm::StreamCounters& after = stream_->counters();
  if (after.started != before.started) bump(st.reasm_started, after.started - before.started);
  if (after.completed != before.completed) bump(st.reasm_completed, after.completed - before.completed);
  if (after.conflicts != before.conflicts) bump(st.reasm_conflicts, after.conflicts - before.conflicts);
  if (after.refused != before.refused) bump(st.reasm_refused, after.refused - before.refused);
  if (step == reasm::Step::kOverflow) {
    bump(st.inspect_overflow);
    if (cfg_.inspect_overflow_drop) reasm::stream_drop_all(ref);
  }
  s.inspect_drop[i] = step == reasm::Step::kDropped || step == reasm::Step::kConflict ||
                      (step == reasm::Step::kOverflow && cfg_.inspect_overflow_drop) ||
                      fin_cuts_message(ref, m, seg.forward);
}

namespace {

// The packet's checksums as its receiver will find them: the NIC's verdict
// where the driver gives one (GOOD, or NONE: "integrity verified"), else
// computed (keys/checksum.hpp). A UDP checksum of 0 over IPv4 is no
// checksum whatever the NIC says.
Checksum receiver_checksum(const rte_mbuf* mb, const uint8_t* frame, const PacketMeta& m) {
  const uint64_t l4 = mb->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK;
  const uint64_t ip = mb->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
  const bool l4_ok = l4 == RTE_MBUF_F_RX_L4_CKSUM_GOOD || l4 == RTE_MBUF_F_RX_L4_CKSUM_NONE;
  const bool ip_ok = m.family == 6 || ip == RTE_MBUF_F_RX_IP_CKSUM_GOOD || ip == RTE_MBUF_F_RX_IP_CKSUM_NONE;
  if (ip == RTE_MBUF_F_RX_IP_CKSUM_BAD) return Checksum::kBad;  // also what FragStage sets for a bad fragment
  const bool udp_none = m.family == 4 && m.proto == kProtoUdp && m.l4 && m.l4_off + 8 <= rte_pktmbuf_data_len(mb) &&
                        frame[m.l4_off + 6] == 0 && frame[m.l4_off + 7] == 0;
  if (l4 == RTE_MBUF_F_RX_L4_CKSUM_BAD) return udp_none ? Checksum::kUnchecked : Checksum::kBad;
  if (l4_ok && ip_ok) return Checksum::kGood;
  if (mb->nb_segs != 1) return Checksum::kUnchecked;  // the first segment is not the whole packet
  return check_checksums(frame, rte_pktmbuf_data_len(mb), m);
}

}  // namespace

// A FIN, RST or SYN-ACK whose checksum is bad (and checksums are verified)
// moves no flow state: its receiver drops it, while the gateway would close
// the flow (and a SYN then reopen it, to wait for a SYN-ACK its server never
// sends, its next segment starting a flow picked up mid-stream, whose
// guessed start an attacker can steer past a request) or anchor its stream
// (docs/reassembly.md, "Checksums"). It is only looked up
// (FlowPacket::no_state): no entry created, nothing changed, its stream not
// touched. A bare SYN is not checked: one that finds no entry makes none
// anyway, and one on a live entry moves nothing; only a closing one, which
// this check keeps a forged close from making, would reopen.
// With checksums = "auto", besides a client's valid checksum (the caller
// asks that), a server's must have been seen: a SYN-ACK's, checked until
// one is valid. A capture taken on a server whose NIC computes checksums has
// wrong ones on everything the server sent, and its flows must still open
// and close (a FIN or RST's sender is not known before the lookup).
void Worker::ignore_bad_control(uint16_t i, const rte_mbuf* mb) {
  WorkerScratch& s = *s_;
  const PacketMeta& m = s.meta[i];
  constexpr uint8_t kSynAck = flow::kTcpSyn | flow::kTcpAck;
  const bool syn_ack = (m.tcp_flags & kSynAck) == kSynAck;
  if (m.proto != kProtoTcp || ((m.tcp_flags & (flow::kTcpFin | flow::kTcpRst)) == 0 && !syn_ack)) return;
  if (!server_checksums_trusted_ && !syn_ack) return;
  const Checksum c = receiver_checksum(mb, rte_pktmbuf_mtod(mb, const uint8_t*), m);
  if (syn_ack && c == Checksum::kGood) server_checksums_trusted_ = true;
  if (c != Checksum::kBad || !server_checksums_trusted_) return;
  s.fp[s.flow[i]].no_state = true;
  s.control_bad[i] = true;
  bump(cfg_.stats->reasm_bad_checksum);
}

// Whether a tracked packet's bytes must not be read by the inspectors: its
// checksums are bad and this worker verifies them (docs/reassembly.md,
// "Checksums"). `inspected`: an inspector wants the packet. With checksums =
// "auto" a worker starts verifying at the first valid checksum it sees on a
// client's packet: one an inspector reads, or a bare SYN (every one until
// then: a sample could be spent by one bad SYN, which its server drops, just
// before an insertion). Never from the servers' packets: a capture taken on
// a client whose NIC computes checksums holds valid ones only on what it
// received, and must still be read.
bool Worker::unreadable(const rte_mbuf* mb, const uint8_t* frame, const PacketMeta& m, bool inspected) {
  const bool bare_syn = m.proto == kProtoTcp && (m.tcp_flags & (flow::kTcpSyn | flow::kTcpAck)) == flow::kTcpSyn;
  if (!inspected && (checksums_trusted_ || !bare_syn)) return false;  // nothing to read, nothing to learn
  const Checksum c = receiver_checksum(mb, frame, m);
  if (c == Checksum::kGood) checksums_trusted_ = true;
  if (!inspected || c != Checksum::kBad || !checksums_trusted_) return false;
  bump(cfg_.stats->reasm_bad_checksum);
  return true;
}

// A client datagram of a QUIC flow (UDP to port 443; docs/quic.md). With
// quic = "inspect", its Initials are decrypted (keys from the connection ID),
// their CRYPTO frames reassembled in the flow's slot, and the datagram that
// completes the ClientHello is classified on it (the SNI gives host keys);
// then the flow is done and nothing of it is decrypted again. Datagrams that
// are not client Initials of v1/v2 end the inspection (a QUIC version the
// gateway cannot read passes, as any UDP). With quic = "block", a client
// Initial drops the flow's client datagrams (browsers fall back to TCP).
void Worker::inspect_quic(uint16_t i, const uint8_t* frame, uint64_t now) {
  WorkerScratch& s = *s_;
  WorkerStats& st = *cfg_.stats;
  const PacketMeta& m = s.meta[i];
  flow::FlowEntry& e = *s.fr[s.flow[i]].entry;
  const uint8_t* dgram = frame + m.payload_off;
  classify_meta(frame, m, s.keys[i]);  // addresses and ports; QUIC has no cleartext name
  s.inspect_drop[i] = e.inspect == kQuicDropped;
  if (e.inspect == kQuicDropped) return;
  flow::FlowCold& cold = flows_->cold(e);
  uint32_t& h = cold.stream[0];
  uint32_t& judged = cold.stream[1];  // kQuicDone: dcid_tag() of the keys its ClientHello came under
  auto stop = [&](uint8_t state) {
    if (h != 0) pool_->release(h);
    h = 0;
    e.inspect = state;
    s.inspect_drop[i] = state == kQuicDropped;
  };
  uint32_t version = 0;
  // A client Initial in a datagram under 1200 bytes: clients pad every such
  // datagram to 1200 (RFC 9000 §14.1), and servers discard a short one that
  // would open a connection, but not all check those of one under way
  // (quic-go). Read, a short one naming a fine host was judged ahead of the
  // real one; passed unread, a short one could carry the rest of a
  // ClientHello. Dropped, every server sees what the gateway read.
  if (cfg_.quic == QuicMode::kInspect && m.payload_len < 1200) {
    if (quic::peek_initial(dgram, m.payload_len, &version) == quic::Status::kOk) {
      bump(st.reasm_not_taken);
      s.inspect_drop[i] = true;
    }
    return;
  }
  quic::Decoded d;
  bool decoded = false;  // d holds the datagram opened under its own DCID's keys
  if (e.inspect == kQuicDone) {
    // Servers tell QUIC connections apart by connection ID, not by the
    // ports: a client Initial that opens under its own DCID's keys, other
    // than the ones (and the version) the judged ClientHello came under,
    // starts another connection on the flow's ports (a new attempt, a
    // client after a Retry), and is inspected afresh; so is one that
    // carries a ClientHello's first bytes again (a DCID used anew, or a
    // retransmission: judged again). One of the judged connection after its
    // DCID switched does not open under its own DCID's keys.
    if (cfg_.quic != QuicMode::kInspect || quic::peek_initial(dgram, m.payload_len, &version) != quic::Status::kOk)
      return;
    quic_->decode(dgram, m.payload_len, s.quic, sizeof s.quic, d);
    if (d.status != quic::Status::kOk) return;
    bool restart = dcid_tag(dcid_seed_, d.version, d.dcid, d.dcid_len) != judged;
    for (unsigned c = 0; c < d.n_chunks; ++c) restart = restart || d.chunk[c].offset == 0;
    if (!restart) return;
    e.inspect = kQuicInspecting;  // (no slot: stop() gave it back)
    decoded = true;
  }
  if (cfg_.quic == QuicMode::kBlock) {
    if (quic::peek_initial(dgram, m.payload_len, &version) != quic::Status::kOk) return;
    bump(st.quic_blocked);
    stop(kQuicDropped);
    return;
  }
  // What the flow's slot keeps (QuicTag): the DCID whose keys its Initials
  // use and the largest packet number opened.
  QuicTag tag{};
  if (uint8_t* t = h != 0 ? pool_->tag(h) : nullptr) std::memcpy(&tag, t, sizeof tag);
  const int64_t largest = static_cast<int64_t>(tag.largest_pn_plus1) - 1;
  if (!decoded)
    quic_->decode(dgram, m.payload_len, s.quic, sizeof s.quic, d, tag.has_key ? tag.dcid : nullptr, tag.dcid_len,
                  largest);
  bool own_key = !tag.has_key;
  if (d.status == quic::Status::kOk && tag.has_key && d.undecryptable != 0) {
    // Coalesced Initials that do not all open under the flow's keys: a
    // client's share their keys, so one under other keys is another
    // connection's (its server takes it, and drops the rest) or a forgery.
    // Fail closed, as below.
    bump(st.quic_failed);
    bump(st.reasm_conflicts);
    stop(kQuicDropped);
    return;
  }
  if (d.status == quic::Status::kDecryptFailed && tag.has_key) {
    // Keys of its own DCID (numbered afresh): a new connection on the flow's
    // ports, a client after a Retry (RFC 9001 §5.2), or the Initial the
    // gateway saw first was one its server never took.
    quic_->decode(dgram, m.payload_len, s.quic, sizeof s.quic, d, nullptr, 0, -1);
    own_key = true;
    // Neither the flow's keys nor its own open it (a client's Initials all
    // do: they keep their first DCID's keys after switching DCID), or they do
    // while CRYPTO bytes opened under the flow's keys are held: two streams
    // under two keys, of which the server reads one, unknowable which (a
    // forged head under other keys would complete a real tail). Fail closed:
    // the flow's client datagrams are dropped.
    const bool held = pool_->data(h).size() != 0 || pool_->held_out_of_order(h) != 0;
    if (d.status == quic::Status::kDecryptFailed || (d.status == quic::Status::kOk && held)) {
      bump(st.quic_failed);
      bump(st.reasm_conflicts);
      stop(kQuicDropped);
      return;
    }
    if (d.status == quic::Status::kOk) {  // nothing held: these keys are the flow's now
      pool_->release(h);
      h = 0;
      tag = {};
    }
  }
  if (d.status != quic::Status::kOk) {
    // Not a client Initial: a 1-RTT packet of a connection already under
    // way, or another protocol. Before any Initial the flow is not QUIC the
    // gateway can read; after one, the handshake goes on in other packets.
    // Inspection goes on until a ClientHello is whole: a client may send
    // any number of other datagrams first (a version it then negotiates
    // away, an Initial the server discards, junk), and the server still
    // reads the Initial after them. Giving up after the first (or the
    // eighth) let such a prefix carry a blocked SNI past.
    if (h == 0 && d.status != quic::Status::kNotLongHeader && d.status != quic::Status::kNotInitial)
      bump(st.quic_failed);
    return;
  }
  bump(st.quic_initials);
  // The flow's slot from its first Initial on (one of only ACK, PING or
  // PADDING too): it keeps the keys' DCID and the packet numbers.
  if (h == 0 && pool_ != nullptr) h = pool_->begin(0, now);
  if (own_key) {  // the DCID these keys came from: the datagram's first packet's
    tag.has_key = 1;
    tag.dcid_len = d.dcid_len;
    std::memcpy(tag.dcid, d.dcid, d.dcid_len);
  }
  tag.largest_pn_plus1 = static_cast<uint64_t>(d.largest_pn + 1);
  if (uint8_t* t = h != 0 ? pool_->tag(h) : nullptr) std::memcpy(t, &tag, sizeof tag);
  if (d.n_chunks == 0) return;  // only ACK / PING / PADDING
  const reasm::Append a = h != 0 ? quic::feed_crypto(*pool_, h, d, now) : reasm::Append::kBadHandle;
  if (a == reasm::Append::kConflict) {  // two different copies of the ClientHello's bytes
    bump(st.reasm_conflicts);
    stop(kQuicDropped);
    return;
  }
  const std::span<const uint8_t> held = h != 0 ? pool_->data(h) : std::span<const uint8_t>{};
  const quic::ClientHello ch = quic::client_hello_complete(held.data(), held.size(), s.tls, sizeof s.tls);
  // Done: the keys (and version) this connection's ClientHello came under.
  judged = dcid_tag(dcid_seed_, d.version, tag.dcid, tag.dcid_len);
  if (ch.status == reasm::Frame::kComplete) {
    bump(st.quic_completed);
    classify_meta(frame, m, s.keys[i], ch.record, ch.record_len);
    stop(kQuicDone);
    return;
  }
  if (ch.status == reasm::Frame::kNeedMore && a != reasm::Append::kOverflow && a != reasm::Append::kBadHandle)
    return;  // the rest comes in the next Initial
  if (ch.status == reasm::Frame::kInvalid) {
    stop(kQuicDone);
    return;
  }
  bump(st.inspect_overflow);  // too large, the slot's budget or window, no slot
  stop(cfg_.inspect_overflow_drop ? kQuicDropped : kQuicDone);
}

// The names a connection carried (docs/dataplane.md, "Names a connection
// carried"). The names a TCP stream's or QUIC flow's inspection reads (an
// SNI, an HTTP Host or absolute-form target; of every message of a segment)
// are noted per packet (note_names) and, in step 3, once the packet is
// judged, kept in its flow's cold state (remember_name): the first name the
// flow carried, which no later one replaces, and the latest other one, 16
// bytes each (the exact set's Key128 of the name's own key; without verify,
// its filter hash). Every classified packet of a named flow — one judged
// again because a rule was added since its pass was cached, or because the
// rule that blocked it was deleted, and one that brings a name of its own —
// looks the kept names up here, so a host rule added at run time reaches
// connections already open (TLS keep-alive, a download under way) from the
// next burst on, in both directions, and a new name cannot stand in for
// the old ones. Names noted in this burst are not looked up by the burst's
// later packets: those follow the verdict of the packet that brought them
// (step 3). A DNS query over UDP notes none: it is a transaction of its own
// (dns_query_name_hit). Costs: one 128-bit hash per name read, and a
// cold-line load plus one or two exact-set probes per classified packet of
// a named flow while host rules exist.
void Worker::flow_name(uint16_t i, uint32_t kinds) {
  WorkerScratch& s = *s_;
  const flow::FlowEntry& e = *s.fr[s.flow[i]].entry;
  if ((e.flags & kNamed) == 0 || !has_rules(kinds, RuleKind::kHost)) return;
  const flow::FlowCold& c = flows_->cold(e);
  for (const uint64_t* n : {c.name[0], c.name[1]}) {
    if ((n[0] | n[1]) == 0) break;  // the second is empty: one name so far
    RuleKind kind = RuleKind::kHost;
    uint32_t rule = 0;
    if (cfg_.verify ? burst_.exact->contains(Key128{n[0], n[1]}, &kind, &rule) : burst_.filter->contains(n[0]))
      s.hit[i].keep(kind, rule);
  }
}

// The names among pk's keys (a host key that is not a parent domain of the
// one before it: those end where it ends, Emitter::host), as packet i's
// first and latest one.
void Worker::note_names(uint16_t i, const PacketKeys& pk) {
  WorkerScratch& s = *s_;
  const uint8_t* prev_end = nullptr;
  for (unsigned k = 0; k < pk.n; ++k) {
    if (pk.key[k].kind != RuleKind::kHost) continue;
    const uint8_t* end = pk.key_bytes(k) + pk.key[k].len;
    if (end == prev_end) continue;  // a parent domain of the name before
    prev_end = end;
    const Key128 h = cfg_.verify ? key_hash128(pk.key_bytes(k), pk.key[k].len) : Key128{pk.key[k].hash, 0};
    uint8_t& n = s.nnames[i];
    if (n == 0) {
      s.names[i][n++] = h;
    } else if (!(h == s.names[i][0]) && (n == 1 || !(h == s.names[i][1]))) {
      if (n == 2) bump(cfg_.stats->names_forgotten);  // the one it replaces is not kept
      s.names[i][1] = h;
      n = 2;
    }
  }
}

// A name packet i's inspection read, kept for its flow e (flow_name): as
// its first name, else as its latest other one.
void Worker::remember_name(flow::FlowEntry& e, const Key128& h) {
  flow::FlowCold& c = flows_->cold(e);
  // An all-zero slot is empty: XXH3-128 (or a 64-bit filter hash) of a name
  // is zero with probability 2^-128 (2^-64), and the entry's creation zeroed it.
  if ((e.flags & kNamed) == 0) {
    c.name[0][0] = h.lo;  // (over the server's start, if kept)
    c.name[0][1] = h.hi;
    e.flags |= kNamed;
  } else if ((c.name[0][0] != h.lo || c.name[0][1] != h.hi) && (c.name[1][0] != h.lo || c.name[1][1] != h.hi)) {
    if ((c.name[1][0] | c.name[1][1]) != 0) bump(cfg_.stats->names_forgotten);  // the latest slot's is replaced
    c.name[1][0] = h.lo;
    c.name[1][1] = h.hi;
  }
}

// Adds packet i's keys of the kinds that have rules to the burst's bulk
// lookup (s.hashes, from index nk); returns the new count. With verify, an
// ip key shares its filter hash with the src or dst key of its address
// (PacketKey::same): it is probed only if that key's kind has no rules, and
// confirm_hit() checks it on that key's hit. Without, each address kind has
// its own filter entry (kind_keyed_hash).
[[gnu::always_inline]] inline std::size_t Worker::gather_keys(uint16_t i, uint32_t kinds, std::size_t nk) {
  WorkerScratch& s = *s_;
  const PacketKeys& pk = s.keys[i];
  for (unsigned k = 0; k < pk.n; ++k) {
    const PacketKey& key = pk.key[k];
    if (!has_rules(kinds, key.kind)) continue;
    uint64_t h = key.hash;
    if (!cfg_.verify) {
      h = kind_keyed_hash(h, key.kind);
    } else if (key.same != 0 && has_rules(kinds, pk.key[key.same - 1].kind)) {
      continue;  // probed with the src or dst key of its address
    }
    s.hashes[nk] = h;
    s.owner[nk] = i;
    s.slot[nk] = static_cast<uint16_t>(k);
    ++nk;
  }
  return nk;
}

// A filter hit for key k of packet i: confirmed against the exact set (with
// verify), together with the ip key the probe stood for (PacketKey::same);
// the smallest confirmed kind joins s.hit[i]. Returns 1 if the hit was
// confirmed (0: a filter false positive, or another kind's rule of this
// address), so filter_hits - confirmed_hits stays the false positives avoided.
unsigned Worker::confirm_hit(uint16_t i, unsigned k, uint32_t kinds) {
  WorkerScratch& s = *s_;
  const PacketKeys& pk = s.keys[i];
  RuleHit& h = s.hit[i];
  if (!cfg_.verify) {
    h.keep(pk.key[k].kind, 0);
    return 1;
  }
  unsigned found = 0;
  auto confirm = [&](unsigned q) {
    const PacketKey& key = pk.key[q];
    RuleKind kind = key.kind;
    uint32_t rule = 0;
    if (!burst_.exact->contains(key_hash128(pk.key_bytes(q), key.len), &kind, &rule)) return;
    found = 1;
    h.keep(kind, rule);
  };
  confirm(k);
  if (is_address_kind(pk.key[k].kind)) {  // the ip keys come after src and dst
    for (unsigned q = k + 1; q < pk.n && is_address_kind(pk.key[q].kind); ++q)
      if (pk.key[q].same == k + 1 && has_rules(kinds, pk.key[q].kind)) confirm(q);
  }
  return found;
}

// Decides a burst: packets of flows with a current verdict take it; the rest
// are classified, looked up in one bulk filter lookup and confirmed against
// the exact set, and their flows remember the verdict. Fills pass[]
// (returned count) and drop[] (*ndrop); every packet ends up in exactly one.
// *nbad and *nbig count the malformed and oversized frames of the burst.
// IP fragments are taken out of the burst by `frags` (see parse_burst) and
// are in neither list.
uint16_t Worker::process(rte_mbuf** pkts, uint16_t n, FragStage* frags, uint32_t max_frame, rte_mbuf** pass,
                         rte_mbuf** drop, uint16_t* ndrop, uint16_t* nbad, uint16_t* nbig, uint64_t now) {
  WorkerScratch& s = *s_;
  WorkerStats& st = *cfg_.stats;
  if (!cfg_.filtering) {  // the same pipeline without classification or lookup
    for (uint16_t i = 0; i < n; ++i) pass[i] = pkts[i];
    *ndrop = *nbad = *nbig = 0;
    return n;
  }
  // acquire: pairs with the control lcore's release of the generations after
  // each change, and of the kind mask when a kind gains its first rule. The
  // generations are read FIRST: every mask store a change made precedes its
  // generation bumps, so a burst that sees pass generation P also sees the
  // mask as of P. (Read the other way round, a burst could see P+1 with the
  // mask before P+1 — skip the new rule's kind — and cache "pass" as current.)
  // Passes are cached at the pass generation (moved by additions only),
  // blocks at the full one (every change; see from_cache).
  const uint64_t pass_gen = cfg_.pass_generation->load(std::memory_order_acquire);
  const uint64_t gen = cfg_.generation->load(std::memory_order_acquire);
  const uint32_t kinds = cfg_.kind_mask->load(std::memory_order_acquire);
  // acquire, after the generations: a burst that sees a change's generation
  // sees the tables the change was made in (docs/concurrency.md, "Growth").
  burst_ = cfg_.tables != nullptr ? *cfg_.tables->load(std::memory_order_acquire)
                                  : LookupTables{cfg_.filter, cfg_.exact};
  uint16_t nf = 0;
  n = parse_burst(pkts, n, frags, now, &nf);
  // 0. The fast lane (passing flows in their steady state), then the rest.
  const uint16_t first = flows_ != nullptr ? pass_cached(pkts, n, max_frame, pass_gen, now, pass) : 0;
  // The whole burst took the lane (a passing flow's steady state): the
  // general way below would walk empty loops and add zeros to every
  // counter but this one. Measured on the Intel guest: steady/io +1.7 %
  // (docs/PERFORMANCE.md, "Session 28").
  if (first == n && n != 0) {
    bump(st.cache_hits, n);
    *ndrop = *nbad = *nbig = 0;
    return n;
  }
  const bool check_controls = checksums_trusted_ && cfg_.checksums != ChecksumMode::kOff;
  for (uint16_t i = first; i < n; ++i) {  // the general way reads every packet's meta and full flow key
    if (!s.parsed[i]) {
      parse_packet(rte_pktmbuf_mtod(pkts[i], const uint8_t*), rte_pktmbuf_data_len(pkts[i]), s.meta[i]);
      const int16_t j = s.flow[i];  // a plain frame is always tracked
      flow::expand(s.k4[j], s.fp[j].key);
      s.fp[j].side = s.lane[j].side;
      s.fp[j].tcp_flags = s.lane[j].tcp_flags;
      s.fp[j].no_state = false;
    }
    s.control_bad[i] = false;
    s.fast_open_cut[i] = false;
    if (check_controls && s.flow[i] >= 0) ignore_bad_control(i, pkts[i]);
  }
  if (flows_ != nullptr) track_flows(pkts, first, n, nf, now);

  // 1. Packets their flow decides; the others are classified.
  std::size_t nk = 0;
  uint16_t hits_cached = first, untracked = 0;
  for (uint16_t i = 0; i < first; ++i) s.classify[i] = false;
  for (uint16_t i = first; i < n; ++i) {
    s.hit[i] = {};
    s.nnames[i] = 0;
    const bool tracked = s.flow[i] >= 0 && s.fr[s.flow[i]].entry != nullptr;
    const bool spoofed = tracked && wrong_side(*s.fr[s.flow[i]].entry, s.fr[s.flow[i]].dir);
    s.classify[i] = !from_cache(i, pkts[i], gen, pass_gen, spoofed);
    // Untracked: no flow could be kept (not a bare SYN, which waits for its answer).
    untracked += s.flow[i] < 0 || (s.fr[s.flow[i]].entry == nullptr && !s.fr[s.flow[i]].deferred);
    if (!s.classify[i]) {
      ++hits_cached;
      continue;
    }
    const uint8_t* frame = rte_pktmbuf_mtod(pkts[i], const uint8_t*);
    s.inspect_drop[i] = false;
    const PacketMeta& m = s.meta[i];
    const bool verify = cfg_.checksums != ChecksumMode::kOff;
    const bool inspected = tracked && inspects(*s.fr[s.flow[i]].entry, s.lane[s.flow[i]], s.fr[s.flow[i]].dir, cfg_.quic,
                                               [&] { return first_payload_byte(i, pkts[i], false); });
    if (spoofed) {
      from_wrong_side(i, frame);
    } else if (fast_open_syn(m)) {
      // Its data judged, entry or not: a SYN on a live entry (one a forged
      // segment made) opens a connection for a server that never saw that
      // entry's packets, and a Fast Open server takes the data.
      classify_meta(frame, m, s.keys[i]);
    } else if (inspected && m.proto == kProtoTcp && !payload_taken(m.tcp_flags)) {
      bump(st.reasm_not_taken);
      classify_meta(frame, m, s.keys[i], frame, 0);  // headers only: no receiver reads its bytes
    } else if (s.control_bad[i]) {
      classify_meta(frame, m, s.keys[i], frame, 0);  // headers only: checked and counted already
    } else if (verify && (inspected || !checksums_trusted_) && unreadable(pkts[i], frame, m, inspected)) {
      classify_meta(frame, m, s.keys[i], frame, 0);  // headers only: the receiver drops it
    } else if (tracked && m.proto == kProtoTcp &&
               (m.payload_len != 0 || (m.tcp_flags & flow::kTcpUrg) != 0 || inspected ||
                fin_while_read(*s.fr[s.flow[i]].entry, s.lane[s.flow[i]], s.fr[s.flow[i]].dir))) {
      inspect_stream(i, frame, now, kinds);  // notes the names it reads (inspected pure ACK: a settling flow's)
    } else if (tracked && m.proto == kProtoUdp && m.dport == 443 && m.payload_len != 0 &&
               cfg_.quic != QuicMode::kPass) {
      inspect_quic(i, frame, now);
      note_names(i, s.keys[i]);
    } else {
      classify_meta(frame, m, s.keys[i]);
    }
    if (!spoofed && s.fast_open_cut[i]) {
      s.inspect_drop[i] = true;
      bump(st.reasm_fast_open_cut);
    }
    if (tracked) flow_name(i, kinds);
    nk = gather_keys(i, kinds, nk);
  }
  // 2. One bulk filter lookup; hits confirmed against the exact set.
  LookupStats ls;
  if (nk != 0) burst_.filter->contains_bulk(s.hashes, nk, s.hit_mask, &ls);
  uint64_t hits = 0, confirmed = 0;
  for (std::size_t w = 0; w < (nk + 63) / 64; ++w) {
    uint64_t bits = s.hit_mask[w];
    while (bits != 0) {
      const std::size_t j = w * 64 + static_cast<std::size_t>(__builtin_ctzll(bits));
      bits &= bits - 1;
      ++hits;
      confirmed += confirm_hit(s.owner[j], s.slot[j], kinds);
    }
  }
  // 2b. CIDR prefix rules (dataplane/prefix.cpp): one bulk probe of the
  // burst's addresses; an exact hit of the same or a smaller kind stays.
  // Nothing to probe when every packet was decided by its flow.
  if (cfg_.prefixes != nullptr && hits_cached != n) {
    PrefixHit ph[kBurst];
    cfg_.prefixes->lookup(s.keys, s.classify, n, cfg_.verify, ph, &burst_);
    for (uint16_t i = 0; i < n; ++i) s.hit[i].keep(ph[i].kind, ph[i].slot);
  }

  // 3. In packet order: a flow blocked by an earlier packet of this burst
  // blocks this one too; classified packets teach their flow the verdict.
  uint16_t np = first, nd = 0;
  uint16_t malformed = 0, malformed_dropped = 0, oversized = 0, flow_drops = 0, inspect_dropped = 0;
  for (uint16_t i = first; i < n; ++i) {
    flow::FlowEntry* e = s.flow[i] >= 0 ? s.fr[s.flow[i]].entry : nullptr;
    RuleHit h = s.hit[i];
    // (Only when set: a store would dirty every cached flow's entry line.)
    if (e != nullptr && (e->flags & (kJudgingFwd | kJudgingRev)) != 0)
      e->flags &= static_cast<uint8_t>(~(kJudgingFwd | kJudgingRev));
    if (e != nullptr && s.classify[i])  // the names it brought, once it is judged (flow_name)
      for (uint8_t k = 0; k < s.nnames[i]; ++k) remember_name(*e, s.names[i][k]);
    if (e != nullptr && s.classify[i]) {
      if (e->blocked() && h.kind == 0) {         // blocked by an earlier packet of this burst
        h = {e->rule_kind, e->rule_slot};
      } else if (h.kind != 0 && dns_query_name_hit(s.meta[i], h)) {
        // A DNS query over UDP is a transaction of its own: a blocked name
        // drops (or refuses) that query only. Blocking the flow took every
        // later query of a resolver that reuses its source port with it
        // (an outside check: one blocked name blackholed all its DNS). The
        // flow's verdict is left as it was; its next query is judged anew.
      } else if (h.kind != 0) {
        e->set_verdict(rejects(h.slot) ? flow::Verdict::kReject : flow::Verdict::kDrop, gen, h.kind, h.slot,
                       /*block=*/true);
      } else {
        // "Pass" holds for the direction it was judged in, at this
        // generation: an answer that matches no rule says nothing about the
        // initiator's packets, nor the other way round.
        const flow::Dir d = s.fr[s.flow[i]].dir;
        if (!e->verdict_current(pass_gen)) e->flags &= static_cast<uint8_t>(~(kPassFwd | kPassRev));
        e->set_verdict(flow::Verdict::kPass, pass_gen);
        e->flags |= pass_bit(d);
      }
    } else if (e != nullptr && e->blocked() && h.kind == 0) {
      h = {e->rule_kind, e->rule_slot};  // cached as passing, but blocked earlier in this burst
    }
    const bool bad = s.classify[i] ? s.keys[i].malformed : s.meta[i].malformed;
    malformed += bad;
    // Longer than the MTU allows: GRO/LRO merged segments (on af_packet
    // ports also cut to the ring's frame size, hence malformed too).
    oversized += rte_pktmbuf_pkt_len(pkts[i]) > max_frame;
    if (h.kind != 0) {                           // matched a rule, now or earlier in its flow: drop
      bump(st.dropped_by_kind[h.kind]);
      if (cfg_.verify) bump(cfg_.rule_hits[h.slot]);  // single writer: this worker's own array
      flow_drops += !s.classify[i] || (e != nullptr && e->blocked() && s.hit[i].kind == 0);
      // A reject answers these, not malformed drops; nor tunneled packets,
      // whose reply the builder would address to the tunnel's endpoints.
      s.by_rule[nd] = !s.meta[i].tunneled && rejects(h.slot);
      drop[nd++] = pkts[i];
    } else if (s.classify[i] && s.inspect_drop[i]) {  // a conflicting copy, or inspect_overflow = "drop"
      ++inspect_dropped;
      s.by_rule[nd] = false;
      drop[nd++] = pkts[i];
    } else if (bad && cfg_.drop_malformed) {     // malformed, policy drop
      ++malformed_dropped;
      s.by_rule[nd] = false;
      drop[nd++] = pkts[i];
    } else {                                     // pass by default
      pass[np++] = pkts[i];
    }
  }
  bump(st.keys, nk);
  bump(st.filter_hits, hits);
  bump(st.confirmed_hits, confirmed);
  bump(st.fp_avoided, hits - confirmed);
  if (ls.retries) bump(st.lookup_retries, ls.retries);
  if (flows_ != nullptr) {
    bump(st.cache_hits, hits_cached);
    bump(st.cache_misses, n - hits_cached - untracked);
    if (untracked) bump(st.untracked, untracked);
  }
  if (flow_drops) bump(st.flow_drops, flow_drops);
  if (malformed) bump(st.malformed, malformed);
  if (malformed_dropped) bump(st.malformed_dropped, malformed_dropped);
  if (inspect_dropped) bump(st.inspect_dropped, inspect_dropped);
  if (oversized) bump(st.oversized, oversized);
  *ndrop = nd;
  *nbad = malformed;
  *nbig = oversized;
  return np;
}

bool Worker::rejects(uint32_t slot) const noexcept {
  // relaxed: the slot came from the exact set (acquire) or the prefix
  // tables (published before the generation this burst acquired), after
  // the blocklist stored the rule's action (release; slot_actions()).
  const auto a = cfg_.rule_actions != nullptr ? static_cast<RuleAction>(cfg_.rule_actions[slot].load(std::memory_order_relaxed))
                                              : RuleAction::kDefault;
  return a == RuleAction::kReject || (a == RuleAction::kDefault && cfg_.reject);
}

// Reject: the replies to the blocked packets of a burst (drop[] before they
// are freed or written to the drop port), rate-limited per worker, built in
// mbufs of this worker's own pool. To the sender: out of the port the packet
// came in on; to the destination (the RST that lets a server go): out of the
// port passed packets take. replay --reply sends every reply to reply_port.
void Worker::send_rejects(const QueueLink& q, rte_mbuf** drop, uint16_t nd, uint64_t now) {
  WorkerStats& st = *cfg_.stats;
  rte_mbuf* back[kBurst * reject::kMaxReplies];
  rte_mbuf* on[kBurst * reject::kMaxReplies];
  const bool one_port = cfg_.reply_port >= 0;  // replay --reply: every reply, in packet order
  uint16_t nback = 0, non = 0, limited = 0, failed = 0;
  const reject::Options& opts = cfg_.reject_opts;
  for (uint16_t i = 0; i < nd; ++i) {
    if (!s_->by_rule[i]) continue;
    const rte_mbuf* m = drop[i];
    const uint8_t* frame = rte_pktmbuf_mtod(m, const uint8_t*);
    // A dry run first: frames that get no reply (ICMP errors, broadcasts, ...)
    // must not use up tokens.
    const reject::Result dry = reject::build(frame, rte_pktmbuf_data_len(m), {}, opts);
    if (dry.status == reject::Status::kNotApplicable) continue;
    if (!bucket_->allow(now, dry.count)) {  // a TCP reset pair costs two
      ++limited;
      continue;
    }
    rte_mbuf* out[reject::kMaxReplies] = {};
    reject::Buffer buf[reject::kMaxReplies];
    bool ok = rte_pktmbuf_alloc_bulk(reply_pool_, out, dry.count) == 0;
    for (unsigned k = 0; ok && k < dry.count; ++k)
      buf[k] = {rte_pktmbuf_mtod(out[k], uint8_t*), rte_pktmbuf_tailroom(out[k])};
    const reject::Result r =
        ok ? reject::build(frame, rte_pktmbuf_data_len(m), {buf, dry.count}, opts) : reject::Result{};
    if (!ok || r.status != reject::Status::kBuilt || r.count != dry.count) {
      if (ok) rte_pktmbuf_free_bulk(out, dry.count);
      failed += dry.count;
      continue;
    }
    if (cfg_.reply_port == kDiscardReplies) {  // replay without --reply: built, counted, not sent
      rte_pktmbuf_free_bulk(out, dry.count);
      bump(st.rejects_sent, dry.count);
      continue;
    }
    for (unsigned k = 0; k < r.count; ++k) {
      out[k]->data_len = r.reply[k].len;
      out[k]->pkt_len = r.reply[k].len;
      (one_port || r.reply[k].dir == reject::Direction::kToSender ? back[nback++] : on[non++]) = out[k];
    }
  }
  auto send = [&](uint16_t port, uint16_t queue, rte_mbuf** v, uint16_t cnt) {
    uint16_t sent = cnt ? rte_eth_tx_burst(port, queue, v, cnt) : 0;
    if (sent < cnt) {
      failed += cnt - sent;
      rte_pktmbuf_free_bulk(v + sent, cnt - sent);
    }
    bump(st.rejects_sent, sent);
  };
  if (one_port) {
    send(static_cast<uint16_t>(cfg_.reply_port), static_cast<uint16_t>(cfg_.id), back, nback);
  } else {
    send(q.rx_port, q.tx_queue, back, nback);  // run pairs ports both ways: this worker owns that queue
    send(q.tx_port, q.tx_queue, on, non);
  }
  if (limited) bump(st.rejects_limited, limited);
  if (failed) bump(st.rejects_failed, failed);
}

// IP fragments (FragStage, docs/dataplane.md): judges each datagram this
// burst completed as one frame, then sends the held originals after the
// verdict: passed ones out of q's tx port in arrival order, dropped ones
// (by a rule, or by the stage: overlap, timeout, no room, unsupported) to
// the drop port or freed. q is nullptr when idle (only timeouts then).
// Returns the originals released: they count in rx now.
uint16_t Worker::release_fragments(const QueueLink* q, uint64_t now) {
  FragStage& f = *frag_;
  WorkerStats& st = *cfg_.stats;
  if (q == nullptr) f.expire(now);
  side_ = q != nullptr ? q->side : reasm::kSideUnknown;  // (the completing fragment's side)
  for (uint16_t j = 0; j < f.frames(); ++j) {
    rte_mbuf* fm = f.frame(j);
    rte_mbuf* pass[1];
    rte_mbuf* drop[1];
    uint16_t nd = 0, nbad = 0, nbig = 0;
    // Own counters, single writer: relaxed reads. A drop counts every
    // original under the rule's kind, as if each had matched.
    std::array<uint64_t, kRuleKindCount + 1> by_kind;
    for (std::size_t k = 0; k < by_kind.size(); ++k) by_kind[k] = st.dropped_by_kind[k].load(std::memory_order_relaxed);
    const uint16_t np = process(&fm, 1, nullptr, UINT32_MAX, pass, drop, &nd, &nbad, &nbig, now);
    if (np == 0) {
      for (std::size_t k = 0; k < by_kind.size(); ++k)
        if (st.dropped_by_kind[k].load(std::memory_order_relaxed) != by_kind[k])
          bump(st.dropped_by_kind[k], f.originals(j) - 1u);
      // A reply is built from the reassembled datagram (one per datagram).
      if (bucket_ != nullptr && q != nullptr) send_rejects(*q, drop, nd, now);
    }
    f.settle(j, np != 0);
  }
  auto send = [](uint16_t port, uint16_t queue, rte_mbuf** v, uint16_t cnt) {
    uint16_t sent = 0;
    for (int tries = 0; sent < cnt && tries < 4; ++tries) sent += rte_eth_tx_burst(port, queue, v + sent, cnt - sent);
    return sent;
  };
  const uint16_t np = f.pass_count(), nd = f.drop_count();
  if (np != 0) {  // frames (and so passes) only come from a burst: q is set
    const uint16_t sent = send(q->tx_port, q->tx_queue, f.pass_list(), np);
    if (sent < np) {
      bump(st.tx_failed, np - sent);
      rte_pktmbuf_free_bulk(f.pass_list() + sent, np - sent);
    }
    bump(st.passed, sent);
  }
  if (nd != 0) {
    const uint16_t dsent =
        cfg_.drop_port >= 0 ? send(static_cast<uint16_t>(cfg_.drop_port), cfg_.drop_queue, f.drop_list(), nd) : 0;
    if (dsent < nd) rte_pktmbuf_free_bulk(f.drop_list() + dsent, nd - dsent);
    bump(st.dropped, nd);
  }
  f.clear();
  return static_cast<uint16_t>(np + nd);
}

void Worker::loop() {
  rte_mbuf* pkts[kBurst];
  rte_mbuf* pass[kBurst];
  rte_mbuf* drop[kBurst];
  WorkerStats& st = *cfg_.stats;
  const uint64_t hz = rte_get_tsc_hz();
  const uint64_t start = rte_rdtsc();
  uint64_t received = 0;

  rte_rcu_qsbr_thread_register(cfg_.qsv, cfg_.id);
  rte_rcu_qsbr_thread_online(cfg_.qsv, cfg_.id);
  // acquire: pairs with the control lcore's release store of `stop`.
  while (!cfg_.stop->load(std::memory_order_acquire)) {
    bool busy = false;
    for (std::size_t li = 0; li < cfg_.links.size(); ++li) {
      const QueueLink& q = cfg_.links[li];
      uint16_t want = kBurst;
      if (cfg_.pps != 0) {  // replay pacing: stay at or below pps on average
        // 128-bit product: cycles * pps overflows 64 bits after minutes.
        const auto allowed = static_cast<uint64_t>(
            static_cast<unsigned __int128>(rte_rdtsc() - start) * cfg_.pps / hz);
        const uint64_t budget = allowed > received ? allowed - received : 0;
        if (budget == 0) {
          rte_pause();
          continue;
        }
        want = budget < kBurst ? static_cast<uint16_t>(budget) : kBurst;
      }
      const uint16_t n = rte_eth_rx_burst(q.rx_port, q.rx_queue, pkts, want);
      if (n == 0) continue;
      busy = true;
      received += n;
      uint16_t nd = 0, nbad = 0, nbig = 0;
      // One clock read per burst (a TSC read is not free in a VM).
      const uint64_t now = rte_rdtsc();
      if (frag_ != nullptr) frag_->expire(now);  // incomplete datagrams past their timeout
      // IP fragments wait in the stage for the rest of their datagram: the
      // burst keeps the other packets (nw), each passed or dropped.
      side_ = q.side;
      const uint16_t np = process(pkts, n, frag_, max_frame_[li], pass, drop, &nd, &nbad, &nbig, now);
      const uint16_t nw = np + nd;
      if ((nbad | nbig) != 0 && cfg_.link_stats != nullptr) {  // rare: warned about per port
        LinkStats& lk = cfg_.link_stats[li];
        if (nbad) bump(lk.malformed, nbad);
        if (nbig) bump(lk.oversized, nbig);
      }

      uint16_t sent = np ? rte_eth_tx_burst(q.tx_port, q.tx_queue, pass, np) : 0;
      for (int retry = 0; sent < np && retry < 3; ++retry)
        sent += rte_eth_tx_burst(q.tx_port, q.tx_queue, pass + sent, np - sent);
      if (sent < np) {  // the device is full: free and count, never silently
        bump(st.tx_failed, np - sent);
        rte_pktmbuf_free_bulk(pass + sent, np - sent);
      }
      if (nd != 0 && bucket_ != nullptr) send_rejects(q, drop, nd, now);
      if (nd != 0) {
        uint16_t dsent = 0;
        if (cfg_.drop_port >= 0) {
          const auto dp = static_cast<uint16_t>(cfg_.drop_port);
          dsent = rte_eth_tx_burst(dp, cfg_.drop_queue, drop, nd);
          for (int retry = 0; dsent < nd && retry < 3; ++retry)
            dsent += rte_eth_tx_burst(dp, cfg_.drop_queue, drop + dsent, nd - dsent);
        }
        if (dsent < nd) rte_pktmbuf_free_bulk(drop + dsent, nd - dsent);
      }
      // Datagrams this burst completed, fragments the stage dropped.
      const uint16_t released = frag_ != nullptr ? release_fragments(&q, now) : 0;
      bump(st.passed, sent);
      bump(st.dropped, nd);
      bump(st.bursts);
      // rx last: "rx == packets in" means every packet has been handed to
      // tx (replay uses it to know when the input is fully processed); a
      // held fragment counts when it is released.
      // release: orders the tx calls and counters above before it.
      st.rx.store(st.rx.load(std::memory_order_relaxed) + nw + released, std::memory_order_release);
    }
    // Idle (a whole pass over the links found nothing): reclaim some expired
    // flows so flows.active tracks the live ones. Not on every empty queue:
    // with one-way traffic that is every pass, and cost 9 % of forwarding.
    if (!busy && flows_ != nullptr) {
      const uint64_t now = rte_rdtsc();
      flows_->expire(now, 16);
      if (pool_ != nullptr) pool_->reclaim(now, 16);
    }
    if (!busy && frag_ != nullptr) {  // incomplete datagrams past their timeout
      if (const uint16_t r = release_fragments(nullptr, rte_rdtsc()))
        st.rx.store(st.rx.load(std::memory_order_relaxed) + r, std::memory_order_release);  // as above
    }
    // Nothing this worker read from the blocklist is held past this point.
    rte_rcu_qsbr_quiescent(cfg_.qsv, cfg_.id);
  }
  rte_rcu_qsbr_thread_offline(cfg_.qsv, cfg_.id);
  rte_rcu_qsbr_thread_unregister(cfg_.qsv, cfg_.id);
}

}  // namespace cg
