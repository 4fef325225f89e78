// The control loop of test gateways: ticks each StreamSync, polls the
// followers' sockets and hands them what arrived, until pred holds or the
// timeout passes (false). And the stream entry the tests publish most.
#pragma once

#include <poll.h>

#include <chrono>
#include <cstdint>
#include <string_view>
#include <vector>

#include "cuckoogate/keys/rule.hpp"
#include "cuckoogate/sync/entry.hpp"
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

// An entry adding one rule (text must parse), expiring at `exp` (0: never).
inline sync::Entry add(std::string_view text, int64_t exp = 0) {
  sync::Entry e;
  e.op = sync::EntryOp::kAdd;
  e.changes.push_back({false, *parse_rule(text).rule, exp});
  return e;
}

}  // namespace cg::test
