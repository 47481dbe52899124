// The job's output file (OUT.jsonl, records.h): opening it for a new job or a resumed one, and
// appending records durably.
//
// Resume (RecoverOutput): a job killed at any point leaves OUT.jsonl as whole record lines,
// possibly followed by one torn line (a write cut short): that tail is truncated away. Every
// whole line must be a record (a JSON object with "source"); anything else is an error naming the
// line, so a file that is not this job's output is never appended to.
//
// Durability: Append() writes with write(2) (so a killed process loses nothing it appended) and
// Sync() fdatasync(2)s (so a machine crash loses at most the batch since the last Sync).
// Not thread-safe: one writer thread owns it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "common/status.h"

namespace inferd::batchjob {

struct RecoveredOutput {
  std::set<std::string> done;  // sources (records.h SourceKey form) that have a record
  int64_t records = 0;
  int64_t errors = 0;            // of which error records
  int64_t truncated_bytes = 0;   // torn tail removed
  int64_t duplicates = 0;        // records whose source appeared before (kept; counted once)
};

// Reads `path` (which may not exist: nothing done yet), truncating a torn last line.
StatusOr<RecoveredOutput> RecoverOutput(const std::filesystem::path& path);

class OutputFile {
 public:
  // Opens `path` for appending (created if missing). With `truncate`, an existing file is emptied.
  static StatusOr<std::unique_ptr<OutputFile>> Open(const std::filesystem::path& path,
                                                    bool truncate);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Appends whole lines (each ending in '\n').
  Status Append(std::string_view lines);
  Status Sync();

 private:
  OutputFile(std::filesystem::path path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::filesystem::path path_;
  int fd_;
};

// A file of text lines appended with one write(2) each (the --stats event log): a line is either
// whole or absent after a kill. Not thread-safe by itself; O_APPEND makes concurrent writers'
// lines whole.
class AppendLog {
 public:
  static StatusOr<std::unique_ptr<AppendLog>> Open(const std::filesystem::path& path);
  ~AppendLog();
  AppendLog(const AppendLog&) = delete;
  AppendLog& operator=(const AppendLog&) = delete;
  // `line` without its newline; errors are ignored (the log is advisory).
  void Write(std::string_view line);

 private:
  explicit AppendLog(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace inferd::batchjob
