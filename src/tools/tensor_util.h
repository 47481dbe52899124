// Helpers shared by the `inferd` subcommands: random inputs, output summaries, file names.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "graph/graph.h"

namespace inferd::tools {

// The concrete shape used for a declared input when no data is given: known dims as declared,
// symbolic or unknown dims as 1 (batch 1). Fails when the rank itself is unknown.
StatusOr<Shape> ConcreteInputShape(const ValueInfo& info);

// A tensor of the input's type and ConcreteInputShape, filled with random values: floats uniform
// in [-1, 1), integers in [0, int_limit) (small and non-negative, so embedding lookups and masks
// stay valid), bools random. Deterministic for a given seed.
StatusOr<Tensor> RandomInput(const ValueInfo& info, std::mt19937_64& rng, int64_t int_limit = 2);

// Upper bound for random integer values fed to `input`: the smallest table size among Gather
// nodes that index a constant table with it, else `fallback`.
int64_t IntegerInputLimit(const Graph& graph, const std::string& input, int64_t fallback = 2);

struct TensorStats {
  double min = 0, max = 0, mean = 0;
  int64_t nan_count = 0;  // NaNs are excluded from min/max/mean
};
TensorStats ComputeStats(const Tensor& t);

// "logits  float32[1, 1000]  min=-3.2 max=7.1 mean=0.0012"
std::string SummaryLine(const std::string& name, const Tensor& t);

// A file-name-safe version of a tensor name: characters outside [A-Za-z0-9._-] become '_';
// empty, "." and ".." become "output". Does not deduplicate.
std::string SanitizeFileName(const std::string& name);
// SanitizeFileName for every name, with "_1", "_2", ... appended to resolve collisions.
std::vector<std::string> UniqueFileNames(const std::vector<std::string>& names);

// Splits "name=path" at the first '='; both parts must be non-empty.
Status ParseNamedPath(const std::string& arg, std::string* name, std::string* path);

}  // namespace inferd::tools
