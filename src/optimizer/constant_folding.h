// ConstantFolding: evaluates nodes whose inputs are all constants with the CPU kernels and
// replaces them with initializers of the same names.
//
// Also folds shape queries: Shape (and Size) of a value whose shape is fully known from the
// declared or inferred value_info become constants, so Shape→Gather→Unsqueeze→Concat→Reshape
// chains fold to a constant shape once the dims are known.
//
// Not folded: random ops, ops with subgraphs, Quantize/DequantizeLinear (quantized models keep
// their QDQ pairs for the int8 kernels), nodes producing graph outputs, and outputs larger than
// `max_output_bytes` (folding would trade a cheap op for a big weight). A node whose kernel fails
// stays as it is, so the error surfaces when the session runs it.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "optimizer/graph_pass.h"

namespace inferd {

class ConstantFolding final : public GraphPass {
 public:
  // `opsets`: the model's opset imports (domain → version), for kernel selection.
  explicit ConstantFolding(std::map<std::string, int64_t> opsets,
                           int64_t max_output_bytes = int64_t{64} << 20)
      : opsets_(std::move(opsets)), max_output_bytes_(max_output_bytes) {}
  std::string_view Name() const override { return "ConstantFolding"; }
  StatusOr<int> Run(Graph& graph) const override;

 private:
  std::map<std::string, int64_t> opsets_;
  int64_t max_output_bytes_;
};

}  // namespace inferd
