// Merges MatMuls that read the same activation with constant weights into one MatMul over the
// weights concatenated along N, followed by a Split back into the original outputs.
//
// A decoder's Q/K/V projections and its SwiGLU gate/up projections each read one normed hidden
// state. In a decode step (one row per sequence) each of those MatMuls is a matrix-vector product
// whose cost is reading its weights plus a fixed cost per kernel call (a oneDNN primitive call and
// an OpenMP parallel region, whose barrier dominates on a shared or oversubscribed host): one call
// over [K, Nq+Nk+Nv] does the same reading with a third of the calls. Exact: each output column is
// the same dot product as before.
//
// Matches standard MatMul nodes with input 0 the same value and input 1 a float32 rank-2
// initializer with the same K; at least two per group. Weight-only quantized projections
// (ai.inferd.MatMulNBits, quantize/nbits_weights.h) merge the same way when A, K, bits, block size
// and the presence of zero points agree: their packed rows, scales and zero points are stacked. The originals' initializers are erased when
// nothing else reads them. Not part of the general pipeline (encoder attention fusion expects
// separate projections); the decoder runner applies it (src/generation/model_runner.cc).
#pragma once

#include "optimizer/graph_pass.h"

namespace inferd {

class SiblingMatMulMerge final : public GraphPass {
 public:
  std::string_view Name() const override { return "SiblingMatMulMerge"; }
  // Returns the number of merged groups.
  StatusOr<int> Run(Graph& graph) const override;
};

}  // namespace inferd
