// GenerationEngine: text generation with continuous batching over a paged KV cache (GEN.md
// section 4). One step thread loops: take new requests and cancellations, Schedule() a step
// (scheduler.h: decodes first, then prefill chunks, preemption when the pool is short), run it on
// the ModelRunner, sample each sequence that reached its last token (sampler.h), stream the token
// and its text (tokenizer.h's IncrementalDecoder, stop strings withheld by stop_strings.h), and
// finish sequences on EOS, max_tokens or a stop string, freeing their blocks at once.
//
//   auto engine = GenerationEngine::Create(std::move(runner), std::move(tokenizer), {}, &clock);
//   Status s = (*engine)->Submit({"req-1", prompt_ids, params}, [](const GenerationEvent& e) {
//     Send(e.text);                         // on the step thread: keep it short, never block
//     if (e.finished) Done(e.finish_reason);
//   });
//   (*engine)->Cancel("req-1");             // client went away: final event "cancelled"
//
// Tokens: an event's `tokens` are the sequence's new tokens; the EOS token (config.json's
// eos_token_id, else the tokenizer's) that ends a sequence is counted in completion_tokens but
// not delivered in `tokens` or `text`. The usage counts (prompt/completion/cached tokens) are set
// on the final event. Tokens whose text
// contains a stop string are delivered, their text is cut before the stop string.
// Thread-safety: Submit, Cancel, Stats and the histograms may be called from any thread, also
// from within an event callback. Time (for the latency histograms) comes from the injected Clock.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/histogram.h"
#include "common/mutex.h"
#include "common/status.h"
#include "constrained/token_index.h"
#include "generation/model_runner.h"
#include "generation/sampler.h"
#include "generation/scheduler.h"
#include "generation/speculative.h"
#include "generation/stop_strings.h"
#include "generation/tokenizer.h"

namespace inferd::gen {

struct SamplingParams {
  int max_tokens = 16;                 // >= 1
  float temperature = 1.0f;            // >= 0; 0 = greedy
  int top_k = 0;                       // 0 = off
  float top_p = 1.0f;                  // (0, 1]
  std::optional<uint64_t> seed;        // reproducible sampling per request
  float frequency_penalty = 0, presence_penalty = 0;
  std::vector<std::string> stop;       // stop strings (not included in the output)
  bool ignore_eos = false;
  int logprobs = -1;                   // -1 none; k >= 0: chosen token's logprob + top k
  // Constrained output: the whole completion must match this regex (constrained/regex.h; JSON
  // schemas arrive converted by constrained/json_schema.h). Tokens that would leave the pattern
  // are masked before sampling, EOS is allowed only once it matches. A completion cut by
  // max_tokens or a stop string may be an unfinished match.
  std::optional<std::string> guided_regex;
};
struct GenerationRequest { std::string id; std::vector<int32_t> prompt; SamplingParams params; };
struct TokenLogprob { int32_t token; float logprob; std::vector<std::pair<int32_t, float>> top; };
struct GenerationEvent {               // delivered in order, on the engine thread: keep it short
  std::vector<int32_t> tokens;         // new tokens since the previous event
  std::string text;                    // their text (stop strings withheld/cut)
  std::vector<TokenLogprob> logprobs;  // when requested
  bool finished = false;
  std::string finish_reason;           // "stop" | "length" | "cancelled" | "error"
  Status error;                        // when finish_reason == "error"
  int prompt_tokens = 0, completion_tokens = 0, cached_prompt_tokens = 0;
};
struct EngineOptions { int max_num_seqs = 64; int max_num_batched_tokens = 512;
  bool enable_prefix_caching = true; bool chunked_prefill = true;
  SpeculativeOptions speculative;  // method kModel needs the draft runner in Create
};
struct EngineStats { int running, waiting; int64_t kv_blocks_used, kv_blocks_total;
  int64_t prefix_queries, prefix_hits /* tokens */, preemptions, prompt_tokens, generated_tokens;
  int64_t draft_tokens, accepted_tokens;  // speculative: proposed, and kept by the target
  int64_t kv_block_bytes;  // bytes of one block of the target's pool (ModelRunner::kv_block_bytes)
  // Mixture of experts: tokens routed to each expert, [MoE layer][expert] (the target's
  // ModelRunner::ExpertTokens); empty for a dense model.
  std::vector<std::vector<int64_t>> expert_tokens;
};
// (prefix_queries counts tokens too: those of every admission, recomputations included;
// running/waiting are sequences; the counters are totals since Create.)
//
// Speculative decoding (options.speculative, speculative.h): in a step with at most max_batch
// decoding sequences, each of them gets up to k draft tokens (its own k, adapted to its recent
// acceptance; never past max_tokens or the context, and only from the token budget the step's
// chunks left), drafted by the draft runner (k batched steps over the speculating sequences; its
// KV pool is addressed by the same block tables) or by prompt lookup. The target then runs each
// one's [last token, drafts] as one chunk with logits for every row, keeps the agreeing prefix
// plus one token, and rolls the rest back (Scheduler::AcceptSpeculated). Greedy output equals
// non-speculative output; sampled output has the same distribution (a seed then reproduces a
// request only under the same speculation schedule, which depends on the batch).

class GenerationEngine {
 public:
  // INVALID_ARGUMENT for a missing runner/tokenizer, options out of range, or a tokenizer with
  // more pieces than the model's vocabulary. Starts the step thread.
  // With options.speculative.method kModel, `draft` is the draft model's runner: same vocabulary
  // and block size, at least as many blocks and as long a context as `runner` (else
  // INVALID_ARGUMENT); otherwise it must be null.
  static StatusOr<std::unique_ptr<GenerationEngine>> Create(std::unique_ptr<ModelRunner> runner,
      std::unique_ptr<Tokenizer> tokenizer, const EngineOptions& options, Clock* clock,
      std::unique_ptr<ModelRunner> draft = nullptr);
  // INVALID_ARGUMENT (clear message) for a prompt longer than the context, bad params, duplicate
  // id; otherwise on_event is called until an event with finished == true.
  Status Submit(GenerationRequest request, std::function<void(const GenerationEvent&)> on_event)
      EXCLUDES(mu_);
  void Cancel(const std::string& id) EXCLUDES(mu_);  // frees its blocks within one step; final
                                                     // event "cancelled"; unknown ids: no-op
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const DecoderConfig& config() const { return runner_->config(); }
  EngineStats Stats() const EXCLUDES(mu_);
  // Latency histograms, seconds: time to first token (arrival to first token), time per output
  // token (per request: (end - first token) / (tokens - 1)), inter-token latency (between two
  // tokens of a request), end-to-end (arrival to the final event).
  const Histogram& ttft_seconds() const { return ttft_; }
  const Histogram& tpot_seconds() const { return tpot_; }
  const Histogram& itl_seconds() const { return itl_; }
  const Histogram& e2e_seconds() const { return e2e_; }

  ~GenerationEngine();  // cancels everything, joins the step thread
  GenerationEngine(const GenerationEngine&) = delete;
  GenerationEngine& operator=(const GenerationEngine&) = delete;

 private:
  struct Request;  // one request's step-thread state (engine.cc)
  struct Speculation {  // one sequence's drafts in this step
    size_t chunk;                   // index in the plan's chunks (a decode)
    Sequence* seq;
    std::vector<int32_t> tokens;    // the verification chunk: last token, then the drafts
    std::vector<std::vector<float>> q;  // per draft, the distribution it was drawn from
                                        // (sampling with a draft model; else none: one-hot)
    bool from_model = false;            // drafted by the draft model (else prompt lookup)
  };

  GenerationEngine(std::unique_ptr<ModelRunner> runner, std::unique_ptr<Tokenizer> tokenizer,
                   const EngineOptions& options, Clock* clock, std::unique_ptr<ModelRunner> draft);
  static Status CheckDraft(const ModelRunner& runner, const ModelRunner* draft,
                           const SpeculativeOptions& options);
  Status Validate(const GenerationRequest& request) const;
  void Loop() EXCLUDES(mu_);
  void Admit(std::unique_ptr<Request> request);
  void Step();
  void FailStep(const ScheduleResult& plan, const Status& error);
  void OnToken(Request& request, const SampleResult& sample, Clock::TimePoint now);
  // Speculative decoding: which decodes of `plan` speculate, with their blocks reserved.
  std::vector<Speculation> PlanSpeculation(const ScheduleResult& plan);
  // Fills each speculation's drafts (draft model: batched rounds; n-gram: in PlanSpeculation).
  Status RunDraft(std::vector<Speculation>& specs);
  // Verifies one sequence's drafts against the target's rows (tokens.size() of them).
  void Verify(Speculation& spec, const float* rows, Clock::TimePoint now);
  void Finish(Request& request, GenerationEvent event, std::string reason) EXCLUDES(mu_);
  void PublishStats() EXCLUDES(mu_);

  const std::unique_ptr<ModelRunner> runner_;
  const std::unique_ptr<ModelRunner> draft_;  // speculative kModel only
  const std::unique_ptr<Tokenizer> tokenizer_;
  const EngineOptions options_;
  Clock* const clock_;
  const uint64_t seed_base_;   // for requests without a seed
  const int32_t eos_id_;       // the config's eos_token_id, else the tokenizer's
  Histogram ttft_, tpot_, itl_, e2e_;
  // Compiled guided_regex constraints over this tokenizer's vocabulary (thread-safe: Submit
  // compiles on the caller's thread, the step thread reads the masks).
  constrained::TokenIndexCache constraints_;

  mutable Mutex mu_;
  CondVar work_;   // with mu_: a request, a cancellation or shutdown arrived
  std::deque<std::unique_ptr<Request>> inbox_ GUARDED_BY(mu_);
  std::vector<std::string> cancels_ GUARDED_BY(mu_);
  std::unordered_set<std::string> active_ids_ GUARDED_BY(mu_);   // submitted, not finished
  bool stopping_ GUARDED_BY(mu_) = false;
  uint64_t submitted_ GUARDED_BY(mu_) = 0;   // requests accepted (seeds unseeded ones)
  EngineStats stats_ GUARDED_BY(mu_) = {};

  // Step thread only (no lock): the scheduler and the admitted requests.
  Scheduler scheduler_;
  std::unordered_map<int64_t, std::unique_ptr<Request>> requests_;   // by sequence id
  std::unordered_map<std::string, int64_t> seq_of_;                   // request id -> seq id
  int64_t next_seq_id_ = 1;
  int64_t prompt_tokens_ = 0, generated_tokens_ = 0;
  int64_t draft_tokens_ = 0, accepted_tokens_ = 0;

  std::thread thread_;   // last: starts after everything above exists
};

}  // namespace inferd::gen
