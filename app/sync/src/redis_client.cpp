#include "cuckoogate/sync/redis_client.hpp"

#include <hiredis/hiredis.h>
#include <sys/time.h>

namespace cg::sync {
namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// argv for hiredis; the views must outlive the call.
struct Argv {
  std::vector<const char*> ptr;
  std::vector<std::size_t> len;
  explicit Argv(const std::vector<std::string_view>& args) {
    ptr.reserve(args.size());
    len.reserve(args.size());
    for (const std::string_view a : args) {
      ptr.push_back(a.data());
      len.push_back(a.size());
    }
  }
  int argc() const { return static_cast<int>(ptr.size()); }
};

}  // namespace

void ReplyFree::operator()(redisReply* r) const noexcept { freeReplyObject(r); }

bool reply_is_error(const redisReply* r) noexcept { return r != nullptr && r->type == REDIS_REPLY_ERROR; }
bool reply_is_nil(const redisReply* r) noexcept { return r != nullptr && r->type == REDIS_REPLY_NIL; }
bool reply_is_array(const redisReply* r) noexcept { return r != nullptr && r->type == REDIS_REPLY_ARRAY; }
std::size_t reply_size(const redisReply* r) noexcept { return reply_is_array(r) ? r->elements : 0; }
const redisReply* reply_at(const redisReply* r, std::size_t i) noexcept {
  return i < reply_size(r) ? r->element[i] : nullptr;
}
std::string_view reply_str(const redisReply* r) noexcept {
  if (r == nullptr || r->str == nullptr) return {};
  if (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS && r->type != REDIS_REPLY_ERROR) return {};
  return {r->str, r->len};
}
long long reply_int(const redisReply* r) noexcept {
  return r != nullptr && r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
}

std::unique_ptr<RedisConn> RedisConn::connect(const RedisUrl& url, std::chrono::milliseconds timeout,
                                              std::string* err) {
  const timeval tv = to_timeval(timeout);
  redisContext* c = url.unix_path.empty() ? redisConnectWithTimeout(url.host.c_str(), url.port, tv)
                                          : redisConnectUnixWithTimeout(url.unix_path.c_str(), tv);
  if (c == nullptr) {
    *err = "cannot allocate a redis context";
    return nullptr;
  }
  std::unique_ptr<RedisConn> conn(new RedisConn(c));
  if (c->err != 0) {
    *err = "cannot connect to " + describe(url) + ": " + c->errstr;
    return nullptr;
  }
  if (redisSetTimeout(c, tv) != REDIS_OK) {
    *err = "cannot set the redis timeout";
    return nullptr;
  }
  auto check = [&](const std::vector<std::string_view>& args, const char* what) {
    ReplyPtr r = conn->command(args, err);
    if (!r) return false;
    if (reply_is_error(r.get())) {
      *err = std::string(what) + " refused by " + describe(url) + ": " + std::string(reply_str(r.get()));
      return false;
    }
    return true;
  };
  if (!url.password.empty()) {
    const bool ok = url.user.empty() ? check({"AUTH", url.password}, "AUTH")
                                     : check({"AUTH", url.user, url.password}, "AUTH");
    if (!ok) return nullptr;
  }
  if (url.db != 0 && !check({"SELECT", std::to_string(url.db)}, "SELECT")) return nullptr;
  return conn;
}

RedisConn::~RedisConn() {
  if (c_ != nullptr) redisFree(c_);
}

bool RedisConn::fail(std::string* err) {
  broken_ = true;
  *err = c_->err != 0 ? std::string("redis: ") + c_->errstr : "redis: connection failed";
  return false;
}

ReplyPtr RedisConn::command(const std::vector<std::string_view>& args, std::string* err) {
  append(args);
  return reply(err);
}

void RedisConn::append(const std::vector<std::string_view>& args) {
  if (broken_) return;
  const Argv a(args);
  if (redisAppendCommandArgv(c_, a.argc(), const_cast<const char**>(a.ptr.data()), a.len.data()) != REDIS_OK) broken_ = true;
}

ReplyPtr RedisConn::reply(std::string* err) {
  if (broken_) {
    *err = "redis: connection is broken";
    return nullptr;
  }
  void* r = nullptr;
  if (redisGetReply(c_, &r) != REDIS_OK || r == nullptr) {
    fail(err);
    return nullptr;
  }
  return ReplyPtr(static_cast<redisReply*>(r));
}

bool RedisConn::send(const std::vector<std::string_view>& args, std::string* err) {
  append(args);
  int done = 0;
  while (!broken_ && !done) {
    if (redisBufferWrite(c_, &done) != REDIS_OK) return fail(err);
  }
  return !broken_ || fail(err);
}

bool RedisConn::read_ready(ReplyPtr* out, std::string* err) {
  out->reset();
  if (broken_) return fail(err);
  if (redisBufferRead(c_) != REDIS_OK) return fail(err);  // includes EOF
  void* r = nullptr;
  if (redisGetReplyFromReader(c_, &r) != REDIS_OK) return fail(err);
  out->reset(static_cast<redisReply*>(r));
  return true;
}

int RedisConn::fd() const noexcept { return c_ != nullptr ? c_->fd : -1; }

}  // namespace cg::sync
