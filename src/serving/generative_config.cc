#include "serving/generative_config.h"

#include <cctype>
#include <charconv>
#include <limits>

#include "serving/model_config.h"
#include "serving/repository.h"

namespace inferd::serving {
namespace {

namespace fs = std::filesystem;

StatusOr<int64_t> ParseInt(const std::string& key, const std::string& text, int64_t lo,
                           int64_t hi) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < lo || v > hi) {
    return InvalidArgument("config.pbtxt: parameter '{}' must be an integer in [{}, {}] (got '{}')",
                           key, lo, hi, text);
  }
  return v;
}

// "268435456", "256MiB", "64M", "1GiB" (K/M/G are binary; KB/MB/GB decimal).
StatusOr<size_t> ParseBytes(const std::string& key, const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  std::string unit = text.substr(digits);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  uint64_t mult = unit.empty() || unit == "b"    ? 1
                  : unit == "k" || unit == "kib" ? uint64_t{1} << 10
                  : unit == "kb"                 ? 1000
                  : unit == "m" || unit == "mib" ? uint64_t{1} << 20
                  : unit == "mb"                 ? 1000 * 1000
                  : unit == "g" || unit == "gib" ? uint64_t{1} << 30
                  : unit == "gb"                 ? 1000 * 1000 * 1000
                                                 : 0;
  auto n = ParseInt(key, text.substr(0, digits), 1, int64_t{1} << 40);
  if (mult == 0 || !n.ok() || static_cast<uint64_t>(*n) > (uint64_t{1} << 40) / mult) {
    return InvalidArgument(
        "config.pbtxt: parameter '{}' must be a size between 1 byte and 1 TiB "
        "such as 256MiB (got '{}')",
        key, text);
  }
  return static_cast<size_t>(static_cast<uint64_t>(*n) * mult);
}

StatusOr<bool> ParseBool(const std::string& key, const std::string& text) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  return InvalidArgument("config.pbtxt: parameter '{}' must be true or false (got '{}')", key,
                         text);
}

Status SetParameter(const std::string& key, const std::string& v, GenerativeConfig* c) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (key == "kv_cache_bytes") {
    ASSIGN_OR_RETURN(c->kv_cache_bytes, ParseBytes(key, v));
  } else if (key == "block_size") {
    ASSIGN_OR_RETURN(c->block_size, ParseInt(key, v, 1, 4096));
  } else if (key == "max_num_batched_tokens") {
    ASSIGN_OR_RETURN(c->max_num_batched_tokens, ParseInt(key, v, 1, kMax));
  } else if (key == "max_num_seqs") {
    ASSIGN_OR_RETURN(c->max_num_seqs, ParseInt(key, v, 1, kMax));
  } else if (key == "max_context") {
    ASSIGN_OR_RETURN(c->max_context, ParseInt(key, v, 0, kMax));
  } else if (key == "num_threads") {
    ASSIGN_OR_RETURN(c->num_threads, ParseInt(key, v, 0, 1024));
  } else if (key == "int8_weights") {
    ASSIGN_OR_RETURN(c->int8_weights, ParseBool(key, v));
  } else if (key == "kv_cache_dtype") {
    if (v != "float32" && v != "int8") {
      return InvalidArgument(
          "config.pbtxt: parameter 'kv_cache_dtype' must be float32 or int8 (got '{}')", v);
    }
    c->kv_cache_dtype = v;
  } else if (key == "enable_prefix_caching") {
    ASSIGN_OR_RETURN(c->enable_prefix_caching, ParseBool(key, v));
  } else if (key == "chunked_prefill") {
    ASSIGN_OR_RETURN(c->chunked_prefill, ParseBool(key, v));
  } else {
    return InvalidArgument(
        "config.pbtxt: unknown parameter '{}' for backend '{}' (known: "
        "kv_cache_bytes, block_size, max_num_batched_tokens, max_num_seqs, "
        "max_context, num_threads, int8_weights, kv_cache_dtype, enable_prefix_caching, "
        "chunked_prefill)",
        key, kGenerativeBackend);
  }
  return Status::Ok();
}

}  // namespace

bool IsGenerativeConfig(const inference::ModelConfig& config) {
  return config.backend() == kGenerativeBackend;
}

StatusOr<GenerativeConfig> ReadGenerativeConfig(const inference::ModelConfig& config,
                                                const fs::path& model_folder) {
  GenerativeConfig c;
  for (const auto& [key, value] : config.parameters()) {
    RETURN_IF_ERROR(SetParameter(key, value.string_value(), &c));
  }
  const std::vector<int64_t> versions = ListVersionFolders(model_folder);
  const fs::path version = versions.empty() ? fs::path() : fs::path(std::to_string(versions.back()));
  c.model_dir = model_folder / version;
  // The same confinement as an ONNX model's files (repository.h): a symlink or path leading out
  // of the version folder is refused, so a generative model reads nothing outside its folder.
  const std::string name = model_folder.filename().string();
  for (const char* file : {"model.onnx", "config.json", "tokenizer.model"}) {
    auto resolved = ResolveModelFile(model_folder, name, version, version / file, file);
    if (!resolved.ok()) return resolved.status();
  }
  return c;
}

std::vector<std::string> ListGenerativeModels(const fs::path& repository) {
  std::vector<std::string> out;
  for (const std::string& name : ListModelFolders(repository)) {
    std::string text;
    if (!ReadRepositoryFile(repository / name / "config.pbtxt", &text)) continue;
    auto config = ParseModelConfig(text, /*strict=*/false, nullptr);
    if (config.ok() && IsGenerativeConfig(*config)) out.push_back(name);
  }
  return out;
}

}  // namespace inferd::serving
