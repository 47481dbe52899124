// Constant weights packed once per oneDNN weights layout (ONNX Runtime's "prepacked weights").
#pragma once

#include <dnnl.hpp>

#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "common/tensor.h"

namespace inferd::cpu {

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

}  // namespace inferd::cpu
