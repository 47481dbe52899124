// TextGenerator: the narrow view of a generative model that the HTTP layer (openai_http.h) needs.
//
// The server does not include src/generation: an adapter over gen::GenerationEngine
// (src/genserve/engine_text_generator.h) implements this interface, and tests implement it with a
// fake, so request parsing, validation, SSE framing and cancellation are testable without a model.
// The structs mirror GEN.md section 4 (SamplingParams, TokenLogprob, GenerationEvent) field by
// field so the adapter is a plain copy.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/histogram.h"
#include "common/status.h"

namespace inferd::server {

struct GenParams {
  int max_tokens = 16;       // >= 1
  float temperature = 1.0f;  // >= 0; 0 = greedy
  int top_k = 0;             // 0 = off
  float top_p = 1.0f;        // (0, 1]
  std::optional<uint64_t> seed;
  float frequency_penalty = 0, presence_penalty = 0;
  std::vector<std::string> stop;  // stop strings (not included in the output)
  bool ignore_eos = false;
  int logprobs = -1;  // -1 none; k >= 0: the chosen token's logprob and the top k
  // Constrained output: the completion must match this regex (response_format json_object /
  // json_schema arrive converted by openai_codec; constrained/regex.h has the syntax).
  std::optional<std::string> guided_regex;
};

struct GenTokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // (token, logprob), best first
};

struct GenEvent {
  std::vector<int32_t> tokens;  // new tokens since the previous event
  std::string text;             // their text (stop strings withheld/cut)
  std::vector<GenTokenLogprob> logprobs;
  bool finished = false;
  std::string finish_reason;  // "stop" | "length" | "cancelled" | "error"
  Status error;               // when finish_reason == "error"
  int prompt_tokens = 0, completion_tokens = 0, cached_prompt_tokens = 0;
};

// What /metrics shows of one generative model (metrics.h renders it).
struct GenerationMetrics {
  std::string model;
  int running = 0, waiting = 0;
  int64_t kv_blocks_used = 0, kv_blocks_total = 0;
  int64_t kv_block_bytes = 0;  // bytes of one block (all layers, K and V, as stored; 0: unknown)
  int64_t prefix_queries = 0, prefix_hits = 0;  // tokens looked up / found in the prefix cache
  int64_t preemptions = 0, prompt_tokens = 0, generated_tokens = 0;
  int64_t requests_finished = 0;  // completed sequences (any finish reason)
  // Speculative decoding: draft tokens proposed, and kept by the target (0 without it).
  int64_t spec_draft_tokens = 0, spec_accepted_tokens = 0;
  // Mixture of experts: tokens routed to each expert since load, [MoE layer][expert] (empty for
  // a dense model).
  std::vector<std::vector<int64_t>> moe_expert_tokens;
  // Seconds, as the engine's histograms record them.
  HistogramSnapshot ttft, tpot, itl, e2e;
};

// Thread-safety: every method may be called from any thread.
class TextGenerator {
 public:
  virtual ~TextGenerator() = default;
  // Tokens a sequence may hold (prompt + generated).
  virtual int max_context() const = 0;
  // Prompt tokens for `text`, BOS first when the model uses one.
  virtual std::vector<int32_t> Encode(std::string_view text) const = 0;
  // Text of one token (for logprobs' "token" fields).
  virtual std::string TokenText(int32_t token) const = 0;
  // Starts generating. An error (INVALID_ARGUMENT: prompt too long, bad parameters, duplicate id)
  // means on_event is never called; otherwise on_event is called, in order and from the engine's
  // thread (keep it short: hand work elsewhere), until an event with finished == true.
  virtual Status Submit(const std::string& id, std::vector<int32_t> prompt, const GenParams& params,
                        std::function<void(const GenEvent&)> on_event) = 0;
  // Stops a sequence (no-op when unknown or finished); its last event says "cancelled".
  virtual void Cancel(const std::string& id) = 0;
  virtual GenerationMetrics Metrics() const = 0;
};

}  // namespace inferd::server
