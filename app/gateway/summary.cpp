#include "gateway/summary.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

namespace cg {

void print_summary(std::FILE* f, const SummaryInfo& info, const StatsSnapshot& s) {
  const double mpps = info.seconds > 0 ? static_cast<double>(s.rx) / info.seconds / 1e6 : 0;
  std::fprintf(f, "cuckoogate %s\n", info.title.c_str());
  std::fprintf(f, "  rules at exit   %zu\n", info.rules);  // (run: after any runtime changes)
  std::fprintf(f, "  packets in      %lu\n", static_cast<unsigned long>(s.rx));
  std::fprintf(f, "  passed          %lu%s%s\n", static_cast<unsigned long>(s.passed),
               info.passed_to.empty() ? "" : "  -> ", info.passed_to.c_str());
  std::fprintf(f, "  dropped         %lu%s%s\n", static_cast<unsigned long>(s.dropped),
               info.dropped_to.empty() ? "" : "  -> ", info.dropped_to.c_str());
  for (std::size_t k = 1; k <= kRuleKindCount; ++k)
    std::fprintf(f, "    %-10s    %lu\n", std::string(kind_name(static_cast<RuleKind>(k))).c_str(),
                 static_cast<unsigned long>(s.dropped_by_kind[k]));
  std::fprintf(f, "    %-10s    %lu\n", "malformed", static_cast<unsigned long>(s.malformed_dropped));
  std::fprintf(f, "  malformed       %lu\n", static_cast<unsigned long>(s.malformed));
  if (s.oversized != 0)
    std::fprintf(f, "  oversized       %lu (longer than the port's MTU allows)\n",
                 static_cast<unsigned long>(s.oversized));
  std::fprintf(f, "  filter hits     %lu (confirmed %lu, false positives avoided %lu)\n",
               static_cast<unsigned long>(s.filter_hits), static_cast<unsigned long>(s.confirmed_hits),
               static_cast<unsigned long>(s.fp_avoided));
  if (s.tx_failed != 0)
    std::fprintf(f, "  tx failed       %lu (device queue full; freed)\n",
                 static_cast<unsigned long>(s.tx_failed));
  if (s.flows_created != 0)
    std::fprintf(f, "  flows           %lu created, %lu evicted, %lu expired; verdict cache %lu hits, %lu misses\n",
                 static_cast<unsigned long>(s.flows_created), static_cast<unsigned long>(s.flows_evicted),
                 static_cast<unsigned long>(s.flows_expired), static_cast<unsigned long>(s.cache_hits),
                 static_cast<unsigned long>(s.cache_misses));
  if (s.rejects_sent + s.rejects_limited != 0)
    std::fprintf(f, "  rejects         %lu sent, %lu held back by the rate limit\n",
                 static_cast<unsigned long>(s.rejects_sent), static_cast<unsigned long>(s.rejects_limited));
  std::fprintf(f, "  rate            %.3f Mpps (%lu packets in %.3f s)\n", mpps,
               static_cast<unsigned long>(s.rx), info.seconds);
}

bool write_summary_json(const std::string& path, const SummaryInfo& info, const StatsSnapshot& s,
                        std::string* err) {
  nlohmann::json by_kind = nlohmann::json::object();
  for (std::size_t k = 1; k <= kRuleKindCount; ++k)
    by_kind[std::string(kind_name(static_cast<RuleKind>(k)))] = s.dropped_by_kind[k];
  nlohmann::json j = {
      {"rx", s.rx},
      {"passed", s.passed},
      {"dropped", s.dropped},
      {"dropped_by_kind", by_kind},
      {"malformed", s.malformed},
      {"malformed_dropped", s.malformed_dropped},
      {"oversized", s.oversized},
      {"filter_hits", s.filter_hits},
      {"confirmed_hits", s.confirmed_hits},
      {"false_positives_avoided", s.fp_avoided},
      {"tx_failed", s.tx_failed},
      {"flows", {{"active", s.flows_active}, {"created", s.flows_created}, {"evicted", s.flows_evicted},
                 {"expired", s.flows_expired}, {"syn_deferred", s.flows_syn_deferred},
                 {"reopened_in_burst", s.flows_reopened_in_burst}, {"untracked", s.untracked},
                 {"names_forgotten", s.names_forgotten}}},
      {"cache", {{"hits", s.cache_hits}, {"misses", s.cache_misses}}},
      {"flow_drops", s.flow_drops},
      {"reassembly", {{"started", s.reasm_started}, {"completed", s.reasm_completed},
                      {"overflow", s.inspect_overflow},
                      {"conflicts", s.reasm_conflicts}, {"dropped", s.inspect_dropped},
                      {"bad_checksum", s.reasm_bad_checksum}, {"not_taken", s.reasm_not_taken},
                      {"fast_open_cut", s.reasm_fast_open_cut}, {"refused", s.reasm_refused}}},
      {"quic", {{"initials", s.quic_initials}, {"completed", s.quic_completed}, {"failed", s.quic_failed},
                {"blocked", s.quic_blocked}}},
      {"rejects", {{"sent", s.rejects_sent}, {"limited", s.rejects_limited}, {"failed", s.rejects_failed}}},
      {"frags", {{"held", s.frags_held}, {"reassembled", s.frags_reassembled}, {"timeout", s.frags_timeout},
                 {"overlap", s.frags_overlap}, {"too_many", s.frags_too_many}, {"failed", s.frags_failed},
                 {"duplicate", s.frags_duplicate}, {"dead", s.frags_dead}, {"table_full", s.frags_table_full},
                 {"unsupported", s.frags_unsupported}}},
      {"rules", info.rules},
      {"seconds", info.seconds},
      {"pps", info.seconds > 0 ? static_cast<double>(s.rx) / info.seconds : 0.0},
  };
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  out.close();
  if (!out) {
    *err = "cannot write " + path;
    return false;
  }
  return true;
}

}  // namespace cg
