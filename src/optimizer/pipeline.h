// The optimization pipeline: which passes run, in which order, at each OptimizationLevel.
//
//   OptimizationReport report;
//   RETURN_IF_ERROR(Optimize(model, OptimizationLevel::kBasic, CpuProvider(), &report));
//   std::cout << report.ToString();
//
// Session::Create runs it (SessionOptions::optimization_level, default all); `inferd optimize`
// runs it and writes the result back as ONNX. The caller injects the execution provider whose
// kernels constant folding evaluates (the optimizer links no kernels). The order and the reasons for it are in pipeline.cc
// and docs/optimizer.md.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "graph/graph.h"
#include "optimizer/graph_pass.h"
#include "optimizer/optimization_level.h"
#include "runtime/execution_provider.h"

namespace inferd {

struct OptimizationReport {
  struct PassStats {
    std::string pass;
    int fired = 0;  // rewrites made, summed over rounds
  };
  OptimizationLevel level = OptimizationLevel::kNone;
  std::vector<PassStats> passes;  // in pipeline order; a RuleSweep counts each rule
  int rounds = 0;                 // rounds of the whole list until nothing changed
  size_t nodes_before = 0;
  size_t nodes_after = 0;
  // One line per pass ("ConvBnFusion: 53"), then a summary line.
  std::string ToString() const;
};

// The passes of `level`, in order. `model` supplies opset versions and `fold_provider` the kernels
// for constant folding (null: only shape queries fold).
std::vector<std::unique_ptr<GraphPass>> BuildPipeline(
    const Model& model, OptimizationLevel level, std::shared_ptr<ExecutionProvider> fold_provider);

// Runs the pipeline on the main graph, repeating the whole list until a round changes nothing
// (at most a few rounds). On error the graph may be partly rewritten; discard it.
Status Optimize(Model& model, OptimizationLevel level,
                std::shared_ptr<ExecutionProvider> fold_provider,
                OptimizationReport* report = nullptr);

}  // namespace inferd
