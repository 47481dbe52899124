// `inferd bench --model M.onnx` (engine mode; the flags are registered by bench_cli.h): measures
// one model's latency and throughput in-process on random inputs.
//
//   inferd bench --model bert.onnx --batch 16 --seq-len 128 --threads 2 --iterations 10 --json
//
// Inputs get the declared shapes with symbolic dims filled in: the first as --batch, the second of
// a 2-D integer input as --seq-len, others as 1; --input-shape NAME=DxD... overrides one input.
// Floats are uniform in [-1, 1); integers lie in [0, smallest table a Gather indexes with them)
// (else [0, 2)) so embedding lookups stay valid. Each iteration is one Session::Run; the report
// gives median / p90 (common/stats.h percentiles) / mean latency, items per second (batch /
// median), peak RSS and the memory plan (arena size vs. the sum of the planned tensors).
// --profile adds per-node timing, summed by op type.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "common/status.h"

namespace inferd::tools {

struct BenchOptions {
  std::string model;
  int64_t batch = 1;
  int64_t seq_len = 0;                    // 0: symbolic sequence dims become 1
  std::vector<std::string> input_shapes;  // NAME=DxDx...
  int threads = 0;                        // 0 = all cores
  int iterations = 10;
  int warmup = 2;
  std::string level = "all";  // optimization level (none, basic, extended, all)
  bool json = false;
  bool profile = false;
  uint64_t seed = 1;
};

// Loads the model, runs warmup + timed iterations and writes the report (one JSON object on one
// line with --json) to `out`.
Status BenchCommand(const BenchOptions& options, std::ostream& out);

// Parses "16x128" / "1x3x224x224" (dims >= 0).
StatusOr<std::vector<int64_t>> ParseDims(const std::string& text);

}  // namespace inferd::tools
