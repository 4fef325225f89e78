// Files of every kind for the tests of what the gateway reads at start-up:
// a scratch directory, regular and sparse files, FIFOs, and a guard that
// turns a read blocked on a FIFO into a test failure instead of a hang.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <string>
#include <vector>

namespace cg::test {

// A fresh directory under /tmp, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/cg-scratch-XXXXXX";
    if (mkdtemp(tmpl) != nullptr) path_ = tmpl;
    EXPECT_FALSE(path_.empty()) << "mkdtemp failed";
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  std::string path(const std::string& name) const { return path_ + "/" + name; }

  // A regular file holding `text`.
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary) << text;
    return path(name);
  }
  // A regular file of `size` bytes that occupies no disk (one hole).
  std::string sparse(const std::string& name, off_t size) const {
    const int fd = ::open(path(name).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    EXPECT_GE(fd, 0) << path(name);
    EXPECT_EQ(::ftruncate(fd, size), 0) << path(name);
    ::close(fd);
    return path(name);
  }
  // A FIFO that nobody writes to.
  std::string fifo(const std::string& name) const {
    EXPECT_EQ(::mkfifo(path(name).c_str(), 0600), 0) << path(name);
    return path(name);
  }

 private:
  std::string path_;
};

// Runs `f` on a thread and returns its result, or nullopt if it was still
// running after `limit`: then each of `fifos` is opened for writing, which
// releases a reader blocked opening it, and `f` is waited for.
template <class F>
auto returns_within(std::chrono::seconds limit, const std::vector<std::string>& fifos, F f)
    -> std::optional<decltype(f())> {
  auto done = std::async(std::launch::async, std::move(f));
  if (done.wait_for(limit) == std::future_status::ready) return done.get();
  for (const std::string& p : fifos) {
    const int w = ::open(p.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (w >= 0) ::close(w);
  }
  done.wait();
  return std::nullopt;
}

}  // namespace cg::test
