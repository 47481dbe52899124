#include "session/session.h"

#include <gtest/gtest.h>

#include <thread>

#include "session/test_util.h"

namespace inferd {
namespace {

ValueInfo Decl(std::string name, DataType t, std::vector<int64_t> dims) {
  ValueInfo vi;
  vi.name = std::move(name);
  vi.dtype = t;
  std::vector<Dim> shape;
  for (int64_t d : dims) {
    Dim dim;
    if (d >= 0) dim.value = d; else dim.param = "batch";
    shape.push_back(dim);
  }
  vi.shape = shape;
  return vi;
}

// y = Relu(x + b), x: float[batch, 4]; b is an initializer that graph input "b" shadows.
Model AddReluModel() {
  Model m;
  m.opsets[""] = 13;
  Graph& g = m.graph;
  g.name = "add_relu";
  g.inputs = {Decl("x", DataType::kFloat32, {-1, 4}), Decl("b", DataType::kFloat32, {4})};
  g.outputs = {Decl("y", DataType::kFloat32, {-1, 4})};
  g.initializers["b"] = Tensor::FromVector<float>({1.f, -1.f, 0.5f, -3.f});
  g.AddNode("Add", {"x", "b"}, {"s"}, "add");
  g.AddNode("Relu", {"s"}, {"y"}, "relu");
  return m;
}

TEST(SessionTest, RunsAndUsesShadowedInitializerAsDefault) {
  auto s = Session::Create(AddReluModel(), {.num_threads = 1});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ((*s)->inputs().size(), 1u);  // "b" has a default
  Tensor x = Tensor::FromVector<float>({1, 1, 1, 1, -1, 2, 3, 4}, {2, 4});
  std::vector<Tensor> out;
  ASSERT_TRUE((*s)->Run({x}, &out).ok());
  testing::ExpectTensorNear(out[0], Tensor::FromVector<float>({2, 0, 1.5, 0, 0, 1, 3.5, 1}, {2, 4}));

  // Override the shadowed initializer by name.
  Tensor b = Tensor::FromVector<float>({0, 0, 0, 0});
  ASSERT_TRUE((*s)->Run({{"x", x}, {"b", b}}, &out).ok());
  testing::ExpectTensorNear(out[0], Tensor::FromVector<float>({1, 1, 1, 1, 0, 2, 3, 4}, {2, 4}));
}

TEST(SessionTest, RejectsBadInputsWithClearErrors) {
  auto s = Session::Create(AddReluModel());
  ASSERT_TRUE(s.ok());
  const Session& session = **s;
  std::vector<Tensor> out;
  auto expect_error = [&](Status st, const std::string& needle) {
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.ToString();
  };
  expect_error(session.Run(std::span<const Tensor>(), &out), "expects 1 inputs");
  expect_error(session.Run({Tensor::Allocate(DataType::kInt64, {2, 4})}, &out), "must be float32");
  expect_error(session.Run({Tensor::Allocate(DataType::kFloat32, {8})}, &out), "rank 2");
  expect_error(session.Run({Tensor::Allocate(DataType::kFloat32, {2, 5})}, &out), "dimension 1");
  expect_error(session.Run({{"nope", Tensor::Allocate(DataType::kFloat32, {2, 4})}}, &out),
               "unknown input 'nope'");
  Tensor x = Tensor::Allocate(DataType::kFloat32, {1, 4});
  expect_error(session.Run({{"x", x}, {"x", x}}, &out), "given twice");
  expect_error(session.Run({{"b", Tensor::Allocate(DataType::kFloat32, {4})}}, &out),
               "'x' is missing");
}

TEST(SessionTest, UnsupportedOpNamesOpAndOpset) {
  Model m = AddReluModel();
  m.graph.nodes[1]->op_type = "FancyNewOp";
  auto s = Session::Create(std::move(m));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.status().message().find("FancyNewOp"), std::string::npos);
  EXPECT_NE(s.status().message().find("opset 13"), std::string::npos) << s.status().ToString();
}

TEST(SessionTest, OutputThatIsAnInputIsCopied) {
  Model m;
  m.opsets[""] = 13;
  m.graph.inputs = {Decl("x", DataType::kFloat32, {2})};
  m.graph.outputs = {Decl("x", DataType::kFloat32, {2})};
  auto s = Session::Create(std::move(m));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  float data[2] = {1, 2};
  std::vector<Tensor> out;
  ASSERT_TRUE((*s)->Run({Tensor::View(DataType::kFloat32, {2}, data)}, &out).ok());
  EXPECT_NE(out[0].raw_data(), static_cast<void*>(data));
  EXPECT_TRUE(out[0].owns_data());
  EXPECT_EQ(out[0].data<float>()[1], 2.f);
}

TEST(SessionTest, ConcurrentRunsAgree) {
  auto s = Session::Create(AddReluModel(), {.num_threads = 1});
  ASSERT_TRUE(s.ok());
  Tensor x = testing::RandomFloat({64, 4});
  std::vector<Tensor> ref;
  ASSERT_TRUE((*s)->Run({x}, &ref).ok());
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        std::vector<Tensor> out;
        if (!(*s)->Run({x}, &out).ok() ||
            std::memcmp(out[0].raw_data(), ref[0].raw_data(), ref[0].ByteSize()) != 0) {
          ++mismatches;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// y = MatMul(x, w), z = MatMul(x, shared), t = Transpose(shared): both MatMuls pack their weight
// and release it; Transpose reads "shared" itself, so it stays in the graph.
Model PackedWeightModel() {
  Model m;
  m.opsets[""] = 13;
  Graph& g = m.graph;
  g.name = "packed";
  g.inputs = {Decl("x", DataType::kFloat32, {-1, 8})};
  g.outputs = {Decl("y", DataType::kFloat32, {-1, 8}), Decl("z", DataType::kFloat32, {-1, 8}),
               Decl("t", DataType::kFloat32, {8, 8})};
  g.initializers["w"] = testing::RandomFloat({8, 8}, -1, 1, 3);
  g.initializers["shared"] = testing::RandomFloat({8, 8}, -1, 1, 4);
  g.AddNode("MatMul", {"x", "w"}, {"y"}, "mm");
  g.AddNode("MatMul", {"x", "shared"}, {"z"}, "mm2");
  g.AddNode("Transpose", {"shared"}, {"t"}, "transpose");
  return m;
}

TEST(SessionTest, PackedWeightsLeaveTheGraphUnlessKept) {
  Tensor x = testing::RandomFloat({3, 8}, -1, 1, 5);
  SessionOptions keep;
  keep.optimization_level = OptimizationLevel::kNone;
  keep.keep_initializers = true;
  auto kept = Session::Create(PackedWeightModel(), keep);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ((*kept)->model().graph.initializers.size(), 2u);
  std::vector<Tensor> ref;
  Status st0 = (*kept)->Run({x}, &ref);
  ASSERT_TRUE(st0.ok()) << st0.ToString();

  SessionOptions release = keep;
  release.keep_initializers = false;
  auto released = Session::Create(PackedWeightModel(), release);
  ASSERT_TRUE(released.ok()) << released.status().ToString();
  const auto& inits = (*released)->model().graph.initializers;
  EXPECT_EQ(inits.count("w"), 0u);       // only the MatMul read it, from its packed copy
  EXPECT_EQ(inits.count("shared"), 1u);  // Transpose reads the tensor itself
  for (int i = 0; i < 3; ++i) {  // the recording run packs, planned runs reuse the packed copy
    std::vector<Tensor> out;
    Status st = (*released)->Run({x}, &out);
    ASSERT_TRUE(st.ok()) << st.ToString();
    testing::ExpectTensorNear(out[0], ref[0], 0, 0);
    testing::ExpectTensorNear(out[1], ref[1], 0, 0);
    testing::ExpectTensorNear(out[2], ref[2], 0, 0);
  }
}

TEST(SessionTest, RejectsNegativeThreadCount) {
  EXPECT_FALSE(Session::Create(AddReluModel(), {.num_threads = -1}).ok());
}

}  // namespace
}  // namespace inferd
