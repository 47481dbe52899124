#include "serving/repository.h"

#include <algorithm>
#include <chrono>
#include <fstream>
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
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  *bytes = ss.str();
  return static_cast<bool>(f) || f.eof();
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
