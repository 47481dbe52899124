// RewriteRule: a local rewrite (a fusion, a fold, a no-op removal) in rule form, and RuleSweep,
// the GraphPass that applies a list of rules in one sweep over the graph.
//
// A rule anchors on nodes of a few op types. The sweep visits the live nodes in graph order and
// offers each one to the rules that target its current op type, in list order:
//
//   class ConvBnFusion final : public RewriteRule {
//     std::string_view Name() const override { return "ConvBnFusion"; }
//     std::vector<std::string> TargetOpTypes() const override { return {"Conv"}; }
//     bool Match(const GraphEditor& ed, const Node& conv) const override;  // cheap: domain, arity
//     bool Rewrite(GraphEditor& ed, Node* conv) const override;            // full match + edit
//   };
//
//   passes.push_back(MakeRuleSweep("ConvFolds", MakeRules(std::make_unique<ConvBnFusion>(),
//                                                         std::make_unique<ConvMulAddFusion>())));
//
// Contract of a rule:
//   - Match is read-only and cheap (op domain, arity, attributes): the sweep calls it for every
//     node of a target type, so a graph with nothing to do costs one pass over its nodes.
//   - Rewrite finishes the match and edits through the GraphEditor, keeping the graph valid (see
//     graph_pass.h). It returns true when it changed the graph and false, with the graph
//     unchanged, when the full pattern is not there.
//   - A rule may edit or remove nodes other than its anchor (a producer, a consumer); removed nodes
//     are skipped when the sweep reaches them.
//
// Grouping: rules in one sweep fire interleaved, node by node, instead of each over the whole
// graph in turn. That gives the same graph as running them as separate sweeps in list order only
// when no rule's match at a node depends on a rewrite another rule of the sweep makes at a node
// elsewhere; pipeline.cc groups rules only where that holds and says why. A rule that rewrites
// its anchor into another target type is offered to the later rules that target the new type.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "optimizer/graph_edit.h"
#include "optimizer/graph_pass.h"

namespace inferd {

class RewriteRule {
 public:
  virtual ~RewriteRule() = default;
  // The name the optimization report counts the rule's rewrites under ("ConvBnFusion").
  virtual std::string_view Name() const = 0;
  // The op types (Node::op_type, any domain) of the nodes the rule anchors on.
  virtual std::vector<std::string> TargetOpTypes() const = 0;
  // The cheap, read-only precondition on an anchor of a target type.
  virtual bool Match(const GraphEditor& ed, const Node& node) const = 0;
  // The full match from an anchor that passed Match, and the rewrite. True: the graph changed.
  virtual bool Rewrite(GraphEditor& ed, Node* node) const = 0;
  // Whether the sweep offers the anchor to this rule again after it fired, for chains that fold
  // one step at a time into the anchor (Conv → Mul → Add). Default: once per node and sweep.
  virtual bool RepeatOnAnchor() const { return false; }
};

// Applies `rules` in one sweep over the nodes `ed` indexes (a snapshot taken at the start; nodes
// removed during the sweep are skipped). Adds rule i's rewrites to (*fired)[i]. The caller
// commits the editor.
void SweepRules(GraphEditor& ed, const std::vector<const RewriteRule*>& rules,
                std::vector<int>* fired);

// The GraphPass form: one sweep of its rules per Run, on a fresh GraphEditor, then Commit. The
// report counts each rule under the rule's own name.
class RuleSweep final : public GraphPass {
 public:
  // `name` names the sweep in error messages.
  RuleSweep(std::string name, std::vector<std::unique_ptr<RewriteRule>> rules);

  std::string_view Name() const override { return name_; }
  StatusOr<int> Run(Graph& graph) const override;
  std::vector<std::string_view> CountedNames() const override;
  StatusOr<std::vector<int>> RunCounted(Graph& graph) const override;

 private:
  std::string name_;
  std::vector<std::unique_ptr<RewriteRule>> rules_;
};

// A sweep of one rule, named after it.
std::unique_ptr<GraphPass> MakeRuleSweep(std::unique_ptr<RewriteRule> rule);
std::unique_ptr<GraphPass> MakeRuleSweep(std::string name,
                                         std::vector<std::unique_ptr<RewriteRule>> rules);

// {std::make_unique<Rules>()...} as a vector (an initializer list cannot hold unique_ptrs).
template <typename... Rules>
std::vector<std::unique_ptr<RewriteRule>> MakeRules(std::unique_ptr<Rules>... rules) {
  std::vector<std::unique_ptr<RewriteRule>> v;
  (v.push_back(std::move(rules)), ...);
  return v;
}

}  // namespace inferd
