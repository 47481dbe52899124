// What the float and the quantized MoE kernels share (moe.h, moe_nbits.h): the router product,
// softmax and top-k per token, the grouping of the step's tokens by expert, the attributes, and
// the weighted sum of each token's expert rows at the end. The expert products differ.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "graph/graph.h"
#include "kernels/cpu/util/panel_gemm.h"
#include "runtime/op_kernel.h"

namespace inferd::cpu {

// Token x expert rows from which every phase of a call runs on the OpenMP threads; below, the
// small parts (router product, gather, weighted sum: ~T·H·E and T·k·H operations) stay on the
// calling thread, where an OpenMP region costs more than they do (and more still on a loaded
// host where every barrier waits for a descheduled thread).
constexpr int64_t kMoeParallelRows = 128;

// Which experts each token goes to, and the expert-ordered rows the products run on.
struct MoeRouting {
  int64_t k = 0;
  std::vector<int32_t> expert;  // [t * k]: token's j-th expert, best first
  std::vector<float> weight;    // [t * k]: its weight
  std::vector<int64_t> row;     // [t * k]: its row in the expert-ordered buffers
  std::vector<int64_t> offset;  // [E + 1]: expert e's rows are offset[e] .. offset[e + 1) - 1
  std::vector<int64_t> token;   // [t * k]: the token of each expert-ordered row

  int64_t rows(int64_t e) const { return offset[e + 1] - offset[e]; }
};

// x [t, H] · router [H, E], softmax and top_k per token (ties: the lower expert; a NaN never wins,
// so k distinct experts are always chosen), renormalized when `normalize`, then the rows grouped
// by expert (token order inside an expert). counts (may be null): [E] rows per expert. `small`:
// on the calling thread.
MoeRouting RouteTokens(const float* x, int64_t t, const PanelWeights& router, int top_k,
                       bool normalize, bool small, int64_t* counts);

// y [t, H] = per token the weighted sum of its top_k expert rows of d [t * k, H] (expert-ordered),
// best expert first: the same order whatever else is in the batch, and a gather (no two threads
// write one row).
void CombineExpertRows(const MoeRouting& r, const float* d, int64_t t, int64_t h, bool small,
                       float* y);

inline float SiLU(float x) {  // x * sigmoid(x), sigmoid from e^-|x| (never overflows)
  const float e = std::exp(-std::fabs(x));
  return x * (x < 0.f ? e / (1.f + e) : 1.f / (1.f + e));
}

// The node's top_k (1..experts) and normalize (0 | 1) attributes, or the reason they are bad.
Status ParseMoeAttributes(const Node& node, int64_t experts, int* top_k, bool* normalize);

// The Compute of both MoE kernels: X float32 [..., hidden] checked, Y (X's shape) and the optional
// expert_counts [experts] allocated, then forward(x, tokens, y, counts) with counts null when not
// requested.
template <typename Forward>
Status ComputeMoe(KernelContext& ctx, int64_t hidden, int64_t experts, const Forward& forward) {
  const Tensor* x = ctx.Input(0);
  if (!x || x->dtype() != DataType::kFloat32 || x->rank() < 1 || x->shape().back() != hidden) {
    return InvalidArgument("{}: X must be float32 [..., {}], got {}", ctx.node().Describe(),
                           hidden, x ? x->DebugString() : "nothing");
  }
  Tensor* y = ctx.AllocateOutputUninitialized(0, DataType::kFloat32, x->shape());
  int64_t* counts = nullptr;
  if (ctx.OutputRequested(1)) {
    counts = ctx.AllocateOutput(1, DataType::kInt64, {experts})->data<int64_t>();
  }
  forward(x->data<float>(), x->NumElements() / hidden, y->data<float>(), counts);
  return Status::Ok();
}

}  // namespace inferd::cpu
