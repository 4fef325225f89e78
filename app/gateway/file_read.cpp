#include "gateway/file_read.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

namespace cg {
namespace {

// Read in pieces of this size once the file outgrows what fstat announced.
constexpr std::size_t kChunk = std::size_t{1} << 20;

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// "a FIFO", "a character device", ...: what a non-regular file is.
const char* file_type(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a plain file";
}

// 1073741824 -> "1 GiB"; sizes that are no whole unit stay in bytes.
std::string human_size(std::size_t n) {
  static constexpr struct { std::size_t unit; const char* name; } kUnits[] = {
      {std::size_t{1} << 30, "GiB"}, {std::size_t{1} << 20, "MiB"}, {std::size_t{1} << 10, "KiB"}};
  for (const auto& u : kUnits)
    if (n >= u.unit && n % u.unit == 0) return std::to_string(n / u.unit) + " " + u.name;
  return std::to_string(n) + " bytes";
}

}  // namespace

bool read_regular_file(const std::string& path, const char* what, std::size_t max_bytes,
                       std::string& out, std::string* err) {
  auto fail = [&](const std::string& why) {
    *err = path + ": " + why;
    return false;
  };
  const std::string too_large = "larger than " + std::to_string(max_bytes) + " bytes (" +
                                human_size(max_bytes) + ", the limit for a " + what + ")";

  // O_NONBLOCK: opening a FIFO without a writer would otherwise wait forever.
  // It changes nothing for the regular files that are then read.
  Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
  if (f.fd < 0) {
    const int e = errno;
    // A socket cannot be opened at all (ENXIO): say what it is. The stat is
    // only for the message; nothing is read from what it finds.
    struct stat st {};
    if (e == ENXIO && ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      return fail(std::string("not a regular file (") + file_type(st.st_mode) + ")");
    return fail(std::string("cannot open: ") + std::strerror(e));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) return fail(std::string("cannot stat: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return fail("is a directory");
  if (!S_ISREG(st.st_mode)) return fail(std::string("not a regular file (") + file_type(st.st_mode) + ")");
  if (st.st_size < 0 || static_cast<uintmax_t>(st.st_size) > max_bytes) return fail(too_large);

  // Read to the end, whatever fstat said (files in /proc report 0), but never
  // more than max_bytes + 1: the extra byte tells a file that grew too large.
  const std::size_t cap = max_bytes + 1;
  std::string data;
  data.reserve(std::min(static_cast<std::size_t>(st.st_size) + 1, cap));
  for (;;) {
    const std::size_t have = data.size();
    if (have >= cap) return fail(too_large);
    // Fill what is reserved (the announced size and one byte to see the end)
    // before growing, so an unchanged file is read without reallocating.
    const std::size_t room = data.capacity() > have ? data.capacity() - have : kChunk;
    const std::size_t want = std::min(cap - have, room);
    data.resize(have + want);
    const ssize_t n = ::read(f.fd, data.data() + have, want);
    if (n < 0) {
      const int e = errno;
      data.resize(have);
      if (e == EINTR) continue;
      return fail(std::string("read error: ") + std::strerror(e));
    }
    data.resize(have + static_cast<std::size_t>(n));
    if (n == 0) break;
  }
  out = std::move(data);
  return true;
}

}  // namespace cg
