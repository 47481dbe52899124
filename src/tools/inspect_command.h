// `inferd inspect`: what a model contains and whether inferd can run it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "common/status.h"
#include "graph/graph.h"

namespace inferd::tools {

struct ModelReport {
  std::map<std::string, int64_t> op_counts;  // "Conv" or "domain::Op" → nodes (incl. subgraphs)
  int64_t num_nodes = 0;
  int64_t num_parameters = 0;  // elements of all initializers (incl. subgraphs)
  int64_t parameter_bytes = 0;
  // FLOPs estimate at batch 1 (symbolic dims as 1): 2·MACs for Conv, ConvTranspose, MatMul,
  // Gemm; 1 per output element for element-wise ops. Nodes whose shapes are unknown are skipped.
  double flops = 0;
  int64_t nodes_without_shapes = 0;  // FLOP-counted op types skipped for lack of shapes
  std::vector<std::string> unsupported_ops;  // sorted, distinct, with their opset
};

// Analyses a model (main graph and subgraphs). `model` should have been imported with shape
// inference so intermediate shapes are known.
ModelReport AnalyzeModel(const Model& model);

// Loads the model and prints the report in a human-readable form.
Status InspectModelCommand(const std::filesystem::path& path, std::ostream& out);

}  // namespace inferd::tools
