// The end-of-run summary: human-readable text and the JSON form
// (`--stats-json`), from one stats snapshot.
#pragma once

#include <cstdio>
#include <string>

#include "dataplane/stats.hpp"

namespace cg {

struct SummaryInfo {
  std::string title;      // first line, e.g. "replay pcaps/demo.pcap"
  std::string passed_to;  // where passed packets went ("" = not written)
  std::string dropped_to; // where dropped packets went ("" = freed)
  std::size_t rules = 0;
  double seconds = 0;
};

void print_summary(std::FILE* f, const SummaryInfo& info, const StatsSnapshot& s);
// Writes the JSON summary to `path`; false and *err on failure.
bool write_summary_json(const std::string& path, const SummaryInfo& info, const StatsSnapshot& s,
                        std::string* err);

}  // namespace cg
