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
// --profile measures the machine's peaks first (kernels/cpu/onednn/machine_peak.h: FP32 and INT8
// gemm, memory read bandwidth, on the session's threads) and adds per-node timing summed by op
// type, each op type and each of the 10 slowest nodes with its achieved GFLOP/s (compute ops,
// runtime/node_cost.h) or GB/s (the rest) as a share of the matching peak — the roofline. The
// report starts with the CPU (cpu_info.h: model, oneDNN ISA, cpuid bits); --json has it as "cpu",
// and with --profile "peaks", per-op "profile" and "slowest_nodes".
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/cpu/onednn/machine_peak.h"
#include "runtime/node_cost.h"

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

// A node's or op type's place under the roofline: `flops` (compute-bound) or `bytes` (memory-bound)
// per `ms`, as GFLOP/s (GOP/s for int8) or GB/s, and its share of the FP32, INT8 or memory peak.
struct RooflinePoint {
  double rate = 0;
  const char* unit = "";  // "GFLOP/s", "GOP/s", "GB/s"; "" for no figure (kNone, ms <= 0)
  const char* peak = "";  // "FP32", "INT8", "memory"
  double percent = 0;     // 0 when that peak is unknown
};
RooflinePoint Roofline(double flops, double bytes, double ms, CostBound bound, bool int8,
                       const cpu::MachinePeaks& peaks);

// Parses "16x128" / "1x3x224x224" (dims >= 0).
StatusOr<std::vector<int64_t>> ParseDims(const std::string& text);

}  // namespace inferd::tools
