#include "generation/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace inferd::gen {

namespace {
int32_t Argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}
}  // namespace

Sampler::Sampler(const SamplerOptions& options, uint64_t seed) : options_(options), rng_(seed) {}

double Sampler::Uniform(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

void Sampler::ApplyPenalties(std::vector<float>& logits) const {
  if (options_.frequency_penalty == 0 && options_.presence_penalty == 0) return;
  for (const auto& [token, count] : counts_) {
    logits[token] -=
        options_.frequency_penalty * static_cast<float>(count) + options_.presence_penalty;
  }
}

int32_t Sampler::Draw(const std::vector<float>& logits) {
  const size_t vocab = logits.size();
  const double inv_t = 1.0 / options_.temperature;
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  auto weight = [&](int32_t t) { return std::exp((logits[t] - max_logit) * inv_t); };
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  const bool top_k = options_.top_k > 0 && static_cast<size_t>(options_.top_k) < vocab;
  const bool top_p = options_.top_p < 1.0f;
  // Candidates by decreasing logit, ties by id, so the support set is deterministic. Only as
  // many as the filters need are sorted: a full sort of a 32k vocabulary per token would cost
  // more than a small model's decode step.
  auto more_likely = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  size_t keep = vocab;
  double mass = 0;  // of the support before top-p (top-k's set, or everything)
  if (top_k) {
    keep = static_cast<size_t>(options_.top_k);
    std::partial_sort(order.begin(), order.begin() + keep, order.end(), more_likely);
    for (size_t i = 0; i < keep; ++i) mass += weight(order[i]);
  } else {
    for (size_t t = 0; t < vocab; ++t) mass += weight(static_cast<int32_t>(t));
    if (top_p) {
      // Grow the sorted prefix until it holds the nucleus.
      for (keep = std::min<size_t>(64, vocab);; keep = std::min(vocab, keep * 4)) {
        std::partial_sort(order.begin(), order.begin() + keep, order.end(), more_likely);
        double prefix = 0;
        for (size_t i = 0; i < keep; ++i) prefix += weight(order[i]);
        if (prefix >= options_.top_p * mass || keep == vocab) break;
      }
    }
  }
  std::vector<double> probs(keep);
  for (size_t i = 0; i < keep; ++i) probs[i] = weight(order[i]);
  double total = mass;
  if (top_p) {
    double cumulative = 0;
    size_t n = 0;
    while (n < keep && cumulative < options_.top_p * mass) cumulative += probs[n++];
    keep = std::max<size_t>(n, 1);
    total = std::accumulate(probs.begin(), probs.begin() + keep, 0.0);
  }
  const double u = Uniform(rng_) * total;
  double cumulative = 0;
  for (size_t i = 0; i < keep; ++i) {
    cumulative += probs[i];
    if (u < cumulative) return order[i];
  }
  return order[keep - 1];  // rounding: u landed at the very top
}

void Sampler::FillLogprobs(std::span<const float> logits, SampleResult* result) const {
  const float max_logit = logits[Argmax(logits)];
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - max_logit));
  const float log_z = max_logit + static_cast<float>(std::log(sum));
  result->logprob = logits[result->token] - log_z;
  const size_t k = std::min(static_cast<size_t>(options_.logprobs), logits.size());
  if (k == 0) return;
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (size_t i = 0; i < k; ++i) result->top.emplace_back(order[i], logits[order[i]] - log_z);
}

void Sampler::ApplyMask(std::span<const uint64_t> allowed, std::vector<float>& logits) {
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  const size_t n = std::min(logits.size(), allowed.size() * 64);
  for (size_t t = 0; t < n; ++t) {
    if (!((allowed[t / 64] >> (t % 64)) & 1)) logits[t] = kMasked;
  }
  for (size_t t = n; t < logits.size(); ++t) logits[t] = kMasked;
}

SampleResult Sampler::Sample(std::span<const float> logits, std::span<const uint64_t> allowed) {
  SampleResult result;
  std::vector<float> adjusted(logits.begin(), logits.end());
  ApplyPenalties(adjusted);
  if (!allowed.empty()) ApplyMask(allowed, adjusted);
  result.token = options_.temperature == 0 ? Argmax(adjusted) : Draw(adjusted);
  // Draw's rounding fallback (u at the very top) may land on a zero-weight token: never let a
  // masked one through.
  if (!allowed.empty() && adjusted[result.token] == -std::numeric_limits<float>::infinity()) {
    result.token = Argmax(adjusted);
  }
  if (options_.logprobs >= 0) FillLogprobs(logits, &result);
  ++counts_[result.token];
  return result;
}

std::vector<float> Sampler::Probabilities(std::span<const float> logits) const {
  std::vector<float> adjusted(logits.begin(), logits.end());
  ApplyPenalties(adjusted);
  const size_t vocab = adjusted.size();
  std::vector<float> probs(vocab, 0.0f);
  if (options_.temperature == 0) {
    probs[Argmax(adjusted)] = 1;
    return probs;
  }
  // The same support and weights as Draw(): candidates by decreasing logit (ties by id), top-k,
  // then the smallest prefix reaching top_p of the remaining mass.
  const double inv_t = 1.0 / options_.temperature;
  const float max_logit = *std::max_element(adjusted.begin(), adjusted.end());
  std::vector<double> weight(vocab);
  for (size_t t = 0; t < vocab; ++t) weight[t] = std::exp((adjusted[t] - max_logit) * inv_t);
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  size_t keep = vocab;
  if ((options_.top_k > 0 && static_cast<size_t>(options_.top_k) < vocab) ||
      options_.top_p < 1.0f) {
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return adjusted[a] > adjusted[b] || (adjusted[a] == adjusted[b] && a < b);
    });
    if (options_.top_k > 0) keep = std::min(keep, static_cast<size_t>(options_.top_k));
  }
  double mass = 0;
  for (size_t i = 0; i < keep; ++i) mass += weight[order[i]];
  if (options_.top_p < 1.0f) {
    double cumulative = 0;
    size_t n = 0;
    while (n < keep && cumulative < options_.top_p * mass) cumulative += weight[order[n++]];
    keep = std::max<size_t>(n, 1);
    mass = 0;
    for (size_t i = 0; i < keep; ++i) mass += weight[order[i]];
  }
  for (size_t i = 0; i < keep; ++i) probs[order[i]] = static_cast<float>(weight[order[i]] / mass);
  return probs;
}

SampleResult Sampler::Take(int32_t token, std::span<const float> logits) {
  SampleResult result;
  result.token = token;
  if (options_.logprobs >= 0) FillLogprobs(logits, &result);
  ++counts_[token];
  return result;
}

}  // namespace inferd::gen
