// ConstantFolding: evaluates nodes whose inputs are all constants with the kernels of an injected
// execution provider (the session's CPU provider) and replaces them with initializers of the same
// names. The optimizer knows no concrete provider: whoever runs the pipeline hands one in.
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
#include <memory>
#include <string>

#include "optimizer/graph_pass.h"
#include "runtime/execution_provider.h"

namespace inferd {

class ConstantFolding final : public GraphPass {
 public:
  // `opsets`: the model's opset imports (domain → version), for kernel selection. `provider`
  // evaluates the foldable nodes; null folds only the shape queries.
  ConstantFolding(std::map<std::string, int64_t> opsets,
                  std::shared_ptr<ExecutionProvider> provider,
                  int64_t max_output_bytes = int64_t{64} << 20)
      : opsets_(std::move(opsets)),
        provider_(std::move(provider)),
        max_output_bytes_(max_output_bytes) {}
  std::string_view Name() const override { return "ConstantFolding"; }
  StatusOr<int> Run(Graph& graph) const override;

 private:
  std::map<std::string, int64_t> opsets_;
  std::shared_ptr<ExecutionProvider> provider_;
  int64_t max_output_bytes_;
};

}  // namespace inferd
