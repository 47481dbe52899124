#include "batchjob/inputs.h"

#include <fcntl.h>
#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

namespace inferd::batchjob {
namespace {

namespace fs = std::filesystem;

StatusOr<std::vector<InputItem>> ListDirectory(const fs::path& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return InvalidArgument("cannot list input folder {}: {}", dir.string(), ec.message());
  std::vector<InputItem> items;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return InvalidArgument("cannot list input folder {}: {}", dir.string(), ec.message());
    std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    // Regular files and links to anything but a folder; a dangling link stays listed and
    // becomes an error record when read (the user sees it instead of losing it).
    std::error_code type_ec;
    if (it->is_directory(type_ec)) continue;
    if (!it->is_regular_file(type_ec) && !it->is_symlink(type_ec)) continue;
    InputItem item;
    item.path = it->path();
    item.source = item.path.string();
    item.id = name;
    items.push_back(std::move(item));
  }
  if (ec) return InvalidArgument("cannot list input folder {}: {}", dir.string(), ec.message());
  std::sort(items.begin(), items.end(),
            [](const InputItem& a, const InputItem& b) { return a.source < b.source; });
  if (items.empty()) return InvalidArgument("input folder {} has no files", dir.string());
  return items;
}

StatusOr<std::vector<InputItem>> ListGlob(const std::string& pattern) {
  glob_t g{};
  int rc = glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<InputItem> items;
  if (rc == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      std::error_code ec;
      fs::path p(g.gl_pathv[i]);
      if (!fs::is_regular_file(p, ec)) continue;
      InputItem item;
      item.path = p;
      item.source = p.string();
      item.id = p.string();
      items.push_back(std::move(item));
    }
  }
  globfree(&g);
  if (rc == GLOB_NOSPACE) return InvalidArgument("glob '{}': out of memory", pattern);
  if (rc == GLOB_ABORTED) return InvalidArgument("glob '{}': a folder could not be read", pattern);
  if (items.empty()) return InvalidArgument("no input file matches '{}'", pattern);
  return items;  // glob(3) sorts its matches
}

StatusOr<std::vector<InputItem>> ListJsonLines(const fs::path& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileBytes(path));
  std::vector<InputItem> items;
  size_t pos = 0;
  for (int64_t line = 1; pos < text.size(); ++line) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view view(text.data() + pos, end - pos);
    if (!view.empty() && view.back() == '\r') view.remove_suffix(1);
    pos = end + 1;
    if (view.find_first_not_of(" \t") == std::string_view::npos) continue;
    InputItem item;
    item.kind = InputItem::Kind::kJsonLine;
    item.path = path;
    item.line = line;
    item.source = path.string() + ":" + std::to_string(line);
    item.text = std::string(view);
    items.push_back(std::move(item));
  }
  if (items.empty()) return InvalidArgument("input file {} has no lines", path.string());
  return items;
}

}  // namespace

bool IsGlobPattern(const std::string& spec) {
  return spec.find_first_of("*?[") != std::string::npos;
}

StatusOr<std::vector<InputItem>> ListInputs(const std::string& spec) {
  if (spec.empty()) return InvalidArgument("--input is empty");
  std::error_code ec;
  fs::path path(spec);
  if (fs::is_directory(path, ec)) return ListDirectory(path);
  if (fs::exists(path, ec)) {
    if (path.extension() == ".jsonl") return ListJsonLines(path);
    InputItem item;
    item.path = path;
    item.source = path.string();
    item.id = path.filename().string();
    return std::vector<InputItem>{std::move(item)};
  }
  if (IsGlobPattern(spec)) return ListGlob(spec);
  return InvalidArgument("input {} does not exist", spec);
}

StatusOr<std::string> ReadFileBytes(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return InvalidArgument("cannot read {}: {}", path.string(), std::strerror(errno));
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return InvalidArgument("cannot read {}: {}", path.string(), std::strerror(err));
    }
    if (n == 0) break;
    bytes.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return bytes;
}

}  // namespace inferd::batchjob
