// The rule sweep: dispatch by op type, Match before Rewrite, removed nodes skipped, a rewritten
// anchor handed on to later rules for its new type, repeats on the anchor, per-rule counts.
#include "optimizer/rewrite_rule.h"

#include <gtest/gtest.h>

namespace inferd {
namespace {

// Renames the anchor's op type from `from` to `to` (when Match allows: nodes named "skip" don't).
class Retype final : public RewriteRule {
 public:
  Retype(std::string name, std::string from, std::string to)
      : name_(std::move(name)), from_(std::move(from)), to_(std::move(to)) {}
  std::string_view Name() const override { return name_; }
  std::vector<std::string> TargetOpTypes() const override { return {from_}; }
  bool Match(const GraphEditor& ed, const Node& node) const override { return node.name != "skip"; }
  bool Rewrite(GraphEditor& ed, Node* node) const override {
    ed.EditNode(node, [&](Node& n) { n.op_type = to_; });
    return true;
  }

 private:
  std::string name_, from_, to_;
};

// Removes the anchor's sole consumer if it is a Neg, one per rewrite; repeats on the anchor.
class EatNegs final : public RewriteRule {
 public:
  std::string_view Name() const override { return "EatNegs"; }
  std::vector<std::string> TargetOpTypes() const override { return {"Relu", "Neg"}; }
  bool Match(const GraphEditor& ed, const Node& node) const override { return true; }
  bool Rewrite(GraphEditor& ed, Node* node) const override {
    Node* next = ed.SoleConsumer(node->outputs[0]);
    if (next == nullptr || next->op_type != "Neg") return false;
    const std::string out = next->outputs[0];
    ed.RemoveNode(next);
    ed.EditNode(node, [&](Node& n) { n.outputs[0] = out; });
    return true;
  }
  bool RepeatOnAnchor() const override { return true; }
};

// x → Relu → Neg → Neg → Abs → y, plus a Relu named "skip" reading x into z.
Graph Chain() {
  Graph g;
  g.inputs.push_back({.name = "x"});
  g.outputs.push_back({.name = "y"});
  g.outputs.push_back({.name = "z"});
  g.AddNode("Relu", {"x"}, {"a"}, "relu");
  g.AddNode("Neg", {"a"}, {"b"}, "neg1");
  g.AddNode("Neg", {"b"}, {"c"}, "neg2");
  g.AddNode("Abs", {"c"}, {"y"}, "abs");
  g.AddNode("Relu", {"x"}, {"z"}, "skip");
  return g;
}

std::vector<int> Sweep(Graph& g, const std::vector<const RewriteRule*>& rules) {
  GraphEditor ed(g);
  std::vector<int> fired;
  SweepRules(ed, rules, &fired);
  EXPECT_TRUE(ed.Commit().ok());
  return fired;
}

TEST(SweepRules, DispatchesByOpTypeAfterMatch) {
  Graph g = Chain();
  const Retype abs_to_sign("AbsToSign", "Abs", "Sign");
  const Retype relu_to_elu("ReluToElu", "Relu", "Elu");
  EXPECT_EQ(Sweep(g, {&abs_to_sign, &relu_to_elu}), (std::vector<int>{1, 1}));
  EXPECT_EQ(g.nodes[0]->op_type, "Elu");
  EXPECT_EQ(g.nodes[3]->op_type, "Sign");
  EXPECT_EQ(g.nodes[4]->op_type, "Relu");  // Match refused the node named "skip"
}

TEST(SweepRules, RepeatsOnTheAnchorAndSkipsRemovedNodes) {
  Graph g = Chain();
  const EatNegs eat;
  // Both Negs go in one sweep from the Relu; the removed Negs are not offered themselves.
  EXPECT_EQ(Sweep(g, {&eat}), (std::vector<int>{2}));
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(g.nodes[0]->outputs[0], "c");
  EXPECT_EQ(g.nodes[1]->op_type, "Abs");
}

TEST(SweepRules, RewrittenAnchorGoesToLaterRulesForItsNewType) {
  Graph g = Chain();
  const Retype early("EarlySignToTanh", "Sign", "Tanh");
  const Retype abs_to_sign("AbsToSign", "Abs", "Sign");
  const Retype late("LateSignToErf", "Sign", "Erf");
  // Like three sweeps in this order: the early rule's turn at the Abs has passed when it becomes
  // a Sign, the late rule's has not.
  EXPECT_EQ(Sweep(g, {&early, &abs_to_sign, &late}), (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(g.nodes[3]->op_type, "Erf");
}

TEST(RuleSweep, CountsEachRuleUnderItsName) {
  RuleSweep sweep("Both", MakeRules(std::make_unique<Retype>("AbsToSign", "Abs", "Sign"),
                                    std::make_unique<EatNegs>()));
  EXPECT_EQ(sweep.Name(), "Both");
  EXPECT_EQ(sweep.CountedNames(), (std::vector<std::string_view>{"AbsToSign", "EatNegs"}));
  Graph g = Chain();
  StatusOr<std::vector<int>> fired = sweep.RunCounted(g);
  ASSERT_TRUE(fired.ok());
  EXPECT_EQ(*fired, (std::vector<int>{1, 2}));
  Graph g2 = Chain();
  EXPECT_EQ(sweep.Run(g2).value(), 3);
  EXPECT_EQ(MakeRuleSweep(std::make_unique<EatNegs>())->Name(), "EatNegs");
}

}  // namespace
}  // namespace inferd
