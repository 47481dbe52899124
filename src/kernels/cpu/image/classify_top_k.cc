// ai.inferd.ClassifyTopK: the classifier post-processor's one node (serving/processing_models.h
// builds it from a config.pbtxt with backend "inferd_classify").
//
// Input: float scores [N, C] (or [N, C, 1, 1, ...]: everything after the batch dim is the
// classes). Output: string [N, k], each "score:index:label" (":label" omitted when the index has
// none), best first, ties to the lower index — the classification strings of Triton's
// classification extension, with the score written as std::to_string(float) as Triton does.
// Attributes: k (int, >= 1), softmax (int, 0: the scores as given, 1: softmax over the classes
// first), labels (strings, index i's label; may be shorter than C). Fewer than k classes fail with
// INVALID_ARGUMENT. NaN scores sort last.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/cpu/image/register.h"
#include "runtime/op_kernel.h"

namespace inferd::cpu {
namespace {

class ClassifyTopKKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const Node& n = info.node();
    k_ = n.GetInt("k", 1);
    if (k_ < 1) return InvalidArgument("ClassifyTopK: k must be >= 1, got {}", k_);
    softmax_ = n.GetInt("softmax", 0) != 0;
    if (const Attribute* a = n.FindAttribute("labels")) labels_ = a->strings;
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (x == nullptr || x->dtype() != DataType::kFloat32 || x->rank() < 2) {
      return InvalidArgument("ClassifyTopK needs float scores of shape [N, C]");
    }
    const int64_t n = x->dim(0);
    const int64_t c = n > 0 ? x->NumElements() / n : 0;
    if (c < k_) {
      return InvalidArgument("ClassifyTopK: the scores have {} classes, fewer than k = {}", c, k_);
    }
    Tensor* out = ctx.AllocateOutput(0, DataType::kString, {n, k_});
    std::string* dst = out->data<std::string>();
    std::vector<float> scores(static_cast<size_t>(c));
    std::vector<int64_t> order(static_cast<size_t>(c));
    for (int64_t r = 0; r < n; ++r) {
      Scores(x->data<float>() + r * c, &scores);
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k_, order.end(),
                        [&](int64_t a, int64_t b) {
                          return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
                        });
      for (int64_t j = 0; j < k_; ++j) {
        const int64_t idx = order[j];
        std::string s = std::to_string(scores[idx]) + ":" + std::to_string(idx);
        if (static_cast<size_t>(idx) < labels_.size()) s += ":" + labels_[idx];
        dst[r * k_ + j] = std::move(s);
      }
    }
    return Status::Ok();
  }

 private:
  // The row's scores to report (softmax applied if asked), NaN as -inf so the sort is well defined.
  void Scores(const float* row, std::vector<float>* scores) const {
    const size_t c = scores->size();
    float max = -std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < c; ++i) {
      (*scores)[i] = std::isnan(row[i]) ? -std::numeric_limits<float>::infinity() : row[i];
      max = std::max(max, (*scores)[i]);
    }
    if (!softmax_ || !std::isfinite(max)) return;
    double sum = 0;
    for (size_t i = 0; i < c; ++i) {
      (*scores)[i] = std::exp((*scores)[i] - max);
      sum += (*scores)[i];
    }
    for (size_t i = 0; i < c; ++i) (*scores)[i] = static_cast<float>((*scores)[i] / sum);
  }

  int64_t k_ = 1;
  bool softmax_ = false;
  std::vector<std::string> labels_;
};

}  // namespace

void RegisterClassifyTopKKernels(KernelRegistry& r) {
  KernelDef def;
  def.domain = kImageDomain;
  def.op_type = "ClassifyTopK";
  def.types = {DataType::kFloat32};
  def.factory = MakeKernel<ClassifyTopKKernel>();
  r.Register(std::move(def));
}

}  // namespace inferd::cpu
