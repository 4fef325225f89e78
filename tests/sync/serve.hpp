// The control loop of test gateways: ticks each StreamSync, polls the
// followers' sockets and hands them what arrived, until pred holds or the
// timeout passes (false).
#pragma once

#include <poll.h>

#include <chrono>
#include <vector>

#include "cuckoogate/sync/stream_sync.hpp"

namespace cg::test {

template <class Pred>
bool serve_until(const std::vector<sync::StreamSync*>& syncs, Pred pred, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::vector<pollfd> fds;
    for (sync::StreamSync* s : syncs) {
      s->tick();
      fds.push_back({s->fd(), POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), 20);
    for (std::size_t i = 0; i < syncs.size(); ++i)
      if (fds[i].fd >= 0 && (fds[i].revents & (POLLIN | POLLHUP | POLLERR))) syncs[i]->on_readable();
  }
  return true;
}

}  // namespace cg::test
