#include "serving/model_cache.h"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace inferd::serving {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kMetaMagic = "inferd-model-cache 1";

uint64_t Mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

bool ReadAll(const fs::path& p, std::string* out) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return false;  // before opening: a FIFO would block the load
  std::ifstream f(p, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = std::move(ss).str();
  return !f.bad();
}

// Writes `bytes` to `path` through a temporary file in the same folder and a rename.
bool WriteAtomically(const fs::path& path, std::string_view bytes) {
  const fs::path tmp = path.string() + fmt::format(".tmp{}", ::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return false;
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.flush();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return false;
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
  return !ec;
}

// The CPU's feature flags (the "flags" line of /proc/cpuinfo): kernels pick code paths by them.
std::string CpuFlags() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("flags", 0) == 0) return line;
  }
  return "unknown-cpu";
}

std::string ExecutableHash() {
  std::string bytes;
  if (!ReadAll("/proc/self/exe", &bytes)) return "unknown-exe";
  return ContentHash(bytes);
}

// Other files beside the model (external data) would have to be part of the key.
bool HasSiblingFiles(const fs::path& model_path) {
  std::error_code ec;
  for (fs::directory_iterator it(model_path.parent_path(), ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->path().filename() != model_path.filename()) return true;
  }
  return false;
}

}  // namespace

std::string ContentHash(std::string_view bytes, uint64_t seed) {
  uint64_t h = Mix(seed ^ 0x9e3779b97f4a7c15ULL ^ bytes.size());
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    h = (h ^ Mix(w)) * 0x100000001b3ULL + 0x632be59bd9b4e019ULL;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, bytes.data() + i, bytes.size() - i);
  h = Mix(h ^ Mix(tail ^ 0xa0761d6478bd642fULL));
  return fmt::format("{:016x}", h);
}

ModelCache::ModelCache(ModelCacheOptions options) : options_(std::move(options)) {
  if (!enabled()) return;
  environment_ = ContentHash(options_.build_id + "\n" + ExecutableHash() + "\n" + CpuFlags());
}

std::string ModelCache::Key(std::string_view model_bytes, const SessionOptions& options) const {
  return fmt::format("{}-{}-{}", ContentHash(model_bytes),
                     static_cast<int>(options.optimization_level), environment_);
}

StatusOr<std::unique_ptr<Session>> ModelCache::CreateSession(const fs::path& model_path,
                                                             const SessionOptions& options,
                                                             bool* hit) const {
  *hit = false;
  if (!enabled() || HasSiblingFiles(model_path)) return Session::Create(model_path, options);
  std::string bytes;
  if (!ReadAll(model_path, &bytes)) return InvalidArgument("cannot read {}", model_path.string());
  const std::string key = Key(bytes, options);
  const fs::path entry = options_.dir / (key + ".onnx");
  const fs::path meta = options_.dir / (key + ".meta");

  std::string cached, meta_text;
  std::error_code ec;
  if (fs::exists(meta, ec) && ReadAll(meta, &meta_text)) {
    bool valid = ReadAll(entry, &cached);
    if (valid) {
      valid = meta_text == fmt::format("{}\nsize {}\nchecksum {}\n", kMetaMagic, cached.size(),
                                       ContentHash(cached, 1));
    }
    if (valid) {
      ImportOptions io = options.import;
      io.run_checker = false;  // written by us and checksummed
      auto model = ParseOnnxModel(cached, model_path.parent_path(), io);
      if (model.ok()) {
        SessionOptions so = options;
        so.optimization_level = OptimizationLevel::kNone;  // the entry is already optimized
        auto session = Session::Create(std::move(model).value(), so);
        if (session.ok()) {
          *hit = true;
          return session;
        }
        valid = false;
      } else {
        valid = false;
      }
    }
    spdlog::warn("compiled-model cache entry {} is corrupt; rebuilding it", entry.string());
    fs::remove(entry, ec);
    fs::remove(meta, ec);
  }

  ASSIGN_OR_RETURN(Model model, ParseOnnxModel(bytes, model_path.parent_path(), options.import));
  SessionOptions keep = options;
  keep.keep_initializers = true;  // the optimized model is serialized below
  ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(std::move(model), keep));
  auto serialized = SerializeOnnxModel(session->model());
  if (!serialized.ok()) {
    spdlog::warn("compiled-model cache: cannot serialize {}: {}", model_path.string(),
                 serialized.status().message());
    return session;
  }
  fs::create_directories(options_.dir, ec);
  const std::string meta_out = fmt::format("{}\nsize {}\nchecksum {}\n", kMetaMagic,
                                           serialized->size(), ContentHash(*serialized, 1));
  // Entry first, meta last: a meta file always describes a complete entry.
  if (!WriteAtomically(entry, *serialized) || !WriteAtomically(meta, meta_out)) {
    spdlog::warn("compiled-model cache: cannot write {} (caching disabled for this load)",
                 entry.string());
  }
  return session;
}

}  // namespace inferd::serving
