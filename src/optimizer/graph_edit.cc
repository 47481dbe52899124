#include "optimizer/graph_edit.h"

#include <algorithm>

namespace inferd {

GraphEditor::GraphEditor(Graph& graph) : graph_(graph) {
  for (const auto& vi : graph_.inputs) {
    inputs_.insert(vi.name);
    names_.insert(vi.name);
  }
  for (const auto& vi : graph_.outputs) {
    outputs_.insert(vi.name);
    names_.insert(vi.name);
  }
  for (const auto& [name, t] : graph_.initializers) names_.insert(name);
  for (const auto& [name, vi] : graph_.value_info) names_.insert(name);
  for (const auto& n : graph_.nodes) Index(n.get());
}

std::vector<std::string> GraphEditor::CapturedValues(const Node& node) {
  std::vector<std::string> captured;
  for (const auto& [key, attr] : node.attributes) {
    std::vector<std::shared_ptr<Graph>> subs = attr.graphs;
    if (attr.g) subs.push_back(attr.g);
    for (const auto& sub : subs) {
      for (auto& v : sub->OuterScopeValues()) captured.push_back(std::move(v));
    }
  }
  return captured;
}

void GraphEditor::Index(Node* node) {
  for (const auto& o : node->outputs) {
    if (o.empty()) continue;
    producer_[o] = node;
    names_.insert(o);
  }
  for (const auto& in : node->inputs) {
    if (in.empty()) continue;
    consumers_[in].push_back(node);
    names_.insert(in);
  }
  for (const auto& v : CapturedValues(*node)) {
    consumers_[v].push_back(node);
    names_.insert(v);
  }
}

void GraphEditor::Unindex(Node* node) {
  for (const auto& o : node->outputs) {
    auto it = producer_.find(o);
    if (it != producer_.end() && it->second == node) producer_.erase(it);
  }
  auto drop = [&](const std::string& v) {
    auto it = consumers_.find(v);
    if (it == consumers_.end()) return;
    auto& list = it->second;
    list.erase(std::remove(list.begin(), list.end(), node), list.end());
  };
  for (const auto& in : node->inputs) drop(in);
  for (const auto& v : CapturedValues(*node)) drop(v);
}

std::vector<Node*> GraphEditor::Nodes() const {
  std::vector<Node*> out;
  out.reserve(graph_.nodes.size());
  for (const auto& n : graph_.nodes) {
    if (!removed_.count(n.get())) out.push_back(n.get());
  }
  return out;
}

Node* GraphEditor::Producer(const std::string& value) const {
  auto it = producer_.find(value);
  return it == producer_.end() ? nullptr : it->second;
}

std::vector<Node*> GraphEditor::Consumers(const std::string& value) const {
  std::vector<Node*> out;
  auto it = consumers_.find(value);
  if (it == consumers_.end()) return out;
  for (Node* n : it->second) {
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  }
  return out;
}

Node* GraphEditor::SoleConsumer(const std::string& value) const {
  if (value.empty() || IsGraphOutput(value)) return nullptr;
  auto it = consumers_.find(value);
  if (it == consumers_.end() || it->second.size() != 1) return nullptr;
  Node* n = it->second[0];
  // A captured use (inside a subgraph) is not a plain input read.
  if (std::count(n->inputs.begin(), n->inputs.end(), value) != 1) return nullptr;
  return n;
}

bool GraphEditor::IsUsed(const std::string& value) const {
  if (IsGraphOutput(value)) return true;
  auto it = consumers_.find(value);
  return it != consumers_.end() && !it->second.empty();
}

const Tensor* GraphEditor::Constant(const std::string& value) const {
  if (value.empty() || inputs_.count(value)) return nullptr;
  auto it = graph_.initializers.find(value);
  return it == graph_.initializers.end() ? nullptr : &it->second;
}

std::optional<Shape> GraphEditor::StaticShape(const std::string& value) const {
  if (const Tensor* t = Constant(value)) return t->shape();
  if (value.empty() || graph_.IsInitializer(value)) return std::nullopt;  // shadowed: any shape
  const ValueInfo* vi = graph_.FindValueInfo(value);
  if (vi == nullptr || !vi->shape) return std::nullopt;
  Shape shape;
  for (const Dim& d : *vi->shape) {
    if (!d.known()) return std::nullopt;
    shape.push_back(d.value);
  }
  return shape;
}

std::optional<size_t> GraphEditor::Rank(const std::string& value) const {
  if (const Tensor* t = Constant(value)) return t->shape().size();
  if (value.empty() || graph_.IsInitializer(value)) return std::nullopt;
  const ValueInfo* vi = graph_.FindValueInfo(value);
  if (vi == nullptr || !vi->shape) return std::nullopt;
  return vi->shape->size();
}

void RenameCapturedValue(Graph& subgraph, const std::string& from, const std::string& to) {
  for (const auto& vi : subgraph.inputs) {
    if (vi.name == from) return;
  }
  if (subgraph.initializers.count(from)) return;
  for (const auto& n : subgraph.nodes) {
    if (std::find(n->outputs.begin(), n->outputs.end(), from) != n->outputs.end()) return;
  }
  for (auto& vi : subgraph.outputs) {
    if (vi.name == from) vi.name = to;
  }
  for (auto& n : subgraph.nodes) {
    for (auto& in : n->inputs) {
      if (in == from) in = to;
    }
    for (auto& [key, attr] : n->attributes) {
      if (attr.g) RenameCapturedValue(*attr.g, from, to);
      for (auto& g : attr.graphs) RenameCapturedValue(*g, from, to);
    }
  }
}

void GraphEditor::ReplaceAllUses(const std::string& from, const std::string& to) {
  if (from == to) return;
  for (Node* n : Consumers(from)) {
    Unindex(n);
    for (auto& in : n->inputs) {
      if (in == from) in = to;
    }
    for (auto& [key, attr] : n->attributes) {
      if (attr.g) RenameCapturedValue(*attr.g, from, to);
      for (auto& g : attr.graphs) RenameCapturedValue(*g, from, to);
    }
    Index(n);
  }
}

void GraphEditor::RenameValue(const std::string& from, const std::string& to) {
  if (from == to) return;
  if (Node* p = Producer(from)) {
    Unindex(p);
    for (auto& o : p->outputs) {
      if (o == from) o = to;
    }
    Index(p);
  }
  ReplaceAllUses(from, to);
  auto it = graph_.value_info.find(from);
  if (it != graph_.value_info.end()) {
    if (!graph_.value_info.count(to) && !IsGraphOutput(to)) {
      ValueInfo vi = it->second;
      vi.name = to;
      graph_.value_info[to] = std::move(vi);
    }
    graph_.value_info.erase(from);
  }
  names_.insert(to);
}

bool GraphEditor::BypassNode(Node* node, const std::string& in, const std::string& out) {
  if (in.empty() || out.empty() || in == out) return false;
  if (!IsGraphOutput(out)) {
    ReplaceAllUses(out, in);
    RemoveNode(node);
    return true;
  }
  // `out` must keep its name: make the producer of `in` produce `out` directly. That is only
  // legal when `in` is an ordinary intermediate (not a graph input, initializer or output).
  Node* p = Producer(in);
  if (p == nullptr || IsGraphOutput(in) || IsGraphInput(in) || graph_.IsInitializer(in)) {
    return false;
  }
  RemoveNode(node);
  RenameValue(in, out);
  return true;
}

void GraphEditor::RemoveNode(Node* node) {
  if (removed_.insert(node).second) Unindex(node);
}

void GraphEditor::EditNode(Node* node, const std::function<void(Node&)>& edit) {
  Unindex(node);
  edit(*node);
  Index(node);
}

std::string GraphEditor::UniqueValueName(const std::string& base) {
  std::string name = base;
  for (int i = 1; names_.count(name) || graph_.initializers.count(name); ++i) {
    name = base + "_" + std::to_string(i);
  }
  names_.insert(name);
  return name;
}

std::string GraphEditor::AddInitializer(const std::string& base, Tensor value) {
  std::string name = UniqueValueName(base);
  graph_.initializers[name] = std::move(value);
  return name;
}

Status GraphEditor::Commit() {
  if (removed_.empty()) return Status::Ok();
  auto& nodes = graph_.nodes;
  nodes.erase(
      std::remove_if(nodes.begin(), nodes.end(),
                     [&](const std::unique_ptr<Node>& n) { return removed_.count(n.get()); }),
      nodes.end());
  removed_.clear();
  return Status::Ok();
}

}  // namespace inferd
