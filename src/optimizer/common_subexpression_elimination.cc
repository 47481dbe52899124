#include "optimizer/common_subexpression_elimination.h"

#include <cstring>
#include <unordered_map>

#include "optimizer/graph_edit.h"
#include "optimizer/op_traits.h"

namespace inferd {
namespace {

void AppendTensor(const Tensor& t, std::string* key) {
  *key += std::to_string(static_cast<int>(t.dtype())) + ShapeToString(t.shape());
  if (t.is_string()) {  // length-prefixed, so ["ab", "c"] and ["a", "bc"] differ
    for (const std::string& s : t.values<std::string>()) *key += std::to_string(s.size()) + ':' + s;
    return;
  }
  key->append(static_cast<const char*>(t.raw_data()), t.ByteSize());
}

// A byte string equal for equal attributes (floats compared bitwise).
void AppendAttribute(const std::string& name, const Attribute& a, std::string* key) {
  *key += '\x1f' + name + '=' + std::to_string(static_cast<int>(a.type)) + ':';
  auto put = [&](const void* p, size_t n) { key->append(static_cast<const char*>(p), n); };
  switch (a.type) {
    case Attribute::Type::kFloat:
      put(&a.f, sizeof(a.f));
      break;
    case Attribute::Type::kInt:
      put(&a.i, sizeof(a.i));
      break;
    case Attribute::Type::kString:
      *key += std::to_string(a.s.size()) + ':' + a.s;
      break;
    case Attribute::Type::kTensor:
      AppendTensor(a.t, key);
      break;
    case Attribute::Type::kFloats:
      put(a.floats.data(), a.floats.size() * sizeof(float));
      break;
    case Attribute::Type::kInts:
      put(a.ints.data(), a.ints.size() * sizeof(int64_t));
      break;
    case Attribute::Type::kStrings:
      for (const auto& s : a.strings) *key += std::to_string(s.size()) + ':' + s;
      break;
    case Attribute::Type::kTensors:
      for (const auto& t : a.tensors) AppendTensor(t, key);
      break;
    default:
      break;
  }
}

bool Eligible(const Node& n) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return false;  // unknown semantics
  if (IsNondeterministicOp(n.op_type) || n.op_type == "Dropout") return false;
  for (const auto& [k, a] : n.attributes) {
    if (a.g || !a.graphs.empty()) return false;
  }
  return !n.outputs.empty();
}

}  // namespace

StatusOr<int> CommonSubexpressionElimination::Run(Graph& graph) const {
  GraphEditor ed(graph);
  std::unordered_map<std::string, Node*> seen;
  int fired = 0;
  for (Node* n : ed.Nodes()) {
    if (!Eligible(*n)) continue;
    std::string key = n->op_type + '\x1e' + std::to_string(n->outputs.size());
    for (const auto& in : n->inputs) key += '\x1e' + in;
    for (const auto& [name, a] : n->attributes) AppendAttribute(name, a, &key);
    auto [it, inserted] = seen.emplace(std::move(key), n);
    if (inserted) continue;
    Node* first = it->second;
    bool ok = true;
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      const std::string& o = n->outputs[i];
      if (o.empty()) continue;
      if (first->outputs[i].empty() || ed.IsGraphOutput(o)) ok = false;
    }
    if (!ok) continue;
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      if (!n->outputs[i].empty()) ed.ReplaceAllUses(n->outputs[i], first->outputs[i]);
    }
    ed.RemoveNode(n);
    ++fired;
  }
  RETURN_IF_ERROR(ed.Commit());
  return fired;
}

}  // namespace inferd
