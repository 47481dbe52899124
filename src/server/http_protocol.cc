#include "server/http_protocol.h"

#include <algorithm>
#include <utility>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <fmt/format.h>

namespace inferd::server {
namespace {

namespace http = boost::beast::http;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<HttpProtocolError> ClassifyReadError(const boost::system::error_code& ec,
                                                   bool request_line_parsed,
                                                   const HttpProtocolLimits& limits) {
  if (!ec || ec.category() != http::make_error_code(http::error::bad_method).category()) {
    return std::nullopt;  // socket errors, timeouts: nobody to answer
  }
  switch (static_cast<http::error>(ec.value())) {
    case http::error::end_of_stream:
    case http::error::partial_message:  // the client closed mid-request
    case http::error::stale_parser:
    case http::error::short_read:
      return std::nullopt;
    case http::error::header_limit:
    case http::error::buffer_overflow:
      if (!request_line_parsed) {
        return HttpProtocolError{414, fmt::format("request line exceeds {} bytes",
                                                  limits.max_header_bytes)};
      }
      return HttpProtocolError{431, fmt::format("request header fields exceed {} bytes",
                                                limits.max_header_bytes)};
    case http::error::body_limit:
      return HttpProtocolError{413, "request body exceeds the limit"};
    case http::error::bad_alloc:
      return HttpProtocolError{503, "out of memory reading the request"};
    default:
      return HttpProtocolError{400, "malformed HTTP request: " + ec.message()};
  }
}

std::optional<HttpProtocolError> CheckRequestHead(const http::request_header<>& head,
                                                  const HttpProtocolLimits& limits) {
  if (head.target().size() > limits.max_uri_bytes) {
    return HttpProtocolError{414, fmt::format("request target of {} bytes exceeds {} bytes",
                                              head.target().size(), limits.max_uri_bytes)};
  }
  size_t fields = 0, content_lengths = 0;
  for (const auto& f : head) {
    ++fields;
    if (f.name() == http::field::content_length) {
      ++content_lengths;
      if (f.value().find(',') != boost::beast::string_view::npos) ++content_lengths;
    }
  }
  if (fields > limits.max_header_count) {
    return HttpProtocolError{431, fmt::format("{} header fields exceed the limit of {}", fields,
                                              limits.max_header_count)};
  }
  if (content_lengths > 1) return HttpProtocolError{400, "Content-Length given more than once"};
  auto te = head.find(http::field::transfer_encoding);
  if (te != head.end()) {
    std::string_view value = Trim(std::string_view(te->value().data(), te->value().size()));
    const size_t comma = value.rfind(',');
    std::string_view last = Trim(comma == std::string_view::npos ? value : value.substr(comma + 1));
    if (!boost::beast::iequals(boost::beast::string_view(last.data(), last.size()), "chunked")) {
      return HttpProtocolError{400, "Transfer-Encoding must end with chunked in a request"};
    }
    if (comma != std::string_view::npos) {
      return HttpProtocolError{501, "only Transfer-Encoding: chunked is supported"};
    }
  }
  return std::nullopt;
}

StatusOr<std::string> PercentDecode(std::string_view segment) {
  std::string out;
  out.reserve(segment.size());
  for (size_t i = 0; i < segment.size(); ++i) {
    if (segment[i] != '%') {
      out.push_back(segment[i]);
      continue;
    }
    const bool complete = i + 2 < segment.size();
    const int hi = complete ? HexValue(segment[i + 1]) : -1;
    const int lo = complete ? HexValue(segment[i + 2]) : -1;
    if (hi < 0 || lo < 0) {
      return InvalidArgument("invalid percent-escape in path segment '{}'", segment.substr(0, 128));
    }
    const char c = static_cast<char>(hi * 16 + lo);
    if (c == '\0') return InvalidArgument("path segment '{}' decodes to a NUL byte",
                                          segment.substr(0, 128));
    out.push_back(c);
    i += 2;
  }
  return out;
}

bool ByteBudget::TryAcquire(size_t n) {
  size_t cur = in_use_.load(std::memory_order_relaxed);
  do {
    if (n > limit_ || cur > limit_ - n) return false;
  } while (!in_use_.compare_exchange_weak(cur, cur + n, std::memory_order_relaxed));
  return true;
}

void ByteBudget::Release(size_t n) { in_use_.fetch_sub(n, std::memory_order_relaxed); }

ByteLease::ByteLease(ByteLease&& other) noexcept
    : budget_(std::move(other.budget_)), held_(std::exchange(other.held_, 0)) {}

ByteLease& ByteLease::operator=(ByteLease&& other) noexcept {
  if (this != &other) {
    Reset();
    budget_ = std::move(other.budget_);
    held_ = std::exchange(other.held_, 0);
  }
  return *this;
}

bool ByteLease::Resize(size_t n) {
  if (budget_ == nullptr) return true;
  if (n > held_) {
    if (!budget_->TryAcquire(n - held_)) return false;
  } else {
    budget_->Release(held_ - n);
  }
  held_ = n;
  return true;
}

void ByteLease::Reset() {
  if (budget_ != nullptr && held_ > 0) budget_->Release(held_);
  held_ = 0;
}

}  // namespace inferd::server
