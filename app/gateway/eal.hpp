// EAL start-up from an argument list (DPDK convention: EAL options before
// `--`, or from the config's [eal] table).
#pragma once

#include <string>
#include <vector>

namespace cg {

// Calls rte_eal_init with argv[0] = prog followed by args. false and *err on
// failure, *err saying why in DPDK's words: the first error EAL logged during
// the attempt (e.g. "Cannot create lock on '/var/run/dpdk/x/config'. Is
// another primary process running?") and rte_errno's text when it is set.
//
// Also arranges for EAL's runtime directory (/var/run/dpdk/<prefix>, or
// $XDG_RUNTIME_DIR/dpdk/<prefix>) to be removed when the process exits: all of
// it when the prefix came from unique_file_prefix(), else only if empty (a
// prefix the user chose may be shared with other DPDK processes). Call
// rte_eal_cleanup() before exiting, as DPDK asks.
bool init_eal(const std::string& prog, const std::vector<std::string>& args, std::string* err);

// A --file-prefix unique to this process, so parallel runs never share state.
// init_eal() treats a runtime directory under this prefix as its own.
std::string unique_file_prefix(const std::string& base);

// An --lcores value giving `n` lcores (0..n-1) that float over the machine's CPUs.
std::string float_lcores(unsigned n);

}  // namespace cg
