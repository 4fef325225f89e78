// libFuzzer target for the TOML configuration (issue 9): whatever the bytes,
// parse_config returns a configuration within the documented ranges or an
// error naming the file; it never throws (toml++ reports syntax errors by
// throwing), crashes or overflows the stack (deep dotted keys).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gateway/config.hpp"

namespace {

bool c_safe(const std::string& s) { return s.find('\0') == std::string::npos; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  cg::GatewayConfig c;
  std::string err;
  const bool ok = cg::parse_config(text, "fuzz.toml", c, &err);
  if (!ok) {
    if (err.rfind("fuzz.toml", 0) != 0) std::abort();  // every error names the file
    return 0;
  }
  if (!err.empty()) std::abort();
  if (c.workers && (*c.workers < 1 || *c.workers > 128)) std::abort();
  if (c.capacity < 1 || c.capacity > 536870912) std::abort();
  for (uint16_t d : {c.rx_desc, c.tx_desc})
    if (d < 64 || d > 32768) std::abort();
  if (!c_safe(c.ctl) || !c_safe(c.state_dir)) std::abort();
  for (const auto* list : {&c.eal, &c.rules})
    for (const std::string& s : *list)
      if (!c_safe(s)) std::abort();
  for (const cg::PairConfig& p : c.pairs)
    if (p.a.empty() || p.b.empty() || !c_safe(p.a) || !c_safe(p.b)) std::abort();
  // The same bytes give the same configuration.
  cg::GatewayConfig again;
  if (!cg::parse_config(text, "fuzz.toml", again, &err) || again.eal != c.eal || again.rules != c.rules ||
      again.pairs.size() != c.pairs.size() || again.capacity != c.capacity)
    std::abort();
  return 0;
}
