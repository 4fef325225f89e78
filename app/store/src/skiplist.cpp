#include "cuckoogate/store/skiplist_map.hpp"

namespace cg::store {

std::optional<std::string> prefix_upper_bound(std::string_view prefix) {
  std::string hi(prefix);
  while (!hi.empty()) {
    auto last = static_cast<unsigned char>(hi.back());
    if (last != 0xff) {
      hi.back() = static_cast<char>(last + 1);
      return hi;
    }
    hi.pop_back();  // "ab\xff" -> bound is "ac"
  }
  return std::nullopt;
}

}  // namespace cg::store
