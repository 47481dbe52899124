#include "optimizer/shape_propagation.h"

#include <set>

#include "optimizer/fusion_util.h"

namespace inferd {
namespace {

using Dims = std::vector<Dim>;

const Dim kUnknown{-1, ""};

bool SameDim(const Dim& a, const Dim& b) {
  if (a.known() || b.known()) return a.value == b.value;
  return !a.param.empty() && a.param == b.param;
}

bool IsUnknown(const Dim& d) { return !d.known() && d.param.empty(); }

class Propagator {
 public:
  explicit Propagator(Graph& g) : g_(g), ed_(g) {}

  std::optional<Dims> Get(const std::string& v) const {
    if (v.empty()) return std::nullopt;
    if (auto it = g_.initializers.find(v); it != g_.initializers.end()) {
      Dims d;
      for (int64_t x : it->second.shape()) d.push_back(Dim{x, ""});
      return d;
    }
    const ValueInfo* vi = g_.FindValueInfo(v);
    if (vi == nullptr || !vi->shape) return std::nullopt;
    return *vi->shape;
  }

  void Set(const std::string& v, const Dims& d, DataType dt) {
    if (v.empty() || Get(v)) return;
    ValueInfo vi;
    if (const ValueInfo* old = g_.FindValueInfo(v)) vi = *old;
    vi.name = v;
    if (vi.dtype == DataType::kUndefined) vi.dtype = dt;
    vi.shape = d;
    g_.value_info[v] = vi;
  }

  // Numpy broadcast of two shapes, trusting that the model is valid.
  static std::optional<Dims> Broadcast(const Dims& a, const Dims& b) {
    Dims out(std::max(a.size(), b.size()), kUnknown);
    for (size_t i = 0; i < out.size(); ++i) {
      const Dim* da = i < a.size() ? &a[a.size() - 1 - i] : nullptr;
      const Dim* db = i < b.size() ? &b[b.size() - 1 - i] : nullptr;
      Dim& o = out[out.size() - 1 - i];
      if (!da || !db) {
        o = da ? *da : *db;
      } else if (da->known() && da->value == 1) {
        o = *db;
      } else if (db->known() && db->value == 1) {
        o = *da;
      } else if (SameDim(*da, *db)) {
        o = *da;
      } else if (IsUnknown(*da)) {
        o = *db;
      } else if (IsUnknown(*db)) {
        o = *da;
      }  // else: two different symbols, unknown
    }
    return out;
  }

  // Dim `i` of the value `Unsqueeze(Gather(Shape(x), i))` or of a one-element constant.
  std::optional<Dim> ShapePart(const std::string& v) const {
    if (const Tensor* t = ed_.Constant(v)) {
      if (t->dtype() == DataType::kInt64 && t->NumElements() == 1) {
        return Dim{t->data<int64_t>()[0], ""};
      }
      return std::nullopt;
    }
    Node* u = ed_.Producer(v);
    if (!IsStandardOp(u, "Unsqueeze") || u->inputs.empty()) return std::nullopt;
    Node* gather = ed_.Producer(u->inputs[0]);
    if (!IsStandardOp(gather, "Gather") || gather->inputs.size() != 2) return std::nullopt;
    Node* shape = ed_.Producer(gather->inputs[0]);
    const Tensor* idx = ed_.Constant(gather->inputs[1]);
    if (!IsStandardOp(shape, "Shape") || shape->HasAttribute("start") || idx == nullptr ||
        idx->dtype() != DataType::kInt64 || idx->NumElements() != 1) {
      return std::nullopt;
    }
    std::optional<Dims> xs = Get(shape->inputs[0]);
    int64_t i = idx->data<int64_t>()[0];
    if (!xs) return std::nullopt;
    if (i < 0) i += static_cast<int64_t>(xs->size());
    if (i < 0 || i >= static_cast<int64_t>(xs->size())) return std::nullopt;
    return (*xs)[i];
  }

  std::optional<Dims> ReshapeTarget(const Node& n, const Dims& in) const {
    std::vector<Dim> parts;
    if (const Tensor* t = ed_.Constant(n.inputs[1])) {
      if (t->dtype() != DataType::kInt64 || t->rank() != 1) return std::nullopt;
      for (int64_t i = 0; i < t->NumElements(); ++i) parts.push_back(Dim{t->data<int64_t>()[i], ""});
    } else {
      Node* cat = ed_.Producer(n.inputs[1]);
      if (!IsStandardOp(cat, "Concat")) return std::nullopt;
      for (const std::string& p : cat->inputs) {
        std::optional<Dim> d = ShapePart(p);
        if (!d) return std::nullopt;
        parts.push_back(*d);
      }
    }
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].known() && parts[i].value == 0 && n.GetInt("allowzero", 0) == 0) {
        if (i >= in.size()) return std::nullopt;
        parts[i] = in[i];
      } else if (parts[i].known() && parts[i].value < 0) {
        parts[i] = kUnknown;
      }
    }
    return parts;
  }

  std::optional<Dims> Infer(const Node& n) const {
    static const std::set<std::string> kSame = {
        "Relu", "Erf", "Tanh", "Sigmoid", "Sqrt", "Cast", "Softmax", "LayerNormalization",
        "Identity", "Dropout", "Gelu", "Neg", "Exp", "Log", "Abs", "Clip", "LeakyRelu",
        "HardSigmoid", "HardSwish", "Reciprocal", "Not", "LogSoftmax"};
    static const std::set<std::string> kBinary = {"Add", "Sub", "Mul", "Div", "Pow", "Equal",
                                                  "Less", "Greater", "And", "Or", "Where"};
    if (n.inputs.empty()) return std::nullopt;
    std::optional<Dims> in0 = Get(n.inputs[0]);
    if (kSame.count(n.op_type)) return in0;
    if (kBinary.count(n.op_type) && (n.domain.empty() || n.domain == "ai.onnx")) {
      std::optional<Dims> acc = in0;
      for (size_t i = 1; i < n.inputs.size() && acc; ++i) {
        std::optional<Dims> d = Get(n.inputs[i]);
        acc = d ? Broadcast(*acc, *d) : std::nullopt;
      }
      return acc;
    }
    if (!in0) return std::nullopt;
    if ((n.op_type == "MoE" || n.op_type == "MoENBits") && n.domain == "ai.inferd") {
      return in0;  // Y: X's shape
    }
    if (n.op_type == "SwiGlu" && n.domain == "ai.inferd") {  // [..., 2F] -> [..., F]
      Dims out = *in0;
      if (out.empty()) return std::nullopt;
      out.back() = out.back().known() ? Dim{out.back().value / 2, ""} : kUnknown;
      return out;
    }
    if (n.op_type == "MatMul" || n.op_type == "FusedMatMul") {
      std::optional<Dims> b = Get(n.inputs[1]);
      if (!b || in0->size() < 2 || b->size() < 2) return std::nullopt;
      Dims ab(in0->begin(), in0->end() - 2), bb(b->begin(), b->end() - 2);
      std::optional<Dims> batch = Broadcast(ab, bb);
      batch->push_back((*in0)[in0->size() - 2]);
      batch->push_back(b->back());
      return batch;
    }
    if (n.op_type == "Gather" && n.inputs.size() == 2) {
      std::optional<Dims> idx = Get(n.inputs[1]);
      int64_t axis = n.GetInt("axis", 0);
      if (axis < 0) axis += static_cast<int64_t>(in0->size());
      if (!idx || axis < 0 || axis >= static_cast<int64_t>(in0->size())) return std::nullopt;
      Dims out(in0->begin(), in0->begin() + axis);
      out.insert(out.end(), idx->begin(), idx->end());
      out.insert(out.end(), in0->begin() + axis + 1, in0->end());
      return out;
    }
    if (n.op_type == "Slice") {
      Dims out(in0->size(), kUnknown);
      const Tensor* axes = n.inputs.size() > 3 ? ed_.Constant(n.inputs[3]) : nullptr;
      if (n.inputs.size() > 3 && !n.inputs[3].empty() && axes == nullptr) return out;
      for (size_t i = 0; i < out.size(); ++i) {
        bool sliced = axes == nullptr;  // no axes: every dim may be sliced
        if (axes && axes->dtype() == DataType::kInt64) {
          for (int64_t j = 0; j < axes->NumElements(); ++j) {
            int64_t a = axes->data<int64_t>()[j];
            if (a < 0) a += static_cast<int64_t>(out.size());
            sliced = sliced || a == static_cast<int64_t>(i);
          }
        } else if (axes) {
          sliced = true;
        }
        if (!sliced) out[i] = (*in0)[i];
      }
      return out;
    }
    if (n.op_type == "Transpose") {
      std::vector<int64_t> perm = n.GetInts("perm");
      if (perm.empty()) {
        for (int64_t i = static_cast<int64_t>(in0->size()) - 1; i >= 0; --i) perm.push_back(i);
      }
      if (perm.size() != in0->size()) return std::nullopt;
      Dims out;
      for (int64_t p : perm) {
        if (p < 0 || p >= static_cast<int64_t>(in0->size())) return std::nullopt;
        out.push_back((*in0)[p]);
      }
      return out;
    }
    if (n.op_type == "Reshape" && n.inputs.size() == 2) return ReshapeTarget(n, *in0);
    return std::nullopt;
  }

  void Run() {
    for (const auto& node : g_.nodes) {
      const Node& n = *node;
      if (n.outputs.empty() || n.outputs[0].empty() || Get(n.outputs[0])) continue;
      std::optional<Dims> d = Infer(n);
      if (!d) continue;
      // The element type when no value_info records it: the first input's for the ops that
      // keep it (Cast, comparisons and Where are left to the existing entry).
      static const std::set<std::string> kOtherType = {"Cast", "Equal", "Less", "Greater",
                                                       "And", "Or", "Not", "Where"};
      Set(n.outputs[0], *d,
          kOtherType.count(n.op_type) ? DataType::kUndefined : g_.ValueType(n.inputs[0]));
    }
  }

 private:
  Graph& g_;
  GraphEditor ed_;
};

}  // namespace

StatusOr<int> ShapePropagation::Run(Graph& graph) const {
  Propagator(graph).Run();
  return 0;
}

}  // namespace inferd
