// A small RAII layer over one hiredis (0.14) connection. Blocking commands
// with a timeout for the control thread's short requests (XADD, XREAD without
// BLOCK, XINFO), and one command kept in flight whose reply is read when poll()
// says the socket is readable (XREAD BLOCK), so the caller's poll loop never
// sleeps inside Redis.
//
// Thread safety: a RedisConn belongs to one thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cuckoogate/sync/redis_url.hpp"

struct redisContext;
struct redisReply;

namespace cg::sync {

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

class RedisConn {
 public:
  // Connects (with `timeout` for the connect and every later command), then
  // AUTH and SELECT as the URL says. nullptr and *err on failure.
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

  int fd() const noexcept;
  bool broken() const noexcept { return broken_; }

 private:
  explicit RedisConn(redisContext* c) : c_(c) {}
  bool fail(std::string* err);
  redisContext* c_ = nullptr;
  bool broken_ = false;
};

}  // namespace cg::sync
