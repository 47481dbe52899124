#include "graph/shape_inference_guard.h"

#include <fmt/format.h>
#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <set>

namespace inferd {
namespace {

using onnx::InferenceContext;

enum class Verdict { kRun, kSkip };
using Guard = std::function<Verdict(InferenceContext&, const std::string& op)>;

// Kernel sizes, strides, dilations and pads at most this large keep onnx's output-size formulas
// ((k - 1) * d + 1, s * (n - 1) + ...) inside int64 for any realistic spatial size.
constexpr int64_t kMaxWindowAttr = int64_t{1} << 31;
// onnx's auto_pad code finds `dim % stride` by subtracting the stride in a loop: a spatial
// dimension this many strides long (from a graph input's dim_value) would spin at load.
constexpr int64_t kMaxAutoPadSteps = int64_t{1} << 24;

[[noreturn]] void Reject(const std::string& op, const std::string& what) {
  throw ShapeGuardError(fmt::format("{} node: {}", op, what));
}

// The rank onnx reads for input `i` (its tensor_type().shape()), or -1 when onnx would not look.
int KnownRank(const InferenceContext& ctx, size_t i) {
  if (!onnx::hasInputShape(const_cast<InferenceContext&>(ctx), i)) return -1;
  return ctx.getInputType(i)->tensor_type().shape().dim_size();
}

void CheckInts(const InferenceContext& ctx, const std::string& op, const char* name, int64_t lo,
               int64_t hi) {
  const onnx::AttributeProto* attr = ctx.getAttribute(name);
  if (attr == nullptr) return;
  for (int64_t v : attr->ints()) {
    if (v < lo || v > hi)
      Reject(op, fmt::format("attribute '{}' has {}, outside [{}, {}]", name, v, lo, hi));
  }
}

void CheckWindowAttributes(const InferenceContext& ctx, const std::string& op) {
  CheckInts(ctx, op, "kernel_shape", 1, kMaxWindowAttr);
  // A stride of 0 divides by zero in onnx's output-size formula (SIGFPE).
  CheckInts(ctx, op, "strides", 1, kMaxWindowAttr);
  CheckInts(ctx, op, "dilations", 1, kMaxWindowAttr);
  // Negative pads crop (the conv kernel supports them), so only the magnitude is bounded.
  CheckInts(ctx, op, "pads", -kMaxWindowAttr, kMaxWindowAttr);
  CheckInts(ctx, op, "output_padding", -kMaxWindowAttr, kMaxWindowAttr);
}

// True when onnx's auto_pad residual loop would take more than kMaxAutoPadSteps steps on the
// data input's spatial dims (it runs when `auto_pad` is set, `pads` is not, and a stride is > 1).
bool AutoPadLoopTooLong(const InferenceContext& ctx, size_t data) {
  if (ctx.getAttribute("auto_pad") == nullptr || ctx.getAttribute("pads") != nullptr) return false;
  const onnx::AttributeProto* strides = ctx.getAttribute("strides");
  if (strides == nullptr) return false;
  const auto& shape = ctx.getInputType(data)->tensor_type().shape();
  for (int i = 0; i < strides->ints_size() && i + 2 < shape.dim_size(); ++i) {
    const int64_t stride = strides->ints(i);
    const auto& dim = shape.dim(i + 2);
    if (stride > 1 && dim.has_dim_value() && dim.dim_value() / stride > kMaxAutoPadSteps) {
      return true;
    }
  }
  return false;
}

// Conv, ConvInteger, QLinearConv, ConvTranspose (weight >= 0) and MaxPool, AveragePool, LpPool
// (weight < 0: kernel_shape is required). onnx's convPoolShapeInference and
// convTransposeShapeInference take the kernel's rank from the weight when kernel_shape is absent
// but index `dilations`/`pads`/the data's dims by the data's rank: a mismatch reads past the end
// of an (often empty) vector. ConvTranspose also reads the weight's dim 1 unchecked.
Guard WindowGuard(int data, int weight, bool transpose) {
  return [=](InferenceContext& ctx, const std::string& op) {
    CheckWindowAttributes(ctx, op);
    const int rank = KnownRank(ctx, data);
    if (rank < 2) return Verdict::kRun;  // onnx stops or fails cleanly without a data rank >= 2
    const int weight_rank = weight >= 0 ? KnownRank(ctx, weight) : -1;
    if (weight_rank >= 0) {
      if (transpose && weight_rank < 2) {
        Reject(op, fmt::format("the weight has rank {} (needs at least 2: C x M/group x k...)",
                               weight_rank));
      }
      if (ctx.getAttribute("kernel_shape") == nullptr && weight_rank != rank) {
        Reject(op, fmt::format("the weight has rank {} but the data input has rank {} (they must "
                               "have the same number of spatial dimensions)",
                               weight_rank, rank));
      }
    }
    return AutoPadLoopTooLong(ctx, data) ? Verdict::kSkip : Verdict::kRun;
  };
}

// MaxUnpool: onnx reads dim 1 of the indices input (input 1) without checking that it has a
// shape (a null TypeProto when it has no type) or two dimensions.
Verdict MaxUnpoolGuard(InferenceContext& ctx, const std::string& op) {
  CheckWindowAttributes(ctx, op);
  if (KnownRank(ctx, 0) < 2 || ctx.getNumInputs() != 2) return Verdict::kRun;
  const int indices_rank = KnownRank(ctx, 1);
  if (indices_rank < 0) return Verdict::kSkip;
  if (indices_rank < 2) {
    Reject(op,
           fmt::format("the indices input has rank {} (must match X, at least 2)", indices_rank));
  }
  return Verdict::kRun;
}

// MaxRoiPool: onnx writes pooled_shape[0] and [1] whatever the data's rank, so a 2-D or 3-D data
// input reads past the end of `pooled_shape` (empty: a null dereference).
Verdict MaxRoiPoolGuard(InferenceContext& ctx, const std::string& op) {
  const int rank = KnownRank(ctx, 0);
  if (rank >= 2 && rank < 4 && KnownRank(ctx, 1) >= 0) {
    Reject(op, fmt::format("the data input has rank {} (must be 4: N x C x H x W)", rank));
  }
  return Verdict::kRun;
}

// Gemm-6: onnx copies dim(transA ? 1 : 0) of A and dim(transB ? 0 : 1) of B without checking
// their ranks (versions 7 and later check); A and B are matrices in every version.
Verdict GemmGuard(InferenceContext& ctx, const std::string& op) {
  for (size_t i = 0; i < 2; ++i) {
    const int rank = KnownRank(ctx, i);
    if (rank >= 0 && rank != 2) {
      Reject(op, fmt::format("input {} has rank {} (A and B must be matrices)", i, rank));
    }
  }
  return Verdict::kRun;
}

// LayerNormalization-17: onnx turns a negative `axis` (default -1) into axis + rank without a range
// check and then writes dims [axis, rank) of the Mean/InvStdDev outputs: a scalar input, or an axis
// below -rank, writes at a negative index (SEGV).
Verdict LayerNormGuard(InferenceContext& ctx, const std::string& op) {
  const int rank = KnownRank(ctx, 0);
  if (rank < 0) return Verdict::kRun;
  const onnx::AttributeProto* attr = ctx.getAttribute("axis");
  const int64_t axis = attr != nullptr ? attr->i() : -1;
  if (axis < -rank || axis >= rank) {
    Reject(op, fmt::format("axis {} is out of range for an input of rank {}", axis, rank));
  }
  return Verdict::kRun;
}

// Wraps the inference function of every version of `op` in the default domain.
void WrapAllVersions(const std::string& op, const Guard& guard) {
  const auto& ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  const int max_version = ranges.at(onnx::ONNX_DOMAIN).second;
  std::set<const onnx::OpSchema*> wrapped;
  for (int v = 1; v <= max_version; ++v) {
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(op, v, onnx::ONNX_DOMAIN);
    if (schema == nullptr || !wrapped.insert(schema).second) continue;
    onnx::InferenceFunction original = schema->GetTypeAndShapeInferenceFunction();
    if (!original) continue;
    // The registry hands out const pointers to schemas it owns as non-const objects; replacing
    // the function once, before any inference runs (std::call_once below), is the only write.
    const_cast<onnx::OpSchema*>(schema)->TypeAndShapeInferenceFunction(
        [original, guard, op](InferenceContext& ctx) {
          if (guard(ctx, op) == Verdict::kRun) original(ctx);
        });
  }
}

void InstallAll() {
  WrapAllVersions("Conv", WindowGuard(0, 1, false));
  WrapAllVersions("ConvInteger", WindowGuard(0, 1, false));
  WrapAllVersions("QLinearConv", WindowGuard(0, 3, false));
  WrapAllVersions("ConvTranspose", WindowGuard(0, 1, true));
  for (const char* pool : {"MaxPool", "AveragePool", "LpPool"}) {
    WrapAllVersions(pool, WindowGuard(0, -1, false));
  }
  WrapAllVersions("MaxUnpool", MaxUnpoolGuard);
  WrapAllVersions("MaxRoiPool", MaxRoiPoolGuard);
  WrapAllVersions("Gemm", GemmGuard);
  WrapAllVersions("LayerNormalization", LayerNormGuard);
}

}  // namespace

void InstallShapeInferenceGuards() {
  static std::once_flag once;
  std::call_once(once, InstallAll);
}

}  // namespace inferd
