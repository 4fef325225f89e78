#include "gateway/eal.hpp"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

namespace cg {
namespace {

// What EAL logs while rte_eal_init runs. rte_eal_init does not always set
// rte_errno (a file prefix held by another primary returns -1 with rte_errno
// 0, which rte_strerror calls "Success"); the reason is in the log.
struct InitLog {
  std::mutex mu;            // EAL's threads may log while init runs
  bool capturing = false;
  std::string first_error;  // first message at ERR or worse, without "EAL: "
};
InitLog& init_log() {
  static InitLog l;
  return l;
}

// The log stream during rte_eal_init: writes to stderr, as DPDK's console
// stream does, and remembers the first error.
ssize_t init_log_write(void*, const char* buf, size_t size) {
  const std::size_t n = std::fwrite(buf, 1, size, stderr);
  const int level = rte_log_cur_msg_loglevel();
  if (level > 0 && level <= static_cast<int>(RTE_LOG_ERR)) {
    InitLog& l = init_log();
    std::lock_guard<std::mutex> g(l.mu);
    if (l.capturing && l.first_error.empty()) {
      std::string m(buf, size);
      while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
      if (m.rfind("EAL: ", 0) == 0) m.erase(0, 5);
      l.first_error = m;
    }
  }
  return static_cast<ssize_t>(n);
}

// Created once and never closed: a thread EAL started may still hold the
// stream after rte_openlog_stream() has moved on.
FILE* init_log_stream() {
  static FILE* f = [] {
    cookie_io_functions_t io{};
    io.write = init_log_write;
    FILE* s = fopencookie(nullptr, "w", io);
    if (s != nullptr) setvbuf(s, nullptr, _IOLBF, 0);
    return s;
  }();
  return f;
}

std::set<std::string>& own_prefixes() {
  static std::set<std::string> s;
  return s;
}
bool g_own_runtime_dir = false;  // set before rte_eal_init, read at exit (one thread)

// The value of the last --file-prefix in args ("" if none: EAL's "rte").
std::string file_prefix_of(const std::vector<std::string>& args) {
  std::string prefix;
  const std::string opt = "--file-prefix";
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == opt && i + 1 < args.size()) prefix = args[i + 1];
    else if (args[i].rfind(opt + "=", 0) == 0) prefix = args[i].substr(opt.size() + 1);
  }
  return prefix;
}

// At exit, after DPDK's telemetry has removed its sockets (its atexit handler
// is registered inside rte_eal_init, after this one, so it runs first).
extern "C" void remove_runtime_dir() {
  const char* dir = rte_eal_get_runtime_dir();
  if (dir == nullptr || *dir == '\0') return;  // EAL failed before creating it
  std::error_code ec;
  if (g_own_runtime_dir)
    std::filesystem::remove_all(dir, ec);
  else
    ::rmdir(dir);  // only if nothing is left in it
}

}  // namespace

bool init_eal(const std::string& prog, const std::vector<std::string>& args, std::string* err) {
  static const bool registered = std::atexit(remove_runtime_dir) == 0;
  (void)registered;
  g_own_runtime_dir = own_prefixes().count(file_prefix_of(args)) != 0;

  std::vector<std::string> all;
  all.push_back(prog);
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);

  InitLog& l = init_log();
  {
    std::lock_guard<std::mutex> g(l.mu);
    l.capturing = true;
    l.first_error.clear();
  }
  FILE* capture = init_log_stream();
  if (capture != nullptr) rte_openlog_stream(capture);
  rte_errno = 0;
  const int rc = rte_eal_init(static_cast<int>(all.size()), argv.data());
  const int saved_errno = rte_errno;
  rte_openlog_stream(nullptr);  // back to EAL's default: console and syslog
  std::string first;
  {
    std::lock_guard<std::mutex> g(l.mu);
    l.capturing = false;
    first = l.first_error;
  }
  if (rc >= 0) return true;
  *err = "EAL initialisation failed: ";
  if (!first.empty()) {
    *err += first;
    if (saved_errno != 0) *err += std::string(" (") + rte_strerror(saved_errno) + ")";
  } else if (saved_errno != 0) {
    *err += rte_strerror(saved_errno);
  } else {
    *err += "no reason given (see the EAL messages above)";
  }
  return false;
}

std::string unique_file_prefix(const std::string& base) {
  std::string p = base + "-" + std::to_string(getpid());
  own_prefixes().insert(p);
  return p;
}

std::string float_lcores(unsigned n) {
  cpu_set_t set;
  CPU_ZERO(&set);
  unsigned first = 0, last = 0;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) {
    bool found = false;
    for (unsigned c = 0; c < CPU_SETSIZE; ++c) {
      if (!CPU_ISSET(c, &set)) continue;
      if (!found) first = c;
      last = c;
      found = true;
    }
  } else {
    last = std::thread::hardware_concurrency() ? std::thread::hardware_concurrency() - 1 : 0;
  }
  // "(0-N)@(a-b)": lcores 0..N, each allowed on CPUs a..b.
  return "(0-" + std::to_string(n - 1) + ")@(" + std::to_string(first) + "-" + std::to_string(last) + ")";
}

}  // namespace cg
