// GraphEditor: the graph-editing toolkit passes share.
//
// It indexes one Graph (producer and consumers of every value) and keeps that index up to date
// through its own edits, so a pass can match and rewrite in one sweep:
//
//   GraphEditor ed(graph);
//   for (Node* conv : ed.Nodes()) {
//     if (conv->op_type != "Conv") continue;
//     Node* bn = ed.SoleConsumer(conv->outputs[0]);   // null unless exactly one, not an output
//     ...
//     ed.RenameValue(conv->outputs[0], bn->outputs[0]);  // conv now produces bn's output
//     ed.RemoveNode(bn);
//   }
//   RETURN_IF_ERROR(ed.Commit());  // erases removed nodes, keeps topological order
//
// A node whose subgraph (If/Loop/Scan body) captures a value counts as a consumer of that value,
// and renames reach into such subgraphs. Removed nodes stay allocated until Commit(), so pointers
// held by a pass remain valid during a sweep.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "graph/graph.h"

namespace inferd {

class GraphEditor {
 public:
  explicit GraphEditor(Graph& graph);

  Graph& graph() { return graph_; }
  const Graph& graph() const { return graph_; }
  // Snapshot of the live nodes in order (safe to iterate while editing).
  std::vector<Node*> Nodes() const;
  bool IsRemoved(const Node* node) const { return removed_.count(node) > 0; }

  // The node producing `value` (null for graph inputs, initializers and unknown names).
  Node* Producer(const std::string& value) const;
  // Live nodes that read `value` (each listed once, in graph order, including nodes whose
  // subgraphs capture it).
  std::vector<Node*> Consumers(const std::string& value) const;
  // The only consumer of `value` when it has exactly one, reads it exactly once and `value` is not
  // a graph output; otherwise null. The usual precondition of a fusion.
  Node* SoleConsumer(const std::string& value) const;
  // Whether anything reads `value`: a node, a subgraph, or the graph outputs.
  bool IsUsed(const std::string& value) const;
  bool IsGraphOutput(const std::string& value) const { return outputs_.count(value) > 0; }
  bool IsGraphInput(const std::string& value) const { return inputs_.count(value) > 0; }

  // The value of an initializer no graph input shadows; null for anything else.
  const Tensor* Constant(const std::string& value) const;
  // Fully known shape of a value (initializer shape, or declared/inferred with every dim known).
  std::optional<Shape> StaticShape(const std::string& value) const;
  // Known rank of a value.
  std::optional<size_t> Rank(const std::string& value) const;

  // Makes every reader of `from` (nodes, captured uses in subgraphs) read `to` instead. Graph
  // outputs are not touched.
  void ReplaceAllUses(const std::string& from, const std::string& to);
  // Renames a value everywhere: its producer's output, every reader, and its value_info entry.
  // `to` must be a name that nothing else produces (e.g. the output of a node being removed).
  void RenameValue(const std::string& from, const std::string& to);
  // Removes a node whose input `in` and output `out` hold the same tensor (Identity, a no-op
  // Reshape): readers of `out` read `in`. When `out` is a graph output, the producer of `in` is
  // renamed to produce `out` instead, if that is legal. Returns false (and changes nothing) when
  // neither works, e.g. both are graph outputs or `in` is a graph input.
  bool BypassNode(Node* node, const std::string& in, const std::string& out);
  // Marks a node removed; it is erased by Commit(). Its outputs must be unused by then.
  void RemoveNode(Node* node);
  // Edits a node in place (op type, inputs, outputs, attributes) keeping the index current. The
  // node must stay valid where it is in the topological order.
  void EditNode(Node* node, const std::function<void(Node&)>& edit);

  // Adds an initializer under a fresh name derived from `base` ("conv1/bn_folded") and returns
  // the name.
  std::string AddInitializer(const std::string& base, Tensor value);
  // A value name not used anywhere in the graph: `base`, or `base_1`, `base_2`, ...
  std::string UniqueValueName(const std::string& base);

  // Erases removed nodes from the graph's node list.
  Status Commit();

 private:
  void Index(Node* node);
  void Unindex(Node* node);
  static std::vector<std::string> CapturedValues(const Node& node);

  Graph& graph_;
  std::unordered_map<std::string, Node*> producer_;
  std::unordered_map<std::string, std::vector<Node*>> consumers_;
  std::unordered_set<std::string> outputs_;
  std::unordered_set<std::string> inputs_;
  std::unordered_set<const Node*> removed_;
  std::unordered_set<std::string> names_;  // every value name in use (for UniqueValueName)
};

// Renames a value in a subgraph and the subgraphs nested in it, except where it is redefined.
void RenameCapturedValue(Graph& subgraph, const std::string& from, const std::string& to);

}  // namespace inferd
