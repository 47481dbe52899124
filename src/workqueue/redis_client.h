// A small synchronous Redis client over hiredis (Debian's libhiredis 0.14), for the work queue.
//
//   ASSIGN_OR_RETURN(RedisEndpoint at, ParseRedisUrl("redis://127.0.0.1:6379/0"));
//   ASSIGN_OR_RETURN(auto redis, RedisClient::Connect(at, std::chrono::seconds(2)));
//   ASSIGN_OR_RETURN(RedisValue v, redis->Command({"XLEN", "jobs"}));
//
// Errors are Status values, never exceptions or crashes:
//   - the server's error replies ("-ERR ...", "-BUSYGROUP ...") are FAILED_PRECONDITION with the
//     server's text; callers look at RedisValue-free IsRedisError(status, "BUSYGROUP");
//   - connection failures, timeouts and protocol errors are UNAVAILABLE naming the endpoint. The
//     connection is then broken (hiredis cannot resume a half-read reply); the next Command or
//     Pipeline reconnects first (AUTH and SELECT again), so a caller retries by calling again.
// Not thread-safe: one client per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

struct redisContext;

namespace inferd::workqueue {

// redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]; the port defaults to 6379, the database to 0.
struct RedisEndpoint {
  std::string host;
  int port = 6379;
  std::string user;      // "" = the default user
  std::string password;  // "" = no AUTH
  int db = 0;
  std::string Describe() const;  // "HOST:PORT/DB", no credentials
};

// INVALID_ARGUMENT naming what is wrong (scheme, port, database number, empty host).
StatusOr<RedisEndpoint> ParseRedisUrl(std::string_view url);

// One reply, copied out of hiredis's reply tree.
struct RedisValue {
  enum class Type { kNil, kString, kStatus, kInteger, kArray, kError };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  int64_t integer = 0;
  std::vector<RedisValue> elements;  // kArray

  bool is_nil() const { return type == Type::kNil; }
  bool is_array() const { return type == Type::kArray; }
  bool is_string() const { return type == Type::kString || type == Type::kStatus; }
};

// Commands in RESP (the wire format), appended to one buffer that a Pipeline sends in one write.
// inferd formats RESP itself instead of through hiredis's redisFormatCommandArgv, which formats
// every argument's length with sdscatfmt and copies each argument twice: that was the largest
// single cost of the submitter. Each command is Begin(argc) followed by exactly argc Arg()s.
//
//   RespBuffer b;
//   b.Command({"XACK", stream, group, id});
//   b.Begin(2 + n); b.Arg("MGET"); ...
class RespBuffer {
 public:
  void Begin(size_t argc);
  void Arg(std::string_view arg);
  void Arg(int64_t value);
  void Command(std::initializer_list<std::string_view> args);
  void Command(const std::vector<std::string>& args);
  size_t commands() const { return commands_; }
  // False while a command still lacks arguments (a Pipeline of it is refused: INTERNAL).
  bool complete() const { return args_left_ == 0; }
  const std::string& data() const { return data_; }
  void Clear();

 private:
  std::string data_;
  size_t commands_ = 0;
  size_t args_left_ = 0;
};

// True when `status` is a server error reply whose first word is `code` (e.g. "BUSYGROUP").
bool IsRedisError(const Status& status, std::string_view code);

class RedisClient {
 public:
  // Connects (connect and each reply wait bounded by `timeout`), then AUTH / SELECT as the
  // endpoint says. UNAVAILABLE when the server cannot be reached in time.
  static StatusOr<std::unique_ptr<RedisClient>> Connect(const RedisEndpoint& endpoint,
                                                        std::chrono::milliseconds timeout);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // One command; the arguments are binary-safe. An error reply is FAILED_PRECONDITION.
  // `extra_wait`: added to the reply timeout for this call (a blocking XREADGROUP ... BLOCK ms).
  StatusOr<RedisValue> Command(const std::vector<std::string>& args,
                               std::chrono::milliseconds extra_wait = {});
  // Sends all commands in one write and reads their replies in order: one round trip. Error
  // replies stay in the result as kError values (one failed SET does not hide the others); only
  // I/O failures fail the call.
  StatusOr<std::vector<RedisValue>> Pipeline(const std::vector<std::vector<std::string>>& commands);
  StatusOr<std::vector<RedisValue>> Pipeline(const RespBuffer& commands);

  // Drops the connection and connects again (AUTH, SELECT). UNAVAILABLE when that fails.
  Status Reconnect();
  const RedisEndpoint& endpoint() const { return endpoint_; }

 private:
  RedisClient(RedisEndpoint endpoint, std::chrono::milliseconds timeout)
      : endpoint_(std::move(endpoint)), timeout_(timeout) {}
  Status EnsureConnected();
  Status Broken(std::string_view what);
  Status SetReplyTimeout(std::chrono::milliseconds t);
  Status Append(const RespBuffer& commands);
  StatusOr<RedisValue> Read();

  RedisEndpoint endpoint_;
  std::chrono::milliseconds timeout_;
  redisContext* context_ = nullptr;  // null: not connected (the next call connects)
};

}  // namespace inferd::workqueue
