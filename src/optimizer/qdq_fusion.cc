#include "optimizer/qdq_fusion.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <map>
#include <vector>

#include "optimizer/fusion_util.h"
#include "optimizer/rewrite_rule.h"

namespace inferd {
namespace {

bool IsStd(const Node& n, const char* op) {
  return n.op_type == op && (n.domain.empty() || n.domain == "ai.onnx");
}

bool IsQuant8(DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; }

// A DequantizeLinear/QuantizeLinear with constant per-tensor float scale and 8-bit zero point.
struct QParams {
  std::string scale, zero_point;  // value names (zero_point may be created)
  float scale_value = 0;
  int64_t zp_value = 0;
  DataType type = DataType::kUndefined;
};

// A missing zero point is created as an initializer, even when the rule then rejects the pattern
// (an exception to the rule contract in rewrite_rule.h, kept so outputs stay as they were):
// nothing reads it and dead-node elimination drops it.
bool PerTensorParams(GraphEditor& ed, const Node& n, QParams* p) {
  if (!n.HasInput(1)) return false;
  const Tensor* s = ed.Constant(n.inputs[1]);
  if (!s || s->dtype() != DataType::kFloat32 || s->NumElements() != 1) return false;
  p->scale = n.inputs[1];
  p->scale_value = s->data<float>()[0];
  if (n.HasInput(2)) {
    const Tensor* z = ed.Constant(n.inputs[2]);
    if (!z || !IsQuant8(z->dtype()) || z->NumElements() != 1) return false;
    p->zero_point = n.inputs[2];
    p->zp_value = z->GetAsInt64(0);
    p->type = z->dtype();
  } else {
    p->zero_point = ed.AddInitializer(n.inputs[1] + "_zero_point", Tensor::Scalar<uint8_t>(0));
    p->type = DataType::kUInt8;
  }
  return std::isfinite(p->scale_value) && p->scale_value > 0;
}

// The DQ of a constant int8 weight with zero points 0; scales must be 1 or `channels` values
// along `axis` of the weight.
bool WeightParams(GraphEditor& ed, const Node& dq, int64_t axis, std::string* w,
                  std::vector<float>* scales) {
  if (!IsStd(dq, "DequantizeLinear") || !dq.HasInput(1)) return false;
  const Tensor* q = ed.Constant(dq.inputs[0]);
  const Tensor* s = ed.Constant(dq.inputs[1]);
  if (!q || q->dtype() != DataType::kInt8 || !s || s->dtype() != DataType::kFloat32) return false;
  if (dq.HasInput(2)) {
    const Tensor* z = ed.Constant(dq.inputs[2]);
    if (!z) return false;
    for (int64_t i = 0; i < z->NumElements(); ++i) {
      if (z->GetAsInt64(i) != 0) return false;
    }
  }
  if (s->NumElements() != 1) {
    int64_t a = dq.GetInt("axis", 1);
    if (a < 0) a += q->rank();
    if (a != axis || s->NumElements() != q->dim(axis)) return false;
  }
  *w = dq.inputs[0];
  scales->assign(s->data<float>(), s->data<float>() + s->NumElements());
  return true;
}

// Float values of a constant bias: a float initializer or DQ(constant).
bool BiasValues(GraphEditor& ed, const std::string& name, int64_t m, std::vector<float>* out) {
  if (const Tensor* b = ed.Constant(name)) {
    if (b->dtype() != DataType::kFloat32 || b->NumElements() != m) return false;
    out->assign(b->data<float>(), b->data<float>() + m);
    return true;
  }
  Node* dq = ed.Producer(name);
  if (!dq || !IsStd(*dq, "DequantizeLinear") || !dq->HasInput(1)) return false;
  const Tensor* q = ed.Constant(dq->inputs[0]);
  const Tensor* s = ed.Constant(dq->inputs[1]);
  const Tensor* z = dq->HasInput(2) ? ed.Constant(dq->inputs[2]) : nullptr;
  if (!q || !s || q->NumElements() != m || s->dtype() != DataType::kFloat32) return false;
  if (dq->HasInput(2) && !z) return false;
  if (s->NumElements() != 1 && s->NumElements() != m) return false;
  if (z && z->NumElements() != 1 && z->NumElements() != m) return false;
  out->resize(m);
  for (int64_t i = 0; i < m; ++i) {
    float sc = s->data<float>()[s->NumElements() == 1 ? 0 : i];
    double zp = z ? z->GetAsDouble(z->NumElements() == 1 ? 0 : i) : 0.0;
    (*out)[i] = static_cast<float>((q->GetAsDouble(i) - zp) * sc);
  }
  return true;
}

// The Q that ends the pattern after `op` (past an absorbable Relu), or null. Sets `relu`.
Node* TrailingQuantize(GraphEditor& ed, Node* op, Node** relu, QParams* y) {
  *relu = nullptr;
  Node* next = ed.SoleConsumer(op->outputs[0]);
  if (next && IsStd(*next, "Relu")) {
    *relu = next;
    next = ed.SoleConsumer(next->outputs[0]);
  }
  if (!next || !IsStd(*next, "QuantizeLinear") || next->GetInt("saturate", 1) != 1) return nullptr;
  if (!PerTensorParams(ed, *next, y)) return nullptr;
  if (*relu) {
    int64_t qmin = y->type == DataType::kUInt8 ? 0 : -128;
    if (y->zp_value != qmin) return nullptr;
  }
  return next;
}

// DQ(x_q) → Add(·, b) [→ Relu]  ⇒  ai.inferd.DequantizeAdd(x_q, scale, zp, b) (residual joins).
class DequantizeAddRule final : public RewriteRule {
 public:
  std::string_view Name() const override { return "QdqFusion/DequantizeAdd"; }
  std::vector<std::string> TargetOpTypes() const override { return {"Add"}; }
  bool Match(const GraphEditor& ed, const Node& add) const override {
    return IsStd(add, "Add") && add.NumInputs() == 2;
  }
  bool Rewrite(GraphEditor& ed, Node* add) const override;
};

bool DequantizeAddRule::Rewrite(GraphEditor& ed, Node* add) const {
  for (int side = 0; side < 2; ++side) {
    Node* dq = ed.Producer(add->inputs[side]);
    const std::string other = add->inputs[1 - side];
    if (!dq || !IsStd(*dq, "DequantizeLinear") || ed.SoleConsumer(dq->outputs[0]) != add ||
        add->inputs[0] == add->inputs[1] || dq->GetInt("axis", 1) != 1) {
      continue;
    }
    const DataType other_type = ed.graph().ValueType(other);
    if (other_type != DataType::kFloat32) continue;
    QParams x;
    if (!dq->HasInput(2) || !PerTensorParams(ed, *dq, &x)) continue;
    if (!SameDeclaredShape(ed.graph(), dq->outputs[0], other)) continue;
    Node* relu = ed.SoleConsumer(add->outputs[0]);
    if (relu && !IsStd(*relu, "Relu")) relu = nullptr;
    const std::string out = relu ? relu->outputs[0] : add->outputs[0];
    const std::string x_q = dq->inputs[0];
    if (relu) ed.RemoveNode(relu);
    ed.EditNode(add, [&](Node& n) {
      n.op_type = "DequantizeAdd";
      n.domain = "ai.inferd";
      n.inputs = {x_q, x.scale, x.zero_point, other};
      n.outputs = {out};
      if (relu) {
        Attribute a;
        a.type = Attribute::Type::kString;
        a.s = "Relu";
        n.attributes["activation"] = a;
      }
    });
    return true;
  }
  return false;
}

// Whether two values are constants holding the same single number (a scale or zero point).
bool SameScalar(GraphEditor& ed, const std::string& a, const std::string& b) {
  if (a == b) return true;
  const Tensor* ta = ed.Constant(a);
  const Tensor* tb = ed.Constant(b);
  return ta && tb && ta->dtype() == tb->dtype() && ta->NumElements() == 1 &&
         tb->NumElements() == 1 && ta->GetAsDouble(0) == tb->GetAsDouble(0);
}

// Whether `reader` is the only reader of `value` apart from nodes whose outputs nobody reads
// (the DequantizeLinear that DequantizeAddRule just bypassed, until dead-node elimination).
bool OnlyLiveReader(const GraphEditor& ed, const std::string& value, const Node* reader) {
  if (ed.IsGraphOutput(value)) return false;
  int reads = 0;
  for (const Node* c : ed.Consumers(value)) {
    if (c == reader) {
      for (const std::string& in : c->inputs) reads += in == value;
      continue;
    }
    for (const std::string& out : c->outputs) {
      if (!out.empty() && ed.IsUsed(out)) return false;
    }
  }
  return reads == 1;
}

// QLinearConv → DequantizeAdd(its output, y_scale, y_zp, b) [Relu]  ⇒  ai.inferd.QLinearConv
// with residual Z = b: the join runs as post-ops of the int8 convolution (see quant_conv_dnnl.h).
// The fused node takes the DequantizeAdd's place in the order, after b's producer.
class ConvResidualRule final : public RewriteRule {
 public:
  std::string_view Name() const override { return "QdqFusion/ConvResidual"; }
  std::vector<std::string> TargetOpTypes() const override { return {"DequantizeAdd"}; }
  bool Match(const GraphEditor& ed, const Node& add) const override {
    return add.domain == "ai.inferd" && add.NumInputs() == 4;
  }
  bool Rewrite(GraphEditor& ed, Node* add) const override;
};

bool ConvResidualRule::Rewrite(GraphEditor& ed, Node* add) const {
  Node* conv = ed.Producer(add->inputs[0]);
  if (!conv || !OnlyLiveReader(ed, add->inputs[0], add) || conv->NumInputs() < 8) return false;
  const bool standard = IsStd(*conv, "QLinearConv");
  const bool inferd = conv->op_type == "QLinearConv" && conv->domain == "ai.inferd" &&
                      !conv->HasInput(9) && !conv->HasAttribute("x_channels_last");
  if (!standard && !inferd) return false;
  if (!SameScalar(ed, conv->inputs[6], add->inputs[1]) ||
      !SameScalar(ed, conv->inputs[7], add->inputs[2]) || add->inputs[3] == add->inputs[0]) {
    return false;
  }
  std::vector<std::string> inputs = conv->inputs;
  inputs.resize(9);
  inputs.push_back(add->inputs[3]);
  std::map<std::string, Attribute> attrs = conv->attributes;
  if (add->HasAttribute("activation")) attrs["activation"] = add->attributes.at("activation");
  const std::string name = conv->name;
  ed.RemoveNode(conv);
  ed.EditNode(add, [&](Node& n) {
    n.name = name;
    n.op_type = "QLinearConv";
    n.domain = "ai.inferd";
    n.inputs = inputs;
    n.attributes = attrs;
  });
  return true;
}

// DQ(x_q) → MaxPool → Q with the DQ's scale and zero point  ⇒  ai.inferd.MaxPool(x_q): the max of
// dequantized values quantizes back to the max of the quantized ones (a monotonic map).
class QuantizedMaxPoolRule final : public RewriteRule {
 public:
  std::string_view Name() const override { return "QdqFusion/MaxPool"; }
  std::vector<std::string> TargetOpTypes() const override { return {"MaxPool"}; }
  bool Match(const GraphEditor& ed, const Node& pool) const override {
    return IsStd(pool, "MaxPool") && pool.outputs.size() == 1 &&
           pool.GetInt("storage_order", 0) == 0 && pool.GetInts("kernel_shape").size() == 2;
  }
  bool Rewrite(GraphEditor& ed, Node* pool) const override;
};

bool QuantizedMaxPoolRule::Rewrite(GraphEditor& ed, Node* pool) const {
  Node* dq = ed.Producer(pool->inputs[0]);
  if (!dq || !IsStd(*dq, "DequantizeLinear") || ed.SoleConsumer(dq->outputs[0]) != pool) {
    return false;
  }
  Node* q = ed.SoleConsumer(pool->outputs[0]);
  if (!q || !IsStd(*q, "QuantizeLinear") || q->GetInt("saturate", 1) != 1) return false;
  QParams x, y;
  if (!dq->HasInput(2) || !PerTensorParams(ed, *dq, &x) || !PerTensorParams(ed, *q, &y)) {
    return false;
  }
  if (x.scale_value != y.scale_value || x.zp_value != y.zp_value || x.type != y.type) {
    return false;
  }
  const std::string x_q = dq->inputs[0], out = q->outputs[0];
  ed.RemoveNode(q);
  ed.EditNode(pool, [&](Node& n) {
    n.domain = "ai.inferd";
    n.inputs = {x_q};
    n.outputs = {out};
  });
  return true;
}

// DQ(x) → Conv/MatMul(DQ(W) [, B]) [→ Relu] → Q  ⇒  QLinearConv / QLinearMatMul.
class QLinearOpRule final : public RewriteRule {
 public:
  std::string_view Name() const override { return "QdqFusion/QLinearOp"; }
  std::vector<std::string> TargetOpTypes() const override { return {"Conv", "MatMul"}; }
  bool Match(const GraphEditor& ed, const Node& op) const override {
    return (IsStd(op, "Conv") || IsStd(op, "MatMul")) && op.NumInputs() >= 2;
  }
  bool Rewrite(GraphEditor& ed, Node* op) const override;
};

// The bias in the accumulator's scale x_scale * w_scale[m], as a new int32 initializer.
std::string AddInt32Bias(GraphEditor& ed, const std::string& name, const std::vector<float>& bias,
                         float x_scale, const std::vector<float>& w_scales) {
  const int64_t m = static_cast<int64_t>(bias.size());
  Tensor b = Tensor::Allocate(DataType::kInt32, {m});
  for (int64_t i = 0; i < m; ++i) {
    double s = double(x_scale) * w_scales[w_scales.size() == 1 ? 0 : i];
    double v = std::nearbyint(bias[i] / s);
    b.data<int32_t>()[i] = static_cast<int32_t>(std::clamp(v, -2147483647.0, 2147483647.0));
  }
  return ed.AddInitializer(name + "_int32", b);
}

bool QLinearOpRule::Rewrite(GraphEditor& ed, Node* op) const {
  const bool conv = op->op_type == "Conv";
  Node* dq_x = ed.Producer(op->inputs[0]);
  Node* dq_w = ed.Producer(op->inputs[1]);
  if (!dq_x || !dq_w || !IsStd(*dq_x, "DequantizeLinear")) return false;
  const Tensor* wq = ed.Constant(dq_w->inputs[0]);
  if (!wq || (conv && wq->rank() < 3) || (!conv && wq->rank() != 2)) return false;
  QParams x, y;
  if (!PerTensorParams(ed, *dq_x, &x)) return false;
  std::string w;
  std::vector<float> w_scales;
  if (!WeightParams(ed, *dq_w, conv ? 0 : 1, &w, &w_scales)) return false;
  const int64_t m = conv ? wq->dim(0) : wq->dim(1);
  std::vector<float> bias;
  if (conv && op->HasInput(2) && !BiasValues(ed, op->inputs[2], m, &bias)) return false;
  Node* relu = nullptr;
  Node* q = TrailingQuantize(ed, op, &relu, &y);
  if (!q) return false;
  std::string bias_name;
  if (!bias.empty()) bias_name = AddInt32Bias(ed, op->inputs[2], bias, x.scale_value, w_scales);
  std::string w_scale = dq_w->inputs[1];
  std::string w_zp = ed.AddInitializer(
      w + "_zero_point", w_scales.size() == 1
                             ? Tensor::Scalar<int8_t>(0)
                             : Tensor::Allocate(DataType::kInt8, {static_cast<int64_t>(m)}));
  std::string x_q = dq_x->inputs[0];
  const std::string out = q->outputs[0];
  ed.RemoveNode(q);
  if (relu) ed.RemoveNode(relu);
  ed.EditNode(op, [&](Node& n) {
    n.op_type = conv ? "QLinearConv" : "QLinearMatMul";
    n.domain = "";
    n.inputs = {x_q, x.scale, x.zero_point, w, w_scale, w_zp, y.scale, y.zero_point};
    if (!bias_name.empty()) n.inputs.push_back(bias_name);
    n.outputs = {out};
  });
  return true;
}

}  // namespace

// The phases run one after another on one editor, each a sweep of its rule: the residual join
// needs the QLinearConvs and DequantizeAdds the first two phases make.
StatusOr<int> QdqFusion::Run(Graph& graph) const {
  const QLinearOpRule qlinear;
  const DequantizeAddRule dequantize_add;
  const ConvResidualRule conv_residual;
  const QuantizedMaxPoolRule max_pool;
  GraphEditor ed(graph);
  std::vector<int> fired(1, 0);
  for (const RewriteRule* phase : std::initializer_list<const RewriteRule*>{
           &qlinear, &dequantize_add, &conv_residual, &max_pool}) {
    SweepRules(ed, {phase}, &fired);
  }
  RETURN_IF_ERROR(ed.Commit());
  return fired[0];
}

}  // namespace inferd
