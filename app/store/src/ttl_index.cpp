#include "cuckoogate/store/ttl_index.hpp"

namespace cg::store {

std::string TtlIndex::encode(std::int64_t deadline_ms, std::string_view key) {
  const std::uint64_t u = static_cast<std::uint64_t>(deadline_ms) ^ (std::uint64_t{1} << 63);
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>(u >> (56 - 8 * i));
  out.append(key);
  return out;
}

std::int64_t TtlIndex::decode_deadline(std::string_view index_key) {
  std::uint64_t u = 0;
  for (std::size_t i = 0; i < 8 && i < index_key.size(); ++i) {
    u = (u << 8) | static_cast<unsigned char>(index_key[i]);
  }
  return static_cast<std::int64_t>(u ^ (std::uint64_t{1} << 63));
}

bool TtlIndex::schedule(std::int64_t deadline_ms, std::string_view key) {
  return map_.insert(encode(deadline_ms, key), Empty{}) == InsertResult::inserted;
}

bool TtlIndex::cancel(std::int64_t deadline_ms, std::string_view key) {
  return map_.erase(encode(deadline_ms, key)) == EraseResult::erased;
}

std::vector<std::pair<std::int64_t, std::string>> TtlIndex::pop_due(std::int64_t now_ms,
                                                                    std::size_t max) {
  std::vector<std::string> due;
  if (now_ms != INT64_MAX) {
    const std::string hi = encode(now_ms + 1, {});  // every deadline <= now_ms sorts below
    for (auto c = map_.scan({}, std::string_view(hi)); due.size() < max && c.next();) {
      due.emplace_back(c.key());
    }
  } else {
    for (auto c = map_.scan(); due.size() < max && c.next();) due.emplace_back(c.key());
  }
  std::vector<std::pair<std::int64_t, std::string>> out;
  out.reserve(due.size());
  for (auto& k : due) {
    if (map_.erase(k) == EraseResult::erased) {  // a concurrent popper may win
      out.emplace_back(decode_deadline(k), k.substr(8));
    }
  }
  return out;
}

std::optional<std::int64_t> TtlIndex::next_deadline() const {
  auto c = map_.scan();
  if (!c.next()) return std::nullopt;
  return decode_deadline(c.key());
}

}  // namespace cg::store
