// Logging through DPDK's rte_log, with the project's own log types, so that
// `--log-level=cuckoogate.*:debug` (or `cuckoogate.dataplane:warning`, ...)
// and DPDK's log redirection (--syslog, rte_openlog_stream) apply to our
// messages exactly as to DPDK's.
//
//   CG_LOG(ERR, gateway, "port %s: %s", name, why);
//   CG_LOG(WARNING, dataplane, "...");
//   CG_LOG(INFO, control, "...");
//
// Levels are DPDK's: EMERG ALERT CRIT ERR WARNING NOTICE INFO DEBUG. A newline
// is appended. Every type starts at INFO.
//
// Not for the burst loop: rte_log formats and writes (a syscall). Messages
// printed before rte_eal_init (usage errors, configuration) stay plain
// fprintf to stderr, as DPDK's own command-line errors do; rte_log works
// there too but --log-level has not been parsed yet.
#pragma once

#include <rte_log.h>

namespace cg::logtype {

// Registers (or finds) `name`; the level comes from any --log-level pattern
// already given, else INFO. A failed registration falls back to USER1 so a
// message is never lost to a negative type.
inline int register_type(const char* name) noexcept {
  const int t = rte_log_register_type_and_pick_level(name, RTE_LOG_INFO);
  return t >= 0 ? t : RTE_LOGTYPE_USER1;
}

// Registered during static initialisation (after DPDK's own log set-up, which
// runs as a prioritised constructor of librte_log/librte_eal), before main().
inline const int gateway = register_type("cuckoogate.gateway");      // run, replay, EAL, ports
inline const int dataplane = register_type("cuckoogate.dataplane");  // traffic and worker health
inline const int control = register_type("cuckoogate.control");      // blocklist, control socket

}  // namespace cg::logtype

// `type` is one of the names above: gateway, dataplane, control.
#define CG_LOG(level, type, fmt, ...)                                             \
  rte_log(RTE_LOG_##level, ::cg::logtype::type, "cuckoogate: " fmt "\n" __VA_OPT__(, ) \
              __VA_ARGS__)
