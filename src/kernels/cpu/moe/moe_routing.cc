// Routing and the final weighted sum of the MoE kernels (moe_routing.h).
#include "kernels/cpu/moe/moe_routing.h"

#include <algorithm>

#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

constexpr int64_t kPanel = PanelWeights::kPanel;

void RouteToken(const float* logits, int64_t e, int64_t k, bool normalize, int32_t* chosen,
                float* weights) {
  float m = logits[0];
  for (int64_t i = 1; i < e; ++i) m = std::max(m, logits[i]);
  std::vector<float> p(e);
  float sum = 0;
  for (int64_t i = 0; i < e; ++i) sum += p[i] = std::exp(logits[i] - m);
  for (int64_t i = 0; i < e; ++i) p[i] /= sum;
  std::vector<bool> taken(e, false);
  float top_sum = 0;
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = 0;
    while (taken[best]) ++best;
    for (int64_t i = best + 1; i < e; ++i) {
      if (!taken[i] && p[i] > p[best]) best = i;
    }
    taken[best] = true;
    chosen[j] = static_cast<int32_t>(best);
    weights[j] = p[best];
    top_sum += p[best];
  }
  if (normalize) {
    for (int64_t j = 0; j < k; ++j) weights[j] /= top_sum;
  }
}

}  // namespace

MoeRouting RouteTokens(const float* x, int64_t t, const PanelWeights& router, int top_k,
                       bool normalize, bool small, int64_t* counts) {
  const int64_t h = router.k(), e = router.n(), k = top_k;
  std::vector<float> logits(t * e);
  if (small) {
    for (int64_t p = 0; p < router.num_panels(); ++p) {
      PanelGemmPanel(x, t, h, router.panel(p), std::min(kPanel, e - p * kPanel),
                     logits.data() + p * kPanel, e);
    }
  } else {
    PanelGemm(x, t, router, logits.data());
  }
  MoeRouting r;
  r.k = k;
  r.expert.resize(t * k);
  r.weight.resize(t * k);
  for (int64_t i = 0; i < t; ++i) {
    RouteToken(logits.data() + i * e, e, k, normalize, &r.expert[i * k], &r.weight[i * k]);
  }
  r.offset.assign(e + 1, 0);
  for (int32_t x : r.expert) ++r.offset[x + 1];
  for (int64_t i = 0; i < e; ++i) r.offset[i + 1] += r.offset[i];
  std::vector<int64_t> next(r.offset.begin(), r.offset.end() - 1);
  r.row.resize(t * k);
  r.token.resize(t * k);
  for (int64_t i = 0; i < t * k; ++i) {  // token order within an expert
    const int64_t row = next[r.expert[i]]++;
    r.row[i] = row;
    r.token[row] = i / k;
  }
  if (counts) {
    for (int64_t i = 0; i < e; ++i) counts[i] = r.rows(i);
  }
  return r;
}

void CombineExpertRows(const MoeRouting& r, const float* d, int64_t t, int64_t h, bool small,
                       float* y) {
  const int64_t k = r.k;
  auto sum = [&](int64_t t0, int64_t t1) {
    for (int64_t tok = t0; tok < t1; ++tok) {
      float* dst = y + tok * h;
      for (int64_t j = 0; j < k; ++j) {
        const float wj = r.weight[tok * k + j];
        const float* src = d + r.row[tok * k + j] * h;
        if (j == 0) {
          for (int64_t c = 0; c < h; ++c) dst[c] = wj * src[c];
        } else {
          for (int64_t c = 0; c < h; ++c) dst[c] += wj * src[c];
        }
      }
    }
  };
  if (small) {
    sum(0, t);
  } else {
    ParallelFor(t, std::max<int64_t>(1, 4096 / h), sum);
  }
}

Status ParseMoeAttributes(const Node& node, int64_t experts, int* top_k, bool* normalize) {
  const int64_t k = node.GetInt("top_k", 2), norm = node.GetInt("normalize", 1);
  if (k < 1 || k > experts) {
    return InvalidArgument("{}: top_k {} outside 1..{} (the number of experts)", node.Describe(), k,
                           experts);
  }
  if (norm != 0 && norm != 1) {
    return InvalidArgument("{}: normalize must be 0 or 1, got {}", node.Describe(), norm);
  }
  *top_k = static_cast<int>(k);
  *normalize = norm == 1;
  return Status::Ok();
}

}  // namespace inferd::cpu
