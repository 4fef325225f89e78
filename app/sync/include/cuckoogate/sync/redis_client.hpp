// A small RAII layer over one hiredis (0.14) connection. Blocking commands
// with a timeout for the control thread's short requests (XADD, XREAD without
// BLOCK, XINFO), and one command kept in flight whose reply is read when poll()
// says the socket is readable (XREAD BLOCK), so the caller's poll loop never
// sleeps inside Redis. TLS (rediss://) goes through a TlsPipe, under the
// same hiredis calls.
//
// Thread safety: a RedisConn belongs to one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cuckoogate/sync/redis_url.hpp"

struct redisContext;
struct redisReply;
struct redisReplyObjectFunctions;

namespace cg::sync {

class TlsPipe;

struct ReplyFree {
  void operator()(redisReply* r) const noexcept;
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyFree>;

// Reply accessors that never trust the shape of what came back.
bool reply_is_error(const redisReply* r) noexcept;
bool reply_is_nil(const redisReply* r) noexcept;
bool reply_is_array(const redisReply* r) noexcept;
std::size_t reply_size(const redisReply* r) noexcept;           // array elements, 0 otherwise
const redisReply* reply_at(const redisReply* r, std::size_t i) noexcept;  // nullptr if absent
// String, status or error text; "" for other types.
std::string_view reply_str(const redisReply* r) noexcept;
long long reply_int(const redisReply* r) noexcept;              // integer replies, 0 otherwise

// A reply built without an allocation per element: hiredis' default reader
// makes a redisReply (and a string copy) for every array element and string,
// about ten per stream entry. A FlatReply keeps every node in one vector and
// every string in one arena, both reused from reply to reply, so reading a
// page of 10 000 entries allocates nothing once they have grown. For the
// XREAD pages of the catch-up and the follower (RedisConn::reply_flat,
// read_ready_flat). Refs are indexes; kNone for absent.
class FlatReply {
 public:
  using Ref = uint32_t;
  static constexpr Ref kNone = UINT32_MAX;
  // The reply itself (kNone before one was read).
  Ref root() const noexcept { return root_; }
  bool is_error(Ref r) const noexcept { return type(r) == kError; }
  bool is_nil(Ref r) const noexcept { return type(r) == kNil; }
  bool is_array(Ref r) const noexcept { return type(r) == kArray; }
  std::size_t size(Ref r) const noexcept { return is_array(r) ? nodes_[r].n : 0; }
  Ref at(Ref r, std::size_t i) const noexcept { return i < size(r) ? kids_[nodes_[r].off + i] : kNone; }
  // String, status or error text; "" for other types. Valid until the next read.
  std::string_view str(Ref r) const noexcept;
  long long integer(Ref r) const noexcept { return type(r) == kInteger ? static_cast<long long>(nodes_[r].off) : 0; }
  void clear() noexcept;

  // For the reader callbacks (redis_client.cpp).
  enum Type : uint8_t { kString, kStatus, kError, kInteger, kNil, kArray, kAbsent };
  struct Node {
    Type type = kAbsent;
    uint32_t n = 0;    // array: elements; string: length
    uint64_t off = 0;  // array: first kid in kids_; string: offset in arena_; integer: value
  };
  Ref add(Node n, Ref parent, int idx);
  Ref add_string(Type t, const char* s, std::size_t len, Ref parent, int idx);
  void set_root(Ref r) noexcept { root_ = r; }

 private:
  Type type(Ref r) const noexcept { return r < nodes_.size() ? nodes_[r].type : kAbsent; }
  std::vector<Node> nodes_;
  std::vector<Ref> kids_;
  std::string arena_;
  Ref root_ = kNone;
};

// One reply from raw RESP bytes through the same reader functions as
// RedisConn::reply_flat (tests and fuzzing). *complete false: the bytes hold
// only part of a reply. false and *err: a protocol error.
bool parse_flat_reply(std::string_view resp, FlatReply* out, bool* complete, std::string* err);

class RedisConn {
 public:
  // Connects (with `timeout` for the connect and every later command; TLS
  // when url.tls.on), then AUTH and SELECT as the URL says, then PING, so a
  // server that does not answer Redis (a TLS port reached without TLS, a
  // client certificate refused after the handshake) fails here, with a hint.
  // nullptr and *err on failure.
  static std::unique_ptr<RedisConn> connect(const RedisUrl& url, std::chrono::milliseconds timeout,
                                            std::string* err);
  ~RedisConn();
  RedisConn(const RedisConn&) = delete;
  RedisConn& operator=(const RedisConn&) = delete;

  // One command, its reply (which may be an error reply). nullptr and *err
  // when the connection failed; the connection is then broken() for good.
  ReplyPtr command(const std::vector<std::string_view>& args, std::string* err);
  // Pipelining: queue commands, then take their replies in order.
  void append(const std::vector<std::string_view>& args);
  ReplyPtr reply(std::string* err);

  // The command whose reply comes later: sends it now (false on failure).
  bool send(const std::vector<std::string_view>& args, std::string* err);
  // After poll() reported the socket readable: reads what arrived. A complete
  // reply goes to *out (true); none yet leaves *out empty (true); false and
  // *err when the connection failed or closed.
  bool read_ready(ReplyPtr* out, std::string* err);

  // reply() and read_ready() into a FlatReply (cleared when a new reply
  // starts): the reply's nodes and strings without an allocation each.
  // hiredis' reader builds the reply through our functions for the call; a
  // reply left partial keeps them until it is complete, so a connection is
  // read either way between replies, never both within one.
  // read_ready_flat: *complete false while the reply is partial (call again
  // with the same FlatReply when the socket is readable).
  bool reply_flat(FlatReply* out, std::string* err);
  bool read_ready_flat(FlatReply* out, bool* complete, std::string* err);

  int fd() const noexcept;
  bool broken() const noexcept { return broken_; }

 private:
  RedisConn(redisContext* c, std::unique_ptr<TlsPipe> tls);
  bool fail(std::string* err);
  bool read_flat(FlatReply* out, bool wait, bool* complete, std::string* err);
  redisContext* c_ = nullptr;
  std::unique_ptr<TlsPipe> tls_;  // after c_ in destruction: hiredis closes its end first
  redisReplyObjectFunctions* default_functions_ = nullptr;  // hiredis' reader's own
  bool broken_ = false;
};

}  // namespace cg::sync
