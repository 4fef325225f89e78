// control_bench: durable adds through the control socket (issue 9, item 6).
//
// In one process: EAL (for the blocklist's memory), a Blocklist with a state
// directory (every OK is on disk), the ControlServer polled by its own thread
// as on the control lcore, and a client on Unix sockets:
//   * pipelined: a sender thread streams N `add` lines in 64 KiB writes while
//     the reader counts the answers: time to the first OK, and acknowledged
//     adds per second until the N-th OK;
//   * one at a time: send `add`, wait for its OK, repeat (each OK its own
//     journal sync: the ceiling for a client that does not pipeline).
// Medians over --runs fresh state directories.
//
//   build/bench/control_bench [--adds N] [--runs R] [--dir DIR]
// DIR must be on the disk being measured (default: a directory under /var/tmp).
#include <rte_eal.h>
#include <rte_errno.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "control/blocklist.hpp"
#include "control/protocol.hpp"
#include "control/server.hpp"

namespace {

using clk = std::chrono::steady_clock;

int connect_to(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    std::perror("connect");
    std::exit(1);
  }
  return fd;
}

std::string rule(int i) {
  return "src 10." + std::to_string((i >> 16) & 255) + "." + std::to_string((i >> 8) & 255) + "." +
         std::to_string(i & 255);
}

// Counts "OK added" lines until `want`; returns the time of the first.
clk::time_point read_oks(int fd, int want, clk::time_point* last) {
  char buf[65536];
  int n_ok = 0;
  clk::time_point first{};
  std::string partial;
  while (n_ok < want) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      std::fprintf(stderr, "connection lost after %d answers\n", n_ok);
      std::exit(1);
    }
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] != '\n') {
        partial += buf[i];
        continue;
      }
      if (partial != "OK added") {
        std::fprintf(stderr, "unexpected answer: %s\n", partial.c_str());
        std::exit(1);
      }
      if (n_ok++ == 0) first = clk::now();
      partial.clear();
    }
  }
  *last = clk::now();
  return first;
}

struct Server {
  std::unique_ptr<cg::Blocklist> bl;
  std::unique_ptr<cg::CommandHandler> h;
  std::unique_ptr<cg::ControlServer> srv;
  std::atomic<bool> stop{false};
  std::thread t;
  Server(const std::string& state, const std::string& sock, std::size_t capacity, int n) {
    cg::Blocklist::Options o;
    o.capacity = capacity;
    o.name = "cb" + std::to_string(n);
    o.state_dir = state;
    std::string err;
    bl = cg::Blocklist::create(o, &err);
    if (!bl) {
      std::fprintf(stderr, "blocklist: %s\n", err.c_str());
      std::exit(1);
    }
    h = std::make_unique<cg::CommandHandler>(*bl, [](std::string&) {}, [](std::string&) {});
    srv = cg::ControlServer::open(sock, *h, &err);
    if (!srv) {
      std::fprintf(stderr, "server: %s\n", err.c_str());
      std::exit(1);
    }
    t = std::thread([this] {
      while (!stop.load(std::memory_order_relaxed)) srv->poll_once(5);
    });
  }
  ~Server() {
    stop.store(true, std::memory_order_relaxed);
    t.join();
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int adds = 200000, runs = 5;
  std::string base = "/var/tmp";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--adds" && i + 1 < argc) adds = std::atoi(argv[++i]);
    else if (a == "--runs" && i + 1 < argc) runs = std::atoi(argv[++i]);
    else if (a == "--dir" && i + 1 < argc) base = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--adds N] [--runs R] [--dir DIR]\n", argv[0]);
      return 2;
    }
  }
#ifdef CG_NOT_RELEASE_BUILD
  std::printf("WARNING: not a release build; numbers are not representative\n");
#endif
  const std::string prefix = "--file-prefix=cg-control-bench-" + std::to_string(getpid());
  std::vector<std::string> eal = {"control_bench", "--no-huge", "--no-pci", "--no-shconf", "-m", "1024",
                                  "-l", "0", "--no-telemetry", "--log-level=lib.eal:error", prefix};
  std::vector<char*> eargv;
  for (auto& s : eal) eargv.push_back(s.data());
  if (rte_eal_init(static_cast<int>(eargv.size()), eargv.data()) < 0) {
    std::fprintf(stderr, "rte_eal_init: %s\n", rte_strerror(rte_errno));
    return 1;
  }
  std::string tmpl = base + "/cg-control-bench-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string dir = tmpl;
  std::vector<double> first_ms, rate, single_rate;
  for (int run = 0; run < runs; ++run) {
    const std::string sock = dir + "/ctl.sock";
    {
      Server s(dir + "/state-p" + std::to_string(run), sock, static_cast<std::size_t>(adds) + 1024, run * 2);
      const int fd = connect_to(sock);
      const clk::time_point t0 = clk::now();
      std::thread sender([&] {
        std::string chunk;
        for (int i = 0; i < adds; ++i) {
          chunk += "add " + rule(i) + "\n";
          if (chunk.size() >= 65536 || i + 1 == adds) {
            for (std::size_t off = 0; off < chunk.size();) {
              const ssize_t n = ::send(fd, chunk.data() + off, chunk.size() - off, MSG_NOSIGNAL);
              if (n <= 0) return;
              off += static_cast<std::size_t>(n);
            }
            chunk.clear();
          }
        }
      });
      clk::time_point last;
      const clk::time_point first = read_oks(fd, adds, &last);
      sender.join();
      ::close(fd);
      first_ms.push_back(std::chrono::duration<double, std::milli>(first - t0).count());
      rate.push_back(adds / std::chrono::duration<double>(last - t0).count());
      std::printf("run %d pipelined: first OK %.2f ms, %d acknowledged durable adds in %.3f s = %.0f/s "
                  "(%llu journal syncs)\n",
                  run, first_ms.back(), adds, std::chrono::duration<double>(last - t0).count(), rate.back(),
                  static_cast<unsigned long long>(s.h->commits()));
    }
    {
      Server s(dir + "/state-s" + std::to_string(run), sock, 1u << 16, run * 2 + 1);
      const int fd = connect_to(sock);
      int n = 0;
      const clk::time_point t0 = clk::now();
      clk::time_point last = t0;
      while (last - t0 < std::chrono::seconds(2)) {
        const std::string req = "add " + rule(n++) + "\n";
        if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) return 1;
        read_oks(fd, 1, &last);
      }
      ::close(fd);
      single_rate.push_back(n / std::chrono::duration<double>(last - t0).count());
      std::printf("run %d one at a time: %.0f durable adds/s\n", run, single_rate.back());
    }
  }
  std::printf("median over %d runs: first OK %.2f ms, pipelined %.0f acknowledged durable adds/s, "
              "one at a time %.0f adds/s\n",
              runs, median(first_ms), median(rate), median(single_rate));
  std::filesystem::remove_all(dir);
  const std::string runtime_dir = rte_eal_get_runtime_dir();
  rte_eal_cleanup();
  std::error_code ec;
  std::filesystem::remove(runtime_dir, ec);
  return 0;
}
