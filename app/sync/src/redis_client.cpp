#include "cuckoogate/sync/redis_client.hpp"

#include <hiredis/hiredis.h>
#include <sys/time.h>
#include <unistd.h>

#include "cuckoogate/sync/tls_pipe.hpp"

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

// FlatReply's reader functions: handles are a node's index + 1 (hiredis
// takes NULL for out of memory). A throw must not cross hiredis' C frames.
void* handle(FlatReply::Ref r) { return reinterpret_cast<void*>(static_cast<uintptr_t>(r) + 1); }
FlatReply::Ref ref(const void* h) { return static_cast<FlatReply::Ref>(reinterpret_cast<uintptr_t>(h) - 1); }
FlatReply* flat_of(const redisReadTask* t) { return static_cast<FlatReply*>(t->privdata); }
FlatReply::Ref parent_of(const redisReadTask* t) {
  return t->parent != nullptr ? ref(t->parent->obj) : FlatReply::kNone;
}

void* flat_string(const redisReadTask* t, char* s, size_t len) {
  const FlatReply::Type type = t->type == REDIS_REPLY_ERROR    ? FlatReply::kError
                               : t->type == REDIS_REPLY_STATUS ? FlatReply::kStatus
                                                               : FlatReply::kString;
  try {
    return handle(flat_of(t)->add_string(type, s, len, parent_of(t), t->idx));
  } catch (...) {
    return nullptr;
  }
}
// No page or snapshot chunk the gateway asks for comes near this; a reply
// that declares more (a broken or hostile server: "*2000000000") is an
// error, not gigabytes allocated up front (sync_fuzz found it).
constexpr int kMaxArrayElements = 1 << 20;

void* flat_array(const redisReadTask* t, int n) {
  if (n < 0 || n > kMaxArrayElements) return nullptr;
  try {
    return handle(flat_of(t)->add({FlatReply::kArray, static_cast<uint32_t>(n), 0}, parent_of(t), t->idx));
  } catch (...) {
    return nullptr;
  }
}
void* flat_integer(const redisReadTask* t, long long v) {
  try {
    return handle(flat_of(t)->add({FlatReply::kInteger, 0, static_cast<uint64_t>(v)}, parent_of(t), t->idx));
  } catch (...) {
    return nullptr;
  }
}
void* flat_nil(const redisReadTask* t) {
  try {
    return handle(flat_of(t)->add({FlatReply::kNil, 0, 0}, parent_of(t), t->idx));
  } catch (...) {
    return nullptr;
  }
}
void flat_free(void*) {}  // the FlatReply owns everything (hiredis calls this on errors)

redisReplyObjectFunctions flat_functions = {flat_string, flat_array, flat_integer, flat_nil, flat_free};

}  // namespace

std::string_view FlatReply::str(Ref r) const noexcept {
  const Type t = type(r);
  if (t != kString && t != kStatus && t != kError) return {};
  return {arena_.data() + nodes_[r].off, nodes_[r].n};
}

void FlatReply::clear() noexcept {
  nodes_.clear();
  kids_.clear();
  arena_.clear();
  root_ = kNone;
  // One huge reply (a `load` entry of a million rules) should not pin its arena.
  if (arena_.capacity() > (std::size_t{64} << 20)) arena_.shrink_to_fit();
}

FlatReply::Ref FlatReply::add(Node n, Ref parent, int idx) {
  if (n.type == kArray) {
    n.off = kids_.size();
    kids_.resize(kids_.size() + n.n, kNone);
  }
  const Ref r = static_cast<Ref>(nodes_.size());
  nodes_.push_back(n);
  if (parent != kNone && parent < nodes_.size() && nodes_[parent].type == kArray && idx >= 0 &&
      static_cast<uint32_t>(idx) < nodes_[parent].n)
    kids_[nodes_[parent].off + static_cast<std::size_t>(idx)] = r;
  return r;
}

FlatReply::Ref FlatReply::add_string(Type t, const char* s, std::size_t len, Ref parent, int idx) {
  const std::size_t off = arena_.size();
  arena_.append(s, len);
  return add({t, static_cast<uint32_t>(len), off}, parent, idx);
}

bool parse_flat_reply(std::string_view resp, FlatReply* out, bool* complete, std::string* err) {
  *complete = false;
  out->clear();
  redisReader* rd = redisReaderCreateWithFunctions(&flat_functions);
  if (rd == nullptr) {
    *err = "cannot allocate a reader";
    return false;
  }
  rd->privdata = out;
  void* r = nullptr;
  const bool ok = redisReaderFeed(rd, resp.data(), resp.size()) == REDIS_OK && redisReaderGetReply(rd, &r) == REDIS_OK;
  if (!ok) *err = rd->errstr;
  if (ok && r != nullptr) {
    out->set_root(ref(r));
    *complete = true;
  }
  redisReaderFree(rd);  // frees a partial reply through flat_free: nothing
  return ok;
}

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
  std::unique_ptr<TlsPipe> tls;
  redisContext* c = nullptr;
  if (url.tls.on) {
    if (!url.unix_path.empty()) {
      *err = "TLS to a Unix socket is not supported (" + describe(url) + ")";
      return nullptr;
    }
    tls = TlsPipe::open(url.host, url.port, url.tls, timeout, err);
    if (!tls) {
      *err = "cannot connect to " + describe(url) + ": " + *err;
      return nullptr;
    }
    const int fd = tls->release_app_fd();
    c = redisConnectFd(fd);
    if (c == nullptr) ::close(fd);
  } else {
    c = url.unix_path.empty() ? redisConnectWithTimeout(url.host.c_str(), url.port, tv)
                              : redisConnectUnixWithTimeout(url.unix_path.c_str(), tv);
  }
  if (c == nullptr) {
    *err = "cannot allocate a redis context";
    return nullptr;
  }
  std::unique_ptr<RedisConn> conn(new RedisConn(c, std::move(tls)));
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
    if (!r) {
      *err = std::string(what) + " to " + describe(url) + " failed: " + *err;
      // A TCP port that closes on a Redis command may be a TLS port.
      if (!url.tls.on && url.unix_path.empty())
        *err += " (if the server speaks TLS on this port: rediss:// or [sync] tls = true)";
      return false;
    }
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
  if (!check({"PING"}, "PING")) return nullptr;
  return conn;
}

RedisConn::RedisConn(redisContext* c, std::unique_ptr<TlsPipe> tls)
    : c_(c), tls_(std::move(tls)), default_functions_(c->reader != nullptr ? c->reader->fn : nullptr) {}

RedisConn::~RedisConn() {
  if (c_ != nullptr) redisFree(c_);
}

bool RedisConn::fail(std::string* err) {
  broken_ = true;
  *err = c_->err != 0 ? std::string("redis: ") + c_->errstr : "redis: connection failed";
  if (tls_) {  // the pipe says why it ended (its error is set before the EOF hiredis read)
    if (const std::string why = tls_->error(); !why.empty()) *err += " (" + why + ")";
  }
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

bool RedisConn::reply_flat(FlatReply* out, std::string* err) {
  bool complete = false;
  return read_flat(out, /*wait=*/true, &complete, err);
}

bool RedisConn::read_ready_flat(FlatReply* out, bool* complete, std::string* err) {
  return read_flat(out, /*wait=*/false, complete, err);
}

bool RedisConn::read_flat(FlatReply* out, bool wait, bool* complete, std::string* err) {
  *complete = false;
  if (broken_) return fail(err);
  redisReader* rd = c_->reader;
  if (rd->ridx == -1 && rd->reply == nullptr) out->clear();  // a new reply starts
  rd->fn = &flat_functions;
  rd->privdata = out;
  void* r = nullptr;
  int rc = REDIS_OK;
  if (wait) {
    rc = redisGetReply(c_, &r);
  } else {
    rc = redisBufferRead(c_);  // includes EOF
    if (rc == REDIS_OK) rc = redisGetReplyFromReader(c_, &r);
  }
  // Back to hiredis' own objects, unless a partial reply holds our handles
  // (hiredis would free them with freeReplyObject).
  if (rd->ridx == -1 && rd->reply == nullptr) {
    rd->fn = default_functions_;
    rd->privdata = nullptr;
  }
  if (rc != REDIS_OK || (wait && r == nullptr)) return fail(err);
  if (r != nullptr) {
    out->set_root(ref(r));
    *complete = true;
  }
  return true;
}

int RedisConn::fd() const noexcept { return c_ != nullptr ? c_->fd : -1; }

}  // namespace cg::sync
