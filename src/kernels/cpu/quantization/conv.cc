// ConvInteger and QLinearConv (and ai.inferd.QLinearConv): N-D grouped convolution over int32 values (zero points subtracted
// up front, so padding contributes zero), via im2col + QGemmInt32.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/quantization/conv_dnnl.h"
#include "kernels/cpu/quantization/quant_util.h"
#include "kernels/cpu/quantization/register.h"
#include "kernels/cpu/tensor/tensor_util.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

struct ConvAttrs {
  std::string auto_pad = "NOTSET";
  std::vector<int64_t> dilations, kernel_shape, pads, strides;
  int64_t group = 1;
};

struct ConvGeometry {
  int64_t batch = 0, in_c = 0, out_c = 0, group = 1;
  Shape in_spatial, out_spatial, kernel;
  std::vector<int64_t> stride, dilation, pad_begin;
};

StatusOr<ConvGeometry> PlanConv(const ConvAttrs& a, const Shape& x, const Shape& w) {
  if (x.size() < 3 || w.size() != x.size()) {
    return InvalidArgument("conv input {} and weight {} must have equal rank >= 3",
                           ShapeToString(x), ShapeToString(w));
  }
  size_t sd = x.size() - 2;
  ConvGeometry g;
  g.batch = x[0];
  g.in_c = x[1];
  g.out_c = w[0];
  g.group = a.group;
  if (g.group < 1 || g.in_c % g.group != 0 || g.out_c % g.group != 0 || w[1] * g.group != g.in_c) {
    return InvalidArgument("conv group {} does not fit input channels {}, weight {}", g.group,
                           g.in_c, ShapeToString(w));
  }
  g.in_spatial.assign(x.begin() + 2, x.end());
  g.kernel.assign(w.begin() + 2, w.end());
  if (!a.kernel_shape.empty() && a.kernel_shape != g.kernel) {
    return InvalidArgument("kernel_shape {} differs from weight {}", ShapeToString(a.kernel_shape),
                           ShapeToString(w));
  }
  auto dims_or = [&](const std::vector<int64_t>& v, int64_t def, const char* what,
                     size_t n) -> StatusOr<std::vector<int64_t>> {
    if (v.empty()) return std::vector<int64_t>(n, def);
    if (v.size() != n) return InvalidArgument("conv {} needs {} values, got {}", what, n, v.size());
    return v;
  };
  ASSIGN_OR_RETURN(g.stride, dims_or(a.strides, 1, "strides", sd));
  ASSIGN_OR_RETURN(g.dilation, dims_or(a.dilations, 1, "dilations", sd));
  ASSIGN_OR_RETURN(std::vector<int64_t> pads, dims_or(a.pads, 0, "pads", 2 * sd));
  g.pad_begin.resize(sd);
  g.out_spatial.resize(sd);
  for (size_t d = 0; d < sd; ++d) {
    if (g.stride[d] < 1 || g.dilation[d] < 1 || pads[d] < 0 || pads[d + sd] < 0) {
      return InvalidArgument("conv strides/dilations must be >= 1 and pads >= 0");
    }
    int64_t ext = g.dilation[d] * (g.kernel[d] - 1) + 1;
    if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
      int64_t out = (g.in_spatial[d] + g.stride[d] - 1) / g.stride[d];
      int64_t total = std::max<int64_t>(0, (out - 1) * g.stride[d] + ext - g.in_spatial[d]);
      g.pad_begin[d] = a.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.out_spatial[d] = out;
    } else if (a.auto_pad == "VALID" || a.auto_pad == "NOTSET") {
      int64_t pb = a.auto_pad == "VALID" ? 0 : pads[d];
      int64_t pe = a.auto_pad == "VALID" ? 0 : pads[d + sd];
      g.pad_begin[d] = pb;
      g.out_spatial[d] = (g.in_spatial[d] + pb + pe - ext) / g.stride[d] + 1;
    } else {
      return InvalidArgument("unknown auto_pad '{}'", a.auto_pad);
    }
    if (g.out_spatial[d] < 1) {
      return InvalidArgument("conv output would be empty: input {} kernel {}", ShapeToString(x),
                             ShapeToString(w));
    }
  }
  return g;
}

ConvAttrs ParseConvAttrs(const Node& n) {
  ConvAttrs a;
  a.auto_pad = n.GetString("auto_pad", "NOTSET");
  a.dilations = n.GetInts("dilations");
  a.kernel_shape = n.GetInts("kernel_shape");
  a.pads = n.GetInts("pads");
  a.strides = n.GetInts("strides");
  a.group = n.GetInt("group", 1);
  return a;
}

// out[N, M, out_spatial...] (int32) = conv(x - x_zp, w - w_zp[m]).
std::vector<int32_t> ConvInt32(const ConvGeometry& g, std::vector<int32_t> x,
                               std::vector<int32_t> w) {
  int64_t in_sp = NumElements(g.in_spatial), out_sp = NumElements(g.out_spatial);
  int64_t ksz = NumElements(g.kernel);
  int64_t icg = g.in_c / g.group, ocg = g.out_c / g.group;
  int64_t rows = icg * ksz;
  size_t sd = g.kernel.size();
  std::vector<int32_t> out(g.batch * g.out_c * out_sp);
  std::vector<int32_t> col(rows * out_sp);
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t gr = 0; gr < g.group; ++gr) {
      const int32_t* xg = x.data() + (n * g.in_c + gr * icg) * in_sp;
      ParallelFor(rows, 1, [&](int64_t r0, int64_t r1) {
        std::vector<int64_t> kidx(sd), oidx(sd);
        for (int64_t r = r0; r < r1; ++r) {
          int64_t c = r / ksz, kflat = r % ksz;
          for (int64_t d = static_cast<int64_t>(sd) - 1; d >= 0; --d) {
            kidx[d] = kflat % g.kernel[d];
            kflat /= g.kernel[d];
          }
          std::fill(oidx.begin(), oidx.end(), 0);
          int32_t* crow = col.data() + r * out_sp;
          for (int64_t p = 0; p < out_sp; ++p) {
            int64_t off = 0;
            bool inside = true;
            for (size_t d = 0; d < sd; ++d) {
              int64_t i = oidx[d] * g.stride[d] - g.pad_begin[d] + kidx[d] * g.dilation[d];
              if (i < 0 || i >= g.in_spatial[d]) {
                inside = false;
                break;
              }
              off = off * g.in_spatial[d] + i;
            }
            crow[p] = inside ? xg[c * in_sp + off] : 0;
            for (int64_t d = static_cast<int64_t>(sd) - 1; d >= 0; --d) {
              if (++oidx[d] < g.out_spatial[d]) break;
              oidx[d] = 0;
            }
          }
        }
      });
      QGemmInt32(w.data() + gr * ocg * rows, col.data(), ocg, out_sp, rows,
                 out.data() + (n * g.out_c + gr * ocg) * out_sp);
    }
  }
  return out;
}

Status CheckQuantOperand(const Tensor* t, const char* what) {
  if (t == nullptr) return InvalidArgument("{} is required", what);
  if (!IsQuantType(t->dtype())) {
    return InvalidArgument("{} must be uint8/int8, got {}", what, DataTypeName(t->dtype()));
  }
  return Status::Ok();
}

// Widened x minus its per-tensor zero point, w minus per-output-channel zero points.
struct WidenedOperands {
  std::vector<int32_t> x, w;
};
StatusOr<WidenedOperands> Widen(const Tensor& x, const Tensor* x_zp, const Tensor& w,
                                const Tensor* w_zp) {
  if (x_zp != nullptr && x_zp->NumElements() != 1) {
    return InvalidArgument("x_zero_point must be a scalar, got {}", x_zp->DebugString());
  }
  ASSIGN_OR_RETURN(auto xz, ReadZeroPoints(x_zp, 1, "x_zero_point"));
  ASSIGN_OR_RETURN(auto wz, ReadZeroPoints(w_zp, w.dim(0), "w_zero_point"));
  WidenedOperands o{WidenToInt32(x), WidenToInt32(w)};
  for (int32_t& v : o.x) v -= xz[0];
  int64_t per_oc = w.NumElements() / std::max<int64_t>(1, w.dim(0));
  for (size_t i = 0; i < o.w.size(); ++i) o.w[i] -= wz[i / per_oc];
  return o;
}

class ConvIntegerKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    attrs_ = ParseConvAttrs(info.node());
    return Status::Ok();
  }
  Status Compute(KernelContext& ctx) const override {
    RETURN_IF_ERROR(CheckQuantOperand(ctx.Input(0), "ConvInteger x"));
    RETURN_IF_ERROR(CheckQuantOperand(ctx.Input(1), "ConvInteger w"));
    const Tensor& x = *ctx.Input(0);
    const Tensor& w = *ctx.Input(1);
    ASSIGN_OR_RETURN(ConvGeometry g, PlanConv(attrs_, x.shape(), w.shape()));
    ASSIGN_OR_RETURN(WidenedOperands o, Widen(x, ctx.Input(2), w, ctx.Input(3)));
    std::vector<int32_t> acc = ConvInt32(g, std::move(o.x), std::move(o.w));
    Shape out_shape = {g.batch, g.out_c};
    out_shape.insert(out_shape.end(), g.out_spatial.begin(), g.out_spatial.end());
    Tensor* y = ctx.AllocateOutput(0, DataType::kInt32, out_shape);
    std::copy(acc.begin(), acc.end(), y->data<int32_t>());
    return Status::Ok();
  }

 private:
  ConvAttrs attrs_;
};

// QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B?). With constant quantization
// parameters, symmetric int8 weights and per-tensor activations it runs on oneDNN's int8
// convolution (quant_conv_dnnl.h); anything else takes the int32 reference path.
//
// The same kernel runs ai.inferd.QLinearConv (written by Int8LayoutPropagation and QdqFusion):
// the standard inputs plus an optional float32 residual Z (input 9), and attributes
// x_channels_last / y_channels_last (NHWC tensors) and activation ("Relu", with Z only). With Z
// the output is float32: act(DequantizeLinear(QLinearConv(...)) + Z).
class QLinearConvKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const Node& node = info.node();
    attrs_ = ParseConvAttrs(node);
    if (node.domain == "ai.inferd") {
      x_cl_ = node.GetInt("x_channels_last", 0) != 0;
      y_cl_ = node.GetInt("y_channels_last", 0) != 0;
      residual_ = node.HasInput(9);
      const std::string act = node.GetString("activation", "");
      if (!act.empty() && (act != "Relu" || !residual_)) {
        return InvalidArgument("{}: unsupported activation '{}' (only Relu, with a residual Z)",
                               node.Describe(), act);
      }
      relu_ = act == "Relu";
    }
    fast_ = TryFastPath(info);
    return Status::Ok();
  }
  // The output may take over the residual's buffer (the join accumulates onto it).
  int InPlaceInput(size_t output) const override { return output == 0 && residual_ ? 9 : -1; }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x_in = ctx.Input(0);
    const Tensor* x_zp = ctx.Input(2);
    if (x_in && x_zp && x_in->dtype() != x_zp->dtype()) {
      return InvalidArgument("QLinearConv x is {} but x_zero_point is {}",
                             DataTypeName(x_in->dtype()), DataTypeName(x_zp->dtype()));
    }
    if ((x_cl_ || y_cl_) && (!x_in || x_in->rank() != 4)) {
      return InvalidArgument("{}: channels-last x must be rank 4", ctx.node().Describe());
    }
    if (fast_ && x_in && x_in->dtype() == x_type_ && x_in->rank() >= 3) {
      const Tensor& x = *x_in;
      StatusOr<Shape> shape = fast_->OutputShape(ctx.node(), x.shape());
      if (shape.ok()) {
        Tensor* y = ctx.AllocateOutputUninitialized(
            0, residual_ ? DataType::kFloat32 : y_type_, *shape);
        Status st = fast_->Run(ctx.node(), x, ctx.Input(9), y);
        if (st.ok() || st.code() != StatusCode::kInternal) return st;
      } else if (shape.status().code() != StatusCode::kInternal) {
        return shape.status();
      }
      // oneDNN could not build this case: fall through to the reference loops.
    }
    return ComputeReference(ctx);
  }

 private:
  // The oneDNN path when every parameter but x is a constant of the supported form.
  std::unique_ptr<DnnlQConv> TryFastPath(const KernelInfo& info) {
    const Tensor* xs = info.ConstantInput(1);
    const Tensor* xzp = info.ConstantInput(2);
    const Tensor* w = info.ConstantInput(3);
    const Tensor* ws = info.ConstantInput(4);
    const Tensor* wzp = info.ConstantInput(5);
    const Tensor* ys = info.ConstantInput(6);
    const Tensor* yzp = info.ConstantInput(7);
    const Tensor* b = info.NumInputs() > 8 ? info.ConstantInput(8) : nullptr;
    if (!xs || !xzp || !w || !ws || !ys || !yzp) return nullptr;
    if (info.NumInputs() > 8 && !info.node().inputs[8].empty() && !b) return nullptr;
    if (xs->NumElements() != 1 || xzp->NumElements() != 1 || ys->NumElements() != 1 ||
        yzp->NumElements() != 1 || xs->dtype() != DataType::kFloat32 ||
        ys->dtype() != DataType::kFloat32 || ws->dtype() != DataType::kFloat32) {
      return nullptr;
    }
    if (w->dtype() != DataType::kInt8 || w->rank() < 3 || !IsQuantType(xzp->dtype()) ||
        !IsQuantType(yzp->dtype())) {
      return nullptr;
    }
    if (wzp) {
      for (int64_t i = 0; i < wzp->NumElements(); ++i) {
        if (wzp->GetAsInt64(i) != 0) return nullptr;
      }
    }
    QConvParams p;
    p.x_type = x_type_ = xzp->dtype();
    p.y_type = y_type_ = yzp->dtype();
    p.x_scale = xs->data<float>()[0];
    p.y_scale = ys->data<float>()[0];
    p.x_zero_point = static_cast<int32_t>(xzp->GetAsInt64(0));
    p.y_zero_point = static_cast<int32_t>(yzp->GetAsInt64(0));
    p.w_scales.assign(ws->data<float>(), ws->data<float>() + ws->NumElements());
    p.weights = *w;
    if (b) {
      if (b->dtype() != DataType::kInt32 || b->NumElements() != w->dim(0)) return nullptr;
      p.bias.assign(b->data<int32_t>(), b->data<int32_t>() + b->NumElements());
    }
    p.group = attrs_.group;
    p.x_channels_last = x_cl_;
    p.y_channels_last = y_cl_;
    p.residual = residual_;
    p.relu = relu_;
    if (!p.window.Parse(info.node(), false).ok()) return nullptr;
    StatusOr<std::unique_ptr<DnnlQConv>> conv = DnnlQConv::Create(std::move(p));
    return conv.ok() ? std::move(*conv) : nullptr;
  }

  // The int32 reference in NCHW, with the layout and residual handling of ai.inferd.QLinearConv
  // around it (transposes, dequantize + Z + activation).
  Status ComputeReference(KernelContext& ctx) const {
    RETURN_IF_ERROR(CheckQuantOperand(ctx.Input(0), "QLinearConv x"));
    Tensor x = x_cl_ ? Permuted(*ctx.Input(0), {0, 3, 1, 2}) : *ctx.Input(0);
    ASSIGN_OR_RETURN(Tensor q, ReferenceConv(ctx, x));
    if (y_cl_) q = Permuted(q, {0, 2, 3, 1});
    if (!residual_) {
      Tensor* y = ctx.AllocateOutputUninitialized(0, q.dtype(), q.shape());
      std::memcpy(y->raw_data(), q.raw_data(), q.ByteSize());
      return Status::Ok();
    }
    const Tensor* z = ctx.Input(9);
    if (z == nullptr || z->dtype() != DataType::kFloat32 || z->shape() != q.shape()) {
      return InvalidArgument("{}: residual Z must be float32 of shape {}, got {}",
                             ctx.node().Describe(), ShapeToString(q.shape()),
                             z ? z->DebugString() : std::string("none"));
    }
    ASSIGN_OR_RETURN(auto ys, ReadScales(ctx.Input(6), 1, "y_scale"));
    ASSIGN_OR_RETURN(auto yzp, ReadZeroPoints(ctx.Input(7), 1, "y_zero_point"));
    // Z's values are read before y's are written at each index, so y may share Z's buffer.
    const std::vector<int32_t> qv = WidenToInt32(q);
    Tensor* y = ctx.AllocateOutputUninitialized(0, DataType::kFloat32, q.shape());
    const float* zv = z->data<float>();
    float* yv = y->data<float>();
    for (size_t i = 0; i < qv.size(); ++i) {
      const float v = static_cast<float>(qv[i] - yzp[0]) * ys[0] + zv[i];
      yv[i] = relu_ ? std::max(v, 0.f) : v;
    }
    return Status::Ok();
  }

  static Tensor Permuted(const Tensor& t, const std::vector<int64_t>& perm) {
    Shape s(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) s[i] = t.dim(perm[i]);
    Tensor out = Tensor::Allocate(t.dtype(), s);
    TransposeInto(t, perm, &out);
    return out;
  }

  // QLinearConv over NCHW x (an ONNX QLinearConv's output, uint8/int8).
  StatusOr<Tensor> ReferenceConv(KernelContext& ctx, const Tensor& x) const {
    RETURN_IF_ERROR(CheckQuantOperand(ctx.Input(3), "QLinearConv w"));
    const Tensor& w = *ctx.Input(3);
    ASSIGN_OR_RETURN(ConvGeometry g, PlanConv(attrs_, x.shape(), w.shape()));
    ASSIGN_OR_RETURN(auto xs, ReadScales(ctx.Input(1), 1, "x_scale"));
    ASSIGN_OR_RETURN(auto ws, ReadScales(ctx.Input(4), g.out_c, "w_scale"));
    ASSIGN_OR_RETURN(auto ys, ReadScales(ctx.Input(6), 1, "y_scale"));
    ASSIGN_OR_RETURN(auto yzp, ReadZeroPoints(ctx.Input(7), 1, "y_zero_point"));
    DataType out_type = ctx.Input(7) ? ctx.Input(7)->dtype() : DataType::kUInt8;
    if (!IsQuantType(out_type))
      return InvalidArgument("QLinearConv y_zero_point must be uint8/int8");
    std::vector<int32_t> bias(g.out_c, 0);
    if (const Tensor* b = ctx.Input(8)) {
      if (b->dtype() != DataType::kInt32 || b->NumElements() != g.out_c) {
        return InvalidArgument("QLinearConv bias must be int32 with {} elements, got {}", g.out_c,
                               b->DebugString());
      }
      bias.assign(b->data<int32_t>(), b->data<int32_t>() + g.out_c);
    }
    ASSIGN_OR_RETURN(WidenedOperands o, Widen(x, ctx.Input(2), w, ctx.Input(5)));
    std::vector<int32_t> acc = ConvInt32(g, std::move(o.x), std::move(o.w));
    Shape out_shape = {g.batch, g.out_c};
    out_shape.insert(out_shape.end(), g.out_spatial.begin(), g.out_spatial.end());
    Tensor y = Tensor::Allocate(out_type, out_shape);
    int64_t out_sp = NumElements(g.out_spatial);
    for (int64_t i = 0; i < static_cast<int64_t>(acc.size()); ++i) {
      int64_t m = (i / out_sp) % g.out_c;
      float mult = xs[0] * ws[m] / ys[0];
      StoreQuantized(y, i, static_cast<float>(acc[i] + bias[m]) * mult, yzp[0]);
    }
    return y;
  }

  ConvAttrs attrs_;
  std::unique_ptr<DnnlQConv> fast_;
  DataType x_type_ = DataType::kUInt8, y_type_ = DataType::kUInt8;
  bool x_cl_ = false, y_cl_ = false, residual_ = false, relu_ = false;
};

}  // namespace

void RegisterQuantConvKernels(KernelRegistry& r) {
  r.Add("ConvInteger", 10, kOpsetMax, {DataType::kUInt8, DataType::kInt8},
        MakeKernel<ConvIntegerKernel>());
  r.Add("QLinearConv", 10, kOpsetMax, {DataType::kUInt8, DataType::kInt8},
        MakeKernel<QLinearConvKernel>());
  KernelDef def;
  def.domain = "ai.inferd";
  def.op_type = "QLinearConv";
  def.since_version = 1;
  def.until_version = kOpsetMax;
  def.types = {DataType::kUInt8, DataType::kInt8};
  def.factory = MakeKernel<QLinearConvKernel>();
  r.Register(std::move(def));
}

}  // namespace inferd::cpu
