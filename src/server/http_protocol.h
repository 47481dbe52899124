// The HTTP server's protocol rules as pure pieces (no sockets), so they are unit-tested directly:
// which reply a malformed request gets, the request-header checks Beast's parser leaves to us,
// percent-decoding of path segments, and the server-wide budget of request bytes in flight.
//
// Replies to protocol errors (HttpServer answers them, then closes the connection):
//   431  header fields over max_header_bytes, or more than max_header_count fields
//   414  request target (URI) over max_uri_bytes
//   400  anything else the parser rejects: bad or duplicate Content-Length, Content-Length with
//        Transfer-Encoding, NUL or other control bytes in a field, bare LF line endings, a bad
//        method, target or version, a malformed chunk
//   501  a Transfer-Encoding other than `chunked` alone
// Errors that are not the request's (EOF, reset, timeout) get no reply.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http/message.hpp>
#include <boost/system/error_code.hpp>

#include "common/status.h"

namespace inferd::server {

struct HttpProtocolLimits {
  size_t max_header_bytes = 64 * 1024;  // request line + header fields
  size_t max_header_count = 100;        // header fields
  size_t max_uri_bytes = 8 * 1024;      // request target
};

struct HttpProtocolError {
  int status = 400;
  std::string message;  // for the {"error": ...} body
};

// The reply for an error met while reading a request head or body. `request_line_parsed`: whether
// the parser got past the request line (a head over the limit before that is a long URI, 414;
// after it, long header fields, 431). nullopt: not the request's fault (EOF, reset, timeout,
// aborted); close without a reply.
std::optional<HttpProtocolError> ClassifyReadError(const boost::system::error_code& ec,
                                                   bool request_line_parsed,
                                                   const HttpProtocolLimits& limits);

// Checks a parsed request head for what the parser accepts but we refuse: a target over
// max_uri_bytes (414), more than max_header_count fields (431), Content-Length given twice (even
// with equal values) or as a list (400), a Transfer-Encoding that is not `chunked` alone (400 when
// chunked is not last, 501 otherwise).
std::optional<HttpProtocolError> CheckRequestHead(
    const boost::beast::http::request_header<>& head, const HttpProtocolLimits& limits);

// Decodes %XX escapes in one path segment ("m%C3%B6del" -> "mödel"). A '%' not followed by two
// hex digits, or an escape that decodes to NUL, is INVALID_ARGUMENT. '+' stays '+' (paths are not
// form data). Segments are decoded after splitting at '/', so "%2F" is part of a name.
StatusOr<std::string> PercentDecode(std::string_view segment);

// Request bytes in flight across a server (or several: HTTP and gRPC may share one): bytes are
// acquired when a request's size is known, before its body is buffered, and released when the
// body is freed. Thread-safe, lock-free.
class ByteBudget {
 public:
  explicit ByteBudget(size_t limit) : limit_(limit) {}
  // False (and nothing taken) when `n` more would exceed the limit.
  bool TryAcquire(size_t n);
  void Release(size_t n);
  size_t limit() const { return limit_; }
  size_t in_use() const { return in_use_.load(std::memory_order_relaxed); }

 private:
  const size_t limit_;
  std::atomic<size_t> in_use_{0};
};

// A movable claim on a ByteBudget, released on destruction. An empty lease (no budget) holds
// nothing and every Resize succeeds.
class ByteLease {
 public:
  ByteLease() = default;
  explicit ByteLease(std::shared_ptr<ByteBudget> budget) : budget_(std::move(budget)) {}
  ByteLease(ByteLease&& other) noexcept;
  ByteLease& operator=(ByteLease&& other) noexcept;
  ~ByteLease() { Reset(); }

  // Holds exactly `n` bytes: grows (false, unchanged, if the budget has no room) or shrinks.
  bool Resize(size_t n);
  bool Grow(size_t n) { return Resize(held_ + n); }
  void Reset();  // releases what is held; keeps the budget
  size_t held() const { return held_; }

 private:
  std::shared_ptr<ByteBudget> budget_;
  size_t held_ = 0;
};

}  // namespace inferd::server
