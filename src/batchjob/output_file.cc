#include "batchjob/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "batchjob/inputs.h"
#include "batchjob/records.h"

namespace inferd::batchjob {
namespace {

Status WriteAll(int fd, std::string_view data, const std::filesystem::path& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Internal("cannot write {}: {}", path.string(), std::strerror(errno));
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<RecoveredOutput> RecoverOutput(const std::filesystem::path& path) {
  RecoveredOutput out;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return out;
  ASSIGN_OR_RETURN(std::string text, ReadFileBytes(path));
  size_t whole = text.rfind('\n');
  whole = whole == std::string::npos ? 0 : whole + 1;  // bytes in whole lines
  size_t pos = 0;
  for (int64_t line = 1; pos < whole; ++line) {
    size_t end = text.find('\n', pos);
    std::string_view view(text.data() + pos, end - pos);
    pos = end + 1;
    auto key = ParseRecordKey(view);
    if (!key.ok()) {
      return InvalidArgument("{} line {} is not a record of inferd batch ({}); refusing to resume "
                             "into it",
                             path.string(), line, key.status().message());
    }
    if (!out.done.insert(key->source).second) {
      ++out.duplicates;
      continue;
    }
    ++out.records;
    if (key->is_error) ++out.errors;
  }
  if (whole < text.size()) {
    out.truncated_bytes = static_cast<int64_t>(text.size() - whole);
    std::filesystem::resize_file(path, whole, ec);
    if (ec) return Internal("cannot truncate the torn last line of {}: {}", path.string(),
                            ec.message());
  }
  return out;
}

StatusOr<std::unique_ptr<OutputFile>> OutputFile::Open(const std::filesystem::path& path,
                                                       bool truncate) {
  int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0);
  int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) {
    return InvalidArgument("cannot open output {}: {}", path.string(), std::strerror(errno));
  }
  return std::unique_ptr<OutputFile>(new OutputFile(path, fd));
}

OutputFile::~OutputFile() { ::close(fd_); }

Status OutputFile::Append(std::string_view lines) { return WriteAll(fd_, lines, path_); }

Status OutputFile::Sync() {
  if (::fdatasync(fd_) != 0 && errno != EINVAL) {
    return Internal("cannot sync {}: {}", path_.string(), std::strerror(errno));
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<AppendLog>> AppendLog::Open(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return InvalidArgument("cannot open stats file {}: {}", path.string(), std::strerror(errno));
  }
  return std::unique_ptr<AppendLog>(new AppendLog(fd));
}

AppendLog::~AppendLog() { ::close(fd_); }

void AppendLog::Write(std::string_view line) {
  std::string buffer(line);
  buffer.push_back('\n');
  ssize_t n;
  do {
    n = ::write(fd_, buffer.data(), buffer.size());
  } while (n < 0 && errno == EINTR);
}

}  // namespace inferd::batchjob
