// Small POSIX helpers for the durability code (internal to the library).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cuckoogate/store/status.hpp"

namespace cg::store::fsu {

// write(2) until everything is written (EINTR retried).
Status write_all(int fd, std::string_view data, const std::string& path);
Status pwrite_all(int fd, std::string_view data, std::uint64_t offset, const std::string& path);
// Reads a whole file.
Status read_file(const std::string& path, std::string* out);
// fsync of a directory, so a create/rename/unlink in it is durable.
Status fsync_dir(const std::string& dir);
Status fsync_fd(int fd, const std::string& path);
std::string dir_of(const std::string& path);
std::string join(const std::string& dir, const std::string& name);

}  // namespace cg::store::fsu
