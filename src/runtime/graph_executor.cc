#include "runtime/graph_executor.h"

#include <exception>
#include <unordered_set>

#include <fmt/format.h>

namespace inferd {
namespace {

class Frame final : public ExecutionFrame {
 public:
  Frame(const std::unordered_map<std::string, int>& slots, size_t n, const ExecutionFrame* parent)
      : slots_(slots), values(n), ptrs(n, nullptr), parent_(parent) {}

  const Tensor* Lookup(const std::string& name) const override {
    auto it = slots_.find(name);
    if (it != slots_.end() && ptrs[it->second] != nullptr) return ptrs[it->second];
    return parent_ ? parent_->Lookup(name) : nullptr;
  }

  const std::unordered_map<std::string, int>& slots_;
  std::vector<Tensor> values;        // tensors produced in this frame
  std::vector<const Tensor*> ptrs;   // current value of each slot (into values, inputs, constants)
  const ExecutionFrame* parent_;
};

}  // namespace

int GraphExecutor::SlotOf(const std::string& name) {
  auto [it, inserted] = slots_.emplace(name, static_cast<int>(slot_names_.size()));
  if (inserted) slot_names_.push_back(name);
  return it->second;
}

StatusOr<std::shared_ptr<GraphExecutor>> GraphExecutor::Create(
    const Graph& graph, const Model& model, std::shared_ptr<ExecutionProvider> provider,
    const ExecutorOptions& options, const std::vector<std::string>& outer_scope) {
  std::shared_ptr<GraphExecutor> ex(new GraphExecutor(graph, model));
  ex->options_ = options;
  ex->provider_ = provider;

  for (const ValueInfo& vi : graph.inputs) ex->input_slots_.push_back(ex->SlotOf(vi.name));
  std::unordered_set<int> input_set(ex->input_slots_.begin(), ex->input_slots_.end());
  for (const auto& [name, tensor] : graph.initializers) {
    int slot = ex->SlotOf(name);
    if (!input_set.count(slot)) ex->constant_slots_.emplace_back(slot, &tensor);
  }
  std::unordered_set<std::string> produced;
  for (const auto& n : graph.nodes) {
    for (const auto& o : n->outputs) {
      if (!o.empty()) produced.insert(o);
    }
  }
  std::unordered_set<std::string> outer(outer_scope.begin(), outer_scope.end());
  for (const std::string& name : graph.OuterScopeValues()) {
    if (!outer.count(name)) {
      return InvalidArgument("graph '{}' uses value '{}' that is never defined", graph.name, name);
    }
    ex->outer_slots_.push_back(ex->SlotOf(name));
  }

  auto make_subgraph = [weak = std::weak_ptr<GraphExecutor>(ex), &model, provider,
                        options](const Graph& sub) -> StatusOr<std::shared_ptr<GraphExecutor>> {
    return GraphExecutor::Create(sub, model, provider, options, sub.OuterScopeValues());
  };

  for (const auto& node_ptr : graph.nodes) {
    const Node& node = *node_ptr;
    int64_t opset = model.OpsetFor(node.domain);
    if (opset == 0 && !node.domain.empty() && node.domain != "ai.onnx") opset = 1;
    std::vector<DataType> types;
    for (const auto& in : node.inputs) types.push_back(graph.ValueType(in));
    ASSIGN_OR_RETURN(const KernelDef* def, provider->Registry().Find(node, opset, types));
    KernelInfo info(node, opset, graph, options.num_threads, make_subgraph);
    Step step;
    step.node = &node;
    StatusOr<std::unique_ptr<OpKernel>> kernel = [&]() -> StatusOr<std::unique_ptr<OpKernel>> {
      try {
        return def->factory(info);
      } catch (const std::exception& e) {
        return Internal("{}", e.what());
      }
    }();
    if (!kernel.ok()) return kernel.status().WithContext(node.Describe());
    step.kernel = std::move(kernel).value();
    for (const auto& in : node.inputs) step.inputs.push_back(in.empty() ? -1 : ex->SlotOf(in));
    for (const auto& out : node.outputs) step.outputs.push_back(out.empty() ? -1 : ex->SlotOf(out));
    ex->steps_.push_back(std::move(step));
  }
  for (const ValueInfo& vi : graph.outputs) {
    if (!ex->slots_.count(vi.name)) {
      return InvalidArgument("graph output '{}' is never produced", vi.name);
    }
    ex->output_slots_.push_back(ex->slots_.at(vi.name));
  }

  // Lifetimes: a slot produced by a step is released after its last consumer, unless it is a graph
  // output. Slots that are inputs, constants or captured values are never released.
  std::vector<int> last_use(ex->slot_names_.size(), -1);
  for (size_t s = 0; s < ex->steps_.size(); ++s) {
    for (int slot : ex->steps_[s].inputs) {
      if (slot >= 0) last_use[slot] = static_cast<int>(s);
    }
    // Values captured by subgraphs count as used by the node owning the subgraph.
    for (const auto& [key, attr] : ex->steps_[s].node->attributes) {
      std::vector<std::shared_ptr<Graph>> subs = attr.graphs;
      if (attr.g) subs.push_back(attr.g);
      for (const auto& sub : subs) {
        for (const auto& name : sub->OuterScopeValues()) {
          auto it = ex->slots_.find(name);
          if (it != ex->slots_.end()) last_use[it->second] = static_cast<int>(s);
        }
      }
    }
  }
  std::unordered_set<int> keep(ex->output_slots_.begin(), ex->output_slots_.end());
  for (size_t s = 0; s < ex->steps_.size(); ++s) {
    for (int slot : ex->steps_[s].outputs) {
      if (slot < 0 || keep.count(slot)) continue;
      int lu = last_use[slot];
      ex->steps_[lu >= 0 ? lu : s].release_after.push_back(slot);
    }
  }
  return ex;
}

Status GraphExecutor::Run(std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
                          const ExecutionFrame* parent) const {
  if (inputs.size() != input_slots_.size()) {
    return InvalidArgument("graph '{}' expects {} inputs, got {}", graph_.name,
                           input_slots_.size(), inputs.size());
  }
  Frame frame(slots_, slot_names_.size(), parent);
  for (const auto& [slot, tensor] : constant_slots_) frame.ptrs[slot] = tensor;
  for (size_t i = 0; i < inputs.size(); ++i) frame.ptrs[input_slots_[i]] = &inputs[i];
  for (int slot : outer_slots_) {
    const Tensor* t = parent ? parent->Lookup(slot_names_[slot]) : nullptr;
    if (t == nullptr) {
      return InvalidArgument("value '{}' captured by graph '{}' is not available",
                             slot_names_[slot], graph_.name);
    }
    frame.ptrs[slot] = t;
  }

  std::vector<const Tensor*> in_ptrs;
  std::vector<Tensor> out_vals;
  for (const Step& step : steps_) {
    in_ptrs.assign(step.inputs.size(), nullptr);
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      int slot = step.inputs[i];
      if (slot < 0) continue;
      in_ptrs[i] = frame.ptrs[slot];
      if (in_ptrs[i] == nullptr) {
        return Internal("{}: input '{}' has no value", step.node->Describe(), slot_names_[slot]);
      }
    }
    out_vals.assign(step.outputs.size(), Tensor());
    KernelContext ctx(*step.node, in_ptrs, out_vals, &frame, options_.num_threads);
    Status st;
    try {
      st = step.kernel->Compute(ctx);
    } catch (const std::exception& e) {
      st = Internal("{}", e.what());
    }
    if (!st.ok()) return st.WithContext(step.node->Describe());
    for (size_t o = 0; o < step.outputs.size(); ++o) {
      int slot = step.outputs[o];
      if (slot < 0) continue;
      if (!out_vals[o].defined()) {
        return Internal("{} did not produce output '{}'", step.node->Describe(),
                        slot_names_[slot]);
      }
      frame.values[slot] = std::move(out_vals[o]);
      frame.ptrs[slot] = &frame.values[slot];
    }
    for (int slot : step.release_after) {
      frame.values[slot] = Tensor();
      frame.ptrs[slot] = nullptr;
    }
  }

  outputs->clear();
  outputs->reserve(output_slots_.size());
  for (int slot : output_slots_) {
    const Tensor* t = frame.ptrs[slot];
    if (t == nullptr) return Internal("graph output '{}' has no value", slot_names_[slot]);
    // Outputs never alias caller inputs, weights or parent frames: copy those.
    bool produced_here = t == &frame.values[slot];
    outputs->push_back(produced_here && t->owns_data() ? *t : t->Clone());
  }
  return Status::Ok();
}

}  // namespace inferd
