// `inferd quantize IN.onnx -o OUT.onnx --precision int8|bf16|fp16|int4 [--calibration DIR] ...`:
// quantizes a model (src/quantize/quantizer.h) and writes it as standard ONNX (INT8 as QDQ).
// `inferd quantize DECODER_DIR -o OUT_DIR --precision int4|int8 [--group-size 32|64|128]
// [--asymmetric]`: a decoder folder (config.json + model.onnx) gets weight-only INT4/INT8
// (quantize/nbits_weights.h) and is written as a folder the decoder loader runs.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/cpu/onednn/bf16_choice.h"
#include "kernels/cpu/onednn/cpu_info.h"

namespace inferd::tools {

struct QuantizeCommandOptions {
  std::filesystem::path input;
  std::filesystem::path output;
  std::string precision = "int8";
  std::filesystem::path calibration;
  std::string method = "minmax";
  double percentile = 99.99;
  bool dynamic = false;     // --dynamic: int8 MatMul/Gemm with run-time activation scales
  bool per_tensor = false;  // --per-tensor (default --per-channel)
  int64_t samples = 500;
  std::string exclude;           // comma-separated node names
  std::filesystem::path report;  // write the per-layer report here ("-": stdout)
  int threads = 0;
  int64_t block_size = 32;     // --block-size / --group-size for int4 (and decoder int8)
  bool asymmetric = false;     // --asymmetric: decoder folders, per-group zero points
  int weight_bits = 0;         // --weight-bits for int8 (0: for this CPU)
  double accuracy_target = 0;  // --accuracy-target (0: off)
  std::string accuracy_metric = "sqnr";
  std::filesystem::path validation;  // --validation DIR
};

// Adds the `quantize` subcommand with its options to `app`.
CLI::App* AddQuantizeSubcommand(CLI::App& app, QuantizeCommandOptions* options);

// Loads, quantizes, saves and re-imports the output to check it; a summary line goes to `out`.
Status QuantizeModelCommand(const QuantizeCommandOptions& options, std::ostream& out);

// The note `--precision bf16` prints on a CPU without native BF16 (cpu.native_bf16 false): the
// bf16-marked layers will compute in FP32 there (kernels/cpu/fused: BlockedConv, FusedMatMul).
std::string Bf16FallbackNote(const cpu::CpuInfo& cpu);
// The note on a CPU with native bf16 where bf16 compute measured slower (kernels/cpu/onednn/
// bf16_choice.h) for convolutions or matmuls.
std::string Bf16MeasuredNote(const cpu::Bf16Choice& choice);

}  // namespace inferd::tools
