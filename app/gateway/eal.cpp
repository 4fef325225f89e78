#include "gateway/eal.hpp"

#include <rte_eal.h>
#include <rte_errno.h>
#include <sched.h>
#include <unistd.h>

#include <thread>

namespace cg {

bool init_eal(const std::string& prog, const std::vector<std::string>& args, std::string* err) {
  std::vector<std::string> all;
  all.push_back(prog);
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (rte_eal_init(static_cast<int>(all.size()), argv.data()) < 0) {
    *err = std::string("EAL initialisation failed: ") + rte_strerror(rte_errno);
    return false;
  }
  return true;
}

std::string unique_file_prefix(const std::string& base) {
  return base + "-" + std::to_string(getpid());
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
