#include "kernels/cpu/nn_common.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <memory>

#include "kernels/cpu/dnnl_util.h"

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

dnnl::memory::dims DnnlDilations(const std::vector<int64_t>& d) {
  dnnl::memory::dims r(d.size());
  for (size_t i = 0; i < d.size(); ++i) r[i] = d[i] - 1;
  return r;
}

dnnl::memory::dims PlainStrides(const dnnl::memory::dims& dims) {
  dnnl::memory::dims s(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

dnnl::memory::desc PlainDesc(const dnnl::memory::dims& dims, dnnl::memory::data_type dt) {
  return dnnl::memory::desc(dims, dt, PlainStrides(dims));
}

void* ThreadScratch(int which, size_t bytes) {
  struct Slot {
    struct Free {
      void operator()(void* p) const { std::free(p); }
    };
    std::unique_ptr<void, Free> data;
    size_t capacity = 0;
  };
  thread_local std::array<Slot, 4> slots;
  if (which < 0 || which >= static_cast<int>(slots.size())) return nullptr;
  Slot& slot = slots[which];
  if (bytes > slot.capacity) {
    const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    slot.data.reset(std::aligned_alloc(64, rounded));
    slot.capacity = slot.data ? rounded : 0;
  }
  return slot.data.get();
}

Tensor ToFloat32(const Tensor& t) {
  if (t.dtype() == DataType::kFloat32) return t;
  Tensor f = Tensor::Allocate(DataType::kFloat32, t.shape());
  float* dst = f.data<float>();
  const int64_t n = t.NumElements();
  DispatchAll(
      t.dtype(),
      [&](auto tag) {
        using T = decltype(tag);
        const T* src = t.data<T>();
        for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
      },
      [] {});
  return f;
}

void SetOutputFromFloat32(KernelContext& ctx, size_t i, DataType dtype, const Tensor& f32) {
  if (dtype == DataType::kFloat32) {
    ctx.SetOutput(i, f32);
    return;
  }
  Tensor* out = ctx.AllocateOutput(i, dtype, f32.shape());
  const float* src = f32.data<float>();
  const int64_t n = f32.NumElements();
  DispatchAll(
      dtype,
      [&](auto tag) {
        using T = decltype(tag);
        T* dst = out->data<T>();
        if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
          for (int64_t j = 0; j < n; ++j) dst[j] = T(src[j]);
        } else {
          for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<T>(src[j]);
        }
      },
      [] {});
}

Status ParseFusedActivation(const Node& node, dnnl::post_ops* ops, const std::string& attr) {
  const std::string act = node.GetString(attr, "");
  if (act.empty()) return Status::Ok();
  const std::vector<float> p = node.GetFloats(attr + "_params");
  auto param = [&](size_t i, float def) { return i < p.size() ? p[i] : def; };
  using A = dnnl::algorithm;
  if (act == "Relu") {
    ops->append_eltwise(1.f, A::eltwise_relu, 0.f, 0.f);
  } else if (act == "LeakyRelu") {
    ops->append_eltwise(1.f, A::eltwise_relu, param(0, 0.01f), 0.f);
  } else if (act == "Sigmoid") {
    ops->append_eltwise(1.f, A::eltwise_logistic, 0.f, 0.f);
  } else if (act == "Tanh") {
    ops->append_eltwise(1.f, A::eltwise_tanh, 0.f, 0.f);
  } else if (act == "Clip") {
    ops->append_eltwise(1.f, A::eltwise_clip, param(0, -3.4e38f), param(1, 3.4e38f));
  } else if (act == "Gelu") {  // added by the fusion passes: erf form
    ops->append_eltwise(1.f, A::eltwise_gelu_erf, 0.f, 0.f);
  } else if (act == "GeluTanh") {  // tanh approximation
    ops->append_eltwise(1.f, A::eltwise_gelu_tanh, 0.f, 0.f);
  } else if (act == "HardSwish") {  // x * relu6(x + 3) / 6 (ONNX alpha 1/6, beta 0.5)
    ops->append_eltwise(1.f, A::eltwise_hardswish, 0.f, 0.f);
  } else if (act == "HardSigmoid") {
    ops->append_eltwise(1.f, A::eltwise_linear, param(0, 0.2f), param(1, 0.5f));
    ops->append_eltwise(1.f, A::eltwise_clip, 0.f, 1.f);
  } else {
    return InvalidArgument("{}: unsupported fused activation '{}'", node.Describe(), act);
  }
  return Status::Ok();
}

namespace {
std::atomic<int64_t> g_live_layouts{0};
std::atomic<int64_t> g_live_bytes{0};
}  // namespace

PackedWeights::~PackedWeights() {
  for (const auto& p : packed_) {
    g_live_layouts.fetch_sub(1);
    g_live_bytes.fetch_sub(static_cast<int64_t>(p.first.get_size()));
  }
}

PackedWeights::Totals PackedWeights::LiveTotals() {
  return Totals{g_live_layouts.load(), g_live_bytes.load()};
}

void PackedWeights::Reset(const Tensor& w) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& p : packed_) {
    g_live_layouts.fetch_sub(1);
    g_live_bytes.fetch_sub(static_cast<int64_t>(p.first.get_size()));
  }
  // A float32 initializer that owns its buffer is shared, not copied; anything else (a view, or
  // another float type converted by ToFloat32) is owned here until the first packing.
  Tensor f = ToFloat32(w);
  plain_ = f.owns_data() ? f : f.Clone();
  packed_.clear();
  defined_ = true;
}

dnnl::memory ScratchMemory(const dnnl::memory::desc& md, int which) {
  void* p = ThreadScratch(which, md.get_size());
  if (p == nullptr) throw std::bad_alloc();
  return dnnl::memory(md, DnnlEngine(), p);
}

dnnl::memory ReorderIfNeeded(const dnnl::memory& src, const dnnl::memory::desc& md,
                             dnnl::stream& s, int which) {
  if (src.get_desc() == md) return src;
  dnnl::memory dst = ScratchMemory(md, which);
  dnnl::reorder(src, dst).execute(s, const_cast<dnnl::memory&>(src), dst);
  return dst;
}

dnnl::memory PackedWeights::Get(const dnnl::memory::desc& user_md,
                                const dnnl::memory::desc& md) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [have_md, mem] : packed_) {
    if (have_md == md) return mem;
  }
  // oneDNN reorders into its Winograd weight formats but not out of them: only a blocked copy can
  // be the source of later layouts, so the plain weights stay until there is one.
  auto is_wino = [](const dnnl::memory::desc& d) {
    return d.data.format_kind == dnnl_format_kind_wino;
  };
  dnnl::engine& eng = DnnlEngine();
  dnnl::memory src;
  if (plain_.defined()) {
    src = dnnl::memory(user_md, eng, const_cast<void*>(plain_.raw_data()));
  } else {
    for (const auto& [have_md, mem] : packed_) {
      if (!is_wino(have_md)) {
        src = mem;
        break;
      }
    }
  }
  dnnl::memory dst(md, eng);
  dnnl::stream s(eng);
  dnnl::reorder(src, dst).execute(s, src, dst);
  s.wait();
  packed_.emplace_back(md, dst);
  g_live_layouts.fetch_add(1);
  g_live_bytes.fetch_add(static_cast<int64_t>(md.get_size()));
  if (!is_wino(md)) plain_ = Tensor();  // later layouts reorder from this copy
  return dst;
}

size_t PackedWeights::NumPacked() const {
  std::lock_guard<std::mutex> lock(mu_);
  return packed_.size();
}

size_t PackedWeights::PackedBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t bytes = 0;
  for (const auto& p : packed_) bytes += p.first.get_size();
  return bytes;
}

}  // namespace inferd::cpu
