// The data plane: one worker lcore's burst loop.
//
//   rx_burst -> classify the burst -> one bulk filter lookup over every key
//   -> confirm hits against the exact set -> tx_burst passed packets to the
//   paired port, dropped ones to the drop port (replay) or free them
//   -> report a quiescent state.
//
// Nothing in the loop locks, allocates, makes a syscall or throws; all
// scratch is allocated once by worker_prepare(). This file has no socket code.
#pragma once

#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "cuckoogate/flow/flow_table.hpp"
#include "cuckoogate/reject/reject.hpp"
#include "dataplane/frag.hpp"
#include "dataplane/lookup.hpp"
#include "dataplane/prefix.hpp"
#include "dataplane/stats.hpp"

namespace cg {

inline constexpr uint16_t kBurst = 32;  // packets per rx burst
inline constexpr int kDiscardReplies = -2;  // WorkerConfig::reply_port

// One rx queue a worker polls and the tx queue its passed packets go to.
struct QueueLink {
  uint16_t rx_port, rx_queue;
  uint16_t tx_port, tx_queue;
  // Which side of the gateway rx_port faces, for the stream inspector's
  // settling (reasm::Segment::side): reasm::kSideA for a pair's first port,
  // kSideB for its second (run); 0 when a port sees both sides (replay).
  uint8_t side = 0;
};

// A mode from its word (the config's and the command line's): the one of
// `all` whose name(mode) is `s`.
template <class Mode, std::size_t N>
bool parse_mode(const std::string& s, const Mode (&all)[N], const char* (*name)(Mode), Mode* out) {
  for (Mode c : all)
    if (s == name(c)) {
      *out = c;
      return true;
    }
  return false;
}

enum class QuicMode : uint8_t { kInspect, kBlock, kPass };
inline const char* quic_mode_name(QuicMode m) {
  return m == QuicMode::kInspect ? "inspect" : m == QuicMode::kBlock ? "block" : "pass";
}
// "inspect" | "block" | "pass".
inline bool parse_quic_mode(const std::string& s, QuicMode* m) {
  static constexpr QuicMode kAll[] = {QuicMode::kInspect, QuicMode::kBlock, QuicMode::kPass};
  return parse_mode(s, kAll, quic_mode_name, m);
}

// Checksums of the segments the inspectors read (docs/reassembly.md,
// "Checksums"): a segment the receiver drops for its checksum must not be
// read as the client's bytes (the insertion attack). kAuto verifies once the
// worker has seen one valid checksum on a client's packet (so captures and
// hosts whose checksums are left to a NIC, wrong on the wire, are read as
// before); kVerify always; kOff never.
enum class ChecksumMode : uint8_t { kAuto, kVerify, kOff };
inline const char* checksum_mode_name(ChecksumMode m) {
  return m == ChecksumMode::kAuto ? "auto" : m == ChecksumMode::kVerify ? "verify" : "off";
}
// "auto" | "verify" | "off".
inline bool parse_checksum_mode(const std::string& s, ChecksumMode* m) {
  static constexpr ChecksumMode kAll[] = {ChecksumMode::kAuto, ChecksumMode::kVerify, ChecksumMode::kOff};
  return parse_mode(s, kAll, checksum_mode_name, m);
}

struct WorkerConfig {
  unsigned id = 0;                     // worker index, also its QSBR thread id
  std::vector<QueueLink> links;        // queues this worker owns
  int drop_port = -1;                  // >= 0: dropped packets are sent here (replay)
  uint16_t drop_queue = 0;
  bool filtering = true;               // false: forward everything, fragments as they are (benchmark baseline)
  bool verify = true;                  // confirm filter hits against the exact set
  bool drop_malformed = false;         // verdict for malformed packets that match nothing
  uint64_t pps = 0;                    // > 0: pace rx to this many packets/s (replay)
  const GatewayFilter* filter = nullptr;
  const ExactSet* exact = nullptr;
  // Blocklist::tables(): when set, the filter and exact set are loaded from
  // it once per burst instead (they are replaced when the blocklist grows).
  const std::atomic<const LookupTables*>* tables = nullptr;
  const std::atomic<uint32_t>* kind_mask = nullptr;  // kinds with rules (bit = RuleKind)
  const PrefixTables* prefixes = nullptr;  // CIDR prefix rules (Blocklist::prefixes()); null: none
  rte_rcu_qsbr* qsv = nullptr;
  const std::atomic<bool>* stop = nullptr;
  WorkerStats* stats = nullptr;
  LinkStats* link_stats = nullptr;     // one per link, in `links` order
  std::atomic<uint64_t>* rule_hits = nullptr;  // this worker's per-rule counters, by slot
  // Flows (docs/dataplane.md): entries in this worker's flow table; 0 = judge
  // every packet alone.
  uint64_t flows = 0;
  // TCP first-flight reassembly slots (docs/reassembly.md): flows that can
  // be reassembling a ClientHello at once; 0 = no reassembly.
  uint32_t reasm_slots = 1024;
  // When a flow's inspection runs out of budget (slot, pool, out-of-order
  // window) or sees held bytes rewritten: false = stop inspecting and pass,
  // true = drop the flow's client data from then on (inspect_overflow).
  bool inspect_overflow_drop = false;
  // QUIC (UDP to port 443): decrypt client Initials and judge their SNI,
  // drop them (browsers fall back to TCP), or leave them alone (docs/quic.md).
  QuicMode quic = QuicMode::kInspect;
  ChecksumMode checksums = ChecksumMode::kAuto;
  const std::atomic<uint64_t>* generation = nullptr;       // Blocklist::generation()
  const std::atomic<uint64_t>* pass_generation = nullptr;  // Blocklist::pass_generation()
  const std::atomic<uint64_t>* slot_removed_at = nullptr;  // Blocklist::slot_removed_at()
  // Action for a packet a rule blocks: drop silently, or reject (TCP RSTs,
  // DNS REFUSED, ICMP administratively prohibited; docs/reject.md).
  bool reject = false;
  // Blocklist::slot_actions(): per hit-counter slot, the rule's own action
  // (RuleAction, `action=`), which overrides `reject`. With verify only (a
  // hit has a slot then); nullptr: every rule has the gateway's action.
  const std::atomic<uint8_t>* rule_actions = nullptr;
  uint32_t reject_rate = 1000;   // replies per second per worker (token bucket)
  uint32_t reject_burst = 100;
  reject::Options reject_opts;  // what the replies say (the DNS answer's RCODE)
  // IP fragments (docs/dataplane.md, "IP fragments"): held until their
  // datagram is complete, judged reassembled, the verdict applied to each.
  FragConfig frags;
  int reply_port = -1;           // >= 0: every reply goes here, tx queue = id (replay --reply);
                                 // kDiscardReplies: built and counted, then freed (replay)
};

struct WorkerScratch;  // per-worker preallocated buffers (worker.cpp)

namespace quic { class Decoder; }

namespace reasm {
class Pool;
struct StreamRef;
class StreamInspector;
enum class App : uint8_t;
}  // namespace reasm

namespace reject { class TokenBucket; }

class Worker {
 public:
  // Allocates the scratch on the worker's NUMA socket and reads each rx
  // port's MTU (the ports must be configured); false on failure.
  bool prepare(const WorkerConfig& cfg, int socket);
  ~Worker();
  // lcore entry point: runs until *cfg.stop. arg is a Worker*.
  static int main(void* arg);
  // This worker's flow-table counters (any thread; zero without a table).
  flow::FlowStats flow_stats() const;

 private:
  void loop();
  uint16_t process(rte_mbuf** pkts, uint16_t n, FragStage* frags, uint32_t max_frame, rte_mbuf** pass,
                   rte_mbuf** drop, uint16_t* ndrop, uint16_t* nbad, uint16_t* nbig, uint64_t now);
  uint16_t parse_burst(rte_mbuf** pkts, uint16_t n, FragStage* frags, uint64_t now, uint16_t* tracked);
  uint16_t pass_cached(rte_mbuf** pkts, uint16_t n, uint32_t max_frame, uint64_t pass_gen, uint64_t now,
                       rte_mbuf** pass);
  void track_flows(rte_mbuf* const* pkts, uint16_t first, uint16_t n, uint16_t nf, uint64_t now);
  void timestamp_floor(const uint8_t* frame, const PacketMeta& m, flow::FlowEntry& e);
  bool from_cache(uint16_t i, const rte_mbuf* pkt, uint64_t gen, uint64_t pass_gen, bool spoofed);
  uint8_t first_payload_byte(uint16_t i, const rte_mbuf* mb, bool plain) const;
  void fast_open(uint16_t i, const rte_mbuf* mb, const PacketMeta& m);
  std::size_t gather_keys(uint16_t i, uint32_t kinds, std::size_t nk);
  unsigned confirm_hit(uint16_t i, unsigned k, uint32_t kinds);
  struct MessageSink;
  static void on_message(void* ctx, const uint8_t* p, std::size_t n, reasm::App app, bool first);
  void inspect_stream(uint16_t i, const uint8_t* frame, uint64_t now, uint32_t kinds);
  bool fin_cuts_message(const reasm::StreamRef& ref, const PacketMeta& m, bool forward) const;
  void server_start(flow::FlowEntry& e, uint32_t syn_ack_seq);
  uint8_t side_bit(flow::Dir dir) const;
  bool wrong_side(const flow::FlowEntry& e, flow::Dir dir) const;
  void from_wrong_side(uint16_t i, const uint8_t* frame);
  void judge_extra(uint16_t i, const uint8_t* frame, const uint8_t* p, std::size_t n, uint32_t kinds);
  void inspect_quic(uint16_t i, const uint8_t* frame, uint64_t now);
  void flow_name(uint16_t i, uint32_t kinds);
  void note_names(uint16_t i, const PacketKeys& pk);
  void remember_name(flow::FlowEntry& e, const Key128& h);
  bool unreadable(const rte_mbuf* mb, const uint8_t* frame, const PacketMeta& m, bool inspected);
  void ignore_bad_control(uint16_t i, const rte_mbuf* mb);
  void send_rejects(const QueueLink& q, rte_mbuf** drop, uint16_t nd, uint64_t now);
  // Whether a packet the rule in `slot` blocks is answered (a reject).
  bool rejects(uint32_t slot) const noexcept;
  uint16_t release_fragments(const QueueLink* q, uint64_t now);
  WorkerConfig cfg_;
  LookupTables burst_{};  // the tables of the burst in process() (one load per burst)
  std::vector<uint32_t> max_frame_;  // per link: longest frame the rx port's MTU allows
  WorkerScratch* s_ = nullptr;
  bool scratch_in_eal_ = true;          // s_ from rte_zmalloc (else mem::map_pages)
  flow::FlowTable* flows_ = nullptr;    // this worker's own; nullptr when cfg_.flows == 0
  reject::TokenBucket* bucket_ = nullptr;
  reasm::Pool* pool_ = nullptr;          // this worker's reassembly slots; nullptr: none
  reasm::StreamInspector* stream_ = nullptr;  // with a flow table: reads the client streams through pool_
  quic::Decoder* quic_ = nullptr;        // with a flow table and quic = inspect
  rte_mempool* reply_pool_ = nullptr;   // mbufs for reject replies
  FragStage* frag_ = nullptr;           // IP defragmentation; nullptr: fragments judged one by one
  bool checksums_trusted_ = false;      // checksums are verified (ChecksumMode; set in prepare)
  bool server_checksums_trusted_ = false;  // the same for servers' packets (ignore_bad_control)
  uint64_t dcid_seed_ = 0;  // keys dcid_tag() of QUIC flows (inspect_quic)
  uint8_t side_ = 0;        // QueueLink::side of the link being processed (reasm::Segment::side)
};

}  // namespace cg
