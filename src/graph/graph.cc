#include "graph/graph.h"

#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

namespace inferd {

std::string ValueInfo::ShapeString() const {
  if (!shape) return "?";
  std::string s = "[";
  for (size_t i = 0; i < shape->size(); ++i) {
    if (i) s += ", ";
    const Dim& d = (*shape)[i];
    s += d.known() ? std::to_string(d.value) : (d.param.empty() ? "?" : d.param);
  }
  return s + "]";
}

const Attribute* Node::FindAttribute(const std::string& key) const {
  auto it = attributes.find(key);
  return it == attributes.end() ? nullptr : &it->second;
}

int64_t Node::GetInt(const std::string& key, int64_t def) const {
  const Attribute* a = FindAttribute(key);
  return a ? a->i : def;
}

float Node::GetFloat(const std::string& key, float def) const {
  const Attribute* a = FindAttribute(key);
  return a ? a->f : def;
}

std::string Node::GetString(const std::string& key, const std::string& def) const {
  const Attribute* a = FindAttribute(key);
  return a ? a->s : def;
}

std::vector<int64_t> Node::GetInts(const std::string& key, std::vector<int64_t> def) const {
  const Attribute* a = FindAttribute(key);
  return a ? a->ints : def;
}

std::vector<float> Node::GetFloats(const std::string& key, std::vector<float> def) const {
  const Attribute* a = FindAttribute(key);
  return a ? a->floats : def;
}

const Tensor* Node::GetTensor(const std::string& key) const {
  const Attribute* a = FindAttribute(key);
  return a && a->type == Attribute::Type::kTensor ? &a->t : nullptr;
}

std::shared_ptr<Graph> Node::GetGraph(const std::string& key) const {
  const Attribute* a = FindAttribute(key);
  return a ? a->g : nullptr;
}

size_t Node::NumInputs() const {
  size_t n = inputs.size();
  while (n > 0 && inputs[n - 1].empty()) --n;
  return n;
}

std::string Node::Describe() const {
  std::string op = domain.empty() || domain == "ai.onnx" ? op_type : domain + "." + op_type;
  return name.empty() ? fmt::format("{} (output '{}')", op, outputs.empty() ? "" : outputs[0])
                      : fmt::format("{} '{}'", op, name);
}

Node* Graph::AddNode(std::string op_type, std::vector<std::string> in,
                     std::vector<std::string> out, std::string node_name) {
  auto n = std::make_unique<Node>();
  n->op_type = std::move(op_type);
  n->inputs = std::move(in);
  n->outputs = std::move(out);
  n->name = std::move(node_name);
  nodes.push_back(std::move(n));
  return nodes.back().get();
}

Status Graph::TopologicalSort(const std::vector<std::string>& outer_scope) {
  std::unordered_set<std::string> available(outer_scope.begin(), outer_scope.end());
  for (const auto& vi : inputs) available.insert(vi.name);
  for (const auto& [k, v] : initializers) available.insert(k);

  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const auto& o : nodes[i]->outputs) {
      if (!o.empty()) producer[o] = i;
    }
  }
  // Kahn's algorithm; a node's dependencies are the producers of its inputs, including values used
  // inside its subgraphs (captured from this scope).
  std::vector<std::vector<size_t>> users(nodes.size());
  std::vector<size_t> pending(nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::set<size_t> deps;
    auto add_dep = [&](const std::string& v) -> Status {
      if (v.empty() || available.count(v)) return Status::Ok();
      auto it = producer.find(v);
      if (it == producer.end()) {
        return InvalidArgument("{} uses value '{}' that no node produces and is not a graph input "
                               "or initializer", nodes[i]->Describe(), v);
      }
      if (it->second != i) deps.insert(it->second);
      return Status::Ok();
    };
    for (const auto& in : nodes[i]->inputs) RETURN_IF_ERROR(add_dep(in));
    for (const auto& [key, attr] : nodes[i]->attributes) {
      std::vector<std::shared_ptr<Graph>> subs = attr.graphs;
      if (attr.g) subs.push_back(attr.g);
      for (const auto& sub : subs) {
        for (const auto& v : sub->OuterScopeValues()) {
          if (producer.count(v) || available.count(v)) RETURN_IF_ERROR(add_dep(v));
        }
      }
    }
    pending[i] = deps.size();
    for (size_t d : deps) users[d].push_back(i);
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (pending[i] == 0) ready.push(i);
  }
  std::vector<std::unique_ptr<Node>> sorted;
  sorted.reserve(nodes.size());
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t u : users[i]) {
      if (--pending[u] == 0) ready.push(u);
    }
  }
  if (order.size() != nodes.size()) {
    return InvalidArgument("graph '{}' has a cycle", name);
  }
  for (size_t i : order) sorted.push_back(std::move(nodes[i]));
  nodes = std::move(sorted);
  return Status::Ok();
}

const ValueInfo* Graph::FindValueInfo(const std::string& value) const {
  for (const auto& vi : inputs) {
    if (vi.name == value) return &vi;
  }
  for (const auto& vi : outputs) {
    if (vi.name == value) return &vi;
  }
  auto it = value_info.find(value);
  return it == value_info.end() ? nullptr : &it->second;
}

DataType Graph::ValueType(const std::string& value) const {
  auto it = initializers.find(value);
  if (it != initializers.end()) return it->second.dtype();
  const ValueInfo* vi = FindValueInfo(value);
  return vi ? vi->dtype : DataType::kUndefined;
}

bool Graph::IsGraphInput(const std::string& value) const {
  for (const auto& vi : inputs) {
    if (vi.name == value) return true;
  }
  return false;
}

bool Graph::IsGraphOutput(const std::string& value) const {
  for (const auto& vi : outputs) {
    if (vi.name == value) return true;
  }
  return false;
}

std::vector<std::string> Graph::OuterScopeValues() const {
  std::unordered_set<std::string> defined;
  for (const auto& vi : inputs) defined.insert(vi.name);
  for (const auto& [k, v] : initializers) defined.insert(k);
  for (const auto& n : nodes) {
    for (const auto& o : n->outputs) defined.insert(o);
  }
  std::vector<std::string> outer;
  std::unordered_set<std::string> seen;
  auto visit = [&](const std::string& v) {
    if (!v.empty() && !defined.count(v) && seen.insert(v).second) outer.push_back(v);
  };
  for (const auto& n : nodes) {
    for (const auto& in : n->inputs) visit(in);
    for (const auto& [key, attr] : n->attributes) {
      std::vector<std::shared_ptr<Graph>> subs = attr.graphs;
      if (attr.g) subs.push_back(attr.g);
      for (const auto& sub : subs) {
        for (const auto& v : sub->OuterScopeValues()) visit(v);
      }
    }
  }
  for (const auto& vi : outputs) visit(vi.name);
  return outer;
}

int64_t Model::OpsetFor(const std::string& domain) const {
  auto it = opsets.find(domain);
  if (it == opsets.end() && domain == "ai.onnx") it = opsets.find("");
  return it == opsets.end() ? 0 : it->second;
}

}  // namespace inferd
