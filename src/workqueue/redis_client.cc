#include "workqueue/redis_client.h"

#include <sys/time.h>

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

RedisValue Copy(const redisReply* r) {
  RedisValue v;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      v.type = RedisValue::Type::kString;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      v.type = RedisValue::Type::kStatus;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      v.type = RedisValue::Type::kError;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      v.type = RedisValue::Type::kInteger;
      v.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      v.type = RedisValue::Type::kArray;
      v.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) v.elements.push_back(Copy(r->element[i]));
      break;
    default:  // REDIS_REPLY_NIL
      break;
  }
  return v;
}

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
    Append(args);
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

void RedisClient::Append(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  redisAppendCommandArgv(context_, static_cast<int>(args.size()), argv.data(), lens.data());
}

StatusOr<RedisValue> RedisClient::Read() {
  void* raw = nullptr;
  if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) {
    return Broken("reading a reply");
  }
  auto* reply = static_cast<redisReply*>(raw);
  RedisValue v = Copy(reply);
  freeReplyObject(reply);
  return v;
}

StatusOr<RedisValue> RedisClient::Command(const std::vector<std::string>& args,
                                          std::chrono::milliseconds extra_wait) {
  RETURN_IF_ERROR(EnsureConnected());
  if (extra_wait.count() > 0) RETURN_IF_ERROR(SetReplyTimeout(timeout_ + extra_wait));
  Append(args);
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
  RETURN_IF_ERROR(EnsureConnected());
  for (const auto& args : commands) Append(args);
  std::vector<RedisValue> replies;
  replies.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    ASSIGN_OR_RETURN(RedisValue v, Read());
    replies.push_back(std::move(v));
  }
  return replies;
}

}  // namespace inferd::workqueue
