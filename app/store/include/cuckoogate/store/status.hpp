// Status values returned by the rule-store library. No exception crosses the
// store API except std::bad_alloc; every failure is one of these codes plus a
// human-readable message naming the file or key involved.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace cg::store {

// One byte: a bulk add's per-request results are a vector of these (a
// million-rule load wrote 4 MB of them before, faulted in page by page).
enum class Errc : unsigned char {
  ok = 0,
  exists,            // add of a key that is present: nothing changed
  updated,           // add of a present key with another lifetime: its expiry was replaced
  absent,            // delete of a key that is not present: nothing changed
  invalid_argument,  // bad input (empty key, oversized record, ...): nothing changed
  io_error,          // a system call failed; the store refuses further writes
  corrupt,           // persistent state is damaged before its tail (see docs/store.md)
};

const char* errc_name(Errc e) noexcept;

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Errc code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return {}; }

  bool ok() const noexcept { return code_ == Errc::ok; }
  Errc code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  // "ok", or "<code name>: <message>".
  std::string to_string() const;

 private:
  Errc code_ = Errc::ok;
  std::string message_;
};

// A Status naming a failed system call: "<what>: <strerror(err)>".
Status errno_status(std::string_view what, int err);

}  // namespace cg::store
