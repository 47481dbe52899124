#include "graph/graph.h"

#include <gtest/gtest.h>

namespace inferd {
namespace {

TEST(GraphTest, TopologicalSortOrdersAndDetectsErrors) {
  Graph g;
  g.inputs.push_back({.name = "x"});
  g.outputs.push_back({.name = "z"});
  g.AddNode("Relu", {"y"}, {"z"}, "second");
  g.AddNode("Neg", {"x"}, {"y"}, "first");
  ASSERT_TRUE(g.TopologicalSort().ok());
  EXPECT_EQ(g.nodes[0]->name, "first");
  EXPECT_EQ(g.nodes[1]->name, "second");

  g.AddNode("Abs", {"undefined_value"}, {"w"}, "dangling");
  Status s = g.TopologicalSort();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("undefined_value"), std::string::npos);
}

TEST(GraphTest, CycleIsAnError) {
  Graph g;
  g.AddNode("Relu", {"b"}, {"a"});
  g.AddNode("Relu", {"a"}, {"b"});
  EXPECT_FALSE(g.TopologicalSort().ok());
}

TEST(GraphTest, OuterScopeValuesOfSubgraph) {
  Graph body;
  body.inputs.push_back({.name = "i"});
  body.outputs.push_back({.name = "o"});
  body.AddNode("Add", {"i", "captured"}, {"o"});
  EXPECT_EQ(body.OuterScopeValues(), std::vector<std::string>{"captured"});
}

TEST(NodeTest, AttributeGettersHaveDefaults) {
  Node n;
  n.op_type = "Conv";
  Attribute a;
  a.type = Attribute::Type::kInts;
  a.ints = {1, 2};
  n.attributes["strides"] = a;
  EXPECT_EQ(n.GetInts("strides"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(n.GetInts("pads", {0, 0}), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(n.GetInt("group", 1), 1);
  n.inputs = {"x", "w", ""};
  EXPECT_EQ(n.NumInputs(), 2u);
  EXPECT_FALSE(n.HasInput(2));
}

}  // namespace
}  // namespace inferd
