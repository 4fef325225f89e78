#include "cuckoogate/sync/tls_pipe.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace cg::sync {
namespace {

using Clock = std::chrono::steady_clock;

// OpenSSL's queued errors as one line (and the queue emptied).
// A PEM key file protected by a passphrase (PKCS#8 "ENCRYPTED PRIVATE KEY",
// or a traditional key with a Proc-Type: 4,ENCRYPTED header).
bool pem_is_encrypted(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::array<char, 4096> head{};
  const ssize_t n = ::read(fd, head.data(), head.size() - 1);
  ::close(fd);
  return n > 0 && std::strstr(head.data(), "ENCRYPTED") != nullptr;
}

std::string ssl_errors() {
  std::string out;
  char buf[256];
  while (const unsigned long e = ERR_get_error()) {
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// Waits for `events` on fd until the deadline; false when it passed.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int left = ms_left(deadline);
    const int r = ::poll(&p, 1, left);
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return true;  // let the caller's next call report it
  }
}

bool set_nonblocking(int fd) {
  const int fl = ::fcntl(fd, F_GETFL);
  return fl >= 0 && ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
}

// A non-blocking TCP connection to host:port within the deadline; -1 and *err.
int tcp_connect(const std::string& host, uint16_t port, Clock::time_point deadline, std::string* err) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
    *err = "cannot resolve " + host + ": " + ::gai_strerror(rc);
    return -1;
  }
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      if (!wait_fd(fd, POLLOUT, deadline)) {
        why = "connect timed out";
      } else {
        int soerr = 0;
        socklen_t len = sizeof(soerr);
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
        rc = soerr == 0 ? 0 : -1;
        errno = soerr;
        if (rc != 0) why = std::strerror(soerr);
      }
    } else if (rc != 0) {
      why = std::strerror(errno);
    }
    if (rc != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd < 0) *err = "cannot connect to " + host + ":" + service + ": " + why;
  return fd;
}

// An SSL_get_error that asks for the socket to be readable or writable:
// noted in *in / *out (true); anything else: false.
bool wants_io(int e, bool* in, bool* out) {
  if (e == SSL_ERROR_WANT_READ) *in = true;
  else if (e == SSL_ERROR_WANT_WRITE) *out = true;
  else return false;
  return true;
}

bool is_address(const std::string& name) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, name.c_str(), buf) == 1 || ::inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

}  // namespace

std::unique_ptr<TlsPipe> TlsPipe::open(const std::string& host, uint16_t port, const TlsOptions& o,
                                       std::chrono::milliseconds timeout, std::string* err) {
  const Clock::time_point deadline = Clock::now() + timeout;
  std::unique_ptr<TlsPipe> p(new TlsPipe);
  const std::string where = "TLS to " + host + ":" + std::to_string(port) + ": ";
  // The trust and identity settings first: a missing or unreadable file is
  // named before any connection is tried.
  ERR_clear_error();
  p->ctx_ = SSL_CTX_new(TLS_client_method());
  if (p->ctx_ == nullptr) {
    *err = where + "cannot create an OpenSSL context: " + ssl_errors();
    return nullptr;
  }
  // No passphrase source: OpenSSL's default asks on the terminal, which
  // would block the control thread on every reconnect.
  SSL_CTX_set_default_passwd_cb(p->ctx_, [](char*, int, int, void*) { return 0; });
  SSL_CTX_set_min_proto_version(p->ctx_, TLS1_2_VERSION);
  SSL_CTX_set_verify(p->ctx_, SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_mode(p->ctx_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (!o.ca_file.empty() || !o.ca_dir.empty()) {
    if (SSL_CTX_load_verify_locations(p->ctx_, o.ca_file.empty() ? nullptr : o.ca_file.c_str(),
                                      o.ca_dir.empty() ? nullptr : o.ca_dir.c_str()) != 1) {
      *err = where + "cannot load the CA certificates (tls_ca '" + o.ca_file + "', tls_ca_dir '" + o.ca_dir +
             "'): " + ssl_errors();
      return nullptr;
    }
  } else if (SSL_CTX_set_default_verify_paths(p->ctx_) != 1) {
    *err = where + "cannot load the system's CA certificates: " + ssl_errors();
    return nullptr;
  }
  if (o.cert_file.empty() != o.key_file.empty()) {
    *err = where + "a client certificate needs both tls_cert and tls_key";
    return nullptr;
  }
  if (!o.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(p->ctx_, o.cert_file.c_str()) != 1) {
      *err = where + "cannot load the client certificate '" + o.cert_file + "': " + ssl_errors();
      return nullptr;
    }
    if (SSL_CTX_use_PrivateKey_file(p->ctx_, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(p->ctx_) != 1) {
      *err = where + "cannot use the client key '" + o.key_file + "': " +
             (pem_is_encrypted(o.key_file) ? "it is encrypted, and encrypted keys are not supported "
                                             "(give an unencrypted key, readable by the gateway only)"
                                           : ssl_errors());
      return nullptr;
    }
  }
  p->name_ = o.server_name.empty() ? host : o.server_name;
  p->ssl_ = SSL_new(p->ctx_);
  if (p->ssl_ == nullptr) {
    *err = where + "cannot create a TLS connection: " + ssl_errors();
    return nullptr;
  }
  // The name the certificate must carry (an address is checked as one) and SNI.
  if (is_address(p->name_)) {
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(p->ssl_), p->name_.c_str()) != 1) {
      *err = where + "bad server address '" + p->name_ + "'";
      return nullptr;
    }
  } else if (SSL_set1_host(p->ssl_, p->name_.c_str()) != 1 ||
             SSL_set_tlsext_host_name(p->ssl_, p->name_.c_str()) != 1) {
    *err = where + "bad server name '" + p->name_ + "': " + ssl_errors();
    return nullptr;
  }
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    *err = where + "socketpair: " + std::strerror(errno);
    return nullptr;
  }
  p->pipe_ = pair[0];
  p->app_ = pair[1];
  p->wake_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (p->wake_ < 0 || !set_nonblocking(p->pipe_)) {
    *err = where + "eventfd: " + std::strerror(errno);
    return nullptr;
  }
  p->tcp_ = tcp_connect(host, port, deadline, err);
  if (p->tcp_ < 0) {
    *err = "TLS: " + *err;
    return nullptr;
  }
  if (SSL_set_fd(p->ssl_, p->tcp_) != 1) {
    *err = where + "SSL_set_fd: " + ssl_errors();
    return nullptr;
  }
  // The handshake runs on the pipe's thread, where SIGPIPE is blocked (OpenSSL
  // writes with write(2): a server that went away must not kill the gateway).
  std::promise<std::string> done;
  std::future<std::string> result = done.get_future();
  TlsPipe* self = p.get();
  p->thread_ = std::thread([self, deadline, d = std::move(done)]() mutable { self->run(deadline, std::move(d)); });
  std::string hs = result.get();  // the thread keeps to the deadline itself
  if (!hs.empty()) {
    *err = where + hs;
    return nullptr;  // the destructor joins the thread, which has ended
  }
  return p;
}

TlsPipe::~TlsPipe() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_, &one, sizeof(one));
    thread_.join();
  }
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
  for (const int fd : {tcp_, pipe_, app_, wake_})
    if (fd >= 0) ::close(fd);
}

int TlsPipe::release_app_fd() noexcept {
  const int fd = app_;
  app_ = -1;
  return fd;
}

std::string TlsPipe::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

void TlsPipe::set_error(std::string e) {
  std::lock_guard lock(mu_);
  if (error_.empty()) error_ = std::move(e);
}

void TlsPipe::run(Clock::time_point deadline, std::promise<std::string> done) {
  sigset_t pipe_sig;
  sigemptyset(&pipe_sig);
  sigaddset(&pipe_sig, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_sig, nullptr);
  pthread_setname_np(pthread_self(), "cg-redis-tls");
  std::string hs = handshake(deadline);
  const bool ok = hs.empty();
  done.set_value(std::move(hs));
  if (!ok) return;
  pump();
  // The client reads EOF next: the error (if any) is set before that. Only
  // our sending side is shut: the client's writes still land in the pair's
  // buffer (no EPIPE, no SIGPIPE in its thread) until it reads the EOF.
  ::shutdown(pipe_, SHUT_WR);
}

std::string TlsPipe::handshake(Clock::time_point deadline) {
  ERR_clear_error();
  for (;;) {
    const int r = SSL_connect(ssl_);
    if (r == 1) return {};
    const int e = SSL_get_error(ssl_, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
      if (!wait_fd(tcp_, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline))
        return "no answer to the TLS handshake in time (a plain Redis port? plain Redis is redis://)";
      continue;
    }
    const long verify = SSL_get_verify_result(ssl_);
    const std::string lib = ssl_errors();
    if (verify != X509_V_OK)
      return "the server's certificate is refused: " + std::string(X509_verify_cert_error_string(verify)) +
             " (for the name '" + name_ + "'; trusted CAs: tls_ca / tls_ca_dir, or the system's)";
    if (lib.find("wrong version number") != std::string::npos ||
        lib.find("packet length too long") != std::string::npos ||
        lib.find("record layer failure") != std::string::npos)
      return "the server does not speak TLS on this port (" + lib + "); plain Redis is redis://";
    if (!lib.empty()) return "TLS handshake failed: " + lib;
    if (e == SSL_ERROR_SYSCALL && errno != 0)
      return "TLS handshake failed: " + std::string(std::strerror(errno));
    return "the server closed the connection during the TLS handshake";
  }
}

// Bytes both ways until the client closes its end, the server closes the TLS
// connection, an error, or the destructor's wake-up. Each direction has one
// buffer; a full one stops reading its source until it drains.
void TlsPipe::pump() {
  std::array<char, 16384> up{}, down{};  // client -> server, server -> client
  std::size_t up_len = 0, up_off = 0, down_len = 0, down_off = 0;
  for (;;) {
    bool progress = false, tcp_in = false, tcp_out = false, app_in = false, app_out = false;
    // Server -> client.
    if (down_len == 0) {
      ERR_clear_error();
      const int r = SSL_read(ssl_, down.data(), static_cast<int>(down.size()));
      if (r > 0) {
        down_len = static_cast<std::size_t>(r);
        down_off = 0;
        progress = true;
      } else {
        const int e = SSL_get_error(ssl_, r);
        if (wants_io(e, &tcp_in, &tcp_out)) {
          // wait for the socket
        } else if (e == SSL_ERROR_ZERO_RETURN) {
          set_error("the server closed the TLS connection");
          return;
        } else {
          const std::string lib = ssl_errors();
          set_error(lib.empty() ? "the TLS connection was lost" : "TLS: " + lib);
          return;
        }
      }
    }
    if (down_off < down_len) {
      const ssize_t w = ::send(pipe_, down.data() + down_off, down_len - down_off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0) {
        down_off += static_cast<std::size_t>(w);
        if (down_off == down_len) down_len = down_off = 0;
        progress = true;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        app_out = true;
      } else if (errno != EINTR) {
        return;  // the client is gone
      }
    }
    // Client -> server.
    if (up_len == 0) {
      const ssize_t r = ::recv(pipe_, up.data(), up.size(), MSG_DONTWAIT);
      if (r > 0) {
        up_len = static_cast<std::size_t>(r);
        up_off = 0;
        progress = true;
      } else if (r == 0) {
        SSL_shutdown(ssl_);  // close_notify, best effort (non-blocking)
        return;              // the client closed its end: done, no error
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        app_in = true;
      } else if (errno != EINTR) {
        return;
      }
    }
    if (up_off < up_len) {
      ERR_clear_error();
      const int r = SSL_write(ssl_, up.data() + up_off, static_cast<int>(up_len - up_off));
      if (r > 0) {
        up_off += static_cast<std::size_t>(r);
        if (up_off == up_len) up_len = up_off = 0;
        progress = true;
      } else if (!wants_io(SSL_get_error(ssl_, r), &tcp_in, &tcp_out)) {
        const std::string lib = ssl_errors();
        set_error(lib.empty() ? "the TLS connection was lost while sending" : "TLS: " + lib);
        return;
      }
    }
    if (progress) continue;
    // Nothing moved: wait for what would let something move (an fd of -1 is
    // left out by poll, so an idle side cannot make this loop spin).
    const short tcp_ev = static_cast<short>((tcp_in ? POLLIN : 0) | (tcp_out ? POLLOUT : 0));
    const short app_ev = static_cast<short>((app_in ? POLLIN : 0) | (app_out ? POLLOUT : 0));
    std::array<pollfd, 3> fds{{{tcp_ev != 0 ? tcp_ : -1, tcp_ev, 0},
                               {app_ev != 0 ? pipe_ : -1, app_ev, 0},
                               {wake_, POLLIN, 0}}};
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
      set_error(std::string("poll: ") + std::strerror(errno));
      return;
    }
    if (fds[2].revents != 0) return;  // the owner is closing the pipe
  }
}

}  // namespace cg::sync
