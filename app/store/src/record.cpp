#include "cuckoogate/store/record.hpp"

#include <cstring>

namespace cg::store {

namespace {
template <class T>
void put(std::string* out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out->append(b, sizeof(T));
}
template <class T>
T get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
}  // namespace

namespace {
void encode_parts(RecordOp op, std::uint64_t id, std::int64_t added, std::int64_t expiry, std::string_view key,
                  std::string_view set, std::string_view text, std::uint8_t action, std::string* out) {
  out->push_back(static_cast<char>(op));
  // version: 1 is what readers before sets understand, 2 what readers
  // before actions do; 3 only for a record that has an action.
  out->push_back(action != 0 ? 3 : set.empty() ? 1 : 2);
  put<std::uint16_t>(out, static_cast<std::uint16_t>(set.size()));
  put<std::uint32_t>(out, static_cast<std::uint32_t>(key.size()));
  put<std::uint64_t>(out, id);
  put<std::int64_t>(out, added);
  put<std::int64_t>(out, expiry);
  out->append(key);
  out->append(set);
  if (action != 0) out->push_back(static_cast<char>(action));
  out->append(text);
}
}  // namespace

void encode_record(const StoreRecord& r, std::string* out) {
  encode_parts(r.op, r.id, r.added_unix_ms, r.expiry_unix_ms, r.key, r.set, r.text,
               r.op == RecordOp::add ? r.action : 0, out);
}

void encode_add_record(std::uint64_t id, std::int64_t added_unix_ms, std::int64_t expiry_unix_ms,
                       std::string_view key, std::string_view set, std::string_view text, std::uint8_t action,
                       std::string* out) {
  encode_parts(RecordOp::add, id, added_unix_ms, expiry_unix_ms, key, set, text, action, out);
}

bool decode_record(std::string_view p, StoreRecord* r) {
  if (p.size() < kStoreRecordFixed) return false;
  const auto op = static_cast<std::uint8_t>(p[0]);
  const auto version = static_cast<std::uint8_t>(p[1]);
  if (op < 1 || op > 6 || version < 1 || version > 3) return false;
  const auto key_len = get<std::uint32_t>(p.data() + 4);
  const auto set_len = get<std::uint16_t>(p.data() + 2);
  if (version != 3 && (version == 1) != (set_len == 0)) return false;
  if (key_len > p.size() - kStoreRecordFixed || set_len > p.size() - kStoreRecordFixed - key_len) return false;
  std::size_t at = kStoreRecordFixed + key_len + set_len;
  r->action = 0;
  if (version == 3) {  // written only for an add with an action
    // Not 0 (written as version 1 or 2) and not 0xff (kKeepAction, a
    // request's "leave it", never a rule's state).
    if (op != static_cast<std::uint8_t>(RecordOp::add) || at == p.size() || p[at] == 0 ||
        static_cast<std::uint8_t>(p[at]) == 0xff)
      return false;
    r->action = static_cast<std::uint8_t>(p[at++]);
  }
  r->op = static_cast<RecordOp>(op);
  r->id = get<std::uint64_t>(p.data() + 8);
  r->added_unix_ms = get<std::int64_t>(p.data() + 16);
  r->expiry_unix_ms = get<std::int64_t>(p.data() + 24);
  r->key.assign(p.substr(kStoreRecordFixed, key_len));
  r->set.assign(p.substr(kStoreRecordFixed + key_len, set_len));
  r->text.assign(p.substr(at));
  return true;
}

}  // namespace cg::store
