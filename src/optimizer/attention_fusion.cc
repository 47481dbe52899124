#include "optimizer/attention_fusion.h"

#include "optimizer/fusion_util.h"

namespace inferd {
namespace {

// Element `i` of an int64 constant with `n` elements; nullopt otherwise.
std::optional<int64_t> IntAt(const GraphEditor& ed, const std::string& v, int64_t n, int64_t i) {
  const Tensor* t = ed.Constant(v);
  if (t == nullptr || t->dtype() != DataType::kInt64 || t->NumElements() != n) return std::nullopt;
  return t->data<int64_t>()[i];
}

// The last `count` entries of a 1-D target shape of `total` entries, when they are constants: the
// shape is a constant, or a Concat (axis 0) whose trailing inputs are one-element constants.
std::optional<std::vector<int64_t>> TrailingShape(const GraphEditor& ed, const std::string& shape,
                                                  int64_t total, int64_t count) {
  std::vector<int64_t> out;
  if (ed.Constant(shape) != nullptr) {
    for (int64_t i = total - count; i < total; ++i) {
      std::optional<int64_t> v = IntAt(ed, shape, total, i);
      if (!v) return std::nullopt;
      out.push_back(*v);
    }
    return out;
  }
  Node* cat = ed.Producer(shape);
  if (!IsStandardOp(cat, "Concat") || cat->GetInt("axis", 0) != 0 ||
      static_cast<int64_t>(cat->inputs.size()) != total) {
    return std::nullopt;  // each part one element: total parts
  }
  for (int64_t i = total - count; i < total; ++i) {
    std::optional<int64_t> v = IntAt(ed, cat->inputs[i], 1, 0);
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

bool HasPerm(const Node* n, const std::vector<int64_t>& perm) {
  return IsStandardOp(n, "Transpose") && n->GetInts("perm") == perm;
}

// One head split: `value` = Transpose(Reshape(src, [B, S, H, D]), perm). Fills src, H, D and
// appends the nodes.
struct HeadSplit {
  std::string src;
  int64_t heads = 0, size = 0;
};
std::optional<HeadSplit> MatchSplit(const GraphEditor& ed, const std::string& value,
                                    const std::vector<int64_t>& perm, std::vector<Node*>* nodes) {
  Node* t = ed.Producer(value);
  if (!HasPerm(t, perm) || ed.SoleConsumer(value) == nullptr) return std::nullopt;
  Node* r = ed.Producer(t->inputs[0]);
  if (!IsStandardOp(r, "Reshape") || r->NumInputs() != 2 ||
      ed.SoleConsumer(t->inputs[0]) != t) {
    return std::nullopt;
  }
  std::optional<std::vector<int64_t>> hd = TrailingShape(ed, r->inputs[1], 4, 2);
  if (!hd || (*hd)[0] <= 0 || (*hd)[1] <= 0 || ed.Rank(r->inputs[0]) != 3u) return std::nullopt;
  nodes->insert(nodes->end(), {t, r});
  return HeadSplit{r->inputs[0], (*hd)[0], (*hd)[1]};
}

// K's split into Kᵀ per head: perm [0, 2, 3, 1] at once, or [0, 2, 1, 3] then [0, 1, 3, 2].
std::optional<HeadSplit> MatchKeySplit(const GraphEditor& ed, const std::string& value,
                                       std::vector<Node*>* nodes) {
  if (auto s = MatchSplit(ed, value, {0, 2, 3, 1}, nodes)) return s;
  Node* t = ed.Producer(value);
  if (!HasPerm(t, {0, 1, 3, 2}) || ed.SoleConsumer(value) == nullptr) return std::nullopt;
  std::optional<HeadSplit> s = MatchSplit(ed, t->inputs[0], {0, 2, 1, 3}, nodes);
  if (s) nodes->push_back(t);
  return s;
}

Attribute FloatAttr(float v) {
  Attribute a;
  a.type = Attribute::Type::kFloat;
  a.f = v;
  return a;
}

// Backwards from the Softmax: [Add(·, mask)] ← [Div/Mul by c] ← MatMul(Qh, Kt).
struct Scores {
  Node* qk = nullptr;
  std::string mask;  // empty when unmasked
  float scale = 1.f;
};
std::optional<Scores> MatchScores(const GraphEditor& ed, Node* sm, std::vector<Node*>* nodes) {
  Scores out;
  std::string scores = sm->inputs[0];
  Node* p = ed.Producer(scores);
  if (p == nullptr || ed.SoleConsumer(scores) != sm) return std::nullopt;
  if (IsStandardOp(p, "Add") && p->NumInputs() == 2) {
    bool found = false;
    for (size_t i = 0; i < 2 && !found; ++i) {
      Node* s = ed.Producer(p->inputs[i]);
      if (IsStandardOp(s, "Div") || IsStandardOp(s, "Mul") || IsStandardOp(s, "MatMul")) {
        scores = p->inputs[i];
        out.mask = p->inputs[1 - i];
        found = out.mask != scores;
      }
    }
    if (!found || ed.SoleConsumer(scores) != p) return std::nullopt;
    nodes->push_back(p);
    p = ed.Producer(scores);
  }
  if (IsStandardOp(p, "Div") || IsStandardOp(p, "Mul")) {
    std::optional<float> c = p->NumInputs() == 2 ? ScalarConstant(ed, p->inputs[1])
                                                  : std::nullopt;
    if (!c || *c == 0.f) return std::nullopt;
    out.scale = p->op_type == "Div" ? 1.f / *c : *c;
    if (ed.SoleConsumer(p->inputs[0]) != p) return std::nullopt;
    nodes->push_back(p);
    p = ed.Producer(p->inputs[0]);
  }
  if (!IsStandardOp(p, "MatMul") || p->NumInputs() != 2) return std::nullopt;
  out.qk = p;
  nodes->push_back(p);
  return out;
}

// Forwards from the Softmax: MatMul(P, Vh) → Transpose [0, 2, 1, 3] → Reshape [B, S, H·Dv].
// Returns the Reshape (null without a match) and sets `v`; appends the nodes but the Reshape.
Node* MatchContext(const GraphEditor& ed, Node* sm, std::vector<Node*>* nodes,
                   std::optional<HeadSplit>* v) {
  Node* pv = ed.SoleConsumer(sm->outputs[0]);
  if (!IsStandardOp(pv, "MatMul") || pv->inputs[0] != sm->outputs[0]) return nullptr;
  nodes->push_back(pv);
  *v = MatchSplit(ed, pv->inputs[1], {0, 2, 1, 3}, nodes);
  if (!*v) return nullptr;
  Node* merge = ed.SoleConsumer(pv->outputs[0]);
  if (!HasPerm(merge, {0, 2, 1, 3})) return nullptr;
  nodes->push_back(merge);
  Node* out = nullptr;
  for (Node* c : ed.Consumers(merge->outputs[0])) {
    if (IsStandardOp(c, "Reshape") && c->NumInputs() == 2 && c->inputs[0] == merge->outputs[0]) {
      out = c;
    }
  }
  return out;
}

}  // namespace

bool AttentionFusion::Match(const GraphEditor& ed, const Node& sm) const {
  if (!IsStandardOp(&sm, "Softmax") || sm.inputs.size() != 1) return false;
  const int64_t axis = sm.GetInt("axis", -1);
  if (axis != -1 && axis != 3) return false;
  return axis == -1 || ed.Rank(sm.inputs[0]) == 4u;
}

bool AttentionFusion::Rewrite(GraphEditor& ed, Node* sm) const {
  std::vector<Node*> nodes = {sm};
  std::optional<Scores> scores = MatchScores(ed, sm, &nodes);
  if (!scores) return false;
  const std::string mask = scores->mask;
  Node* qk = scores->qk;
  std::optional<HeadSplit> q = MatchSplit(ed, qk->inputs[0], {0, 2, 1, 3}, &nodes);
  std::optional<HeadSplit> k = q ? MatchKeySplit(ed, qk->inputs[1], &nodes) : std::nullopt;
  if (!q || !k) return false;
  std::optional<HeadSplit> v;
  Node* out = MatchContext(ed, sm, &nodes, &v);
  if (out == nullptr) return false;
  std::optional<std::vector<int64_t>> last = TrailingShape(ed, out->inputs[1], 3, 1);
  const int64_t h = q->heads;
  if (!last || ((*last)[0] != h * v->size && (*last)[0] != -1)) return false;
  if (k->heads != h || v->heads != h || k->size != q->size) return false;
  if (ed.graph().ValueType(q->src) != DataType::kFloat32) return false;
  nodes.push_back(out);
  std::vector<std::string> keep = {q->src, k->src, v->src, out->outputs[0]};
  if (!mask.empty()) keep.push_back(mask);
  std::optional<std::vector<Node*>> cone = DeadCone(ed, nodes, keep);
  if (!cone) return false;
  for (Node* n : *cone) {
    if (n != out) ed.RemoveNode(n);
  }
  ed.EditNode(out, [&](Node& n) {
    n.op_type = "Attention";
    n.domain = kInferdDomain;
    n.inputs = {q->src, k->src, v->src};
    if (!mask.empty()) n.inputs.push_back(mask);
    n.attributes.clear();
    n.attributes["num_heads"] = IntAttr(h);
    n.attributes["scale"] = FloatAttr(scores->scale);
  });
  return true;
}

}  // namespace inferd
