#include "control/server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace cg {
namespace {

// Output past this is not read further from the client until written out:
// a client that pipelines without reading cannot grow our memory unbounded.
constexpr std::size_t kOutHighWater = 64u << 20;

bool fill_addr(const std::string& path, sockaddr_un* a, std::string* err) {
  std::memset(a, 0, sizeof(*a));
  a->sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(a->sun_path)) {
    *err = "control socket path '" + path + "' is empty or longer than " +
           std::to_string(sizeof(a->sun_path) - 1) + " bytes";
    return false;
  }
  std::memcpy(a->sun_path, path.c_str(), path.size());
  return true;
}

// True if something accepts connections on `a` (a live gateway).
bool socket_is_live(const sockaddr_un& a) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool live = ::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return live;
}

}  // namespace

std::unique_ptr<ControlServer> ControlServer::open(const std::string& path, CommandHandler& h,
                                                   std::string* err) {
  sockaddr_un a;
  if (!fill_addr(path, &a, err)) return nullptr;
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      *err = "control socket path '" + path + "' exists and is not a socket; not replacing it";
      return nullptr;
    }
    if (socket_is_live(a)) {
      *err = "control socket '" + path + "' is in use by another process";
      return nullptr;
    }
    ::unlink(path.c_str());  // stale: a previous gateway died without removing it
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *err = std::string("socket(): ") + std::strerror(errno);
    return nullptr;
  }
  // Create the file with 0660 from the start (no window with wider access).
  const mode_t old = ::umask(0117);
  const int rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a));
  const int bind_errno = errno;
  ::umask(old);
  if (rc != 0 || ::listen(fd, 16) != 0) {
    *err = "cannot listen on '" + path + "': " + std::strerror(rc != 0 ? bind_errno : errno);
    ::close(fd);
    return nullptr;
  }
  ::chmod(path.c_str(), 0660);
  return std::unique_ptr<ControlServer>(new ControlServer(path, fd, h));
}

ControlServer::~ControlServer() {
  for (auto& c : clients_) ::close(c->fd);
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
}

void ControlServer::accept_clients() {
  for (;;) {
    const int c = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) {
      // Out of descriptors: the connection stays queued and the listening
      // socket stays readable; stop polling it for a while instead of spinning.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        accept_paused_until_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      return;  // EAGAIN: no more pending
    }
    if (clients_.size() >= kMaxClients) {
      static constexpr char kBusy[] = "ERR 503 too many control clients\n";
      [[maybe_unused]] ssize_t w = ::send(c, kBusy, sizeof(kBusy) - 1, MSG_NOSIGNAL);
      ::close(c);
      continue;
    }
    auto cl = std::make_unique<Client>();
    cl->fd = c;
    clients_.push_back(std::move(cl));
  }
}

void ControlServer::frame_lines(Client& c) {
  std::size_t start = 0;
  for (;;) {
    // Backpressure: answers pile up no further than the high-water mark; the
    // rest of the input waits in c.in until the client has read them.
    if (c.out.size() - c.out_off > kOutHighWater) break;
    const std::size_t nl = c.in.find('\n', start);
    if (nl == std::string::npos) break;
    if (c.discarding) {
      c.discarding = false;  // end of the over-long line: it was answered already
    } else if (nl - start > kMaxRequestLine) {
      h_.line_too_long(c.session, c.out);
    } else {
      h_.handle_line(c.session, std::string_view(c.in).substr(start, nl - start), c.out);
      if (c.session.closing) {
        c.in.clear();
        return;
      }
    }
    start = nl + 1;
  }
  c.in.erase(0, start);
  if (c.in.size() > kMaxRequestLine && c.in.find('\n') == std::string::npos) {
    if (!c.discarding) h_.line_too_long(c.session, c.out);
    c.discarding = true;
    c.in.clear();
  }
}

bool ControlServer::read_client(Client& c) {
  char buf[16384];
  for (;;) {
    const ssize_t n = ::recv(c.fd, buf, sizeof(buf), 0);
    if (n > 0) {
      c.in.append(buf, static_cast<std::size_t>(n));
      frame_lines(c);
      if (c.session.closing || c.out.size() - c.out_off > kOutHighWater) return true;
      continue;
    }
    if (n == 0) {  // peer closed its side: answer what it sent, then close
      c.eof = true;
      return true;
    }
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

bool ControlServer::flush_client(Client& c) {
  while (c.out_off < c.out.size()) {
    const ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.out_off += static_cast<std::size_t>(n);
  }
  c.out.clear();
  c.out_off = 0;
  return true;
}

void ControlServer::poll_once(int timeout_ms) {
  std::vector<pollfd> fds;
  fds.reserve(clients_.size() + 1);
  const bool accepting = std::chrono::steady_clock::now() >= accept_paused_until_;
  fds.push_back({fd_, static_cast<short>(accepting ? POLLIN : 0), 0});
  for (auto& c : clients_) {
    short ev = 0;
    if (!c->eof && !c->session.closing && c->out.size() - c->out_off <= kOutHighWater) ev |= POLLIN;
    if (c->out_off < c->out.size()) ev |= POLLOUT;
    fds.push_back({c->fd, ev, 0});
  }
  if (::poll(fds.data(), fds.size(), timeout_ms) <= 0) return;
  const std::size_t polled = clients_.size();
  std::vector<std::unique_ptr<Client>> keep;
  keep.reserve(polled + 1);
  for (std::size_t i = 0; i < polled; ++i) {
    Client& c = *clients_[i];
    const short re = fds[i + 1].revents;
    bool ok = true;
    if (re & (POLLIN | POLLHUP | POLLERR)) {
      if (!c.eof && !c.session.closing) ok = read_client(c);
      if (re & POLLERR) ok = false;
    }
    // A peer that half-closed after its requests still gets every answer.
    if (ok) ok = flush_client(c);
    // Lines held back by the high-water mark are answered once output drained.
    if (ok && !c.in.empty() && !c.session.closing && c.out.size() - c.out_off <= kOutHighWater) {
      frame_lines(c);
      ok = flush_client(c);
    }
    const bool drained = c.out_off >= c.out.size();
    if (ok && drained && (c.eof || c.session.closing)) ok = false;
    if (ok) {
      keep.push_back(std::move(clients_[i]));
    } else {
      ::close(c.fd);
    }
  }
  clients_ = std::move(keep);
  if (fds[0].revents & POLLIN) accept_clients();
}

}  // namespace cg
