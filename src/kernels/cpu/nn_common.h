// Helpers shared by the neural-network kernels (nn_*.cc): sliding-window geometry (Conv, pools),
// float32 staging for types oneDNN lacks, fused-activation post-ops and oneDNN error wrapping.
#pragma once

#include <dnnl.hpp>

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "graph/graph.h"
#include "runtime/op_kernel.h"

namespace inferd::cpu {

// Window attributes of Conv, ConvTranspose and the pools, parsed once from the node.
struct WindowAttrs {
  std::string auto_pad = "NOTSET";  // NOTSET, SAME_UPPER, SAME_LOWER, VALID
  std::vector<int64_t> kernel_shape;  // empty: taken from the weight (Conv)
  std::vector<int64_t> strides;       // empty: all 1
  std::vector<int64_t> dilations;     // empty: all 1
  std::vector<int64_t> pads;          // empty: all 0; else begin..., end...
  bool ceil_mode = false;

  // Reads auto_pad, kernel_shape, strides, dilations, pads (and ceil_mode if `with_ceil_mode`).
  // Checks values are positive (pads non-negative) and auto_pad is known.
  Status Parse(const Node& node, bool with_ceil_mode);
};

// Geometry for one spatial rank, after resolving defaults and auto_pad.
struct WindowGeometry {
  std::vector<int64_t> kernel, strides, dilations, pad_begin, pad_end, out;
  // The end pads before ceil_mode grew them (what AveragePool's count_include_pad counts).
  std::vector<int64_t> pad_end_given;
  int64_t rank() const { return static_cast<int64_t>(kernel.size()); }
};

// Resolves `attrs` for input spatial dims `in` and kernel `kernel` (the weight's or the attribute's)
// into output dims and explicit pads (Conv / pool forward formula, ceil_mode honoured). With
// ceil_mode, pad_end is grown so that oneDNN's floor formula yields the same output size.
StatusOr<WindowGeometry> ResolveWindow(const WindowAttrs& attrs, const std::vector<int64_t>& in,
                                       const std::vector<int64_t>& kernel,
                                       const std::string& what);

// oneDNN dilation convention is ONNX dilation - 1.
dnnl::memory::dims DnnlDilations(const std::vector<int64_t>& d);

// Row-major strides of `dims` (for plain memory descriptors in any rank).
dnnl::memory::dims PlainStrides(const dnnl::memory::dims& dims);
dnnl::memory::desc PlainDesc(const dnnl::memory::dims& dims,
                             dnnl::memory::data_type dt = dnnl::memory::data_type::f32);

// Returns `t` if it is float32, else a float32 copy (float16, bfloat16, float64 inputs).
Tensor ToFloat32(const Tensor& t);
// Sets output i of `ctx` to the float32 result `f32`, converted to `dtype` when that is not float32.
void SetOutputFromFloat32(KernelContext& ctx, size_t i, DataType dtype, const Tensor& f32);

// Builds post-ops for an optional fused activation given by the node attributes "activation"
// ("Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid", "Gelu" (erf), "GeluTanh",
// "HardSwish") and "activation_params"
// (floats). No attribute: empty post-ops. This is how graph fusion passes attach an activation to
// Conv/MatMul/Gemm nodes (in the ai.inferd domain or as an extra attribute).
Status ParseFusedActivation(const Node& node, dnnl::post_ops* ops,
                            const std::string& attr = "activation");

// Per-thread scratch memory for layout conversions around oneDNN primitives (an activation
// reordered into a blocked layout and back). Slot `which` (0..3) grows to the largest request seen
// on this thread and is reused, so steady-state calls allocate nothing; it stays valid until the
// next call with the same slot on the same thread. Null when the memory is not available.
void* ThreadScratch(int which, size_t bytes);
// A oneDNN memory for `md` in ThreadScratch slot `which`; throws std::bad_alloc when there is none
// (kernels run inside DnnlTry).
dnnl::memory ScratchMemory(const dnnl::memory::desc& md, int which);
// `src` reordered into `md` (in scratch slot `which`), or `src` itself when it has that layout.
dnnl::memory ReorderIfNeeded(const dnnl::memory& src, const dnnl::memory::desc& md,
                             dnnl::stream& s, int which);

// One constant weight of a kernel, packed once per oneDNN weights layout and shared by all of the
// kernel's per-shape plans (ONNX Runtime's "prepacked weights"). Plans for different input shapes
// nearly always ask for the same layout, so a kernel warmed at batch 1 and at batch 16 holds one
// packed copy instead of one per shape.
//
// The plain float32 source shares the initializer's buffer when it is float32 and owned (no copy)
// and is dropped after the first packing: later layouts (rare) are reordered from the first
// packed copy, so the kernel ends up holding only packed memory. Thread safe.
class PackedWeights {
 public:
  PackedWeights() = default;
  PackedWeights(const PackedWeights&) = delete;
  PackedWeights& operator=(const PackedWeights&) = delete;
  ~PackedWeights();

  // `w` is the constant weight (any float type); `user_md` describes its plain float32 layout as
  // the primitives see it (e.g. grouped dims, or strides for a transposed Gemm B).
  void Reset(const Tensor& w);
  bool defined() const { return defined_; }
  // The weights in layout `md` (a primitive's weights_desc()), reordered from `user_md` on the
  // first request for that layout. `user_md` must be the same for every call on one object.
  dnnl::memory Get(const dnnl::memory::desc& user_md, const dnnl::memory::desc& md) const;
  // Number of distinct packed layouts held, and their total bytes (for tests and reports).
  size_t NumPacked() const;
  size_t PackedBytes() const;

  // Process-wide totals over live PackedWeights objects: packed layouts held and their bytes
  // (tests check that new input shapes add no packed copies).
  struct Totals {
    int64_t layouts = 0;
    int64_t bytes = 0;
  };
  static Totals LiveTotals();

 private:
  bool defined_ = false;
  mutable std::mutex mu_;
  mutable Tensor plain_;  // float32 source until the first packing; guarded by mu_
  mutable std::vector<std::pair<dnnl::memory::desc, dnnl::memory>> packed_;  // guarded by mu_
};

// Runs fn and converts a dnnl::error (or std::exception) into an Internal status naming `node`.
template <typename Fn>
Status DnnlTry(const Node& node, Fn&& fn) {
  try {
    return fn();
  } catch (const dnnl::error& e) {
    return Status(StatusCode::kInternal, node.Describe() + ": oneDNN error: " + e.what());
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal, node.Describe() + ": " + e.what());
  }
}

}  // namespace inferd::cpu
