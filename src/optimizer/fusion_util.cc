#include "optimizer/fusion_util.h"

#include <cmath>
#include <unordered_set>

namespace inferd {

Attribute IntAttr(int64_t v) {
  Attribute a;
  a.type = Attribute::Type::kInt;
  a.i = v;
  return a;
}

bool IsStandardOp(const Node* node, const char* op_type) {
  return node != nullptr && node->op_type == op_type &&
         (node->domain.empty() || node->domain == "ai.onnx");
}

bool IsInferdOp(const Node* node, const char* op_type) {
  return node != nullptr && node->op_type == op_type && node->domain == kInferdDomain;
}

std::optional<float> ScalarConstant(const GraphEditor& ed, const std::string& value) {
  const Tensor* t = ed.Constant(value);
  if (t == nullptr || t->dtype() != DataType::kFloat32 || t->NumElements() != 1) {
    return std::nullopt;
  }
  return t->data<float>()[0];
}

bool IsScalarNear(const GraphEditor& ed, const std::string& value, float want, float rtol) {
  std::optional<float> v = ScalarConstant(ed, value);
  return v && std::fabs(*v - want) <= rtol * std::fabs(want);
}

std::string OtherInput(const Node& node, const std::string& one) {
  if (node.inputs.size() != 2) return "";
  if (node.inputs[0] == one && node.inputs[1] != one) return node.inputs[1];
  if (node.inputs[1] == one && node.inputs[0] != one) return node.inputs[0];
  return "";
}

bool SameDeclaredShape(const Graph& graph, const std::string& a, const std::string& b) {
  const ValueInfo* va = graph.FindValueInfo(a);
  const ValueInfo* vb = graph.FindValueInfo(b);
  if (va == nullptr || vb == nullptr || !va->shape || !vb->shape) return false;
  const std::vector<Dim>& da = *va->shape;
  const std::vector<Dim>& db = *vb->shape;
  if (da.size() != db.size()) return false;
  for (size_t i = 0; i < da.size(); ++i) {
    if (da[i].known() && db[i].known()) {
      if (da[i].value != db[i].value) return false;
    } else if (da[i].known() || db[i].known() || da[i].param.empty() ||
               da[i].param != db[i].param) {
      return false;
    }
  }
  return true;
}

Node* SoleProducer(const GraphEditor& ed, const std::string& value, const char* op_type) {
  Node* p = ed.Producer(value);
  if (!IsStandardOp(p, op_type) || ed.SoleConsumer(value) == nullptr) return nullptr;
  return p;
}

void AbsorbConsumer(GraphEditor& ed, Node* producer, Node* consumer) {
  std::string old_out = producer->outputs[0];
  ed.RemoveNode(consumer);
  ed.RenameValue(old_out, consumer->outputs[0]);
}

std::optional<std::vector<Node*>> DeadCone(const GraphEditor& ed, const std::vector<Node*>& seeds,
                                           const std::vector<std::string>& keep) {
  std::unordered_set<Node*> doomed(seeds.begin(), seeds.end());
  std::unordered_set<std::string> kept(keep.begin(), keep.end());
  auto read_only_by_doomed = [&](const std::string& v) {
    if (v.empty()) return true;
    if (ed.IsGraphOutput(v) || kept.count(v)) return false;
    for (Node* c : ed.Consumers(v)) {
      if (!doomed.count(c)) return false;
    }
    return true;
  };
  // Grow the set backwards: a producer joins when all its outputs feed doomed nodes only.
  std::vector<Node*> order(seeds.begin(), seeds.end());
  std::vector<Node*> work(seeds.begin(), seeds.end());
  while (!work.empty()) {
    Node* n = work.back();
    work.pop_back();
    for (const std::string& in : n->inputs) {
      Node* p = in.empty() ? nullptr : ed.Producer(in);
      if (p == nullptr || doomed.count(p)) continue;
      bool dead = true;
      for (const std::string& out : p->outputs) dead = dead && read_only_by_doomed(out);
      if (dead) {
        doomed.insert(p);
        order.push_back(p);
        work.push_back(p);
      }
    }
  }
  for (Node* n : order) {
    for (const std::string& out : n->outputs) {
      if (!kept.count(out) && !read_only_by_doomed(out)) return std::nullopt;
    }
  }
  return order;
}

}  // namespace inferd
