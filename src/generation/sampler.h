// Sampler: picks a sequence's next token from the logits of its last position.
//
// One Sampler per sequence. It holds the sequence's random generator, seeded once, and draws
// exactly one number per sampled token, so the same seed gives the same tokens whatever else is in
// the batch and however often the sequence is preempted and recomputed (recomputing re-derives
// the K/V, never re-samples a token).
//
// Order of processing (as vLLM and the OpenAI API): frequency/presence penalties on the tokens
// generated so far (logit[t] -= frequency_penalty * count[t] + presence_penalty * (count[t] > 0));
// temperature 0: greedy (argmax, the lowest id on ties); otherwise divide by temperature, keep the
// top_k most likely (0 = all), then the smallest set of most likely tokens whose probability
// reaches top_p (renormalized after top-k), and draw from what is left.
// Logprobs (when requested) are log-softmax of the raw model logits, before penalties and
// temperature; `top` lists the k most likely tokens, most likely first.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace inferd::gen {

struct SamplerOptions {
  float temperature = 1.0f;  // >= 0; 0 = greedy
  int top_k = 0;             // 0 = off
  float top_p = 1.0f;        // (0, 1]
  float frequency_penalty = 0;
  float presence_penalty = 0;
  int logprobs = -1;  // -1: none; k >= 0: the chosen token's logprob and the top k
};

struct SampleResult {
  int32_t token = 0;
  float logprob = 0;                           // when logprobs >= 0
  std::vector<std::pair<int32_t, float>> top;  // when logprobs > 0
};

class Sampler {
 public:
  // Options are validated by the caller (GenerationEngine::Submit).
  Sampler(const SamplerOptions& options, uint64_t seed);

  // Samples from `logits` (vocab entries) and records the token for the penalties.
  // `allowed` (constrained output, constrained/token_index.h): when not empty, a bitset over the
  // vocabulary (bit t of word t / 64); tokens whose bit is clear get logit -inf after the
  // penalties, so greedy, top-k, top-p and the draw only ever see allowed tokens. The caller
  // guarantees at least one allowed token. Logprobs still describe the raw model logits.
  SampleResult Sample(std::span<const float> logits, std::span<const uint64_t> allowed = {});

  // Speculative decoding (speculative.h; these three are its only hooks here):
  // The distribution Sample() would draw the next token from (vocab entries summing to 1):
  // penalties on the tokens recorded so far, then temperature/top-k/top-p as above; temperature
  // 0 gives one-hot at the argmax. Draws nothing, records nothing.
  std::vector<float> Probabilities(std::span<const float> logits) const;
  // Records `token`, chosen outside Sample() (a kept draft or a resampled token), for the
  // penalties and returns it with its logprobs as Sample() would.
  SampleResult Take(int32_t token, std::span<const float> logits);
  // One uniform in [0, 1) from this sequence's generator.
  double NextUniform() { return Uniform(rng_); }

  // Uniform double in [0, 1) from 53 random bits (not std::uniform_real_distribution, whose
  // algorithm is implementation-defined: seeds must reproduce across standard libraries).
  static double Uniform(std::mt19937_64& rng);

 private:
  void ApplyPenalties(std::vector<float>& logits) const;
  static void ApplyMask(std::span<const uint64_t> allowed, std::vector<float>& logits);
  int32_t Draw(const std::vector<float>& logits);
  void FillLogprobs(std::span<const float> logits, SampleResult* result) const;

  SamplerOptions options_;
  std::mt19937_64 rng_;
  std::unordered_map<int32_t, int> counts_;  // generated tokens so far
};

}  // namespace inferd::gen
