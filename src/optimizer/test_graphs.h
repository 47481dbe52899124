// Test helpers for optimizer passes: build small models by hand, run them with and without
// optimization, compare. Header-only; for *_test.cc files only.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cpu/cpu_provider.h"
#include "optimizer/pipeline.h"
#include "session/session.h"
#include "session/test_util.h"

namespace inferd::testing {

// Deep copy of a model's main graph (subgraph attributes are shared).
inline Model CloneModel(const Model& m) {
  Model c;
  c.ir_version = m.ir_version;
  c.opsets = m.opsets;
  c.metadata = m.metadata;
  c.graph.name = m.graph.name;
  c.graph.inputs = m.graph.inputs;
  c.graph.outputs = m.graph.outputs;
  c.graph.initializers = m.graph.initializers;
  c.graph.value_info = m.graph.value_info;
  for (const auto& n : m.graph.nodes) c.graph.nodes.push_back(std::make_unique<Node>(*n));
  return c;
}

// A model under construction: ModelBuilder b; b.Input("x", {1, 3, 8, 8}); b.Node("Relu", ...).
class ModelBuilder {
 public:
  explicit ModelBuilder(int64_t opset = 17) {
    model_.opsets[""] = opset;
    model_.graph.name = "t";
  }

  ModelBuilder& Input(const std::string& name, Shape shape, DataType dt = DataType::kFloat32) {
    model_.graph.inputs.push_back(Info(name, shape, dt));
    return *this;
  }
  // A graph output; shape may be left empty (unknown rank) with `known_shape` false.
  ModelBuilder& Output(const std::string& name, Shape shape = {}, bool known_shape = false,
                       DataType dt = DataType::kFloat32) {
    ValueInfo vi = Info(name, shape, dt);
    if (!known_shape) vi.shape.reset();
    model_.graph.outputs.push_back(vi);
    return *this;
  }
  // Declared shape of an intermediate value (what shape inference would record).
  ModelBuilder& ValueShape(const std::string& name, Shape shape, DataType dt = DataType::kFloat32) {
    model_.graph.value_info[name] = Info(name, shape, dt);
    return *this;
  }
  ModelBuilder& Init(const std::string& name, Tensor t) {
    model_.graph.initializers[name] = std::move(t);
    return *this;
  }
  Node* Add(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
            std::map<std::string, Attribute> attrs = {}, const std::string& name = "") {
    Node* n = model_.graph.AddNode(op, std::move(in), std::move(out),
                                   name.empty() ? op + std::to_string(count_++) : name);
    n->attributes = std::move(attrs);
    return n;
  }
  Model& model() { return model_; }
  Model Build() const { return CloneModel(model_); }

 private:
  static ValueInfo Info(const std::string& name, const Shape& shape, DataType dt) {
    ValueInfo vi;
    vi.name = name;
    vi.dtype = dt;
    std::vector<Dim> dims;
    for (int64_t d : shape) dims.push_back(Dim{d, ""});
    vi.shape = dims;
    return vi;
  }
  Model model_;
  int count_ = 0;
};

inline int CountOps(const Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes) n += node->op_type == op;
  return n;
}

inline StatusOr<std::vector<Tensor>> RunModel(Model model, const std::vector<Tensor>& inputs,
                                              OptimizationLevel level) {
  SessionOptions opts;
  opts.num_threads = 2;
  opts.optimization_level = level;
  ASSIGN_OR_RETURN(auto session, Session::Create(std::move(model), opts));
  std::vector<Tensor> outs;
  RETURN_IF_ERROR(session->Run(std::span<const Tensor>(inputs), &outs));
  return outs;
}

// Runs `model` unoptimized and optimized at `level` on `inputs` and expects equal outputs.
inline void ExpectSameOutputs(const Model& model, const std::vector<Tensor>& inputs,
                              OptimizationLevel level = OptimizationLevel::kBasic,
                              double rtol = 1e-4, double atol = 1e-5) {
  auto want = RunModel(CloneModel(model), inputs, OptimizationLevel::kNone);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  auto got = RunModel(CloneModel(model), inputs, level);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), want->size());
  for (size_t i = 0; i < want->size(); ++i) ExpectTensorNear((*got)[i], (*want)[i], rtol, atol);
}

// Optimizes a copy of `model`, returns it (and fills `report`).
inline Model Optimized(const Model& model, OptimizationReport* report = nullptr,
                       OptimizationLevel level = OptimizationLevel::kBasic) {
  Model m = CloneModel(model);
  Status st = Optimize(m, level, CpuProvider(), report);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return m;
}

inline int Fired(const OptimizationReport& r, const std::string& pass) {
  for (const auto& p : r.passes) {
    if (p.pass == pass) return p.fired;
  }
  return -1;
}

}  // namespace inferd::testing
