// The Unix-domain control socket: accepts clients, frames request lines,
// hands them to the CommandHandler and writes the responses back. Runs on the
// control lcore inside its poll loop; never touches rx/tx.
//
// One poll round: read what every readable client sent (at most kReadBudget
// bytes each, so no client starves the others), commit the queued changes
// with one journal sync (group commit), then write the responses.
//
// Limits (docs/control-protocol.md): kMaxClients connections; a client whose
// unanswered output passes kOutHighWater is not read until it drains; all
// clients' unread output together is capped at kMaxUnreadTotal (the client
// holding the most is closed); a client idle for the idle timeout is closed.
//
// The socket file is created with mode 0660. A stale socket file (nothing
// listening) is replaced; a live one (another gateway answers) is an error.
#pragma once

#include <chrono>
#include <functional>
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

  // A client that neither sends nor reads anything for this long is closed.
  void set_idle_timeout(std::chrono::milliseconds t) { idle_timeout_ = t; }
  std::chrono::milliseconds idle_timeout() const noexcept { return idle_timeout_; }

  // Output limits (defaults kOutHighWater, kMaxUnreadTotal; tests lower them).
  void set_output_limits(std::size_t high_water, std::size_t unread_total) {
    out_high_water_ = high_water;
    max_unread_total_ = unread_total;
  }

  // One more socket served by the same poll (the Redis sync's follower,
  // docs/sync.md): fd() is asked each round (-1: nothing to watch now) and
  // polled for input; on_readable() runs after the round's group commit.
  struct PollHook {
    std::function<int()> fd;
    std::function<void()> on_readable;
  };
  void set_poll_hook(PollHook h) { hook_ = std::move(h); }

  // Clients closed for idling, for unread output, refused for being too many.
  uint64_t idle_closed() const noexcept { return idle_closed_; }
  uint64_t output_closed() const noexcept { return output_closed_; }
  uint64_t refused() const noexcept { return refused_; }

  static constexpr std::size_t kMaxClients = 64;
  static constexpr std::chrono::milliseconds kDefaultIdleTimeout{30000};
  static constexpr std::size_t kReadBudget = 16u << 10;
  static constexpr std::size_t kOutHighWater = 1u << 20;
  static constexpr std::size_t kMaxUnreadTotal = std::size_t{512} << 20;

 private:
  struct Client {
    int fd = -1;
    LineFramer framer;
    bool eof = false;       // the peer shut down its sending side
    bool dead = false;      // a socket error: close at the end of the round
    std::string out;        // response bytes not yet written
    std::size_t out_off = 0;
    std::chrono::steady_clock::time_point last_active;
    Session session;
    std::size_t unread() const noexcept { return out.size() - out_off; }
  };
  ControlServer(std::string path, int fd, CommandHandler& h) : path_(std::move(path)), fd_(fd), h_(h) {}
  void accept_clients();
  void read_client(Client& c);   // sets eof/dead
  bool flush_client(Client& c);  // false: write failed
  void frame_lines(Client& c);   // handles buffered lines while output has room
  bool wants_input(const Client& c) const;
  void close_client(Client& c);

  std::string path_;
  int fd_ = -1;
  CommandHandler& h_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::chrono::steady_clock::time_point accept_paused_until_{};  // after EMFILE and the like
  std::chrono::milliseconds idle_timeout_ = kDefaultIdleTimeout;
  std::size_t out_high_water_ = kOutHighWater;
  std::size_t max_unread_total_ = kMaxUnreadTotal;
  uint64_t idle_closed_ = 0, output_closed_ = 0, refused_ = 0;
  PollHook hook_;
};

}  // namespace cg
