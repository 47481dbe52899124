// Bf16Compute (level "all", last): convolutions whose weights are stored in bf16 compute in bf16.
//
// Runs only for models that ask for it: metadata_props "inferd.compute_precision" = "bf16", which
// `inferd quantize --precision bf16` writes (other runtimes ignore it and compute in FP32 from the
// bf16 weights). Every ai.inferd.BlockedConv whose weight values are all exactly representable in
// bf16 (the file's bf16 initializers, after their Casts are folded; an `--exclude`d layer keeps
// FP32 weights and so FP32 compute) gets compute_bf16 = 1, and activations between two such
// convolutions are kept in bf16:
//   y_bf16 = 1  the output is blocked and every reader is a compute_bf16 BlockedConv;
//   x_bf16 / z_bf16 = 1  input X / residual Z comes from a y_bf16 convolution.
// An ai.inferd.FusedMatMul whose constant 2-D B is bf16-exact gets compute_bf16 = 1 too (bf16
// inputs to the matmul, float32 tensors in and out: src/kernels/cpu/fused/matmul.cc).
// Everything else (the chain's ends, pools, plain Gemm/MatMul, attention, Softmax, LayerNorm,
// reductions) stays float32; the kernels convert at the boundaries.
#pragma once

#include "graph/graph.h"
#include "optimizer/graph_pass.h"

namespace inferd {

inline constexpr char kComputePrecisionKey[] = "inferd.compute_precision";

class Bf16Compute final : public GraphPass {
 public:
  // Whether `model` asks for bf16 compute (the metadata above).
  static bool Requested(const Model& model);

  std::string_view Name() const override { return "Bf16Compute"; }
  StatusOr<int> Run(Graph& graph) const override;
};

}  // namespace inferd
