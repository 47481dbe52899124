#include "serving/repository_scan.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

namespace inferd::serving {

namespace fs = std::filesystem;

std::vector<std::string> ListModelFolders(const fs::path& repository) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(repository, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    std::error_code dir_ec;
    if (n.empty() || n[0] == '.' || !it->is_directory(dir_ec)) continue;
    names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
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

}  // namespace inferd::serving
