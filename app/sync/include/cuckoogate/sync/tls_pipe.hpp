// TLS to Redis for a hiredis that has none (Debian 12's 0.14.1 is built
// without hiredis_ssl). A TlsPipe connects to the server over TCP, makes the
// TLS handshake with OpenSSL (the server's certificate verified against the
// CA file or directory, or the system's store; its name checked; SNI; an
// optional client certificate), and then hands hiredis the plaintext end of
// a socket pair: one thread of the pipe moves bytes between the pair and the
// TLS connection. hiredis keeps its blocking calls, timeouts and poll-driven
// reads unchanged (docs/sync.md, "TLS", says why this and not a transport of
// our own). Control plane only; the data path never sees it.
//
// Thread safety: open() and the destructor on the owner's thread; error()
// from any thread. The pipe's thread touches only the TLS connection, the
// pair's other end and the error text (under a mutex).
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "cuckoogate/sync/redis_url.hpp"

struct ssl_ctx_st;
struct ssl_st;

namespace cg::sync {

class TlsPipe {
 public:
  // Connects to host:port and completes the TLS handshake within `timeout`.
  // nullptr and *err (what failed, in words: a refused certificate, a port
  // that does not speak TLS, a missing file) on failure.
  static std::unique_ptr<TlsPipe> open(const std::string& host, uint16_t port, const TlsOptions& o,
                                       std::chrono::milliseconds timeout, std::string* err);
  // Stops the pipe's thread and closes everything it holds.
  ~TlsPipe();
  TlsPipe(const TlsPipe&) = delete;
  TlsPipe& operator=(const TlsPipe&) = delete;

  // The plaintext end for the client (blocking socket), once: the caller owns
  // it from then on (hiredis' redisConnectFd closes it in redisFree). Closing
  // it ends the pipe; the pipe ending (server gone, TLS error) reads as EOF.
  int release_app_fd() noexcept;
  // Why the pipe stopped ("" while it runs, or when the client closed it).
  std::string error() const;

 private:
  TlsPipe() = default;
  // The thread: the handshake (its outcome to `done`), then the pump.
  void run(std::chrono::steady_clock::time_point deadline, std::promise<std::string> done);
  std::string handshake(std::chrono::steady_clock::time_point deadline);
  void pump();
  void set_error(std::string e);

  ssl_ctx_st* ctx_ = nullptr;
  ssl_st* ssl_ = nullptr;
  int tcp_ = -1;   // the TLS connection
  int pipe_ = -1;  // our end of the pair (non-blocking)
  int app_ = -1;   // the client's end until released
  int wake_ = -1;  // eventfd: the destructor asks the thread to stop
  std::string name_;  // checked against the certificate
  std::thread thread_;
  mutable std::mutex mu_;
  std::string error_;
};

}  // namespace cg::sync
