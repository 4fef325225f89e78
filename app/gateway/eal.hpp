// EAL start-up from an argument list (DPDK convention: EAL options before
// `--`, or from the config's [eal] table).
#pragma once

#include <string>
#include <vector>

namespace cg {

// Calls rte_eal_init with argv[0] = prog followed by args. false and *err on failure.
bool init_eal(const std::string& prog, const std::vector<std::string>& args, std::string* err);

// A --file-prefix unique to this process, so parallel runs never share state.
std::string unique_file_prefix(const std::string& base);

// An --lcores value giving `n` lcores (0..n-1) that float over the machine's CPUs.
std::string float_lcores(unsigned n);

}  // namespace cg
