// Status and StatusOr<T>: the single error model of inferd.
//
// Every fallible function returns Status or StatusOr<T>; exceptions from libraries are caught at
// the call site and turned into a Status. Assertions are only for programmer errors.
//
//   StatusOr<Tensor> t = LoadNpy(path);
//   if (!t.ok()) return t.status();
//   ASSIGN_OR_RETURN(Tensor t2, LoadNpy(path));
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace inferd {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kOutOfRange,
  kUnimplemented,
  kUnavailable,
  kDeadlineExceeded,
  kResourceExhausted,
  kInternal,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "prefix: message" (no-op for OK).
  Status WithContext(std::string_view prefix) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Convenience constructors taking a fmt format string.
#define INFERD_DEFINE_ERROR(Name, Code)                                                \
  template <typename... Args>                                                          \
  Status Name(fmt::format_string<Args...> f, Args&&... args) {                         \
    return Status(StatusCode::Code, fmt::format(f, std::forward<Args>(args)...));      \
  }
INFERD_DEFINE_ERROR(InvalidArgument, kInvalidArgument)
INFERD_DEFINE_ERROR(NotFound, kNotFound)
INFERD_DEFINE_ERROR(AlreadyExists, kAlreadyExists)
INFERD_DEFINE_ERROR(FailedPrecondition, kFailedPrecondition)
INFERD_DEFINE_ERROR(OutOfRange, kOutOfRange)
INFERD_DEFINE_ERROR(Unimplemented, kUnimplemented)
INFERD_DEFINE_ERROR(Unavailable, kUnavailable)
INFERD_DEFINE_ERROR(DeadlineExceeded, kDeadlineExceeded)
INFERD_DEFINE_ERROR(ResourceExhausted, kResourceExhausted)
INFERD_DEFINE_ERROR(Internal, kInternal)
#undef INFERD_DEFINE_ERROR

// Holds either a value or a non-OK Status. Accessing value() of an error is a programmer error.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    assert(!status_.ok() && "StatusOr constructed from OK status without a value");
    if (status_.ok()) status_ = Status(StatusCode::kInternal, "StatusOr built from OK Status");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const& { return status_; }
  Status status() && { return std::move(status_); }

  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*value_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace inferd

#define INFERD_CONCAT_IMPL(a, b) a##b
#define INFERD_CONCAT(a, b) INFERD_CONCAT_IMPL(a, b)

#define RETURN_IF_ERROR(expr)                     \
  do {                                            \
    ::inferd::Status _status = (expr);            \
    if (!_status.ok()) return _status;            \
  } while (0)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)     \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return std::move(tmp).status();  \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(INFERD_CONCAT(_status_or_, __LINE__), lhs, expr)
