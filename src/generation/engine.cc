#include "generation/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

namespace inferd::gen {

namespace {
// 0.1 ms .. ~52 s: TTFT/E2E of long prompts and ITL of one decode step alike.
std::vector<double> LatencyBounds() { return Histogram::ExponentialBounds(1e-4, 2, 20); }

double Seconds(Clock::TimePoint from, Clock::TimePoint to) {
  return std::chrono::duration<double>(to - from).count();
}

uint64_t MixSeed(uint64_t x) {  // splitmix64: distinct streams for consecutive sequence ids
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

struct GenerationEngine::Request {
  Request(GenerationRequest r, std::function<void(const GenerationEvent&)> cb,
          const Tokenizer& tokenizer, uint64_t seed, Clock::TimePoint now)
      : id(std::move(r.id)),
        prompt(std::move(r.prompt)),
        params(std::move(r.params)),
        on_event(std::move(cb)),
        sampler(SamplerOptions{params.temperature, params.top_k, params.top_p,
                               params.frequency_penalty, params.presence_penalty, params.logprobs},
                params.seed.value_or(seed)),
        // The draft's distribution q: the request's temperature and filters, no penalties (any
        // q keeps the output exact; the closer to p, the more drafts are kept).
        draft_sampler(SamplerOptions{params.temperature, params.top_k, params.top_p, 0, 0, -1},
                      MixSeed(params.seed.value_or(seed) ^ 0x5eedd4af7ull)),
        decoder(tokenizer, prompt),
        stop(params.stop),
        arrival(now) {}

  std::string id;
  std::vector<int32_t> prompt;  // moved into the Sequence on admission
  SamplingParams params;
  std::function<void(const GenerationEvent&)> on_event;
  Sampler sampler;
  Sampler draft_sampler;   // speculative: draws the drafts (and the n-gram acceptance uniforms)
  int spec_k = 0;          // speculative: this sequence's current k (0: not yet set)
  IncrementalDecoder decoder;
  StopStringFilter stop;
  int64_t seq_id = 0;
  int prompt_len = 0;
  int completion_tokens = 0;
  Clock::TimePoint arrival, first_token, last_token;
  std::shared_ptr<const constrained::TokenIndex> constraint;  // guided_regex, else null
  int32_t constraint_state = 0;                               // its DFA state after the output
};

GenerationEngine::GenerationEngine(std::unique_ptr<ModelRunner> runner,
                                   std::unique_ptr<Tokenizer> tokenizer,
                                   const EngineOptions& options, Clock* clock,
                                   std::unique_ptr<ModelRunner> draft)
    : runner_(std::move(runner)),
      draft_(std::move(draft)),
      tokenizer_(std::move(tokenizer)),
      options_(options),
      clock_(clock),
      seed_base_(std::random_device{}()),
      eos_id_(runner_->config().eos_token_id >= 0 ? runner_->config().eos_token_id
                                                  : tokenizer_->eos_id()),
      ttft_(LatencyBounds()),
      tpot_(LatencyBounds()),
      itl_(LatencyBounds()),
      e2e_(LatencyBounds()),
      constraints_(ConstraintVocabulary(*tokenizer_, runner_->config().vocab_size, eos_id_)),
      scheduler_(SchedulerOptions{options.max_num_seqs, options.max_num_batched_tokens,
                                  options.enable_prefix_caching, options.chunked_prefill},
                 runner_->num_blocks(), runner_->block_size()) {
  PublishStats();
  thread_ = std::thread([this] { Loop(); });
}

StatusOr<std::unique_ptr<GenerationEngine>> GenerationEngine::Create(
    std::unique_ptr<ModelRunner> runner, std::unique_ptr<Tokenizer> tokenizer,
    const EngineOptions& options, Clock* clock, std::unique_ptr<ModelRunner> draft) {
  if (runner == nullptr) return InvalidArgument("generation engine: no model runner");
  if (tokenizer == nullptr) return InvalidArgument("generation engine: no tokenizer");
  if (clock == nullptr) return InvalidArgument("generation engine: no clock");
  if (options.max_num_seqs < 1) {
    return InvalidArgument("max_num_seqs must be >= 1, got {}", options.max_num_seqs);
  }
  if (options.max_num_batched_tokens < 1) {
    return InvalidArgument("max_num_batched_tokens must be >= 1, got {}",
                           options.max_num_batched_tokens);
  }
  const DecoderConfig& config = runner->config();
  if (runner->block_size() < 1 || runner->num_blocks() < 1 || config.max_context < 1) {
    return InvalidArgument(
        "model runner has block_size {}, {} blocks, context {}: all must be >= 1",
        runner->block_size(), runner->num_blocks(), config.max_context);
  }
  if (tokenizer->vocab_size() > config.vocab_size) {
    return InvalidArgument("tokenizer has {} pieces, more than the model's vocab_size {}",
                           tokenizer->vocab_size(), config.vocab_size);
  }
  RETURN_IF_ERROR(CheckDraft(*runner, draft.get(), options.speculative));
  return std::unique_ptr<GenerationEngine>(new GenerationEngine(
      std::move(runner), std::move(tokenizer), options, clock, std::move(draft)));
}

Status GenerationEngine::CheckDraft(const ModelRunner& runner, const ModelRunner* draft,
                                    const SpeculativeOptions& options) {
  if (options.method == DraftMethod::kNone) {
    if (draft != nullptr) return InvalidArgument("a draft runner without speculative decoding");
    return Status::Ok();
  }
  RETURN_IF_ERROR(ValidateSpeculativeOptions(options).WithContext("speculative decoding"));
  if (options.method == DraftMethod::kNgram) {
    if (draft != nullptr) return InvalidArgument("n-gram speculative decoding takes no draft runner");
    return Status::Ok();
  }
  if (draft == nullptr) return InvalidArgument("speculative decoding with a draft model: no draft");
  const DecoderConfig& t = runner.config();
  const DecoderConfig& d = draft->config();
  if (d.vocab_size != t.vocab_size) {
    return InvalidArgument("the draft model's vocab_size {} differs from the target's {}",
                           d.vocab_size, t.vocab_size);
  }
  if (draft->block_size() != runner.block_size() || draft->num_blocks() < runner.num_blocks() ||
      d.max_context < t.max_context) {
    return InvalidArgument(
        "the draft's KV pool ({} blocks of {}, context {}) cannot mirror the target's ({} of "
        "{}, context {})",
        draft->num_blocks(), draft->block_size(), d.max_context, runner.num_blocks(),
        runner.block_size(), t.max_context);
  }
  return Status::Ok();
}

GenerationEngine::~GenerationEngine() {
  {
    MutexLock l(&mu_);
    stopping_ = true;
    work_.NotifyAll();
  }
  thread_.join();
}

Status GenerationEngine::Validate(const GenerationRequest& request) const {
  const DecoderConfig& config = runner_->config();
  const SamplingParams& p = request.params;
  const int64_t prompt_len = static_cast<int64_t>(request.prompt.size());
  if (request.id.empty()) return InvalidArgument("request id must not be empty");
  if (prompt_len == 0) return InvalidArgument("prompt must not be empty");
  if (prompt_len > config.max_context) {
    return InvalidArgument("prompt is {} tokens, longer than the model's context of {} tokens",
                           prompt_len, config.max_context);
  }
  for (int32_t t : request.prompt) {
    if (t < 0 || t >= config.vocab_size) {
      return InvalidArgument("prompt token {} is outside the vocabulary [0, {})", t,
                             config.vocab_size);
    }
  }
  if (p.max_tokens <= 0) return InvalidArgument("max_tokens must be >= 1, got {}", p.max_tokens);
  if (p.max_tokens > config.max_context) {
    return InvalidArgument("max_tokens {} exceeds the model's context of {} tokens", p.max_tokens,
                           config.max_context);
  }
  if (prompt_len + p.max_tokens > config.max_context) {
    return InvalidArgument(
        "the model's context is {} tokens, but {} were requested ({} in the prompt, {} in "
        "max_tokens)",
        config.max_context, prompt_len + p.max_tokens, prompt_len, p.max_tokens);
  }
  if (!(p.temperature >= 0) || !std::isfinite(p.temperature)) {
    return InvalidArgument("temperature must be >= 0, got {}", p.temperature);
  }
  if (!(p.top_p > 0 && p.top_p <= 1)) {
    return InvalidArgument("top_p must be in (0, 1], got {}", p.top_p);
  }
  if (p.top_k < 0) return InvalidArgument("top_k must be >= 0 (0 = off), got {}", p.top_k);
  if (!(std::abs(p.frequency_penalty) <= 2) || !(std::abs(p.presence_penalty) <= 2)) {
    return InvalidArgument(
        "frequency_penalty and presence_penalty must be in [-2, 2], got {} "
        "and {}",
        p.frequency_penalty, p.presence_penalty);
  }
  if (p.logprobs < -1 || p.logprobs > config.vocab_size) {
    return InvalidArgument("logprobs must be -1 (none) or in [0, {}], got {}", config.vocab_size,
                           p.logprobs);
  }
  for (const std::string& s : p.stop) {
    if (s.empty()) return InvalidArgument("stop strings must not be empty");
  }
  const int64_t blocks =
      (prompt_len + p.max_tokens + runner_->block_size() - 1) / runner_->block_size();
  if (blocks > runner_->num_blocks()) {
    return InvalidArgument("the request needs {} KV cache blocks ({} tokens), the cache has {}",
                           blocks, prompt_len + p.max_tokens, runner_->num_blocks());
  }
  return Status::Ok();
}

Status GenerationEngine::Submit(GenerationRequest request,
                                std::function<void(const GenerationEvent&)> on_event) {
  RETURN_IF_ERROR(Validate(request));
  std::shared_ptr<const constrained::TokenIndex> constraint;
  if (request.params.guided_regex) {  // compiled here, on the caller's thread, not the step's
    auto index = constraints_.Get(*request.params.guided_regex);
    if (!index.ok()) return InvalidArgument("constrained output: {}", index.status().message());
    constraint = std::move(*index);
  }
  MutexLock l(&mu_);
  if (stopping_) return Unavailable("generation engine is shutting down");
  if (active_ids_.contains(request.id)) {
    return InvalidArgument("a request with id '{}' is already running", request.id);
  }
  active_ids_.insert(request.id);
  const uint64_t seed = MixSeed(seed_base_ + ++submitted_);
  inbox_.push_back(std::make_unique<Request>(std::move(request), std::move(on_event), *tokenizer_,
                                             seed, clock_->Now()));
  inbox_.back()->constraint = std::move(constraint);
  work_.NotifyAll();
  return Status::Ok();
}

void GenerationEngine::Cancel(const std::string& id) {
  MutexLock l(&mu_);
  cancels_.push_back(id);
  work_.NotifyAll();
}

EngineStats GenerationEngine::Stats() const {
  MutexLock l(&mu_);
  EngineStats s = stats_;
  s.waiting += static_cast<int>(inbox_.size());
  s.expert_tokens = runner_->ExpertTokens();  // the runner's atomics: no engine lock needed
  return s;
}

void GenerationEngine::PublishStats() {
  const BlockManager& blocks = scheduler_.blocks();
  MutexLock l(&mu_);
  stats_.running = scheduler_.num_running();
  stats_.waiting = scheduler_.num_waiting();
  stats_.kv_blocks_used = blocks.NumUsed();
  stats_.kv_blocks_total = blocks.num_blocks();
  stats_.kv_block_bytes = static_cast<int64_t>(runner_->kv_block_bytes());
  stats_.prefix_queries = blocks.prefix_query_tokens();
  stats_.prefix_hits = blocks.prefix_hit_tokens();
  stats_.preemptions = scheduler_.num_preemptions();
  stats_.prompt_tokens = prompt_tokens_;
  stats_.generated_tokens = generated_tokens_;
  stats_.draft_tokens = draft_tokens_;
  stats_.accepted_tokens = accepted_tokens_;
}

void GenerationEngine::Admit(std::unique_ptr<Request> request) {
  auto seq = std::make_unique<Sequence>();
  seq->id = next_seq_id_++;
  seq->prompt_len = static_cast<int>(request->prompt.size());
  seq->tokens = std::move(request->prompt);
  request->seq_id = seq->id;
  request->prompt_len = seq->prompt_len;
  prompt_tokens_ += seq->prompt_len;
  seq_of_[request->id] = seq->id;
  scheduler_.Add(std::move(seq));
  requests_.emplace(request->seq_id, std::move(request));
}

void GenerationEngine::Loop() {
  while (true) {
    std::deque<std::unique_ptr<Request>> inbox;
    std::vector<std::string> cancels;
    bool stopping;
    {
      MutexLock l(&mu_);
      while (!stopping_ && inbox_.empty() && cancels_.empty() && !scheduler_.HasWork()) {
        work_.Wait(&mu_);
      }
      inbox.swap(inbox_);
      cancels.swap(cancels_);
      stopping = stopping_;
    }
    for (auto& r : inbox) Admit(std::move(r));
    for (const std::string& id : cancels) {
      auto it = seq_of_.find(id);
      if (it != seq_of_.end()) Finish(*requests_.at(it->second), {}, "cancelled");
    }
    if (stopping) {
      while (!requests_.empty()) Finish(*requests_.begin()->second, {}, "cancelled");
      PublishStats();
      return;
    }
    if (scheduler_.HasWork()) Step();
    PublishStats();
  }
}

void GenerationEngine::FailStep(const ScheduleResult& plan, const Status& error) {
  for (const ScheduledChunk& c : plan.chunks) {
    auto it = requests_.find(c.seq->id);
    if (it == requests_.end()) continue;  // a chunk of a sequence already failed
    GenerationEvent event;
    event.error = error;
    Finish(*it->second, std::move(event), "error");
  }
}

void GenerationEngine::Step() {
  ScheduleResult plan = scheduler_.Schedule();
  if (plan.chunks.empty()) {
    // Only possible if a waiting sequence cannot fit an idle pool (Submit rules that out): fail
    // it rather than spin.
    if (plan.num_preempted == 0 && scheduler_.num_running() == 0 && !requests_.empty()) {
      GenerationEvent event;
      event.error = ResourceExhausted("the KV cache cannot hold the request");
      Finish(*requests_.begin()->second, std::move(event), "error");
    }
    return;
  }
  std::vector<Speculation> specs = PlanSpeculation(plan);
  if (Status s = RunDraft(specs); !s.ok()) {
    FailStep(plan, s.WithContext("draft model step"));
    return;
  }
  std::vector<SequenceChunk> chunks = scheduler_.RunnerChunks(plan);
  std::vector<Speculation*> spec_of(chunks.size(), nullptr);
  for (Speculation& spec : specs) {
    SequenceChunk& c = chunks[spec.chunk];
    c.tokens = spec.tokens;
    c.all_logits = true;
    spec_of[spec.chunk] = &spec;
  }
  int64_t rows = 0;
  for (const SequenceChunk& c : chunks) {
    rows += c.all_logits ? static_cast<int64_t>(c.tokens.size()) : c.need_logits;
  }
  Tensor logits;
  Status status = runner_->Step(chunks, &logits);
  const int64_t vocab = config().vocab_size;
  if (status.ok() && (logits.dtype() != DataType::kFloat32 || logits.rank() != 2 ||
                      logits.dim(0) != rows || logits.dim(1) != vocab)) {
    status = Internal("model runner returned logits {} for {} rows of vocab {}",
                      ShapeToString(logits.shape()), rows, vocab);
  }
  if (!status.ok()) {
    FailStep(plan, status.WithContext("model step"));
    return;
  }
  scheduler_.CompleteStep(plan);
  const Clock::TimePoint now = clock_->Now();
  int64_t row = 0;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const ScheduledChunk& c = plan.chunks[i];
    const float* values = logits.data<float>() + row * vocab;
    if (spec_of[i] != nullptr) {
      row += static_cast<int64_t>(spec_of[i]->tokens.size());
      Verify(*spec_of[i], values, now);
      continue;
    }
    if (!c.need_logits) continue;
    ++row;
    Request& request = *requests_.at(c.seq->id);
    std::span<const uint64_t> allowed;  // constrained output: this state's token mask
    if (request.constraint != nullptr) {
      allowed = request.constraint->Allowed(request.constraint_state);
      if (std::all_of(allowed.begin(), allowed.end(), [](uint64_t w) { return w == 0; })) {
        GenerationEvent event;
        event.error = FailedPrecondition(
            "constrained output: no token of the vocabulary can continue the match");
        Finish(request, std::move(event), "error");
        continue;
      }
    }
    const SampleResult sample = request.sampler.Sample({values, static_cast<size_t>(vocab)}, allowed);
    if (request.constraint != nullptr) {
      request.constraint_state = request.constraint->Next(request.constraint_state, sample.token);
    }
    OnToken(request, sample, now);
  }
}

std::vector<GenerationEngine::Speculation> GenerationEngine::PlanSpeculation(
    const ScheduleResult& plan) {
  const SpeculativeOptions& so = options_.speculative;
  std::vector<Speculation> specs;
  if (so.method == DraftMethod::kNone) return specs;
  int decodes = 0;
  for (const ScheduledChunk& c : plan.chunks) decodes += c.need_logits && c.num_tokens == 1;
  // The batch is every sequence the engine holds, not only this step's decodes: while others
  // still wait or prefill (16 requests arriving together), the batch is about to grow past
  // max_batch, and a draft run then (its catch-up prefill, k steps) costs more than it saves.
  const int batch = scheduler_.num_running() + scheduler_.num_waiting();
  if (decodes == 0 || std::max(decodes, batch) > so.max_batch) return specs;
  // Draft tokens only take what the scheduled chunks left of the step's token budget.
  int64_t budget = options_.max_num_batched_tokens - plan.num_tokens;
  const int64_t context = config().max_context;
  for (size_t i = 0; i < plan.chunks.size() && budget > 0; ++i) {
    const ScheduledChunk& c = plan.chunks[i];
    if (!c.need_logits || c.num_tokens != 1) continue;
    Request& request = *requests_.at(c.seq->id);
    // Constrained output is not speculated: drafts would have to be masked state by state.
    if (request.constraint != nullptr) continue;
    if (request.spec_k == 0) request.spec_k = so.num_speculative_tokens;
    const int64_t n = static_cast<int64_t>(c.seq->tokens.size());
    // A step yields at most k + 1 tokens: no drafts past max_tokens or the context.
    int64_t k = std::min<int64_t>({request.spec_k, budget,
                                   request.params.max_tokens - request.completion_tokens - 1,
                                   context - n});
    if (k < 1) continue;
    Speculation spec{i, c.seq, {c.seq->tokens.back()}, {}, so.method == DraftMethod::kModel};
    if (so.method == DraftMethod::kNgram || so.prompt_lookup) {
      std::vector<int32_t> d = PromptLookup(c.seq->tokens, static_cast<int>(k), so.ngram_max,
                                            so.ngram_min);
      if (!d.empty()) {
        k = static_cast<int64_t>(d.size());
        spec.tokens.insert(spec.tokens.end(), d.begin(), d.end());
        spec.from_model = false;
      } else if (so.method == DraftMethod::kNgram) {
        continue;
      }
    }
    if (!scheduler_.ReserveLookahead(c.seq, n + k)) continue;
    spec.tokens.resize(static_cast<size_t>(k) + 1);  // kModel: drafts filled by RunDraft
    budget -= k;
    specs.push_back(std::move(spec));
  }
  return specs;
}

Status GenerationEngine::RunDraft(std::vector<Speculation>& specs) {
  if (specs.empty() || options_.speculative.method != DraftMethod::kModel) return Status::Ok();
  const int64_t vocab = config().vocab_size;
  size_t max_k = 0;
  for (const Speculation& s : specs) {
    if (s.from_model) max_k = std::max(max_k, s.tokens.size() - 1);
  }
  // Round j (1-based) computes draft token j of every sequence with k >= j; round 1 also catches
  // the draft's cache up with the tokens it has not seen (the prompt, or the last round's kept
  // tokens).
  for (size_t j = 1; j <= max_k; ++j) {
    std::vector<SequenceChunk> chunks;
    std::vector<Speculation*> in_round;
    for (Speculation& s : specs) {
      if (!s.from_model || s.tokens.size() - 1 < j) continue;
      const int64_t n = static_cast<int64_t>(s.seq->tokens.size());
      SequenceChunk c{s.seq->id, {}, 0, scheduler_.blocks().BlockTable(s.seq->id), true};
      if (j == 1) {
        c.start_position = std::min(s.seq->draft_computed, n - 1);
        c.tokens = std::span<const int32_t>(s.seq->tokens).subspan(
            static_cast<size_t>(c.start_position));
      } else {
        c.start_position = n + static_cast<int64_t>(j) - 2;
        c.tokens = std::span<const int32_t>(s.tokens).subspan(j - 1, 1);
      }
      chunks.push_back(c);
      in_round.push_back(&s);
    }
    if (chunks.empty()) break;
    Tensor logits;
    RETURN_IF_ERROR(draft_->Step(chunks, &logits));
    if (logits.rank() != 2 || logits.dim(0) != static_cast<int64_t>(chunks.size()) ||
        logits.dim(1) != vocab) {
      return Internal("draft runner returned logits {} for {} sequences",
                      ShapeToString(logits.shape()), chunks.size());
    }
    for (size_t r = 0; r < in_round.size(); ++r) {
      Speculation& s = *in_round[r];
      std::span<const float> row(logits.data<float>() + r * vocab, static_cast<size_t>(vocab));
      Request& request = *requests_.at(s.seq->id);
      if (request.params.temperature == 0) {
        s.tokens[j] = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
      } else {
        s.q.push_back(request.draft_sampler.Probabilities(row));
        s.tokens[j] = DrawFrom(s.q.back(), request.draft_sampler.NextUniform());
      }
      if (j == s.tokens.size() - 1) {
        s.seq->draft_computed = static_cast<int64_t>(s.seq->tokens.size()) + j - 1;
      }
    }
  }
  return Status::Ok();
}

void GenerationEngine::Verify(Speculation& spec, const float* rows, Clock::TimePoint now) {
  const int64_t seq_id = spec.seq->id;
  const size_t vocab = static_cast<size_t>(config().vocab_size);
  const int k = static_cast<int>(spec.tokens.size()) - 1;
  const int64_t n = static_cast<int64_t>(spec.seq->tokens.size());
  Request& request = *requests_.at(seq_id);
  const bool greedy = request.params.temperature == 0;
  int accepted = 0;
  bool finished = false;
  for (int i = 0; i <= k && !finished; ++i) {
    std::span<const float> row(rows + static_cast<size_t>(i) * vocab, vocab);
    bool keep_going = false;
    SampleResult result;
    if (i == k) {
      result = request.sampler.Sample(row);  // every draft kept: the target's own next token
    } else if (greedy) {
      result = request.sampler.Sample(row);  // argmax after penalties, as without speculation
      keep_going = result.token == spec.tokens[i + 1];
    } else {
      const std::vector<float> p = request.sampler.Probabilities(row);
      std::span<const float> q;
      if (!spec.q.empty()) q = spec.q[static_cast<size_t>(i)];
      Sampler& u = request.sampler;
      const double u_accept = u.NextUniform(), u_resample = u.NextUniform();
      const Verdict v = RejectionSample(p, q, spec.tokens[i + 1], u_accept, u_resample);
      result = request.sampler.Take(v.token, row);
      keep_going = v.accepted;
    }
    OnToken(request, result, now);
    finished = !requests_.contains(seq_id);  // EOS, a stop string or max_tokens
    if (keep_going) ++accepted; else break;
  }
  draft_tokens_ += k;
  accepted_tokens_ += accepted;
  if (finished) return;
  if (options_.speculative.adaptive) {
    request.spec_k = AdaptSpeculativeLength(request.spec_k, k, accepted,
                                            options_.speculative.num_speculative_tokens);
  }
  scheduler_.AcceptSpeculated(spec.seq, accepted);
  // The draft saw [last token, d_1..d_{k-1}]: valid up to the last kept draft.
  spec.seq->draft_computed = std::min(spec.seq->draft_computed, n + accepted);
}

void GenerationEngine::OnToken(Request& request, const SampleResult& sample, Clock::TimePoint now) {
  ++request.completion_tokens;
  ++generated_tokens_;
  if (request.completion_tokens == 1) {
    request.first_token = now;
    ttft_.Record(Seconds(request.arrival, now));
  } else {
    itl_.Record(Seconds(request.last_token, now));
  }
  request.last_token = now;

  GenerationEvent event;
  // The text still held back (an incomplete character, a possible stop string) is final now.
  auto drain = [&request, &event]() {
    std::string tail;
    const bool stopped = request.stop.Push(request.decoder.Flush(), &tail);
    event.text += tail;
    if (!stopped) event.text += request.stop.Flush();
    return stopped;
  };
  if (!request.params.ignore_eos && sample.token == eos_id_) {
    drain();
    Finish(request, std::move(event), "stop");
    return;
  }
  scheduler_.Find(request.seq_id)->tokens.push_back(sample.token);
  event.tokens.push_back(sample.token);
  if (request.params.logprobs >= 0) {
    event.logprobs.push_back({sample.token, sample.logprob, sample.top});
  }
  if (request.stop.Push(request.decoder.Add(sample.token), &event.text)) {
    Finish(request, std::move(event), "stop");
    return;
  }
  if (request.completion_tokens >= request.params.max_tokens) {
    const bool stopped = drain();
    Finish(request, std::move(event), stopped ? "stop" : "length");
    return;
  }
  request.on_event(event);
}

void GenerationEngine::Finish(Request& request, GenerationEvent event, std::string reason) {
  const Clock::TimePoint now = clock_->Now();
  Sequence* seq = scheduler_.Find(request.seq_id);
  event.finished = true;
  event.finish_reason = std::move(reason);
  event.prompt_tokens = request.prompt_len;
  event.completion_tokens = request.completion_tokens;
  event.cached_prompt_tokens = seq != nullptr ? std::max(0, seq->cached_prompt_tokens) : 0;
  if (event.finish_reason != "cancelled" && event.finish_reason != "error") {
    e2e_.Record(Seconds(request.arrival, now));
    if (request.completion_tokens > 1) {
      tpot_.Record(Seconds(request.first_token, now) / (request.completion_tokens - 1));
    }
  }
  scheduler_.Remove(request.seq_id);  // frees the blocks now
  seq_of_.erase(request.id);
  std::function<void(const GenerationEvent&)> on_event = std::move(request.on_event);
  {
    MutexLock l(&mu_);
    active_ids_.erase(request.id);
  }
  requests_.erase(request.seq_id);  // `request` is gone from here on
  PublishStats();                   // a client seeing the final event sees the blocks freed
  on_event(event);
}

}  // namespace inferd::gen
