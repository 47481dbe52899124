// The inputs of a batch job: listing them (a directory, a glob, or a JSONL file) and reading one
// file's bytes.
//
// Every input has a `source`, unique within the job and stable across runs, which is the key
// resume uses (an output record carries it): a file's path as listed, or "FILE.jsonl:LINE"
// (1-based) for a JSONL line. `id` is what the record echoes for the user: for files the path
// relative to the listed directory (or the path as the glob matched it); for JSONL lines it is
// filled in when the line is parsed (item_reader.h).
//
//   DIR         the regular files (and links, except links to folders) directly inside DIR (not
//               recursive; hidden files, whose names start with '.', are skipped), sorted by name.
//               A file that cannot be read (no permission, a dangling link) is still listed:
//               reading it fails later and becomes an error record.
//   GLOB        a pattern with *, ? or [ (glob(3)); matching regular files, sorted. No match is
//               an error.
//   FILE.jsonl  one request per non-blank line (item_reader.h defines the line's form). Lines are
//               kept as text; parsing happens on the reader threads.
//   FILE        any other single file: one input.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"

namespace inferd::batchjob {

struct InputItem {
  enum class Kind { kFile, kJsonLine };
  Kind kind = Kind::kFile;
  std::string source;          // the resume key (see above)
  std::string id;              // files: relative path; JSONL: filled by the reader
  std::filesystem::path path;  // the file (kFile) or the JSONL file (kJsonLine)
  int64_t line = 0;            // kJsonLine: 1-based line number
  std::string text;            // kJsonLine: the line, without its newline
};

// Lists the inputs named by `spec` as described above. INVALID_ARGUMENT when nothing matches,
// the directory or JSONL file cannot be read, or `spec` names nothing.
StatusOr<std::vector<InputItem>> ListInputs(const std::string& spec);

// True when `spec` contains glob metacharacters (*, ?, [).
bool IsGlobPattern(const std::string& spec);

// Reads a whole file. INVALID_ARGUMENT naming the path and the system's reason on failure.
StatusOr<std::string> ReadFileBytes(const std::filesystem::path& path);

}  // namespace inferd::batchjob
