// Sliding-window geometry of Conv, ConvTranspose and the pools (float and quantized): the
// attributes parsed once from the node, and their resolution against an input's spatial dims.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "graph/graph.h"

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

}  // namespace inferd::cpu
