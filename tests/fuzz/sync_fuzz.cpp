// libFuzzer target for what the Redis sync reads from outside: stream entries
// (field/value pairs any tool may XADD), snapshots and Redis URLs. The input
// is split at 0x00 bytes into a URL, a snapshot text and field, value, field,
// value, ... Beyond "no crash, no UB", it checks: a decoded entry has the
// changes its op allows; re-encoding it decodes to the same canonical entry
// (so every gateway that reads it applies the same thing); a decoded snapshot
// re-encodes to the same rules; so does an offline-queue group (the snapshot
// text is read as one too); an accepted URL names TCP or a Unix socket;
// decoding into a reused Entry (as the reader does page after page) gives
// what a fresh decode gives; and the whole input read as a Redis reply
// through the FlatReply functions gives the tree hiredis' own reader builds.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <hiredis/hiredis.h>

#include "cuckoogate/sync/entry.hpp"
#include "cuckoogate/sync/redis_client.hpp"
#include "cuckoogate/sync/redis_url.hpp"
#include "cuckoogate/sync/stream_id.hpp"

namespace {

using cg::sync::EntryOp;

std::string canonical(const cg::sync::Entry& e) {
  std::string s;
  for (const auto& [k, v] : cg::sync::encode_entry(e)) s += k + "=" + v + ";";
  return s;
}

void check_entry(const cg::sync::Fields& f) {
  const cg::sync::EntryDecode d = cg::sync::decode_entry(f);
  if (!d.entry) {
    if (d.error.empty()) std::abort();
    return;
  }
  const cg::sync::Entry& e = *d.entry;
  const std::size_t n = e.changes.size();
  switch (e.op) {
    case EntryOp::kAdd:
      if (n != 1 || e.changes[0].del) std::abort();
      break;
    case EntryOp::kDel:
      if (n != 1 || !e.changes[0].del || e.changes[0].expiry_unix_ms != 0) std::abort();
      break;
    case EntryOp::kFlush:
      if (n != 0) std::abort();
      break;
    case EntryOp::kLoad:
      for (const auto& c : e.changes)
        if (c.del) std::abort();
      [[fallthrough]];
    case EntryOp::kBatch:
      if (n == 0) std::abort();
      break;
  }
  const cg::sync::EntryDecode again = cg::sync::decode_entry(cg::sync::encode_entry(e));
  if (!again.entry || canonical(*again.entry) != canonical(e)) std::abort();
}

// The reader decodes page after page into the same Entry objects.
void check_reused(const cg::sync::Fields& f) {
  static cg::sync::Entry reused;  // whatever the previous input left in it
  cg::sync::FieldViews v;
  for (const auto& [k, val] : f) v.emplace_back(k, val);
  std::string err;
  const bool ok = cg::sync::decode_entry_into(v, &reused, &err);
  const cg::sync::EntryDecode fresh = cg::sync::decode_entry(f);
  if (ok != fresh.entry.has_value()) std::abort();
  if (ok && (canonical(reused) != canonical(*fresh.entry) || reused.kind != fresh.entry->kind)) std::abort();
  if (!ok && err != fresh.error) std::abort();
}

// The flat reply of `resp` against hiredis' own redisReply tree.
bool same(const cg::sync::FlatReply& f, cg::sync::FlatReply::Ref n, const redisReply* r) {
  switch (r->type) {
    case REDIS_REPLY_ARRAY:
      if (!f.is_array(n) || f.size(n) != r->elements) return false;
      for (std::size_t i = 0; i < r->elements; ++i)
        if (!same(f, f.at(n, i), r->element[i])) return false;
      return true;
    case REDIS_REPLY_INTEGER:
      return f.integer(n) == r->integer && !f.is_array(n) && !f.is_nil(n);
    case REDIS_REPLY_NIL:
      return f.is_nil(n);
    case REDIS_REPLY_ERROR:
      return f.is_error(n) && f.str(n) == std::string_view(r->str, r->len);
    default:  // string, status
      return !f.is_error(n) && !f.is_array(n) && f.str(n) == std::string_view(r->str, r->len);
  }
}

// An aggregate header declaring more elements than the flat parser accepts
// (1 << 20): hiredis' own reader would allocate them all up front, and on a
// later protocol error walk them all to free them (seconds for 2^28). Any
// '*' counts, not only one at a line start: hiredis 0.14 skips the two bytes
// after a bulk string's payload without checking they are CRLF, so
// "*2\r\n$1\r\naXY*250000000\r\n" declares a nested array after "XY".
bool declares_huge_array(std::string_view resp) {
  for (std::size_t i = 0; i < resp.size(); ++i) {
    if (resp[i] != '*') continue;
    std::size_t j = i + 1, digits = 0;
    uint64_t v = 0;
    while (j < resp.size() && resp[j] >= '0' && resp[j] <= '9' && digits < 19) v = v * 10 + (resp[j++] - '0'), ++digits;
    if (v > (1u << 20)) return true;
  }
  return false;
}

void check_reply(std::string_view resp) {
  cg::sync::FlatReply flat;
  bool complete = false;
  std::string err;
  const bool ok = cg::sync::parse_flat_reply(resp, &flat, &complete, &err);
  if (declares_huge_array(resp)) return;  // ours must only not crash (or allocate it) here
  redisReader* rd = redisReaderCreate();
  void* r = nullptr;
  const bool ok2 = redisReaderFeed(rd, resp.data(), resp.size()) == REDIS_OK && redisReaderGetReply(rd, &r) == REDIS_OK;
  if (ok != ok2 || (ok && complete != (r != nullptr))) std::abort();
  if (r != nullptr && !same(flat, flat.root(), static_cast<redisReply*>(r))) std::abort();
  if (r != nullptr) freeReplyObject(r);
  redisReaderFree(rd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  for (;;) {
    const std::size_t z = in.find('\0');
    parts.push_back(in.substr(0, z));
    if (z == std::string_view::npos) break;
    in.remove_prefix(z + 1);
  }
  const cg::sync::RedisUrlParse u = cg::sync::parse_redis_url(parts[0]);
  if (u.url && u.url->host.empty() == u.url->unix_path.empty()) std::abort();
  if (!u.url && u.error.empty()) std::abort();
  if (const auto id = cg::sync::StreamId::parse(parts[0]); id && cg::sync::StreamId::parse(id->str()) != id)
    std::abort();
  if (parts.size() > 1) {
    std::vector<cg::sync::EntryChange> rules;
    std::string at, err;
    if (cg::sync::decode_snapshot(parts[1], &rules, &at, &err)) {
      std::vector<cg::sync::EntryChange> back;
      std::string at2;
      if (!cg::sync::decode_snapshot(cg::sync::encode_snapshot(rules, at), &back, &at2, &err) || at2 != at ||
          back.size() != rules.size())
        std::abort();
    } else if (err.empty()) {
      std::abort();
    }
    // The same text as an offline-queue group (read back from the journal):
    // decoded groups hold only add/del/flush and re-encode to the same text.
    std::vector<cg::sync::Entry> group;
    if (cg::sync::decode_outbox_group(parts[1], &group, &err)) {
      for (const auto& e : group)
        if (e.op != EntryOp::kAdd && e.op != EntryOp::kDel && e.op != EntryOp::kFlush) std::abort();
      std::vector<cg::sync::Entry> back;
      const std::string text = cg::sync::encode_outbox_group(group);
      if (!cg::sync::decode_outbox_group(text, &back, &err) || cg::sync::encode_outbox_group(back) != text)
        std::abort();
    } else if (err.empty()) {
      std::abort();
    }
  }
  cg::sync::Fields f;
  for (std::size_t i = 2; i + 1 < parts.size(); i += 2) f.emplace_back(parts[i], parts[i + 1]);
  check_entry(f);
  check_reused(f);
  check_reply(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
