// libFuzzer target for the control protocol's request language: the input is
// a byte stream as a client would send it, cut into chunks at the positions
// the first bytes choose, framed by LineFramer and parsed line by line as the
// server does (every command's parser, and the batch-line parser). Beyond
// "no crash, no UB", it checks the framing invariants: the framer never holds
// more than its limit, every line it returns is within the limit and holds no
// '\n', and a line accepted as a request holds no control character but a
// final CR or tabs — so one line can never carry two commands.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "control/request.hpp"

namespace {

constexpr std::size_t kMax = 64;  // small, so the fuzzer reaches the limit

void check_line(std::string_view line) {
  if (line.size() > kMax || line.find('\n') != std::string_view::npos) std::abort();
  for (const cg::RequestParse& p : {cg::parse_request(line), cg::parse_batch_line(line)}) {
    if (!p.req) {
      if (p.error.empty() || p.code < 400 || p.code > 599) std::abort();
      continue;
    }
    for (std::size_t i = 0; i < line.size(); ++i) {
      const auto c = static_cast<unsigned char>(line[i]);
      const bool final_cr = c == '\r' && i + 1 == line.size();
      if (((c < 0x20 && c != '\t') || c == 0x7f) && !final_cr) std::abort();
    }
    const cg::Request& r = *p.req;
    const bool needs_rule = r.verb == cg::Verb::kAdd || r.verb == cg::Verb::kDel || r.verb == cg::Verb::kCheck;
    if (needs_rule != r.rule.has_value()) std::abort();
    if (r.ttl_ms < 0 || (r.ttl_ms != 0 && r.verb != cg::Verb::kAdd)) std::abort();
    if (r.verb == cg::Verb::kFlush && r.all == r.kind.has_value()) std::abort();
    // Named sets: only a valid name is ever accepted, replace only with a set.
    if (!r.set.empty() && !cg::valid_set_name(r.set)) std::abort();
    if (r.replace && (r.verb != cg::Verb::kLoad || r.set.empty())) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::size_t chunk = 1 + data[0] % 37;
  std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);
  cg::LineFramer f(kMax);
  while (!stream.empty()) {
    const std::string_view part = stream.substr(0, chunk);
    stream.remove_prefix(part.size());
    f.append(part);
    for (;;) {
      const cg::LineFramer::Item it = f.next();
      if (it.kind == cg::LineFramer::Kind::kNone) break;
      if (it.kind == cg::LineFramer::Kind::kLine) check_line(it.line);
    }
    if (f.buffered() > kMax) std::abort();
  }
  return 0;
}
