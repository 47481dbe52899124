// Test helpers for src/serving's tests: tiny ONNX models written into a temporary repository, and
// inferences whose results a test waits for.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graph/onnx_io.h"
#include "serving/model_manager.h"

namespace inferd::serving::testing {

inline ValueInfo FloatInfo(const std::string& name, std::vector<Dim> dims) {
  ValueInfo v;
  v.name = name;
  v.dtype = DataType::kFloat32;
  v.shape = std::move(dims);
  return v;
}

// y = x + x, x: FP32 [batch, seq] (symbolic dims).
inline void WriteAddModel(const std::filesystem::path& path) {
  Model m;
  m.opsets[""] = 13;
  m.graph.name = "double";
  m.graph.inputs.push_back(FloatInfo("x", {Dim{-1, "batch"}, Dim{-1, "seq"}}));
  m.graph.outputs.push_back(FloatInfo("y", {Dim{-1, "batch"}, Dim{-1, "seq"}}));
  m.graph.AddNode("Add", {"x", "x"}, {"y"}, "add");
  std::filesystem::create_directories(path.parent_path());
  ASSERT_TRUE(SaveOnnxModel(m, path).ok());
}

// y = op(x) (a unary ONNX op: "Neg", "Identity", "Relu", ...), x: FP32 [batch, seq].
inline void WriteUnaryModel(const std::filesystem::path& path, const std::string& op) {
  Model m;
  m.opsets[""] = 13;
  m.graph.name = op;
  m.graph.inputs.push_back(FloatInfo("x", {Dim{-1, "batch"}, Dim{-1, "seq"}}));
  m.graph.outputs.push_back(FloatInfo("y", {Dim{-1, "batch"}, Dim{-1, "seq"}}));
  m.graph.AddNode(op, {"x"}, {"y"}, "op");
  std::filesystem::create_directories(path.parent_path());
  ASSERT_TRUE(SaveOnnxModel(m, path).ok());
}

// sum = a + b, FP32 [batch, seq].
inline void WriteSumModel(const std::filesystem::path& path) {
  Model m;
  m.opsets[""] = 13;
  m.graph.name = "sum";
  m.graph.inputs.push_back(FloatInfo("a", {Dim{-1, "batch"}, Dim{-1, "seq"}}));
  m.graph.inputs.push_back(FloatInfo("b", {Dim{-1, "batch"}, Dim{-1, "seq"}}));
  m.graph.outputs.push_back(FloatInfo("sum", {Dim{-1, "batch"}, Dim{-1, "seq"}}));
  m.graph.AddNode("Add", {"a", "b"}, {"sum"}, "add");
  std::filesystem::create_directories(path.parent_path());
  ASSERT_TRUE(SaveOnnxModel(m, path).ok());
}

inline void WriteFile(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A fresh, empty folder below the test temp dir, named after the running test.
inline std::filesystem::path FreshRepository(const std::string& prefix) {
  const auto path = std::filesystem::path(::testing::TempDir()) /
                    (prefix + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path;
}

struct Result {
  Status status;
  InferenceResponse response;
};

// A request for model `model` with one input.
inline std::unique_ptr<InferenceRequest> Request(const std::string& model, Tensor x,
                                                 const std::string& input = "x") {
  auto r = std::make_unique<InferenceRequest>();
  r->model_name = model;
  r->id = "req";
  r->inputs.push_back({input, std::move(x)});
  return r;
}

// Starts an inference; the future holds its result once the callback ran.
inline std::future<Result> InferAsync(ModelManager& manager, std::unique_ptr<InferenceRequest> r) {
  auto p = std::make_shared<std::promise<Result>>();
  auto f = p->get_future();
  manager.Infer(std::move(r), [p](Status s, InferenceResponse resp) {
    p->set_value(Result{std::move(s), std::move(resp)});
  });
  return f;
}

inline Result InferSync(ModelManager& manager, std::unique_ptr<InferenceRequest> r) {
  return InferAsync(manager, std::move(r)).get();
}

}  // namespace inferd::serving::testing
