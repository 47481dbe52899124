#include "workqueue/redis_client.h"

#include <sys/time.h>

#include <algorithm>
#include <charconv>

#include <fmt/format.h>
#include <hiredis/hiredis.h>

namespace inferd::workqueue {
namespace {

timeval ToTimeval(std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  return tv;
}

// hiredis's reader builds RedisValues directly (its custom reply-object functions) instead of a
// redisReply tree that is then copied: one allocation and one copy less per string of a reply,
// which for a batch of job entries is most of what reading it costs. The root is allocated; a
// child is an element of its parent's vector, sized when the array's header was read, so the
// pointers stay valid. hiredis frees only the root (freeObject), on errors and in redisFree.
RedisValue* ReplySlot(const redisReadTask* task) {
  if (task->parent == nullptr) return new RedisValue();
  auto* parent = static_cast<RedisValue*>(task->parent->obj);
  return &parent->elements[static_cast<size_t>(task->idx)];
}

void* CreateString(const redisReadTask* task, char* str, size_t len) {
  RedisValue* v = ReplySlot(task);
  v->type = task->type == REDIS_REPLY_ERROR    ? RedisValue::Type::kError
            : task->type == REDIS_REPLY_STATUS ? RedisValue::Type::kStatus
                                               : RedisValue::Type::kString;
  v->str.assign(str, len);
  return v;
}

void* CreateArray(const redisReadTask* task, int elements) {
  RedisValue* v = ReplySlot(task);
  v->type = RedisValue::Type::kArray;
  v->elements.resize(static_cast<size_t>(std::max(elements, 0)));
  return v;
}

void* CreateInteger(const redisReadTask* task, long long value) {  // NOLINT(runtime/int)
  RedisValue* v = ReplySlot(task);
  v->type = RedisValue::Type::kInteger;
  v->integer = value;
  return v;
}

void* CreateNil(const redisReadTask* task) { return ReplySlot(task); }

void FreeValue(void* root) { delete static_cast<RedisValue*>(root); }

redisReplyObjectFunctions kValueFunctions = {CreateString, CreateArray, CreateInteger, CreateNil,
                                             FreeValue};

bool ParseInt(std::string_view s, int* out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

std::string RedisEndpoint::Describe() const { return fmt::format("{}:{}/{}", host, port, db); }

StatusOr<RedisEndpoint> ParseRedisUrl(std::string_view url) {
  constexpr std::string_view kScheme = "redis://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return InvalidArgument("Redis URL '{}' must start with redis:// (rediss:// and unix "
                           "sockets are not supported)",
                           url);
  }
  std::string_view rest = url.substr(kScheme.size());
  RedisEndpoint e;
  if (size_t at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view cred = rest.substr(0, at);
    rest = rest.substr(at + 1);
    size_t colon = cred.find(':');
    if (colon == std::string_view::npos) {
      e.password = std::string(cred);  // redis://PASSWORD@host
    } else {
      e.user = std::string(cred.substr(0, colon));
      e.password = std::string(cred.substr(colon + 1));
    }
  }
  std::string_view hostport = rest.substr(0, rest.find('/'));
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    if (!db.empty() && (!ParseInt(db, &e.db) || e.db < 0)) {
      return InvalidArgument("Redis URL '{}': database '{}' is not a number >= 0", url, db);
    }
  }
  std::string_view host = hostport;
  if (!hostport.empty() && hostport.front() == '[') {  // [::1]:6379
    size_t close = hostport.find(']');
    if (close == std::string_view::npos) return InvalidArgument("Redis URL '{}': unclosed [", url);
    host = hostport.substr(1, close - 1);
    hostport = hostport.substr(close + 1);
    if (!hostport.empty() && hostport.front() != ':') {
      return InvalidArgument("Redis URL '{}': junk after ']'", url);
    }
    hostport = hostport.empty() ? hostport : hostport.substr(1);
    if (!hostport.empty() && (!ParseInt(hostport, &e.port) || e.port < 1 || e.port > 65535)) {
      return InvalidArgument("Redis URL '{}': port '{}' is not in 1..65535", url, hostport);
    }
  } else if (size_t colon = hostport.rfind(':'); colon != std::string_view::npos) {
    host = hostport.substr(0, colon);
    std::string_view port = hostport.substr(colon + 1);
    if (!ParseInt(port, &e.port) || e.port < 1 || e.port > 65535) {
      return InvalidArgument("Redis URL '{}': port '{}' is not in 1..65535", url, port);
    }
  }
  if (host.empty()) return InvalidArgument("Redis URL '{}' names no host", url);
  e.host = std::string(host);
  return e;
}

void RespBuffer::Begin(size_t argc) {
  fmt::format_to(std::back_inserter(data_), "*{}\r\n", argc);
  args_left_ += argc;
  ++commands_;
}

void RespBuffer::Arg(std::string_view arg) {
  fmt::format_to(std::back_inserter(data_), "${}\r\n", arg.size());
  data_.append(arg);
  data_.append("\r\n");
  --args_left_;
}

void RespBuffer::Arg(int64_t value) {
  fmt::format_int text(value);
  Arg(std::string_view(text.data(), text.size()));
}

void RespBuffer::Command(std::initializer_list<std::string_view> args) {
  Begin(args.size());
  for (std::string_view a : args) Arg(a);
}

void RespBuffer::Command(const std::vector<std::string>& args) {
  Begin(args.size());
  for (const std::string& a : args) Arg(a);
}

void RespBuffer::Clear() {
  data_.clear();
  commands_ = 0;
  args_left_ = 0;
}

bool IsRedisError(const Status& status, std::string_view code) {
  if (status.code() != StatusCode::kFailedPrecondition) return false;
  const std::string& m = status.message();
  size_t pos = m.find("replied: ");
  if (pos == std::string::npos) return false;
  std::string_view reply = std::string_view(m).substr(pos + 9);
  return reply.substr(0, code.size()) == code &&
         (reply.size() == code.size() || reply[code.size()] == ' ');
}

StatusOr<std::unique_ptr<RedisClient>> RedisClient::Connect(const RedisEndpoint& endpoint,
                                                            std::chrono::milliseconds timeout) {
  std::unique_ptr<RedisClient> client(new RedisClient(endpoint, timeout));
  RETURN_IF_ERROR(client->EnsureConnected());
  return client;
}

RedisClient::~RedisClient() {
  if (context_ != nullptr) redisFree(context_);
}

Status RedisClient::Broken(std::string_view what) {
  std::string reason = context_ != nullptr && context_->err != 0 ? context_->errstr : "no reply";
  if (context_ != nullptr) redisFree(context_);
  context_ = nullptr;
  return Unavailable("Redis at {}: {}: {}", endpoint_.Describe(), what, reason);
}

Status RedisClient::SetReplyTimeout(std::chrono::milliseconds t) {
  if (redisSetTimeout(context_, ToTimeval(t)) != REDIS_OK) return Broken("setting a timeout");
  return Status::Ok();
}

Status RedisClient::EnsureConnected() {
  if (context_ != nullptr) return Status::Ok();
  context_ = redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port, ToTimeval(timeout_));
  if (context_ == nullptr) return Unavailable("Redis at {}: out of memory", endpoint_.Describe());
  if (context_->err != 0) return Broken("cannot connect");
  context_->reader->fn = &kValueFunctions;
  RETURN_IF_ERROR(SetReplyTimeout(timeout_));
  std::vector<std::vector<std::string>> setup;
  if (!endpoint_.password.empty()) {
    if (endpoint_.user.empty()) {
      setup.push_back({"AUTH", endpoint_.password});
    } else {
      setup.push_back({"AUTH", endpoint_.user, endpoint_.password});
    }
  }
  if (endpoint_.db != 0) setup.push_back({"SELECT", std::to_string(endpoint_.db)});
  for (const auto& args : setup) {
    RespBuffer b;
    b.Command(args);
    RETURN_IF_ERROR(Append(b));
    ASSIGN_OR_RETURN(RedisValue v, Read());
    if (v.type == RedisValue::Type::kError) {
      Status s = FailedPrecondition("Redis at {}: {} replied: {}", endpoint_.Describe(), args[0],
                                    v.str);
      redisFree(context_);
      context_ = nullptr;
      return s;
    }
  }
  return Status::Ok();
}

Status RedisClient::Reconnect() {
  if (context_ != nullptr) redisFree(context_);
  context_ = nullptr;
  return EnsureConnected();
}

Status RedisClient::Append(const RespBuffer& commands) {
  if (!commands.complete()) return Internal("a Redis command is missing arguments");
  if (redisAppendFormattedCommand(context_, commands.data().data(), commands.data().size()) !=
      REDIS_OK) {
    return Broken("buffering a command");
  }
  return Status::Ok();
}

StatusOr<RedisValue> RedisClient::Read() {
  void* raw = nullptr;
  if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) {
    return Broken("reading a reply");
  }
  std::unique_ptr<RedisValue> reply(static_cast<RedisValue*>(raw));
  return std::move(*reply);
}

StatusOr<RedisValue> RedisClient::Command(const std::vector<std::string>& args,
                                          std::chrono::milliseconds extra_wait) {
  RETURN_IF_ERROR(EnsureConnected());
  if (extra_wait.count() > 0) RETURN_IF_ERROR(SetReplyTimeout(timeout_ + extra_wait));
  RespBuffer b;
  b.Command(args);
  RETURN_IF_ERROR(Append(b));
  ASSIGN_OR_RETURN(RedisValue v, Read());
  if (extra_wait.count() > 0) RETURN_IF_ERROR(SetReplyTimeout(timeout_));
  if (v.type == RedisValue::Type::kError) {
    return FailedPrecondition("Redis at {}: {} replied: {}", endpoint_.Describe(),
                              args.empty() ? "" : args[0], v.str);
  }
  return v;
}

StatusOr<std::vector<RedisValue>> RedisClient::Pipeline(
    const std::vector<std::vector<std::string>>& commands) {
  RespBuffer b;
  for (const auto& args : commands) b.Command(args);
  return Pipeline(b);
}

StatusOr<std::vector<RedisValue>> RedisClient::Pipeline(const RespBuffer& commands) {
  RETURN_IF_ERROR(EnsureConnected());
  RETURN_IF_ERROR(Append(commands));
  std::vector<RedisValue> replies;
  replies.reserve(commands.commands());
  for (size_t i = 0; i < commands.commands(); ++i) {
    ASSIGN_OR_RETURN(RedisValue v, Read());
    replies.push_back(std::move(v));
  }
  return replies;
}

}  // namespace inferd::workqueue
