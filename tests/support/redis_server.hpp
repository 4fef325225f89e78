// A private redis-server for a test: Unix socket in the test's directory, no
// TCP (--port 0) unless `extra` opens a port (--port, --tls-port), AOF on (so
// a restart keeps what was acknowledged), killed when the object goes away.
// Needs redis-server (scripts/install-deps.sh). It is ready when the Unix
// socket answers; Redis opens its TCP and TLS ports before that.
#pragma once

#include <signal.h>
#include <spawn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace cg::test {

// A loopback TCP port that was free a moment ago (for --tls-port or --port).
inline uint16_t free_tcp_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("no free loopback port");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

class RedisServer {
 public:
  // dir: an existing private directory (socket, AOF, log). extra: more
  // redis-server options (e.g. {"--requirepass", "pw"}).
  explicit RedisServer(std::string dir, std::vector<std::string> extra = {})
      : dir_(std::move(dir)), extra_(std::move(extra)) {
    start();
  }
  ~RedisServer() { stop(SIGKILL); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  std::string socket() const { return dir_ + "/redis.sock"; }
  std::string url() const { return "unix://" + socket(); }

  void start() {
    if (pid_ > 0) return;
    std::vector<std::string> argv = {"redis-server", "--port", "0", "--unixsocket", socket(),
                                     "--unixsocketperm", "700", "--dir", dir_, "--appendonly", "yes",
                                     "--appendfsync", "always", "--save", "", "--logfile",
                                     dir_ + "/redis.log", "--daemonize", "no"};
    argv.insert(argv.end(), extra_.begin(), extra_.end());
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    if (posix_spawnp(&pid_, "redis-server", nullptr, nullptr, args.data(), environ) != 0)
      throw std::runtime_error("cannot start redis-server (scripts/install-deps.sh installs it)");
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!answers()) {
      if (std::chrono::steady_clock::now() > end) {
        stop();  // (left running, it would hold the test's output open)
        throw std::runtime_error("redis-server did not come up");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  // SIGKILL: a crash (what AOF with fsync always keeps is what was acknowledged).
  void stop(int sig = SIGKILL) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    ::unlink(socket().c_str());
  }
  // redis-cli against this server: its stdout.
  std::string cli(const std::vector<std::string>& cmd) const {
    std::string line = "redis-cli -s '" + socket() + "'";
    for (const auto& c : cmd) {
      line += " '";
      for (char ch : c) line += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
      line += "'";
    }
    std::string out;
    if (FILE* p = ::popen(line.c_str(), "r")) {
      char buf[4096];
      std::size_t n;
      while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
      ::pclose(p);
    }
    return out;
  }

 private:
  // An answer to a PING other than -LOADING (PONG, or NOAUTH with a
  // password set): not only listening, but done loading its append-only
  // file (until then it answers every command "-LOADING", and a test's
  // redis-cli XADD right after a restart was lost under load).
  bool answers() const {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, socket().c_str(), sizeof(a.sun_path) - 1);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    if (ok) {
      const timeval tv{1, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      char reply[64] = {};
      ok = ::write(fd, "PING\r\n", 6) == 6 && ::read(fd, reply, sizeof reply - 1) > 0 &&
           std::strncmp(reply, "-LOADING", 8) != 0;
    }
    ::close(fd);
    return ok;
  }
  std::string dir_;
  std::vector<std::string> extra_;
  pid_t pid_ = -1;
};

}  // namespace cg::test
