#include "control/server.hpp"

#include "gateway/log.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstring>

namespace cg {
namespace {

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
  for (auto& c : clients_) close_client(*c);
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
      static constexpr char kBusy[] = "ERR 503 too many control clients (idle ones are closed after a timeout)\n";
      [[maybe_unused]] ssize_t w = ::send(c, kBusy, sizeof(kBusy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(c);
      if (refused_++ % 100 == 0)  // a flood of them is not a flood of log lines
        CG_LOG(WARNING, control, "control socket: %zu clients connected, new client refused (%llu so far)",
               clients_.size(), static_cast<unsigned long long>(refused_));
      continue;
    }
    auto cl = std::make_unique<Client>();
    cl->fd = c;
    cl->last_active = std::chrono::steady_clock::now();
    clients_.push_back(std::move(cl));
  }
}

bool ControlServer::wants_input(const Client& c) const {
  return !c.eof && !c.dead && !c.session.closing && c.unread() <= out_high_water_;
}

void ControlServer::frame_lines(Client& c) {
  // Backpressure: answers pile up no further than the high-water mark; the
  // rest of the input waits in the framer (and the socket) until the client
  // has read them.
  while (!c.session.closing && c.unread() <= out_high_water_) {
    const LineFramer::Item it = c.framer.next();
    if (it.kind == LineFramer::Kind::kNone) break;
    if (it.kind == LineFramer::Kind::kTooLong) {
      h_.line_too_long(c.session, c.out);
    } else {
      h_.handle_line(c.session, it.line, c.out);
    }
  }
}

void ControlServer::read_client(Client& c) {
  char buf[16384];
  std::size_t budget = kReadBudget;
  while (budget > 0 && wants_input(c)) {
    const ssize_t n = ::recv(c.fd, buf, std::min(sizeof(buf), budget), 0);
    if (n > 0) {
      c.last_active = std::chrono::steady_clock::now();
      budget -= static_cast<std::size_t>(n);
      c.framer.append(std::string_view(buf, static_cast<std::size_t>(n)));
      frame_lines(c);
      continue;
    }
    if (n == 0) {  // peer closed its side: answer what it sent, then close
      c.eof = true;
      return;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) c.dead = true;
    return;
  }
}

bool ControlServer::flush_client(Client& c) {
  while (c.out_off < c.out.size()) {
    const ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.out_off += static_cast<std::size_t>(n);
    c.last_active = std::chrono::steady_clock::now();
  }
  c.out.clear();
  c.out_off = 0;
  if (c.out.capacity() > out_high_water_) c.out.shrink_to_fit();  // a large list is not kept
  return true;
}

void ControlServer::close_client(Client& c) {
  h_.end_session(c.session);
  ::close(c.fd);
  c.fd = -1;
}

void ControlServer::poll_once(int timeout_ms) {
  using clock = std::chrono::steady_clock;
  std::vector<pollfd> fds;
  fds.reserve(clients_.size() + 1);
  clock::time_point now = clock::now();
  const bool accepting = now >= accept_paused_until_;
  fds.push_back({fd_, static_cast<short>(accepting ? POLLIN : 0), 0});
  clock::time_point wake = now + std::chrono::milliseconds(timeout_ms);
  for (auto& c : clients_) {
    short ev = 0;
    if (wants_input(*c)) {
      ev |= POLLIN;
      if (c->framer.ready()) wake = now;  // lines held back last round can go now
    }
    if (c->unread() > 0) ev |= POLLOUT;
    fds.push_back({c->fd, ev, 0});
    wake = std::min(wake, c->last_active + idle_timeout_);
  }
  const int hook_fd = hook_.fd ? hook_.fd() : -1;
  if (hook_fd >= 0) fds.push_back({hook_fd, POLLIN, 0});
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
  const int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, wait)));
  if (n < 0) return;  // EINTR: the caller's loop checks its stop flag and comes back

  // 1. Read: requests are handled, add/del queued.
  for (std::size_t i = 0; i < clients_.size(); ++i) {
    Client& c = *clients_[i];
    const short re = fds[i + 1].revents;
    if (re & (POLLIN | POLLHUP | POLLERR)) read_client(c);
    if (re & POLLERR) c.dead = true;
    if (wants_input(c)) frame_lines(c);
  }
  // 2. Group commit: one journal sync for every queued change of the round.
  h_.commit();
  // 2b. The hooked socket (after the commit: the changes it brings are
  // applied in their own log order either way).
  if (hook_fd >= 0 && (fds.back().revents & (POLLIN | POLLHUP | POLLERR))) hook_.on_readable();
  // 3. Answers out; close what is finished, failed or idle.
  now = clock::now();
  std::size_t unread_total = 0;
  std::vector<std::unique_ptr<Client>> keep;
  keep.reserve(clients_.size() + 1);
  for (auto& cp : clients_) {
    Client& c = *cp;
    bool close = c.dead || !flush_client(c);
    const bool drained = c.unread() == 0;
    if (drained && (c.eof || c.session.closing)) close = true;
    if (!close && now - c.last_active >= idle_timeout_) {
      static constexpr char kIdle[] = "ERR 408 idle timeout, closing the connection\n";
      if (drained) {
        [[maybe_unused]] ssize_t w = ::send(c.fd, kIdle, sizeof(kIdle) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      ++idle_closed_;
      CG_LOG(DEBUG, control, "control client idle for %lld ms: closed",
             static_cast<long long>(idle_timeout_.count()));
      close = true;
    }
    if (close) {
      close_client(c);
    } else {
      unread_total += c.unread();
      keep.push_back(std::move(cp));
    }
  }
  clients_ = std::move(keep);
  // 4. Clients that do not read what they asked for cannot pin unbounded
  // memory: past the total cap, the one holding the most is closed.
  while (unread_total > max_unread_total_) {
    auto big = std::max_element(clients_.begin(), clients_.end(),
                                [](const auto& a, const auto& b) { return a->unread() < b->unread(); });
    CG_LOG(WARNING, control, "control client closed: %zu bytes of answers unread, all clients %zu (limit %zu)",
           (*big)->unread(), unread_total, max_unread_total_);
    unread_total -= (*big)->unread();
    close_client(**big);
    clients_.erase(big);
    ++output_closed_;
  }
  if (fds[0].revents & POLLIN) accept_clients();
}

}  // namespace cg
