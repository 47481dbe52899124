#include "optimizer/depthwise_fusion.h"

#include "optimizer/fusion_util.h"

namespace inferd {
namespace {

bool AllEqual(const std::vector<int64_t>& v, int64_t x) {
  for (int64_t e : v) {
    if (e != x) return false;
  }
  return true;
}

bool PlainWindow(const Node& n) {
  const std::string pad = n.GetString("auto_pad", "NOTSET");
  return (pad == "NOTSET" || pad.empty()) && AllEqual(n.GetInts("dilations"), 1);
}

// A 1x1, stride-1, unpadded, ungrouped BlockedConv with a blocked output and no residual or
// earlier depthwise fusion.
bool IsPointwise(const GraphEditor& ed, const Node& n) {
  if (!IsInferdOp(&n, "BlockedConv") || n.HasInput(3) || n.inputs.size() > 4) return false;
  if (n.GetInt("y_blocked", 0) != 1 || n.GetInt("group", 1) != 1 || !PlainWindow(n)) return false;
  if (!AllEqual(n.GetInts("strides"), 1) || !AllEqual(n.GetInts("pads"), 0)) return false;
  if (n.GetInt("compute_bf16", 0) != 0) return false;
  const Tensor* w = ed.Constant(n.inputs[1]);
  return w != nullptr && w->rank() == 4 && w->dim(2) == 1 && w->dim(3) == 1;
}

// A 3x3 depthwise BlockedConv over M channels reading a blocked input: pad 1, stride 1 or 2.
bool IsDepthwise(const GraphEditor& ed, const Node& n, int64_t m) {
  if (!IsInferdOp(&n, "BlockedConv") || n.HasInput(3) || n.inputs.size() > 4) return false;
  if (n.GetInt("x_blocked", 0) != 1 || n.GetInt("group", 1) != m || !PlainWindow(n)) return false;
  if (n.GetInt("compute_bf16", 0) != 0) return false;
  const std::vector<int64_t> strides = n.GetInts("strides", {1, 1});
  if (strides.size() != 2 || strides[0] != strides[1] || (strides[0] != 1 && strides[0] != 2)) {
    return false;
  }
  const std::vector<int64_t> pads = n.GetInts("pads");
  if (pads.size() != 4 || !AllEqual(pads, 1)) return false;
  const Tensor* w = ed.Constant(n.inputs[1]);
  if (w == nullptr || w->shape() != Shape{m, 1, 3, 3}) return false;
  return !n.HasInput(2) || ed.Constant(n.inputs[2]) != nullptr;
}

}  // namespace

bool DepthwiseFusion::Match(const GraphEditor& ed, const Node& pw) const {
  return IsPointwise(ed, pw);
}

bool DepthwiseFusion::Rewrite(GraphEditor& ed, Node* pw) const {
  Node* dw = ed.SoleConsumer(pw->outputs[0]);
  const int64_t m = ed.Constant(pw->inputs[1])->dim(0);
  if (dw == nullptr || dw->inputs[0] != pw->outputs[0] || !IsDepthwise(ed, *dw, m)) return false;
  const std::string dw_w = dw->inputs[1];
  const std::string dw_b = dw->HasInput(2) ? dw->inputs[2] : "";
  const std::string y = dw->outputs[0];
  const int64_t stride = dw->GetInts("strides", {1, 1})[0];  // IsDepthwise: both equal
  const int64_t y_blocked = dw->GetInt("y_blocked", 0);
  const std::map<std::string, Attribute> dw_attrs = dw->attributes;
  ed.RemoveNode(dw);
  ed.EditNode(pw, [&](Node& n) {
    n.inputs.resize(4);  // X, W, B, Z (empty)
    n.inputs.push_back(dw_w);
    if (!dw_b.empty()) n.inputs.push_back(dw_b);
    n.outputs[0] = y;
    n.attributes["dw_stride"] = IntAttr(stride);
    n.attributes["y_blocked"] = IntAttr(y_blocked);
    for (const char* key : {"activation", "activation_params"}) {
      if (auto it = dw_attrs.find(key); it != dw_attrs.end()) {
        n.attributes[std::string("dw_") + key] = it->second;
      }
    }
  });
  return true;
}

}  // namespace inferd
