#include "generation/speculative.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace inferd::gen {
namespace {

namespace fs = std::filesystem;

bool ReadFile(const fs::path& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::stringstream s;
  s << f.rdbuf();
  *out = s.str();
  return true;
}

// The "draft" object's fields into `options` (and `path`); INVALID_ARGUMENT naming the field.
Status ParseDraft(const rapidjson::Value& d, const std::string& file, SpeculativeOptions* options,
                  std::string* path) {
  static const std::set<std::string> known = {"path",      "method",    "num_speculative_tokens",
                                              "adaptive",  "max_batch", "ngram_max",
                                              "ngram_min", "num_threads", "prompt_lookup"};
  for (auto m = d.MemberBegin(); m != d.MemberEnd(); ++m) {
    if (!known.count(m->name.GetString())) {
      return InvalidArgument("{}: unknown field 'draft.{}'", file, m->name.GetString());
    }
  }
  auto int_field = [&](const char* name, int* out) -> Status {
    auto it = d.FindMember(name);
    if (it == d.MemberEnd()) return Status::Ok();
    if (!it->value.IsInt()) return InvalidArgument("{}: 'draft.{}' is not an integer", file, name);
    *out = it->value.GetInt();
    return Status::Ok();
  };
  RETURN_IF_ERROR(int_field("num_speculative_tokens", &options->num_speculative_tokens));
  RETURN_IF_ERROR(int_field("max_batch", &options->max_batch));
  RETURN_IF_ERROR(int_field("ngram_max", &options->ngram_max));
  RETURN_IF_ERROR(int_field("ngram_min", &options->ngram_min));
  RETURN_IF_ERROR(int_field("num_threads", &options->draft_threads));
  for (auto [name, out] : {std::pair<const char*, bool*>{"adaptive", &options->adaptive},
                            {"prompt_lookup", &options->prompt_lookup}}) {
    auto it = d.FindMember(name);
    if (it == d.MemberEnd()) continue;
    if (!it->value.IsBool()) return InvalidArgument("{}: 'draft.{}' is not a bool", file, name);
    *out = it->value.GetBool();
  }
  auto p = d.FindMember("path");
  auto m = d.FindMember("method");
  if ((p == d.MemberEnd()) == (m == d.MemberEnd())) {
    return InvalidArgument("{}: 'draft' needs exactly one of 'path' (a draft model folder) or "
                           "'method' (\"ngram\")", file);
  }
  if (p != d.MemberEnd()) {
    if (!p->value.IsString() || p->value.GetStringLength() == 0) {
      return InvalidArgument("{}: 'draft.path' is not a non-empty string", file);
    }
    *path = p->value.GetString();
    options->method = DraftMethod::kModel;
  } else {
    if (!m->value.IsString() || std::string(m->value.GetString()) != "ngram") {
      return InvalidArgument("{}: 'draft.method' must be \"ngram\"", file);
    }
    options->method = DraftMethod::kNgram;
  }
  return ValidateSpeculativeOptions(*options).WithContext(file + ": draft");
}

// The draft must speak the target's tokens: same tokenizer file, vocabulary and special ids.
Status CheckCompatible(const fs::path& target_dir, const DecoderConfig& target,
                       const fs::path& draft_dir, const DecoderConfig& draft) {
  std::string target_tok, draft_tok;
  if (!ReadFile(target_dir / "tokenizer.model", &target_tok)) {
    return InvalidArgument("{}: cannot read the target's tokenizer",
                           (target_dir / "tokenizer.model").string());
  }
  if (!ReadFile(draft_dir / "tokenizer.model", &draft_tok)) {
    return InvalidArgument("{}: cannot read the draft model's tokenizer",
                           (draft_dir / "tokenizer.model").string());
  }
  if (target_tok != draft_tok) {
    return InvalidArgument("draft model {}: its tokenizer.model differs from the target's {}",
                           draft_dir.string(), (target_dir / "tokenizer.model").string());
  }
  if (draft.vocab_size != target.vocab_size || draft.bos_token_id != target.bos_token_id ||
      draft.eos_token_id != target.eos_token_id) {
    return InvalidArgument(
        "draft model {}: vocab_size/bos/eos {}/{}/{} differ from the target's {}/{}/{}",
        draft_dir.string(), draft.vocab_size, draft.bos_token_id, draft.eos_token_id,
        target.vocab_size, target.bos_token_id, target.eos_token_id);
  }
  if (draft.max_context < target.max_context) {
    return InvalidArgument("draft model {}: context {} is shorter than the target's {}",
                           draft_dir.string(), draft.max_context, target.max_context);
  }
  return Status::Ok();
}

}  // namespace

Status ValidateSpeculativeOptions(const SpeculativeOptions& o) {
  if (o.num_speculative_tokens < 1 || o.num_speculative_tokens > kMaxSpeculativeTokens) {
    return InvalidArgument("num_speculative_tokens must be in 1..{}, got {}",
                           kMaxSpeculativeTokens, o.num_speculative_tokens);
  }
  if (o.draft_threads < 1) {
    return InvalidArgument("the draft's num_threads must be >= 1, got {}", o.draft_threads);
  }
  if (o.max_batch < 0) return InvalidArgument("max_batch must be >= 0, got {}", o.max_batch);
  if (o.ngram_min < 1 || o.ngram_max < o.ngram_min || o.ngram_max > 16) {
    return InvalidArgument("ngram_min/ngram_max must satisfy 1 <= min <= max <= 16, got {}/{}",
                           o.ngram_min, o.ngram_max);
  }
  return Status::Ok();
}

int32_t DrawFrom(std::span<const float> weights, double u) {
  double total = 0;
  for (float w : weights) total += w;
  const double target = u * total;
  double cumulative = 0;
  int32_t last = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0) continue;
    cumulative += weights[i];
    last = static_cast<int32_t>(i);
    if (target < cumulative) return last;
  }
  return last;
}

Verdict RejectionSample(std::span<const float> p, std::span<const float> q, int32_t draft,
                        double u_accept, double u_resample) {
  const double pd = p[draft];
  const double qd = q.empty() ? 1.0 : q[draft];
  // qd > 0 whenever the draft was drawn from q; pd >= qd accepts outright.
  if (qd <= 0 || u_accept * qd < pd) return {true, draft};
  std::vector<float> residual(p.size());
  double mass = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double qi = q.empty() ? (static_cast<int32_t>(i) == draft ? 1.0 : 0.0) : q[i];
    residual[i] = static_cast<float>(std::max(0.0, static_cast<double>(p[i]) - qi));
    mass += residual[i];
  }
  if (!(mass > 0)) return {false, DrawFrom(p, u_resample)};
  return {false, DrawFrom(residual, u_resample)};
}

std::vector<int32_t> PromptLookup(std::span<const int32_t> tokens, int k, int ngram_max,
                                  int ngram_min) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  for (int n = std::min<int64_t>(ngram_max, len - 1); n >= ngram_min; --n) {
    const std::span<const int32_t> tail = tokens.subspan(static_cast<size_t>(len - n));
    // Latest occurrence first: recent text predicts the continuation best.
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(tail.begin(), tail.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t count = std::min<int64_t>(k, len - from);
      return std::vector<int32_t>(tokens.begin() + from, tokens.begin() + from + count);
    }
  }
  return {};
}

int AdaptSpeculativeLength(int current, int proposed, int accepted, int max_k) {
  const int next = accepted >= proposed ? current + 2 : current - 1;
  return std::clamp(next, 1, max_k);
}

StatusOr<SpeculativeDecoding> LoadSpeculativeDecoding(
    const fs::path& model_dir, const ModelRunner& target, const RunnerOptions& runner_options,
    const std::function<Status(const fs::path& relative)>& check_draft_file) {
  const std::string file = (model_dir / "config.json").string();
  std::string text;
  if (!ReadFile(model_dir / "config.json", &text)) {
    return InvalidArgument("{}: cannot read the decoder config", file);
  }
  rapidjson::Document doc;
  doc.Parse(text.c_str());
  SpeculativeDecoding result;
  if (doc.HasParseError() || !doc.IsObject()) return InvalidArgument("{}: not a JSON object", file);
  auto it = doc.FindMember("draft");
  if (it == doc.MemberEnd() || it->value.IsNull()) return result;
  if (!it->value.IsObject()) return InvalidArgument("{}: 'draft' is not an object", file);
  std::string path;
  RETURN_IF_ERROR(ParseDraft(it->value, file, &result.options, &path));
  if (result.options.method != DraftMethod::kModel) return result;
  if (check_draft_file) {
    for (const char* f : {"config.json", "tokenizer.model", "model.onnx"}) {
      RETURN_IF_ERROR(check_draft_file(fs::path(path) / f));
    }
  }
  const fs::path draft_dir = fs::path(path).is_absolute() ? fs::path(path) : model_dir / path;
  ASSIGN_OR_RETURN(DecoderConfig draft_config, LoadDecoderConfig(draft_dir / "config.json"));
  RETURN_IF_ERROR(CheckCompatible(model_dir, target.config(), draft_dir, draft_config));
  // As many blocks as the target's pool, of the same size: one block table serves both.
  RunnerOptions ro = runner_options;
  ro.block_size = target.block_size();
  ro.num_threads = result.options.draft_threads;
  ro.kv_cache_bytes = static_cast<size_t>(target.num_blocks()) *
                      KvBlockBytes(draft_config, target.block_size(), ro.kv_cache_dtype);
  auto draft = CreateDecoderRunner(draft_dir, ro);
  if (!draft.ok()) return draft.status().WithContext("draft model");
  result.draft = std::move(*draft);
  return result;
}

}  // namespace inferd::gen
