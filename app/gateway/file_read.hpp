// Reading a whole input file at start-up (a rule file, the TOML configuration)
// without trusting what the path names: only a regular file of bounded size is
// read; a directory, FIFO, device or socket is an error, never a hang, an
// empty read or an unbounded allocation. DPDK-free.
#pragma once

#include <cstddef>
#include <string>

namespace cg {

// Reads all of `path` into `out` (replacing its contents).
//
// The file is opened with O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, so
// opening a FIFO or a terminal returns at once, and the opened descriptor is
// checked with fstat (no window between the check and the open). At most
// `max_bytes` + 1 bytes are ever read, so a file that grows while being read
// cannot make the memory unbounded. `max_bytes` must be less than SIZE_MAX.
//
// Returns true on success (an empty file is fine). Otherwise returns false,
// leaves `out` untouched and sets *err to one line naming the path, with
// `what` (e.g. "rule file") naming the kind of file in the size error:
//   "PATH: cannot open: No such file or directory"   (any open(2) error)
//   "PATH: is a directory"
//   "PATH: not a regular file (a FIFO)"               (or a character device,
//                                                      a block device, a socket)
//   "PATH: larger than N bytes (1 GiB, the limit for a rule file)"
//   "PATH: read error: ..."
// Thread-safe: no shared state.
[[nodiscard]] bool read_regular_file(const std::string& path, const char* what, std::size_t max_bytes,
                                     std::string& out, std::string* err);

}  // namespace cg
