#include "cuckoogate/store/status.hpp"

#include <cstring>

namespace cg::store {

const char* errc_name(Errc e) noexcept {
  switch (e) {
    case Errc::ok: return "ok";
    case Errc::exists: return "exists";
    case Errc::updated: return "updated";
    case Errc::absent: return "absent";
    case Errc::invalid_argument: return "invalid_argument";
    case Errc::io_error: return "io_error";
    case Errc::corrupt: return "corrupt";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  std::string s = errc_name(code_);
  if (!message_.empty()) {
    s += ": ";
    s += message_;
  }
  return s;
}

Status errno_status(std::string_view what, int err) {
  std::string msg(what);
  msg += ": ";
  msg += std::strerror(err);
  return {Errc::io_error, std::move(msg)};
}

}  // namespace cg::store
