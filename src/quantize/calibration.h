// Calibration: reading sample inputs, running the FP32 model over them, and turning the observed
// activation statistics into quantization ranges.
//
// Calibration folder convention (`inferd quantize --calibration DIR`):
//   - single-input model: every DIR/*.npy holds samples stacked along axis 0 (one file of shape
//     [500, 1, 8, 8], or several smaller ones; files are read in name order);
//   - several inputs: one subfolder per input name, DIR/<input name>/*.npy, with the same file
//     names in every subfolder (file k of each subfolder together form one batch).
//
// Ranges: kMinMax takes the observed [min, max]; kPercentile clips |x| at the given percentile of
// its histogram; kEntropy picks the clipping threshold that minimises the KL divergence between
// the clipped 8-bit distribution and the original (TensorRT's method), unless that clips more
// than 1% of the values and raises the expected squared error over not clipping. Both clipped methods keep
// the sign structure: the range is [max(min, -t), min(max, t)] for threshold t.
//
//   ASSIGN_OR_RETURN(auto batches, LoadCalibrationData(dir, model.graph, 500));
//   RangeCalibrator cal(CalibrationMethod::kEntropy);
//   RETURN_IF_ERROR(cal.Collect(model, tensor_names, batches, /*num_threads=*/2));
//   ASSIGN_OR_RETURN(auto ranges, cal.ComputeRanges());
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "graph/graph.h"

namespace inferd::quantize {

enum class CalibrationMethod { kMinMax, kPercentile, kEntropy };
StatusOr<CalibrationMethod> ParseCalibrationMethod(const std::string& name);

// One run's feeds: a tensor per graph input, in Graph::inputs order, samples along axis 0.
using Batch = std::vector<Tensor>;

// Reads the calibration folder for `graph`'s inputs (see the convention above), keeping at most
// `max_samples` samples (0: all) and splitting them into batches of at most `batch_size` samples
// (or the model's fixed batch dimension when it declares one). Fails with INVALID_ARGUMENT when
// the folder is missing or empty, a file is not .npy, or dtypes/shapes do not fit the inputs.
StatusOr<std::vector<Batch>> LoadCalibrationData(const std::filesystem::path& dir,
                                                 const Graph& graph, int64_t max_samples,
                                                 int64_t batch_size = 32);

// Runs `model` (FP32, not modified) over `batches` with `tensors` added as extra outputs, and calls
// `visit(batch index, tensor name, value)` for each tensor of each batch. Also visits the model's
// own outputs. Uses a Session without graph optimizations so every named tensor exists.
Status RunWithIntermediates(
    const Model& model, const std::vector<std::string>& tensors, const std::vector<Batch>& batches,
    int num_threads, const std::function<void(size_t, const std::string&, const Tensor&)>& visit);

struct TensorRange {
  float min = 0.f;
  float max = 0.f;
};

class RangeCalibrator {
 public:
  explicit RangeCalibrator(CalibrationMethod method, double percentile = 99.99)
      : method_(method), percentile_(percentile) {}

  // Runs the model over the batches and accumulates statistics of `tensors` (float32 values).
  // Histogram methods run the batches twice (ranges first, then histograms).
  Status Collect(const Model& model, const std::vector<std::string>& tensors,
                 const std::vector<Batch>& batches, int num_threads);
  // Ranges per tensor name; only tensors seen by Collect.
  StatusOr<std::map<std::string, TensorRange>> ComputeRanges() const;

  static constexpr int kBins = 2048;

 private:
  struct Stats {
    float min = 0.f, max = 0.f;
    bool seen = false;
    std::vector<double> hist;  // |x| over [0, absmax], kBins bins
  };
  CalibrationMethod method_;
  double percentile_;
  std::map<std::string, Stats> stats_;
};

// The threshold (in histogram-bin units, 1..bins) minimising KL(P || Q) for 8-bit quantization of
// a histogram of |x|; but when that clips more than 1% of the values and the full range (bins)
// has the lower expected squared error (ExpectedQuantizationError), the full range: KL alone clips
// narrow distributions far from zero, such as the pooled features in front of ResNet-50's
// classifier, into their bulk (logits SQNR 3 dB instead of 29). quant_levels: 256 for a
// non-negative tensor, 128 otherwise. Exposed for tests.
int EntropyThresholdBin(const std::vector<double>& hist, int quant_levels = 128);

// Expected squared error (in squared bins, summed over the histogram) of quantizing values with
// `levels` steps over [0, threshold] and clipping above it.
double ExpectedQuantizationError(const std::vector<double>& hist, int threshold, double levels);

}  // namespace inferd::quantize
