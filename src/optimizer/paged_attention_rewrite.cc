#include "optimizer/paged_attention_rewrite.h"

#include <fmt/format.h>

#include <set>

#include "optimizer/dead_node_elimination.h"
#include "optimizer/fusion_util.h"
#include "optimizer/graph_edit.h"

namespace inferd {

std::string KeyCacheInput(int layer) { return fmt::format("inferd.key_cache.{}", layer); }
std::string ValueCacheInput(int layer) { return fmt::format("inferd.value_cache.{}", layer); }
std::string KeyScalesInput(int layer) { return fmt::format("inferd.key_scales.{}", layer); }
std::string ValueScalesInput(int layer) { return fmt::format("inferd.value_scales.{}", layer); }

namespace {

constexpr char kAttentionMask[] = "attention_mask";
constexpr int kMaxChain = 32;  // layout ops between a Concat and its MatMul; far more than real

std::string PastName(int layer, const char* kv) {
  return fmt::format("past_key_values.{}.{}", layer, kv);
}
std::string PresentName(int layer, const char* kv) {
  return fmt::format("present.{}.{}", layer, kv);
}

// Ops that only move or repeat data: what sits between the cache Concat and the attention
// MatMuls (K's transpose, GQA's Unsqueeze/Expand/Reshape repeat).
bool IsLayoutOp(const Node* n) {
  for (const char* op :
       {"Transpose", "Reshape", "Unsqueeze", "Squeeze", "Expand", "Tile", "Identity"}) {
    if (IsStandardOp(n, op)) return true;
  }
  return false;
}

// A one-element float constant: an initializer or (before constant folding) a Constant node.
std::optional<float> ScalarValue(const GraphEditor& ed, const std::string& value) {
  if (std::optional<float> c = ScalarConstant(ed, value)) return c;
  Node* p = ed.Producer(value);
  if (!IsStandardOp(p, "Constant")) return std::nullopt;
  const Tensor* t = p->GetTensor("value");
  if (t == nullptr || t->NumElements() != 1 || t->dtype() != DataType::kFloat32) {
    return std::nullopt;
  }
  return *t->data<float>();
}

// For Mul/Div reading `value` and a scalar constant: the factor it applies (Div: only `value`
// divided by the constant). nullopt for anything else.
std::optional<float> ScaleFactor(const GraphEditor& ed, const Node* n, const std::string& value) {
  const bool mul = IsStandardOp(n, "Mul"), div = IsStandardOp(n, "Div");
  if ((!mul && !div) || n->NumInputs() != 2) return std::nullopt;
  if (div && n->inputs[0] != value) return std::nullopt;
  std::optional<float> c = ScalarValue(ed, OtherInput(*n, value));
  if (!c || *c == 0.f) return std::nullopt;
  return div ? 1.f / *c : *c;
}

// The one reader of `value` that uses its data (Shape nodes, which read only its shape, and
// graph outputs are not counted); null when there is none or more than one.
Node* DataConsumer(const GraphEditor& ed, const std::string& value) {
  Node* only = nullptr;
  for (Node* c : ed.Consumers(value)) {
    if (IsStandardOp(c, "Shape")) continue;
    if (only != nullptr) return nullptr;
    only = c;
  }
  return only;
}

// Follows `value` (a layer's full K or V) through layout ops and scalar factors to the MatMul
// reading it as its second input; multiplies the factors into *scale.
StatusOr<Node*> FollowToMatMul(const GraphEditor& ed, std::string value, const std::string& what,
                               float* scale) {
  for (int step = 0; step < kMaxChain; ++step) {
    Node* c = DataConsumer(ed, value);
    if (c == nullptr || (step > 0 && ed.IsGraphOutput(value))) {
      return FailedPrecondition("{} ('{}') is not read by exactly one attention MatMul", what,
                                value);
    }
    if (IsStandardOp(c, "MatMul") && c->inputs.size() == 2 && c->inputs[1] == value &&
        c->inputs[0] != value) {
      return c;
    }
    if (std::optional<float> f = ScaleFactor(ed, c, value)) {
      *scale *= *f;
    } else if (!IsLayoutOp(c) || c->inputs[0] != value) {
      return FailedPrecondition("{} ('{}') reaches {}, not an attention MatMul", what, value,
                                c->Describe());
    }
    value = c->outputs[0];
  }
  return FailedPrecondition("{} passes through more than {} layout ops", what, kMaxChain);
}

// One layer's attention as matched, before any edit.
struct LayerMatch {
  std::string q, k_new, v_new;
  Node* context = nullptr;  // MatMul(P, V): becomes the PagedAttention node
  float scale = 1.f;
};

// The Concat(past, new, axis=2) that extends a layer's cache; returns it and sets *new_value.
StatusOr<Node*> FindCacheConcat(const GraphEditor& ed, const std::string& past,
                                std::string* new_value) {
  if (!ed.IsGraphInput(past)) return FailedPrecondition("the graph has no input '{}'", past);
  for (Node* c : ed.Consumers(past)) {
    if (!IsStandardOp(c, "Concat")) continue;
    const int64_t axis = c->GetInt("axis", 0);
    if (c->inputs.size() != 2 || c->inputs[0] != past || (axis != 2 && axis != -2)) {
      return FailedPrecondition("'{}' is extended by {}, not Concat(past, new, axis=2)", past,
                                c->Describe());
    }
    *new_value = c->inputs[1];
    return c;
  }
  return FailedPrecondition("'{}' is not extended by a Concat (no KV-cache layout)", past);
}

// From the scores MatMul forward: scalar factors, mask Add/Where, Casts, to the Softmax over the
// last axis; returns the Softmax's (possibly cast) output.
StatusOr<std::string> FollowScores(const GraphEditor& ed, Node* qk, int layer, float* scale) {
  std::string value = qk->outputs[0];
  for (int step = 0; step < kMaxChain; ++step) {
    Node* c = DataConsumer(ed, value);
    if (c == nullptr || ed.IsGraphOutput(value)) {
      return FailedPrecondition("layer {}: the attention scores '{}' are read outside attention",
                                layer, value);
    }
    if (std::optional<float> f = ScaleFactor(ed, c, value)) {
      *scale *= *f;
    } else if (IsStandardOp(c, "Softmax")) {
      const int64_t axis = c->GetInt("axis", -1);
      if (axis != -1 && axis != 3) {
        return FailedPrecondition("layer {}: {} is not over the last axis", layer, c->Describe());
      }
      value = c->outputs[0];
      Node* cast = DataConsumer(ed, value);
      return IsStandardOp(cast, "Cast") ? cast->outputs[0] : value;
    } else if (!IsStandardOp(c, "Add") && !IsStandardOp(c, "Cast") &&
               !(IsStandardOp(c, "Where") && c->inputs[0] != value)) {
      return FailedPrecondition("layer {}: the attention scores reach {}, not a mask or Softmax",
                                layer, c->Describe());
    }
    value = c->outputs[0];
  }
  return FailedPrecondition("layer {}: no Softmax after the attention scores", layer);
}

StatusOr<LayerMatch> MatchLayer(const GraphEditor& ed, int layer) {
  LayerMatch m;
  ASSIGN_OR_RETURN(Node * kcat, FindCacheConcat(ed, PastName(layer, "key"), &m.k_new));
  ASSIGN_OR_RETURN(Node * vcat, FindCacheConcat(ed, PastName(layer, "value"), &m.v_new));
  ASSIGN_OR_RETURN(Node * qk, FollowToMatMul(ed, kcat->outputs[0],
                                             fmt::format("layer {}'s keys", layer), &m.scale));
  float v_scale = 1.f;
  ASSIGN_OR_RETURN(m.context, FollowToMatMul(ed, vcat->outputs[0],
                                             fmt::format("layer {}'s values", layer), &v_scale));
  if (v_scale != 1.f) {
    return FailedPrecondition("layer {}: the values are scaled before attention", layer);
  }
  ASSIGN_OR_RETURN(std::string probs, FollowScores(ed, qk, layer, &m.scale));
  if (m.context->inputs[0] != probs) {
    return FailedPrecondition("layer {}: {} does not multiply the attention probabilities '{}'",
                              layer, m.context->Describe(), probs);
  }
  m.q = qk->inputs[0];
  if (ed.graph().ValueType(m.q) != DataType::kFloat32 &&
      ed.graph().ValueType(m.q) != DataType::kUndefined) {
    return FailedPrecondition("layer {}: the query '{}' is not float32", layer, m.q);
  }
  return m;
}

Attribute FloatAttribute(float v) {
  Attribute a;
  a.type = Attribute::Type::kFloat;
  a.f = v;
  return a;
}

ValueInfo Input(std::string name, DataType dtype, std::vector<Dim> shape) {
  ValueInfo v;
  v.name = std::move(name);
  v.dtype = dtype;
  v.shape = std::move(shape);
  return v;
}

// Checks a declared dim of `value` (when known) against what the config says.
Status CheckDim(const Graph& g, const std::string& value, size_t axis, int want, const char* what) {
  const ValueInfo* vi = g.FindValueInfo(value);
  if (vi == nullptr || !vi->shape || vi->shape->size() != 4) return Status::Ok();
  const Dim& d = (*vi->shape)[axis];
  if (d.known() && d.value != want) {
    return FailedPrecondition("'{}' has {} {} where config.json says {}", value, d.value, what,
                              want);
  }
  return Status::Ok();
}

// The new graph inputs: the step's metadata and each layer's cache views.
void AddPagedInputs(Graph& g, const PagedAttentionRewriteOptions& o) {
  const Dim tokens{-1, "tokens"}, seqs{-1, "num_seqs"};
  g.inputs.push_back(Input(kSlotMappingInput, DataType::kInt64, {tokens}));
  g.inputs.push_back(Input(kQueryStartInput, DataType::kInt64, {Dim{-1, "num_seqs_plus_1"}}));
  g.inputs.push_back(Input(kContextLensInput, DataType::kInt64, {seqs}));
  g.inputs.push_back(
      Input(kBlockTablesInput, DataType::kInt64, {seqs, Dim{-1, "max_blocks_per_seq"}}));
  const std::vector<Dim> cache = {Dim{-1, "num_blocks"}, Dim{o.num_kv_heads, ""},
                                  Dim{o.block_size, ""}, Dim{o.head_dim, ""}};
  const DataType type = o.int8_cache ? DataType::kInt8 : DataType::kFloat32;
  const std::vector<Dim> scales(cache.begin(), cache.end() - 1);
  for (int l = 0; l < o.num_layers; ++l) {
    g.inputs.push_back(Input(KeyCacheInput(l), type, cache));
    g.inputs.push_back(Input(ValueCacheInput(l), type, cache));
    if (o.int8_cache) {
      g.inputs.push_back(Input(KeyScalesInput(l), DataType::kFloat32, scales));
      g.inputs.push_back(Input(ValueScalesInput(l), DataType::kFloat32, scales));
    }
  }
}

// The LM head on the requested rows only: Gather(hidden, inferd.logits_rows, axis=1) before the
// MatMul producing `logits`. Leaves the graph alone when `logits` has another producer.
Status GatherLogitsRows(Graph& g) {
  Node* head = nullptr;
  for (const auto& n : g.nodes) {
    for (const auto& o : n->outputs) {
      if (o == "logits") head = n.get();
    }
  }
  // A weight-only quantized head (ai.inferd.MatMulNBits) takes the gathered rows the same way.
  const bool nbits_head =
      head != nullptr && head->domain == kInferdDomain && head->op_type == "MatMulNBits";
  if (head == nullptr || (!IsStandardOp(head, "MatMul") && !nbits_head) ||
      !g.IsGraphOutput("logits")) {
    return Status::Ok();
  }
  GraphEditor ed(g);
  const std::string rows = ed.UniqueValueName(head->inputs[0] + "/logits_rows");
  Node* gather = g.AddNode("Gather", {head->inputs[0], kLogitsRowsInput}, {rows},
                           head->name + "/gather_logits_rows");
  gather->attributes["axis"] = IntAttr(1);
  head->inputs[0] = rows;
  g.inputs.push_back(Input(kLogitsRowsInput, DataType::kInt64, {Dim{-1, "logits_rows"}}));
  for (auto& out : g.outputs) {
    if (out.name == "logits" && out.shape && out.shape->size() == 3) {
      (*out.shape)[1] = Dim{-1, "logits_rows"};
    }
  }
  return g.TopologicalSort();
}

Status CheckOptions(const PagedAttentionRewriteOptions& o) {
  if (o.num_layers <= 0 || o.num_heads <= 0 || o.num_kv_heads <= 0 || o.head_dim <= 0 ||
      o.block_size <= 0 || o.num_heads % o.num_kv_heads != 0) {
    return InvalidArgument(
        "paged attention needs layers, heads, kv heads (dividing heads), head_dim and block size "
        "> 0; got {} layers, {} heads, {} kv heads, head_dim {}, block size {}",
        o.num_layers, o.num_heads, o.num_kv_heads, o.head_dim, o.block_size);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<int> PagedAttentionRewrite::Run(Graph& graph) const {
  const PagedAttentionRewriteOptions& o = options_;
  RETURN_IF_ERROR(CheckOptions(o));
  for (const char* name : {"input_ids", "position_ids"}) {
    if (!graph.IsGraphInput(name)) return FailedPrecondition("the graph has no input '{}'", name);
  }
  if (graph.IsGraphInput(PastName(o.num_layers, "key"))) {
    return FailedPrecondition("the graph has more than the {} layers of config.json", o.num_layers);
  }
  GraphEditor ed(graph);
  std::vector<LayerMatch> layers;
  for (int l = 0; l < o.num_layers; ++l) {
    ASSIGN_OR_RETURN(LayerMatch m, MatchLayer(ed, l));
    RETURN_IF_ERROR(CheckDim(graph, m.q, 1, o.num_heads, "heads"));
    RETURN_IF_ERROR(CheckDim(graph, m.q, 3, o.head_dim, "head_dim"));
    RETURN_IF_ERROR(CheckDim(graph, m.k_new, 1, o.num_kv_heads, "kv heads"));
    RETURN_IF_ERROR(CheckDim(graph, m.v_new, 1, o.num_kv_heads, "kv heads"));
    layers.push_back(std::move(m));
  }
  for (int l = 0; l < o.num_layers; ++l) {
    const LayerMatch& m = layers[l];
    ed.EditNode(m.context, [&](Node& n) {
      n.name = fmt::format("{}/paged_attention", n.name.empty() ? n.outputs[0] : n.name);
      n.op_type = "PagedAttention";
      n.domain = kInferdDomain;
      n.inputs = {m.q,
                  m.k_new,
                  m.v_new,
                  KeyCacheInput(l),
                  ValueCacheInput(l),
                  kSlotMappingInput,
                  kQueryStartInput,
                  kContextLensInput,
                  kBlockTablesInput};
      if (o.int8_cache) {
        n.inputs.push_back(KeyScalesInput(l));
        n.inputs.push_back(ValueScalesInput(l));
      }
      n.attributes.clear();
      n.attributes["scale"] = FloatAttribute(m.scale);
      n.attributes["num_heads"] = IntAttr(o.num_heads);
      n.attributes["num_kv_heads"] = IntAttr(o.num_kv_heads);
    });
  }
  RETURN_IF_ERROR(ed.Commit());

  std::set<std::string> gone = {kAttentionMask};
  for (int l = 0; l < o.num_layers; ++l) {
    for (const char* kv : {"key", "value"}) {
      gone.insert(PastName(l, kv));
      gone.insert(PresentName(l, kv));
    }
  }
  std::erase_if(graph.inputs, [&](const ValueInfo& v) { return gone.count(v.name) > 0; });
  std::erase_if(graph.outputs, [&](const ValueInfo& v) { return gone.count(v.name) > 0; });
  AddPagedInputs(graph, o);
  RETURN_IF_ERROR(DeadNodeElimination().Run(graph).status());
  for (const auto& n : graph.nodes) {
    for (const auto& in : n->inputs) {
      if (gone.count(in)) {
        return FailedPrecondition(
            "'{}' is still read by {} after the attention rewrite (used outside attention)", in,
            n->Describe());
      }
    }
  }
  if (o.gather_logits_rows) RETURN_IF_ERROR(GatherLogitsRows(graph));
  return o.num_layers;
}

}  // namespace inferd
