// Test helpers: run one node through a Session, compare tensors against references.
// Header-only; for *_test.cc files only.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "session/session.h"

namespace inferd::testing {

// Builds a model with a single node whose inputs are graph inputs named in0, in1, ... (an undefined
// Tensor in `inputs` becomes an omitted optional input) and whose outputs are out0, out1, ...;
// runs it and returns the outputs. Inputs listed in `constant_inputs` (by index) become
// initializers instead of graph inputs, so kernels can pre-process them as weights.
inline StatusOr<std::vector<Tensor>> RunNode(const std::string& op_type,
                                             std::map<std::string, Attribute> attributes,
                                             const std::vector<Tensor>& inputs, size_t num_outputs,
                                             int64_t opset = 17,
                                             std::vector<size_t> constant_inputs = {},
                                             const std::string& domain = "") {
  Model model;
  model.opsets[""] = opset;
  if (!domain.empty()) model.opsets[domain] = 1;
  Graph& g = model.graph;
  g.name = "test_" + op_type;
  std::vector<std::string> in_names, out_names;
  std::vector<Tensor> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      in_names.push_back("");
      continue;
    }
    std::string name = "in" + std::to_string(i);
    in_names.push_back(name);
    if (std::find(constant_inputs.begin(), constant_inputs.end(), i) != constant_inputs.end()) {
      g.initializers[name] = inputs[i];
      continue;
    }
    ValueInfo vi;
    vi.name = name;
    vi.dtype = inputs[i].dtype();
    g.inputs.push_back(vi);
    feeds.push_back(inputs[i]);
  }
  for (size_t i = 0; i < num_outputs; ++i) {
    out_names.push_back("out" + std::to_string(i));
    ValueInfo vi;
    vi.name = out_names.back();
    g.outputs.push_back(vi);
  }
  Node* n = g.AddNode(op_type, in_names, out_names, "node");
  n->domain = domain;
  n->attributes = std::move(attributes);
  SessionOptions opts;
  opts.num_threads = 2;
  ASSIGN_OR_RETURN(auto session, Session::Create(std::move(model), opts));
  std::vector<Tensor> outs;
  RETURN_IF_ERROR(session->Run(feeds, &outs));
  return outs;
}

// Attribute builders: {"axis", AttrInt(1)}, {"perm", AttrInts({0, 2, 1})}.
inline Attribute AttrInt(int64_t v) {
  Attribute a;
  a.type = Attribute::Type::kInt;
  a.i = v;
  return a;
}
inline Attribute AttrFloat(float v) {
  Attribute a;
  a.type = Attribute::Type::kFloat;
  a.f = v;
  return a;
}
inline Attribute AttrString(std::string v) {
  Attribute a;
  a.type = Attribute::Type::kString;
  a.s = std::move(v);
  return a;
}
inline Attribute AttrInts(std::vector<int64_t> v) {
  Attribute a;
  a.type = Attribute::Type::kInts;
  a.ints = std::move(v);
  return a;
}
inline Attribute AttrFloats(std::vector<float> v) {
  Attribute a;
  a.type = Attribute::Type::kFloats;
  a.floats = std::move(v);
  return a;
}
inline Attribute AttrTensor(Tensor t) {
  Attribute a;
  a.type = Attribute::Type::kTensor;
  a.t = std::move(t);
  return a;
}

// A float32 tensor with uniform random values in [lo, hi), fixed seed.
inline Tensor RandomFloat(Shape shape, float lo = -1.f, float hi = 1.f, uint32_t seed = 42) {
  Tensor t = Tensor::Allocate(DataType::kFloat32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.NumElements(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

// Expects same dtype and shape, and |a - b| <= atol + rtol * |b| elementwise (compared as double).
inline void ExpectTensorNear(const Tensor& actual, const Tensor& expected, double rtol = 1e-5,
                             double atol = 1e-6) {
  ASSERT_EQ(actual.dtype(), expected.dtype());
  ASSERT_EQ(actual.shape(), expected.shape())
      << ShapeToString(actual.shape()) << " vs " << ShapeToString(expected.shape());
  int64_t bad = 0;
  for (int64_t i = 0; i < expected.NumElements(); ++i) {
    double a = actual.GetAsDouble(i), b = expected.GetAsDouble(i);
    if (std::isnan(a) && std::isnan(b)) continue;
    if (!(std::fabs(a - b) <= atol + rtol * std::fabs(b))) {
      if (++bad <= 5) ADD_FAILURE() << "element " << i << ": got " << a << ", expected " << b;
    }
  }
  EXPECT_EQ(bad, 0) << bad << " of " << expected.NumElements() << " elements differ";
}

}  // namespace inferd::testing
