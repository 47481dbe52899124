#include "optimizer/constant_folding.h"

#include <algorithm>

#include "optimizer/graph_edit.h"
#include "optimizer/op_traits.h"
#include "runtime/graph_executor.h"

namespace inferd {
namespace {

bool Foldable(const Node& n) {
  if (IsNondeterministicOp(n.op_type)) return false;
  if (n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear") return false;
  for (const auto& [k, a] : n.attributes) {
    if (a.g || !a.graphs.empty()) return false;
  }
  return true;
}

// Shape/Size of a value with a fully known shape; undefined Tensor when not applicable.
Tensor FoldShapeQuery(const GraphEditor& ed, const Node& n) {
  if (n.op_type != "Shape" && n.op_type != "Size") return Tensor();
  if (n.inputs.empty() || n.inputs[0].empty()) return Tensor();
  std::optional<Shape> shape = ed.StaticShape(n.inputs[0]);
  if (!shape) return Tensor();
  if (n.op_type == "Size") return Tensor::Scalar<int64_t>(NumElements(*shape));
  // Shape-15 start/end: clamped slice of the dims, negative values counting from the back.
  int64_t rank = static_cast<int64_t>(shape->size());
  auto clamp = [&](int64_t v) {
    if (v < 0) v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  };
  int64_t start = clamp(n.GetInt("start", 0));
  int64_t end = n.HasAttribute("end") ? clamp(n.GetInt("end", rank)) : rank;
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back((*shape)[i]);
  Tensor t = Tensor::Allocate(DataType::kInt64, {static_cast<int64_t>(dims.size())});
  std::copy(dims.begin(), dims.end(), t.data<int64_t>());
  return t;
}

}  // namespace

StatusOr<int> ConstantFolding::Run(Graph& graph) const {
  GraphEditor ed(graph);
  Model mini;
  mini.opsets = opsets_;
  int fired = 0;
  for (Node* n : ed.Nodes()) {
    bool produces_output = false;
    for (const auto& o : n->outputs) produces_output = produces_output || ed.IsGraphOutput(o);
    if (produces_output || !Foldable(*n)) continue;

    std::vector<Tensor> results;
    if (Tensor shape = FoldShapeQuery(ed, *n); shape.defined()) {
      results.push_back(std::move(shape));
    } else {
      bool all_constant = true;
      for (const auto& in : n->inputs)
        all_constant = all_constant && (in.empty() || ed.Constant(in));
      if (!all_constant) continue;
      int64_t opset = mini.OpsetFor(n->domain);
      if (provider_ == nullptr || !provider_->SupportsNode(*n, opset)) continue;
      std::optional<Shape> known =
          n->outputs.empty() ? std::nullopt : ed.StaticShape(n->outputs[0]);
      DataType known_type =
          n->outputs.empty() ? DataType::kUndefined : graph.ValueType(n->outputs[0]);
      if (known && known_type != DataType::kUndefined &&
          NumElements(*known) * static_cast<int64_t>(SizeOf(known_type)) > max_output_bytes_) {
        continue;
      }
      // Run the node alone: its constant inputs are the initializers of a one-node graph.
      Graph& g = mini.graph;
      g = Graph();
      g.name = "fold";
      for (const auto& in : n->inputs) {
        if (!in.empty()) g.initializers[in] = *ed.Constant(in);
      }
      Node* copy = g.AddNode(n->op_type, n->inputs, n->outputs, n->name);
      copy->domain = n->domain;
      copy->attributes = n->attributes;
      for (const auto& o : n->outputs) {
        if (o.empty()) continue;
        ValueInfo vi;
        vi.name = o;
        g.outputs.push_back(vi);
      }
      ExecutorOptions opts;
      opts.num_threads = 1;
      auto executor = GraphExecutor::Create(g, mini, provider_, opts);
      if (!executor.ok()) continue;
      if (!(*executor)->Run({}, &results).ok()) continue;
      bool too_big = false;
      for (const Tensor& t : results) {
        too_big = too_big || static_cast<int64_t>(t.ByteSize()) > max_output_bytes_;
      }
      if (too_big) continue;
    }

    size_t r = 0;
    for (const auto& o : n->outputs) {
      if (o.empty()) continue;
      graph.initializers[o] = std::move(results[r++]);
      graph.value_info.erase(o);
    }
    ed.RemoveNode(n);
    ++fired;
  }
  RETURN_IF_ERROR(ed.Commit());
  return fired;
}

}  // namespace inferd
