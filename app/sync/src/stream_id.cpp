#include "cuckoogate/sync/stream_id.hpp"

#include <charconv>

namespace cg::sync {
namespace {

bool decimal(std::string_view s, uint64_t* v) {
  if (s.empty() || s.size() > 20) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

std::optional<StreamId> StreamId::parse(std::string_view s) {
  StreamId id;
  const std::size_t dash = s.find('-');
  if (!decimal(s.substr(0, dash), &id.ms)) return std::nullopt;
  if (dash != std::string_view::npos && !decimal(s.substr(dash + 1), &id.seq)) return std::nullopt;
  return id;
}

}  // namespace cg::sync
