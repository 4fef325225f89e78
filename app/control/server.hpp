// The Unix-domain control socket: accepts clients, frames request lines,
// hands them to the CommandHandler and writes the responses back. Runs on the
// control lcore inside its poll loop; never touches rx/tx.
//
// The socket file is created with mode 0660. A stale socket file (nothing
// listening) is replaced; a live one (another gateway answers) is an error.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "control/protocol.hpp"

namespace cg {

class ControlServer {
 public:
  // Binds and listens on `path`. nullptr and *err on failure.
  static std::unique_ptr<ControlServer> open(const std::string& path, CommandHandler& h,
                                             std::string* err);
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Waits up to timeout_ms for socket activity and serves it.
  void poll_once(int timeout_ms);
  const std::string& path() const noexcept { return path_; }
  std::size_t clients() const noexcept { return clients_.size(); }

  static constexpr std::size_t kMaxClients = 64;

 private:
  struct Client {
    int fd = -1;
    std::string in;        // bytes not yet framed into a line
    bool discarding = false;  // inside an over-long line: drop bytes until '\n'
    bool eof = false;         // the peer shut down its sending side
    std::string out;       // response bytes not yet written
    std::size_t out_off = 0;
    Session session;
  };
  ControlServer(std::string path, int fd, CommandHandler& h) : path_(std::move(path)), fd_(fd), h_(h) {}
  void accept_clients();
  bool read_client(Client& c);   // false: connection closed or failed
  bool flush_client(Client& c);  // false: write failed
  void frame_lines(Client& c);

  std::string path_;
  int fd_ = -1;
  CommandHandler& h_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::chrono::steady_clock::time_point accept_paused_until_{};  // after EMFILE and the like
};

}  // namespace cg
