#include "kernels/cpu/nn/window.h"

#include <algorithm>

namespace inferd::cpu {

Status WindowAttrs::Parse(const Node& node, bool with_ceil_mode) {
  auto_pad = node.GetString("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER" &&
      auto_pad != "VALID") {
    return InvalidArgument("{}: unknown auto_pad '{}'", node.Describe(), auto_pad);
  }
  kernel_shape = node.GetInts("kernel_shape");
  strides = node.GetInts("strides");
  dilations = node.GetInts("dilations");
  pads = node.GetInts("pads");
  if (with_ceil_mode) ceil_mode = node.GetInt("ceil_mode", 0) != 0;
  for (int64_t v : kernel_shape) {
    if (v <= 0) return InvalidArgument("{}: kernel_shape values must be > 0", node.Describe());
  }
  for (int64_t v : strides) {
    if (v <= 0) return InvalidArgument("{}: strides must be > 0", node.Describe());
  }
  for (int64_t v : dilations) {
    if (v <= 0) return InvalidArgument("{}: dilations must be > 0", node.Describe());
  }
  for (int64_t v : pads) {
    if (v < 0) return InvalidArgument("{}: pads must be >= 0", node.Describe());
  }
  if (pads.size() % 2 != 0) {
    return InvalidArgument("{}: pads must have an even number of values", node.Describe());
  }
  return Status::Ok();
}

StatusOr<WindowGeometry> ResolveWindow(const WindowAttrs& attrs, const std::vector<int64_t>& in,
                                       const std::vector<int64_t>& kernel,
                                       const std::string& what) {
  const size_t r = in.size();
  if (kernel.size() != r) {
    return InvalidArgument("{}: kernel has {} spatial dims but the input has {}", what,
                           kernel.size(), r);
  }
  auto pick = [&](const std::vector<int64_t>& v, int64_t def, size_t n,
                  const char* name) -> StatusOr<std::vector<int64_t>> {
    if (v.empty()) return std::vector<int64_t>(n, def);
    if (v.size() != n) {
      return InvalidArgument("{}: {} has {} values, expected {}", what, name, v.size(), n);
    }
    return v;
  };
  WindowGeometry g;
  g.kernel = kernel;
  ASSIGN_OR_RETURN(g.strides, pick(attrs.strides, 1, r, "strides"));
  ASSIGN_OR_RETURN(g.dilations, pick(attrs.dilations, 1, r, "dilations"));
  ASSIGN_OR_RETURN(std::vector<int64_t> pads, pick(attrs.pads, 0, 2 * r, "pads"));
  g.pad_begin.assign(pads.begin(), pads.begin() + r);
  g.pad_end.assign(pads.begin() + r, pads.end());
  g.out.resize(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t s = g.strides[i];
    const int64_t ke = (kernel[i] - 1) * g.dilations[i] + 1;
    if (attrs.auto_pad == "VALID") {
      g.pad_begin[i] = g.pad_end[i] = 0;
    } else if (attrs.auto_pad == "SAME_UPPER" || attrs.auto_pad == "SAME_LOWER") {
      const int64_t out = (in[i] + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + ke - in[i]);
      const int64_t small = total / 2;
      g.pad_begin[i] = attrs.auto_pad == "SAME_UPPER" ? small : total - small;
      g.pad_end[i] = total - g.pad_begin[i];
    }
    const int64_t span = in[i] + g.pad_begin[i] + g.pad_end[i] - ke;
    if (span < 0) {
      return InvalidArgument("{}: window of extent {} does not fit padded input dim {} ({})", what,
                             ke, i, in[i] + g.pad_begin[i] + g.pad_end[i]);
    }
    int64_t out = span / s + 1;
    if (attrs.ceil_mode && attrs.auto_pad == "NOTSET") {
      out = (span + s - 1) / s + 1;
      // The last window must start inside the input or the begin padding (as PyTorch and ORT).
      if ((out - 1) * s >= in[i] + g.pad_begin[i]) --out;
    }
    g.out[i] = out;
  }
  g.pad_end_given = g.pad_end;
  for (size_t i = 0; i < r; ++i) {
    const int64_t ke = (kernel[i] - 1) * g.dilations[i] + 1;
    g.pad_end[i] = std::max(g.pad_end[i], (g.out[i] - 1) * g.strides[i] + ke - in[i] - g.pad_begin[i]);
  }
  return g;
}

}  // namespace inferd::cpu
