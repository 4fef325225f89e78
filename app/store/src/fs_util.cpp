#include "fs_util.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cg::store::fsu {

Status write_all(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status("write " + path, errno);
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return Status::Ok();
}

Status pwrite_all(int fd, std::string_view data, std::uint64_t offset, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status("pwrite " + path, errno);
    }
    data.remove_prefix(static_cast<std::size_t>(n));
    offset += static_cast<std::uint64_t>(n);
  }
  return Status::Ok();
}

Status read_file(const std::string& path, std::string* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status("open " + path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return errno_status("stat " + path, e);
  }
  out->resize(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  while (done < out->size()) {
    const ssize_t n = ::read(fd, out->data() + done, out->size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      return errno_status("read " + path, e);
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  out->resize(done);
  ::close(fd);
  return Status::Ok();
}

FileWindow::~FileWindow() {
  if (fd_ >= 0) ::close(fd_);
}

Status FileWindow::open(const std::string& path) {
  path_ = path;
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return errno_status("open " + path, errno);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return errno_status("stat " + path, errno);
  size_ = static_cast<std::uint64_t>(st.st_size);
  (void)::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);  // advice: more readahead
  return Status::Ok();
}

Status FileWindow::at(std::uint64_t off, std::size_t ahead, std::string_view* out) {
  const std::uint64_t left = off < size_ ? size_ - off : 0;
  const std::size_t need = static_cast<std::size_t>(std::min<std::uint64_t>(ahead, left));
  if (off < base_ || off + need > base_ + len_) {
    // Reads 8 MiB at a time, or the asked-for span if larger; what the
    // window holds from `off` on is kept, not read again.
    constexpr std::size_t kChunk = std::size_t{8} << 20;
    const std::size_t want = std::max(kChunk, 2 * ahead);
    const bool inside = off >= base_ && off < base_ + len_;
    const std::size_t keep = inside ? static_cast<std::size_t>(base_ + len_ - off) : 0;
    if (cap_ < want) {
      std::unique_ptr<char[]> b(new char[want]);
      if (keep != 0) std::memcpy(b.get(), buf_.get() + (off - base_), keep);
      buf_ = std::move(b);
      cap_ = want;
    } else if (keep != 0) {
      std::memmove(buf_.get(), buf_.get() + (off - base_), keep);
    }
    len_ = keep;
    base_ = off;
    while (len_ < cap_ && base_ + len_ < size_) {
      const std::size_t room = static_cast<std::size_t>(std::min<std::uint64_t>(cap_ - len_, size_ - base_ - len_));
      const ssize_t n = ::pread(fd_, buf_.get() + len_, room, static_cast<off_t>(base_ + len_));
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno_status("read " + path_, errno);
      }
      if (n == 0) {
        // Shorter than when opened: another process cut it (the state
        // directory's lock keeps cooperating ones out). Reading on would
        // judge a tail that moves; recovery stops with an error instead.
        return Status(Errc::io_error, "read " + path_ + ": the file shrank while it was read");
      }
      len_ += static_cast<std::size_t>(n);
    }
  }
  // Here base_ <= off <= base_ + len_ (the window was refilled from off, or held it).
  *out = std::string_view(buf_.get() + (off - base_), static_cast<std::size_t>(base_ + len_ - off));
  return Status::Ok();
}

Status fsync_fd(int fd, const std::string& path) {
  if (::fsync(fd) != 0) return errno_status("fsync " + path, errno);
  return Status::Ok();
}

Status fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_status("open directory " + dir, errno);
  Status s = fsync_fd(fd, dir);
  ::close(fd);
  return s;
}

std::string dir_of(const std::string& path) {
  const auto pos = path.find_last_of('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return path.substr(0, pos);
}

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

}  // namespace cg::store::fsu
