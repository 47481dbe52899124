#include "genserve/engine_text_generator.h"

#include <filesystem>

#include "serving/repository.h"

namespace inferd::genserve {
namespace {

namespace fs = std::filesystem;

gen::SamplingParams ToEngine(const server::GenParams& p) {
  gen::SamplingParams s;
  s.max_tokens = p.max_tokens;
  s.temperature = p.temperature;
  s.top_k = p.top_k;
  s.top_p = p.top_p;
  s.seed = p.seed;
  s.frequency_penalty = p.frequency_penalty;
  s.presence_penalty = p.presence_penalty;
  s.stop = p.stop;
  s.ignore_eos = p.ignore_eos;
  s.logprobs = p.logprobs;
  s.guided_regex = p.guided_regex;
  return s;
}

server::GenEvent FromEngine(const gen::GenerationEvent& e) {
  server::GenEvent out;
  out.tokens = e.tokens;
  out.text = e.text;
  out.logprobs.reserve(e.logprobs.size());
  for (const auto& lp : e.logprobs) out.logprobs.push_back({lp.token, lp.logprob, lp.top});
  out.finished = e.finished;
  out.finish_reason = e.finish_reason;
  out.error = e.error;
  out.prompt_tokens = e.prompt_tokens;
  out.completion_tokens = e.completion_tokens;
  out.cached_prompt_tokens = e.cached_prompt_tokens;
  return out;
}

StatusOr<server::ChatTemplate> LoadChatTemplate(const fs::path& model_dir) {
  for (const fs::path& path :
       {model_dir / "chat_template.json", model_dir.parent_path() / "chat_template.json"}) {
    std::string text;
    if (!serving::ReadRepositoryFile(path, &text)) continue;
    auto t = server::ChatTemplate::Parse(text);
    if (!t.ok()) return InvalidArgument("{}: {}", path.string(), t.status().message());
    return std::move(*t);
  }
  return server::ChatTemplate::Default();
}

}  // namespace

EngineTextGenerator::EngineTextGenerator(std::unique_ptr<gen::GenerationEngine> engine,
                                         int max_context)
    : engine_(std::move(engine)), max_context_(max_context) {}

std::vector<int32_t> EngineTextGenerator::Encode(std::string_view text) const {
  std::vector<int32_t> ids = engine_->tokenizer().Encode(text);
  const int bos = engine_->tokenizer().bos_id();
  if (bos >= 0 && (ids.empty() || ids.front() != bos)) ids.insert(ids.begin(), bos);
  return ids;
}

std::string EngineTextGenerator::TokenText(int32_t token) const {
  const int32_t one[] = {token};
  return engine_->tokenizer().Decode(one);
}

Status EngineTextGenerator::Submit(const std::string& id, std::vector<int32_t> prompt,
                                   const server::GenParams& params,
                                   std::function<void(const server::GenEvent&)> on_event) {
  gen::GenerationRequest request{id, std::move(prompt), ToEngine(params)};
  return engine_->Submit(std::move(request), [on_event = std::move(on_event),
                                              finished = finished_](const gen::GenerationEvent& e) {
    if (e.finished) finished->fetch_add(1, std::memory_order_relaxed);
    on_event(FromEngine(e));
  });
}

void EngineTextGenerator::Cancel(const std::string& id) { engine_->Cancel(id); }

server::GenerationMetrics EngineTextGenerator::Metrics() const {
  const gen::EngineStats s = engine_->Stats();
  server::GenerationMetrics m;
  m.running = s.running;
  m.waiting = s.waiting;
  m.kv_blocks_used = s.kv_blocks_used;
  m.kv_blocks_total = s.kv_blocks_total;
  m.kv_block_bytes = s.kv_block_bytes;
  m.prefix_queries = s.prefix_queries;
  m.prefix_hits = s.prefix_hits;
  m.preemptions = s.preemptions;
  m.prompt_tokens = s.prompt_tokens;
  m.generated_tokens = s.generated_tokens;
  m.requests_finished = finished_->load(std::memory_order_relaxed);
  m.spec_draft_tokens = s.draft_tokens;
  m.spec_accepted_tokens = s.accepted_tokens;
  m.moe_expert_tokens = s.expert_tokens;
  // The engine's latency histograms are in seconds, as the metrics want.
  m.ttft = engine_->ttft_seconds().Snapshot();
  m.tpot = engine_->tpot_seconds().Snapshot();
  m.itl = engine_->itl_seconds().Snapshot();
  m.e2e = engine_->e2e_seconds().Snapshot();
  return m;
}

StatusOr<server::GenerativeModel> LoadGenerativeModel(const std::string& name,
                                                      const serving::GenerativeConfig& config,
                                                      const GenerativeLoadOptions& options) {
  auto fail = [&](const Status& s) {
    return Status(s.code(), fmt::format("generative model '{}': {}", name, s.message()));
  };
  gen::RunnerOptions ro;
  ro.kv_cache_bytes = config.kv_cache_bytes;
  ro.block_size = config.block_size;
  ro.num_threads = config.num_threads > 0 ? config.num_threads : options.default_threads;
  ro.int8_weights = config.int8_weights;
  auto kv_dtype = gen::ParseKvCacheDtype(config.kv_cache_dtype);
  if (!kv_dtype.ok()) return fail(kv_dtype.status());
  ro.kv_cache_dtype = *kv_dtype;
  // The cheap checks first: a corrupt tokenizer or template fails before the graph is optimized.
  auto tokenizer = gen::Tokenizer::Load(config.model_dir / "tokenizer.model");
  if (!tokenizer.ok()) return fail(tokenizer.status());
  auto chat = LoadChatTemplate(config.model_dir);
  if (!chat.ok()) return fail(chat.status());
  auto runner = gen::CreateDecoderRunner(config.model_dir, ro);
  if (!runner.ok()) return fail(runner.status());
  // config.json's optional "draft": speculative decoding (generation/speculative.h).
  // The draft's files are confined to the folder of model.onnx, as the model's own are (a path
  // or symlink leading out of it is refused).
  auto confine = [&](const fs::path& relative) {
    return serving::ResolveModelFile(config.model_dir, name, "", relative, "draft.path").status();
  };
  auto speculative = gen::LoadSpeculativeDecoding(config.model_dir, **runner, ro, confine);
  if (!speculative.ok()) return fail(speculative.status());
  const int model_context = (*runner)->config().max_context;
  if (config.max_context > model_context) {
    return fail(InvalidArgument("max_context {} is above the model's context of {} tokens",
                                config.max_context, model_context));
  }
  gen::EngineOptions eo;
  eo.max_num_seqs = config.max_num_seqs;
  eo.max_num_batched_tokens = config.max_num_batched_tokens;
  eo.enable_prefix_caching = config.enable_prefix_caching;
  eo.chunked_prefill = config.chunked_prefill;
  eo.speculative = speculative->options;
  Clock* clock = options.clock != nullptr ? options.clock : &RealClock::Get();
  auto engine = gen::GenerationEngine::Create(std::move(*runner), std::move(*tokenizer), eo, clock,
                                              std::move(speculative->draft));
  if (!engine.ok()) return fail(engine.status());
  const int context = config.max_context > 0 ? config.max_context : model_context;
  server::GenerativeModel model;
  model.name = name;
  model.generator = std::make_shared<EngineTextGenerator>(std::move(*engine), context);
  model.chat_template = std::move(*chat);
  return model;
}

}  // namespace inferd::genserve
