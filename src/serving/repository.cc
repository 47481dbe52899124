#include "serving/repository.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>

namespace inferd::serving {

namespace fs = std::filesystem;

bool IsValidModelName(std::string_view name) {
  return !name.empty() && name.find('/') == std::string_view::npos && name[0] != '.';
}

bool HasModelFolder(const fs::path& repository, const std::string& name) {
  std::error_code ec;
  return IsValidModelName(name) && fs::is_directory(repository / name, ec);
}

StatusOr<std::vector<std::string>> ScanModelFolders(const fs::path& repository) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(repository, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    std::error_code dir_ec;
    if (!IsValidModelName(n) || !it->is_directory(dir_ec)) continue;
    names.push_back(n);
  }
  if (ec) {
    return Unavailable("cannot read model repository '{}': {}", repository.string(), ec.message());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> ListModelFolders(const fs::path& repository) {
  auto names = ScanModelFolders(repository);
  return names.ok() ? std::move(names).value() : std::vector<std::string>{};
}

std::string FolderFingerprint(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "";
  std::vector<std::string> rows;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec)) continue;
    const auto size = it->file_size(file_ec);
    const auto mtime = it->last_write_time(file_ec);
    rows.push_back(fmt::format(
        "{}\t{}\t{}", fs::relative(it->path(), dir, file_ec).string(), size,
        std::chrono::duration_cast<std::chrono::nanoseconds>(mtime.time_since_epoch()).count()));
  }
  std::sort(rows.begin(), rows.end());
  std::string out;
  for (const auto& r : rows) out += r + "\n";
  return out.empty() ? "(empty)\n" : out;
}

bool ReadRepositoryFile(const fs::path& path, std::string* bytes) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;  // checked before opening: a FIFO blocks
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  *bytes = ss.str();
  return static_cast<bool>(f) || f.eof();
}

namespace {

// True when `file` lies strictly below `root` (both already resolved).
bool IsStrictlyInside(const fs::path& root, const fs::path& file) {
  auto [r, f] = std::mismatch(root.begin(), root.end(), file.begin(), file.end());
  // weakly_canonical may keep a trailing empty component on `root` ("a/b/"): it matches anything.
  return (r == root.end() || (std::next(r) == root.end() && r->empty())) && f != file.end();
}

const char* FileKind(fs::file_type t) {
  switch (t) {
    case fs::file_type::directory: return "a directory";
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::character: return "a character device";
    case fs::file_type::block: return "a block device";
    case fs::file_type::socket: return "a socket";
    default: return "not a regular file";
  }
}

}  // namespace

StatusOr<fs::path> ResolveModelFile(const fs::path& model_dir, std::string_view name,
                                    const fs::path& within, const fs::path& relative,
                                    std::string_view what) {
  // An absolute path is the operator's and may name the repository: it is not repeated.
  const std::string shown = relative.is_absolute()
                                ? std::string("(an absolute path)")
                                : fmt::format("{}/{}", name, relative.generic_string());
  const std::string shown_root =
      within.empty() ? std::string(name) : fmt::format("{}/{}", name, within.generic_string());
  if (relative.empty()) return InvalidArgument("{}: the file name is empty", what);
  std::error_code ec;
  const fs::path root = fs::weakly_canonical(model_dir / within, ec);
  if (ec) return NotFound("{}: folder '{}' cannot be resolved: {}", what, shown_root, ec.message());
  // An absolute `relative` replaces model_dir here, and is then outside it.
  const fs::path file = fs::weakly_canonical(model_dir / relative, ec);
  if (ec) return NotFound("{} '{}' cannot be resolved: {}", what, shown, ec.message());
  if (relative.is_absolute() || !IsStrictlyInside(root, file)) {
    return InvalidArgument("{} '{}' is outside the folder '{}' (absolute paths, '..' and "
                           "symlinks leading out are refused)",
                           what, shown, shown_root);
  }
  const fs::file_status st = fs::status(file, ec);
  if (st.type() == fs::file_type::not_found) {
    return NotFound("{} '{}' does not exist", what, shown);
  }
  if (ec) return InvalidArgument("{} '{}' cannot be read: {}", what, shown, ec.message());
  if (st.type() != fs::file_type::regular) {
    return InvalidArgument("{} '{}' is {}, not a regular file", what, shown, FileKind(st.type()));
  }
  return file;
}

namespace {

bool IsPathChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
         c == '/' || c == '~';
}

void ReplacePathStart(std::string* message, std::string from, std::string_view to) {
  if (from.empty() || from == "./" || from == "/") return;
  for (size_t pos = message->find(from); pos != std::string::npos;
       pos = message->find(from, pos)) {
    if (pos > 0 && IsPathChar((*message)[pos - 1])) {
      pos += from.size();
      continue;
    }
    message->replace(pos, from.size(), to);
    pos += to.size();
  }
}

}  // namespace

std::string HidePath(std::string message, const fs::path& dir, std::string_view shown_as) {
  const std::string to = shown_as.empty() ? std::string() : std::string(shown_as) + "/";
  std::string given = dir.string();
  while (given.size() > 1 && given.back() == '/') given.pop_back();
  std::error_code ec;
  std::string resolved = fs::weakly_canonical(dir, ec).string();
  while (resolved.size() > 1 && resolved.back() == '/') resolved.pop_back();
  // The longer first, so that one being a prefix of the other leaves no remnant.
  if (resolved.size() < given.size()) std::swap(resolved, given);
  if (!ec) ReplacePathStart(&message, resolved + "/", to);
  ReplacePathStart(&message, given + "/", to);
  return message;
}

std::vector<int64_t> ListVersionFolders(const fs::path& model_dir) {
  std::vector<int64_t> versions;
  std::error_code ec;
  for (fs::directory_iterator it(model_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    std::error_code dir_ec;
    if (!it->is_directory(dir_ec) || n.empty() || n.size() > 18 ||
        !std::all_of(n.begin(), n.end(), ::isdigit) || std::stoll(n) < 1) {
      continue;
    }
    versions.push_back(std::stoll(n));
  }
  std::sort(versions.begin(), versions.end());
  return versions;
}

VersionSelection SelectVersions(const inference::ModelVersionPolicy& policy,
                                const std::vector<int64_t>& on_disk,
                                const std::string& model_name) {
  VersionSelection s;
  if (policy.has_all()) {
    s.chosen = on_disk;
  } else if (policy.has_specific()) {
    for (int64_t v : policy.specific().versions()) {
      if (std::find(on_disk.begin(), on_disk.end(), v) == on_disk.end()) {
        s.missing[v] = fmt::format("version folder {}/{} does not exist", model_name, v);
      } else {
        s.chosen.push_back(v);
      }
    }
  } else {
    const size_t n = std::max<uint32_t>(1, policy.latest().num_versions());
    s.chosen.assign(on_disk.end() - std::min(n, on_disk.size()), on_disk.end());
  }
  return s;
}

}  // namespace inferd::serving
