#include "graph/prune.h"

#include <gtest/gtest.h>

namespace inferd {
namespace {

// x → Add(x, read) → y, with initializers: read (by the Add), unread, out (a graph output),
// shadowed (unread, but a graph input may feed it) and captured (read only inside an If branch).
Graph SampleGraph() {
  Graph g;
  g.inputs.push_back({.name = "x"});
  g.inputs.push_back({.name = "shadowed"});
  g.inputs.push_back({.name = "cond"});
  g.outputs.push_back({.name = "y"});
  g.outputs.push_back({.name = "out"});
  g.outputs.push_back({.name = "z"});
  for (const char* name : {"read", "unread", "out", "shadowed", "captured", "also_unread"}) {
    g.initializers[name] = Tensor::Scalar<float>(1.f);
  }
  g.AddNode("Add", {"x", "read"}, {"y"});
  auto branch = std::make_shared<Graph>();
  branch->AddNode("Neg", {"captured"}, {"b"});
  branch->outputs.push_back({.name = "b"});
  Attribute then_attr;
  then_attr.type = Attribute::Type::kGraph;
  then_attr.g = branch;
  Node* cond = g.AddNode("If", {"cond"}, {"z"});
  cond->attributes["then_branch"] = then_attr;
  cond->attributes["else_branch"] = then_attr;
  return g;
}

TEST(PruneUnusedInitializers, DropsOnlyWhatNothingReads) {
  Graph g = SampleGraph();
  EXPECT_EQ(PruneUnusedInitializers(g), 2u);
  std::vector<std::string> left;
  for (const auto& [name, t] : g.initializers) left.push_back(name);
  EXPECT_EQ(left, (std::vector<std::string>{"captured", "out", "read", "shadowed"}));
  EXPECT_EQ(PruneUnusedInitializers(g), 0u);
}

TEST(PruneUnusedInitializers, LimitedToCandidates) {
  Graph g = SampleGraph();
  EXPECT_EQ(PruneUnusedInitializers(g, {"unread", "read", "shadowed", "no_such_name"}), 1u);
  EXPECT_FALSE(g.IsInitializer("unread"));
  EXPECT_TRUE(g.IsInitializer("also_unread"));  // not a candidate
  EXPECT_TRUE(g.IsInitializer("read"));
  EXPECT_TRUE(g.IsInitializer("shadowed"));
}

}  // namespace
}  // namespace inferd
