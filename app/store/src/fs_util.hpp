// Small POSIX helpers for the durability code (internal to the library).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "cuckoogate/store/status.hpp"

namespace cg::store::fsu {

// write(2) until everything is written (EINTR retried).
Status write_all(int fd, std::string_view data, const std::string& path);
Status pwrite_all(int fd, std::string_view data, std::uint64_t offset, const std::string& path);
// Reads a whole file.
Status read_file(const std::string& path, std::string* out);
// A file read front to back through a window of bounded size: recovery
// parses a journal or snapshot record by record without holding the whole
// file (a 10 M-rule journal is ~700 MB: read whole, it took as much memory
// again at every start, zeroed by resize() and by the kernel's first touch).
class FileWindow {
 public:
  FileWindow() = default;
  FileWindow(const FileWindow&) = delete;
  FileWindow& operator=(const FileWindow&) = delete;
  ~FileWindow();
  Status open(const std::string& path);
  // The file's size when opened (a file that shrinks while it is read is an
  // io_error of at()).
  std::uint64_t size() const noexcept { return size_; }
  // The bytes from `off` (<= size()) to the end of the window: at least
  // `ahead` of them, or every byte up to the end of the file. The view is
  // valid until the next call.
  Status at(std::uint64_t off, std::size_t ahead, std::string_view* out);

 private:
  int fd_ = -1;
  std::string path_;
  std::uint64_t size_ = 0;
  std::unique_ptr<char[]> buf_;  // not zero-filled: every byte handed out was read
  std::size_t cap_ = 0;
  std::uint64_t base_ = 0;  // buf_[0, len_) holds the file's [base_, base_ + len_)
  std::size_t len_ = 0;
};
// fsync of a directory, so a create/rename/unlink in it is durable.
Status fsync_dir(const std::string& dir);
Status fsync_fd(int fd, const std::string& path);
std::string dir_of(const std::string& path);
std::string join(const std::string& dir, const std::string& name);

}  // namespace cg::store::fsu
