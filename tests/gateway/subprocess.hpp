// Running the gateway binaries from tests: spawn with arguments, capture
// stdout/stderr into files, wait with a deadline, signal.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace cg::test {

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Process {
 public:
  // Starts argv[0] with stdout/stderr redirected to out_path/err_path
  // (and stdin from `stdin_path` if given).
  Process(const std::vector<std::string>& argv, const std::string& out_path,
          const std::string& err_path, const std::string& stdin_path = "/dev/null")
      : out_(out_path), err_(err_path) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, stdin_path.c_str(), O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int rc = posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  }
  ~Process() {
    if (pid_ > 0 && !done_) {
      kill(pid_, SIGKILL);
      int st = 0;
      if (waitpid(pid_, &st, 0) == pid_) reaped(st);
    }
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // Exit status (128+signal if killed), or -1 if still running at the deadline.
  int wait(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (!done_) {
      int st = 0;
      const pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        reaped(st);
        break;
      }
      if (std::chrono::steady_clock::now() > end) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return status_;
  }
  void signal(int sig) { if (!done_) kill(pid_, sig); }
  pid_t pid() const { return pid_; }
  std::string out() const { return slurp(out_); }
  std::string err() const { return slurp(err_); }

 private:
  // A gateway killed by a signal (SIGKILL in the durability and sync tests,
  // or a crash) never ran its exit handler, which removes its EAL runtime
  // directory (--file-prefix cuckoogate[-replay]-<pid>, app/gateway/eal.cpp):
  // remove it here, so test runs leave nothing behind. Only those two names
  // with this child's pid are touched.
  void reaped(int st) {
    done_ = true;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (!WIFSIGNALED(st)) return;
    const char* xdg = std::getenv("XDG_RUNTIME_DIR");
    const std::string root = geteuid() == 0 ? "/var/run/dpdk"
                             : xdg != nullptr ? std::string(xdg) + "/dpdk" : "/tmp/dpdk";
    std::error_code ec;
    for (const char* base : {"cuckoogate-", "cuckoogate-replay-"})
      std::filesystem::remove_all(root + "/" + base + std::to_string(pid_), ec);
  }

  pid_t pid_ = -1;
  bool done_ = false;
  int status_ = -1;
  std::string out_, err_;
};

// Runs a command to completion: {exit status, stdout, stderr}.
struct Result { int status; std::string out, err; };
inline Result run(const std::vector<std::string>& argv, const std::string& tmpdir,
                  const std::string& stdin_path = "/dev/null",
                  std::chrono::milliseconds timeout = std::chrono::seconds(120)) {
  static int seq = 0;
  const std::string base = tmpdir + "/run" + std::to_string(seq++);
  Process p(argv, base + ".out", base + ".err", stdin_path);
  const int st = p.wait(timeout);
  return {st, p.out(), p.err()};
}

// A minimal control-socket client for tests: send lines, read lines.
class CtlClient {
 public:
  explicit CtlClient(const std::string& path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~CtlClient() { if (fd_ >= 0) ::close(fd_); }
  bool connected() const { return fd_ >= 0; }
  void send(const std::string& s) {
    std::size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error("control socket send failed");
      off += static_cast<std::size_t>(n);
    }
  }
  std::string line() {
    for (;;) {
      const auto nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string l = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return l;
      }
      char tmp[4096];
      const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
      if (n <= 0) throw std::runtime_error("control socket closed");
      buf_.append(tmp, static_cast<std::size_t>(n));
    }
  }
  // One request, its first response line.
  std::string ask(const std::string& req) {
    send(req + "\n");
    return line();
  }
  // A multi-line request: the payload lines until ".".
  std::vector<std::string> ask_multi(const std::string& req, std::string* first = nullptr) {
    send(req + "\n");
    std::string f = line();
    if (first) *first = f;
    std::vector<std::string> body;
    if (f.rfind("OK", 0) != 0) return body;
    for (std::string l = line(); l != "."; l = line()) body.push_back(l);
    return body;
  }
  // The `stats` counters by name (values that are not integers left out).
  std::map<std::string, uint64_t> stats() {
    std::map<std::string, uint64_t> m;
    for (const std::string& l : ask_multi("stats")) {
      const auto sp = l.find(' ');
      if (sp == std::string::npos) continue;
      try {
        m[l.substr(0, sp)] = std::stoull(l.substr(sp + 1));
      } catch (...) {
        // non-integer values (filter_load, uptime) are not needed here
      }
    }
    return m;
  }
  // Polls `stats` until pred(stats) holds or the deadline passes.
  template <class Pred>
  bool wait_stats(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      if (pred(stats())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  // Waits until every worker has ended the burst it was in when this was
  // called (after a change's answer: the last burst judged before the
  // change): each worker's rx, bumped last in a burst, has moved since. A
  // worker is sequential, so its first burst to end after the call is the
  // one in flight then, if any. Counters read afterwards include every
  // packet judged before the change. Needs traffic on every worker.
  bool wait_bursts_in_flight(std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
    std::map<std::string, uint64_t> rx;
    for (const auto& [k, v] : stats())
      if (k.rfind("worker.", 0) == 0 && k.size() > 3 && k.compare(k.size() - 3, 3, ".rx") == 0) rx[k] = v;
    if (rx.empty()) return false;
    return wait_stats(
        [&](std::map<std::string, uint64_t> s) {
          for (const auto& [k, v] : rx)
            if (s[k] <= v) return false;
          return true;
        },
        timeout);
  }

 private:
  int fd_ = -1;
  std::string buf_;
};

// Waits until `path` accepts connections (the gateway is up).
inline bool wait_for_socket(const std::string& path, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    CtlClient c(path);
    if (c.connected()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// `cuckoogate run [run_args]` on two net_null vdevs, its control socket at
// `sock`, output in DIR/NAME.out and DIR/NAME.err: the gateway the
// cuckoogatectl tests talk to. Running once `sock` answers, else null with
// *err holding what it printed.
inline Process* start_null_gateway(const std::string& gateway, const std::string& sock, const std::string& dir,
                                   std::string* err, const std::vector<std::string>& run_args = {},
                                   const std::string& name = "gw") {
  std::vector<std::string> argv = {gateway, "run", "--ctl", sock};
  argv.insert(argv.end(), run_args.begin(), run_args.end());
  argv.insert(argv.end(), {"--", "--no-huge", "--no-pci", "--no-shconf", "-m", "768", "--vdev=net_null0",
                           "--vdev=net_null1", "--log-level=lib.eal:error"});
  auto* gw = new Process(argv, dir + "/" + name + ".out", dir + "/" + name + ".err");
  if (wait_for_socket(sock, std::chrono::seconds(30))) return gw;
  *err = gw->err();
  delete gw;
  return nullptr;
}

}  // namespace cg::test
