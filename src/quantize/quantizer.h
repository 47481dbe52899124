// Model quantization: the library behind `inferd quantize`.
//
// INT8 (static) writes standard ONNX QDQ, so any QDQ-aware runtime (ONNX Runtime included) loads
// the result:
//   - the FP32 graph is first optimized (BatchNormalization folded into Conv, MatMul+Add → Gemm);
//   - Conv, MatMul and Gemm with constant weights are quantized (unless excluded by node name):
//       weights  int8, symmetric, per output channel (or per tensor), DequantizeLinear in front;
//       bias     int32 with scale x_scale * w_scale, zero point 0;
//       inputs   uint8, asymmetric, per tensor, QuantizeLinear → DequantizeLinear pairs;
//       outputs  the same, placed after a ReLU that is the sole consumer (so the engine can fuse
//                DQ → Conv → ReLU → Q into one int8 convolution whose saturation is the ReLU);
//     model outputs stay float32.
//   - activation ranges come from running the FP32 model on calibration samples
//     (calibration.h: min-max, percentile or entropy).
// The engine (optimizer/qdq_fusion.h) turns the QDQ patterns into QLinearConv / QLinearMatMul on
// oneDNN int8 primitives; other runtimes run them their own way.
//
//   QuantizeOptions opts;
//   opts.precision = Precision::kInt8;
//   opts.calibration_dir = "build/digits/calibration";
//   QuantizeReport report;
//   RETURN_IF_ERROR(QuantizeModel(model, opts, &report));
//   RETURN_IF_ERROR(SaveOnnxModel(model, "model.int8.onnx"));
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"
#include "graph/graph.h"
#include "quantize/calibration.h"

namespace inferd::quantize {

enum class Precision { kInt8, kBf16, kFp16, kInt4 };
StatusOr<Precision> ParsePrecision(const std::string& name);
const char* PrecisionName(Precision p);

struct QuantizeOptions {
  Precision precision = Precision::kInt8;
  // INT8: folder of calibration samples (calibration.h describes the layout). Required for int8.
  std::filesystem::path calibration_dir;
  // INT8: quantize MatMul/Gemm activations at run time instead (dynamic_int8.h); no calibration.
  bool dynamic = false;
  CalibrationMethod method = CalibrationMethod::kMinMax;
  double percentile = 99.99;     // for kPercentile, in percent
  int64_t int4_block_size = 32;  // int4: values per scale block (32, 64 or 128)
  bool per_channel = true;       // weights per output channel (needs opset >= 13), else per tensor
  // INT8 (static and dynamic): bits of the symmetric weights, 8 (levels -127..127) or 7
  // (-63..63, what the fast int8 kernels need to be exact on CPUs without VNNI:
  // CpuInt8NeedsSevenBitWeights in kernels/cpu/cpu_provider.h). 0: 7 on such a CPU, else 8.
  int weight_bits = 0;
  int64_t samples = 500;         // calibration samples used (0: all)
  int64_t batch_size = 32;       // calibration batch size (a fixed model batch dimension wins)
  std::vector<std::string> exclude;  // node names left in float
  int num_threads = 0;               // for calibration runs; 0: all cores
  // Whether to compute the per-layer report (runs the FP32 and the quantized model on up to
  // `report_batches` calibration batches).
  bool report = false;
  int64_t report_batches = 4;
  // Static INT8 mixed precision: when > 0, layers go back to FP32 until the model outputs' SQNR
  // (dB) against FP32 on the validation data reaches this target (or, with accuracy_metric
  // "top1", until top-1 agreement in percent does). Layers are returned in order of lowest
  // activation SQNR (the accumulated error at their output), 1, then 2, 4, ... more per round.
  double accuracy_target = 0;
  std::string accuracy_metric = "sqnr";  // "sqnr" (dB) or "top1" (percent)
  // Data for the report and the accuracy target (calibration layout); default: calibration data.
  std::filesystem::path validation_dir;
};

// What quantization did, and (when asked) how much error each layer adds.
struct QuantizeReport {
  struct Layer {
    std::string node;  // node name
    std::string op_type;
    std::string output;             // the tensor compared
    double weight_sqnr_db = 0;      // FP32 weight vs its dequantized int8 value
    double activation_sqnr_db = 0;  // FP32 model vs quantized model (simulated), this tensor
    bool has_activation_sqnr = false;
  };
  Precision precision = Precision::kInt8;
  int64_t calibration_samples = 0;
  int weight_bits = 0;  // INT8: the weight bits used (7 or 8)
  std::vector<Layer> layers;            // quantized layers in graph order
  std::vector<std::string> skipped;     // "name (reason)" of candidate nodes left in float
  std::vector<std::string> kept_float;  // layers --accuracy-target returned to FP32
  // Model outputs: SQNR and (for classifier-shaped outputs) top-1 agreement.
  std::vector<std::pair<std::string, double>> output_sqnr_db;
  double top1_agreement = -1;                // fraction; -1 when not measured
  size_t bytes_before = 0, bytes_after = 0;  // initializer bytes
  std::string ToString() const;
};

// The weight bits `options` asks for, with 0 resolved for this CPU (7 without VNNI, else 8);
// INVALID_ARGUMENT for anything but 0, 7 or 8.
StatusOr<int> ResolveWeightBits(const QuantizeOptions& options);

// The largest weight level for `bits` (7 -> 63, 8 -> 127).
inline int WeightMaxLevel(int bits) { return bits == 7 ? 63 : 127; }

// Quantizes `model` in place. On error the model may be partly rewritten; discard it.
Status QuantizeModel(Model& model, const QuantizeOptions& options, QuantizeReport* report);

// Total bytes of the graph's initializers.
size_t InitializerBytes(const Graph& graph);

}  // namespace inferd::quantize
