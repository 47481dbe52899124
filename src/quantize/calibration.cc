#include "quantize/calibration.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/npy.h"
#include "quantize/model_util.h"
#include "session/session.h"

namespace inferd::quantize {
namespace fs = std::filesystem;

StatusOr<CalibrationMethod> ParseCalibrationMethod(const std::string& name) {
  if (name == "minmax") return CalibrationMethod::kMinMax;
  if (name == "percentile") return CalibrationMethod::kPercentile;
  if (name == "entropy") return CalibrationMethod::kEntropy;
  return InvalidArgument("unknown calibration method '{}' (minmax, percentile or entropy)", name);
}

namespace {

StatusOr<std::vector<fs::path>> NpyFiles(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return InvalidArgument("calibration folder {} does not exist", dir.string());
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".npy") files.push_back(e.path());
  }
  if (ec) return InvalidArgument("cannot list {}: {}", dir.string(), ec.message());
  std::sort(files.begin(), files.end());
  if (files.empty()) return InvalidArgument("no .npy files in calibration folder {}", dir.string());
  return files;
}

// Loads a file as `want` (float64 files are accepted for float32 inputs) and checks that its
// per-sample dims fit the declared shape.
StatusOr<Tensor> LoadSamples(const fs::path& file, const ValueInfo& input) {
  ASSIGN_OR_RETURN(Tensor t, LoadNpy(file));
  if (t.dtype() == DataType::kFloat64 && input.dtype == DataType::kFloat32) {
    Tensor f = Tensor::Allocate(DataType::kFloat32, t.shape());
    for (int64_t i = 0; i < t.NumElements(); ++i) f.data<float>()[i] = float(t.data<double>()[i]);
    t = f;
  }
  if (input.dtype != DataType::kUndefined && t.dtype() != input.dtype) {
    return InvalidArgument("{}: holds {} but input '{}' is {}", file.string(),
                           DataTypeName(t.dtype()), input.name, DataTypeName(input.dtype));
  }
  if (input.shape) {
    const auto& dims = *input.shape;
    if (static_cast<size_t>(t.rank()) != dims.size()) {
      return InvalidArgument("{}: shape {} does not match input '{}' {} (samples go along axis 0)",
                             file.string(), ShapeToString(t.shape()), input.name,
                             input.ShapeString());
    }
    for (size_t d = 1; d < dims.size(); ++d) {
      if (dims[d].known() && dims[d].value != t.dim(d)) {
        return InvalidArgument("{}: shape {} does not match input '{}' {}", file.string(),
                               ShapeToString(t.shape()), input.name, input.ShapeString());
      }
    }
  }
  if (t.rank() == 0) return InvalidArgument("{}: a scalar cannot hold samples", file.string());
  return t;
}

Tensor SliceRows(const Tensor& t, int64_t begin, int64_t end) {
  Shape s = t.shape();
  int64_t row = s[0] > 0 ? static_cast<int64_t>(t.ByteSize()) / s[0] : 0;
  s[0] = end - begin;
  Tensor out = Tensor::Allocate(t.dtype(), s);
  std::memcpy(out.raw_data(), static_cast<const char*>(t.raw_data()) + begin * row,
              static_cast<size_t>((end - begin) * row));
  return out;
}

}  // namespace

StatusOr<std::vector<Batch>> LoadCalibrationData(const fs::path& dir, const Graph& graph,
                                                 int64_t max_samples, int64_t batch_size) {
  if (graph.inputs.empty()) return InvalidArgument("the model has no inputs to calibrate");
  if (batch_size < 1) return InvalidArgument("calibration batch size must be >= 1");
  // Per input: the sample files in order.
  std::vector<std::vector<fs::path>> files(graph.inputs.size());
  if (graph.inputs.size() == 1) {
    ASSIGN_OR_RETURN(files[0], NpyFiles(dir));
  } else {
    for (size_t i = 0; i < graph.inputs.size(); ++i) {
      ASSIGN_OR_RETURN(files[i], NpyFiles(dir / graph.inputs[i].name));
      if (files[i].size() != files[0].size()) {
        return InvalidArgument("calibration subfolders {} and {} hold different numbers of files",
                               graph.inputs[0].name, graph.inputs[i].name);
      }
      for (size_t k = 0; k < files[i].size(); ++k) {
        if (files[i][k].filename() != files[0][k].filename()) {
          return InvalidArgument("calibration file {} has no match in {}",
                                 files[0][k].filename().string(),
                                 (dir / graph.inputs[i].name).string());
        }
      }
    }
  }
  // A fixed declared batch dimension (the same on every input) sets the batch size.
  for (const ValueInfo& in : graph.inputs) {
    if (in.shape && !in.shape->empty() && (*in.shape)[0].known() && (*in.shape)[0].value > 0) {
      batch_size = (*in.shape)[0].value;
      break;
    }
  }
  std::vector<Batch> batches;
  int64_t taken = 0;
  for (size_t k = 0; k < files[0].size(); ++k) {
    if (max_samples > 0 && taken >= max_samples) break;
    Batch whole;
    int64_t rows = -1;
    for (size_t i = 0; i < graph.inputs.size(); ++i) {
      ASSIGN_OR_RETURN(Tensor t, LoadSamples(files[i][k], graph.inputs[i]));
      if (rows >= 0 && t.dim(0) != rows) {
        return InvalidArgument("calibration files {} hold different sample counts",
                               files[0][k].filename().string());
      }
      rows = t.dim(0);
      whole.push_back(std::move(t));
    }
    if (max_samples > 0) rows = std::min(rows, max_samples - taken);
    // Keep only whole batches of a fixed declared size.
    for (int64_t b = 0; b + 1 <= rows; b += batch_size) {
      int64_t e = std::min(rows, b + batch_size);
      if (e - b < batch_size && graph.inputs[0].shape && !graph.inputs[0].shape->empty() &&
          (*graph.inputs[0].shape)[0].known()) {
        break;
      }
      Batch batch;
      for (const Tensor& t : whole) batch.push_back(SliceRows(t, b, e));
      batches.push_back(std::move(batch));
      taken += e - b;
    }
  }
  if (batches.empty()) {
    return InvalidArgument("calibration folder {} holds no usable samples", dir.string());
  }
  return batches;
}

Status RunWithIntermediates(
    const Model& model, const std::vector<std::string>& tensors, const std::vector<Batch>& batches,
    int num_threads, const std::function<void(size_t, const std::string&, const Tensor&)>& visit) {
  Model m = CloneModel(model);
  std::vector<std::string> names;
  for (const ValueInfo& o : m.graph.outputs) names.push_back(o.name);
  for (const std::string& t : tensors) {
    if (std::find(names.begin(), names.end(), t) != names.end()) continue;
    ValueInfo vi;
    vi.name = t;
    vi.dtype = m.graph.ValueType(t);
    m.graph.outputs.push_back(vi);
    names.push_back(t);
  }
  SessionOptions opts;
  opts.num_threads = num_threads;
  opts.optimization_level = OptimizationLevel::kNone;
  opts.import.run_checker = false;
  ASSIGN_OR_RETURN(auto session, Session::Create(std::move(m), opts));
  for (size_t b = 0; b < batches.size(); ++b) {
    std::vector<Tensor> outs;
    RETURN_IF_ERROR(session->Run(std::span<const Tensor>(batches[b]), &outs)
                        .WithContext(fmt::format("calibration batch {}", b)));
    for (size_t i = 0; i < outs.size() && i < names.size(); ++i) visit(b, names[i], outs[i]);
  }
  return Status::Ok();
}

Status RangeCalibrator::Collect(const Model& model, const std::vector<std::string>& tensors,
                                const std::vector<Batch>& batches, int num_threads) {
  std::map<std::string, bool> wanted;
  for (const auto& t : tensors) wanted[t] = true;
  RETURN_IF_ERROR(RunWithIntermediates(
      model, tensors, batches, num_threads, [&](size_t, const std::string& name, const Tensor& v) {
        if (!wanted.count(name) || v.dtype() != DataType::kFloat32 || v.NumElements() == 0) return;
        Stats& s = stats_[name];
        auto [lo, hi] = std::minmax_element(v.data<float>(), v.data<float>() + v.NumElements());
        s.min = s.seen ? std::min(s.min, *lo) : *lo;
        s.max = s.seen ? std::max(s.max, *hi) : *hi;
        s.seen = true;
      }));
  if (method_ == CalibrationMethod::kMinMax) return Status::Ok();
  for (auto& [name, s] : stats_) s.hist.assign(kBins, 0.0);
  return RunWithIntermediates(model, tensors, batches, num_threads,
                              [&](size_t, const std::string& name, const Tensor& v) {
                                auto it = stats_.find(name);
                                if (it == stats_.end() || v.dtype() != DataType::kFloat32) return;
                                Stats& s = it->second;
                                float absmax = std::max(std::fabs(s.min), std::fabs(s.max));
                                if (absmax <= 0.f) return;
                                float scale = kBins / absmax;
                                for (float x : v.values<float>()) {
                                  int bin = static_cast<int>(std::fabs(x) * scale);
                                  s.hist[std::clamp(bin, 0, kBins - 1)] += 1.0;
                                }
                              });
}

namespace {
int KlThresholdBin(const std::vector<double>& hist, int quant_levels);
}  // namespace

double ExpectedQuantizationError(const std::vector<double>& hist, int threshold, double levels) {
  const double step = threshold / levels;  // in bins
  double err = 0;
  for (size_t j = 0; j < hist.size(); ++j) {
    const double x = static_cast<double>(j) + 0.5, over = x - threshold;
    err += hist[j] * (over > 0 ? over * over : step * step / 12);
  }
  return err;
}

int EntropyThresholdBin(const std::vector<double>& hist, int quant_levels) {
  const int bins = static_cast<int>(hist.size());
  const int best = KlThresholdBin(hist, quant_levels);
  // KL only compares distribution shapes: on a narrow distribution far from zero (the pooled
  // features in front of a classifier) it clips into the bulk of the values. A clip of rare
  // outliers (at most 1% of the values) is what the method is for; a larger one is kept only when
  // it lowers the expected squared error.
  double total = 0, clipped = 0;
  for (int j = 0; j < bins; ++j) {
    total += hist[j];
    if (j >= best) clipped += hist[j];
  }
  if (clipped <= 0.01 * total) return best;
  const double levels = quant_levels >= 256 ? 255.0 : 127.5;
  return ExpectedQuantizationError(hist, best, levels) <=
                 ExpectedQuantizationError(hist, bins, levels)
             ? best
             : bins;
}

namespace {

int KlThresholdBin(const std::vector<double>& hist, int quant_levels) {
  const int bins = static_cast<int>(hist.size());
  if (bins <= quant_levels) return bins;
  double best_kl = std::numeric_limits<double>::infinity();
  int best = bins;
  std::vector<double> p, q;
  for (int i = quant_levels; i <= bins; ++i) {
    p.assign(hist.begin(), hist.begin() + i);
    double outliers = 0;
    for (int j = i; j < bins; ++j) outliers += hist[j];
    p[i - 1] += outliers;
    // Q: hist[0, i) merged into quant_levels buckets, each spread evenly over its non-empty bins.
    // Bin 0 (values near zero, which quantize exactly) is a bucket of its own: after a ReLU it
    // holds half the mass, and merging it with its neighbours would make every wide threshold
    // look bad and the search clip far too hard.
    q.assign(i, 0.0);
    q[0] = hist[0];
    const int levels = quant_levels - 1, span = i - 1;
    for (int k = 0; k < levels; ++k) {
      int b = 1 + static_cast<int>(static_cast<int64_t>(k) * span / levels);
      int e = 1 + static_cast<int>(static_cast<int64_t>(k + 1) * span / levels);
      double sum = 0;
      int nonzero = 0;
      for (int j = b; j < e; ++j) {
        sum += hist[j];
        nonzero += hist[j] > 0;
      }
      if (nonzero == 0) continue;
      for (int j = b; j < e; ++j) q[j] = hist[j] > 0 ? sum / nonzero : 0.0;
    }
    double ps = 0, qs = 0;
    for (int j = 0; j < i; ++j) {
      ps += p[j];
      qs += q[j];
    }
    if (ps <= 0 || qs <= 0) continue;
    double kl = 0;
    for (int j = 0; j < i; ++j) {
      if (p[j] <= 0) continue;
      double pj = p[j] / ps;
      double qj = q[j] > 0 ? q[j] / qs : 1e-12;
      kl += pj * std::log(pj / qj);
    }
    if (kl < best_kl) {
      best_kl = kl;
      best = i;
    }
  }
  return best;
}

}  // namespace

StatusOr<std::map<std::string, TensorRange>> RangeCalibrator::ComputeRanges() const {
  std::map<std::string, TensorRange> out;
  for (const auto& [name, s] : stats_) {
    if (!s.seen) continue;
    TensorRange r{s.min, s.max};
    float absmax = std::max(std::fabs(s.min), std::fabs(s.max));
    if (method_ != CalibrationMethod::kMinMax && absmax > 0.f && !s.hist.empty()) {
      double total = 0;
      for (double h : s.hist) total += h;
      int bin = kBins;
      if (method_ == CalibrationMethod::kPercentile) {
        double target = total * percentile_ / 100.0, acc = 0;
        for (int i = 0; i < kBins; ++i) {
          acc += s.hist[i];
          if (acc >= target) {
            bin = i + 1;
            break;
          }
        }
      } else {
        bin = EntropyThresholdBin(s.hist, s.min >= 0.f ? 256 : 128);
      }
      float t = absmax * static_cast<float>(bin) / kBins;
      r.min = std::max(s.min, -t);
      r.max = std::min(s.max, t);
    }
    out[name] = r;
  }
  return out;
}

}  // namespace inferd::quantize
