#include "generation/sampler.h"

#include <algorithm>
#include <cmath>
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
  // Candidates by decreasing logit, ties by id, so the support set is deterministic.
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  auto more_likely = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  size_t keep = order.size();
  if (options_.top_k > 0 && static_cast<size_t>(options_.top_k) < keep) {
    keep = static_cast<size_t>(options_.top_k);
    std::partial_sort(order.begin(), order.begin() + keep, order.end(), more_likely);
  } else {
    std::sort(order.begin(), order.end(), more_likely);
  }
  const double inv_t = 1.0 / options_.temperature;
  const double max_logit = logits[order[0]];
  std::vector<double> probs(keep);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) {
    probs[i] = std::exp((logits[order[i]] - max_logit) * inv_t);
    total += probs[i];
  }
  if (options_.top_p < 1.0f) {
    double cumulative = 0;
    size_t n = 0;
    while (n < keep && cumulative < options_.top_p * total) cumulative += probs[n++];
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

SampleResult Sampler::Sample(std::span<const float> logits) {
  SampleResult result;
  std::vector<float> adjusted(logits.begin(), logits.end());
  ApplyPenalties(adjusted);
  result.token = options_.temperature == 0 ? Argmax(adjusted) : Draw(adjusted);
  if (options_.logprobs >= 0) FillLogprobs(logits, &result);
  ++counts_[result.token];
  return result;
}

}  // namespace inferd::gen
