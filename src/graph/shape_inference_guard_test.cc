// The shape-inference guards (graph/shape_inference_guard.h), through the loader: each malformed
// node below crashed (SEGV, SIGFPE) or hung Debian libonnx 1.12's shape inference before the
// guards; now it is a clean InvalidArgument, or loads without inferred shapes, while valid
// Conv/pool models still get theirs.
#include "graph/shape_inference_guard.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

#include "graph/onnx_io.h"

namespace inferd {
namespace {

void SetShape(onnx::ValueInfoProto* v, std::initializer_list<int64_t> dims) {
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

void AddFloatInitializer(onnx::GraphProto* g, const std::string& name,
                         std::initializer_list<int64_t> dims) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= d;
  }
  for (int64_t i = 0; i < n; ++i) t->add_float_data(1.f);
}

void SetInts(onnx::NodeProto* node, const std::string& name, std::vector<int64_t> values) {
  auto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

// y = op(x[, w]) with x of `x_dims`, w (if `w_dims` is not empty) an initializer.
onnx::ModelProto OneNode(const std::string& op, std::initializer_list<int64_t> x_dims,
                         std::initializer_list<int64_t> w_dims = {}) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("g");
  SetShape(g->add_input(), x_dims);
  g->mutable_input(0)->set_name("x");
  auto* node = g->add_node();
  node->set_op_type(op);
  node->set_name("n");
  node->add_input("x");
  if (w_dims.size() > 0) {
    AddFloatInitializer(g, "w", w_dims);
    node->add_input("w");
  }
  node->add_output("y");
  // The checker wants a shape on graph outputs: as many unnamed dims as x has.
  auto* y = g->add_output();
  y->set_name("y");
  auto* yt = y->mutable_type()->mutable_tensor_type();
  yt->set_elem_type(onnx::TensorProto::FLOAT);
  auto* y_shape = yt->mutable_shape();
  for (size_t i = 0; i < x_dims.size(); ++i) y_shape->add_dim();
  return m;
}

StatusOr<Model> Parse(const onnx::ModelProto& m) {
  return ParseOnnxModel(m.SerializeAsString(), "");
}

void ExpectRejected(const onnx::ModelProto& m, const std::string& needle) {
  StatusOr<Model> r = Parse(m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().ToString();
}

TEST(ShapeInferenceGuardTest, FuzzerInputConvWeightRankAboveDataRankIsRejected) {
  // The input fuzz/known_crashes held: Conv(x[1, 4], w[1, 1, 3, 3]) then MaxPool; onnx indexed
  // the empty `dilations` of a 0-spatial-dim input with the weight's 2 spatial dims (SEGV).
  std::ifstream in(
      std::string(INFERD_SOURCE_DIR) + "/fuzz/corpus/onnx/crash_conv_weight_rank_above_data_rank",
      std::ios::binary);
  ASSERT_TRUE(in) << "corpus file missing";
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  StatusOr<Model> r = ParseOnnxModel(bytes, "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("Conv node: the weight has rank 4 but the data input has "
                                      "rank 2"),
            std::string::npos)
      << r.status().ToString();
}

TEST(ShapeInferenceGuardTest, ConvAndConvTransposeWeightRankMismatchIsRejected) {
  ExpectRejected(OneNode("Conv", {1, 1, 5}, {1, 1, 3, 3}), "weight has rank 4 but the data");
  ExpectRejected(OneNode("ConvTranspose", {1, 1, 5}, {1, 1, 3, 3}), "weight has rank 4");
  // ConvTranspose reads the weight's dim 1 even with kernel_shape given.
  onnx::ModelProto m = OneNode("ConvTranspose", {1, 1, 5, 5}, {1});
  SetInts(m.mutable_graph()->mutable_node(0), "kernel_shape", {3, 3});
  ExpectRejected(m, "weight has rank 1");
}

TEST(ShapeInferenceGuardTest, ZeroOrHugeWindowAttributesAreRejected) {
  // A stride of 0 divided by zero in onnx's output-size formula (SIGFPE).
  onnx::ModelProto conv = OneNode("Conv", {1, 1, 5, 5}, {1, 1, 3, 3});
  SetInts(conv.mutable_graph()->mutable_node(0), "strides", {1, 0});
  ExpectRejected(conv, "Conv node: attribute 'strides' has 0");
  onnx::ModelProto pool = OneNode("MaxPool", {1, 1, 5, 5});
  SetInts(pool.mutable_graph()->mutable_node(0), "kernel_shape", {2, 2});
  SetInts(pool.mutable_graph()->mutable_node(0), "strides", {0, 1});
  ExpectRejected(pool, "MaxPool node: attribute 'strides' has 0");
  onnx::ModelProto avg = OneNode("AveragePool", {1, 1, 5, 5});
  SetInts(avg.mutable_graph()->mutable_node(0), "kernel_shape", {2, -1});
  ExpectRejected(avg, "attribute 'kernel_shape' has -1");
  onnx::ModelProto dil = OneNode("Conv", {1, 1, 5, 5}, {1, 1, 3, 3});
  SetInts(dil.mutable_graph()->mutable_node(0), "dilations", {1, int64_t{1} << 40});
  ExpectRejected(dil, "attribute 'dilations'");
}

TEST(ShapeInferenceGuardTest, MaxRoiPoolOnThreeDimensionalInputIsRejected) {
  onnx::ModelProto m = OneNode("MaxRoiPool", {1, 1, 5}, {2, 5});
  SetInts(m.mutable_graph()->mutable_node(0), "pooled_shape", {2});
  ExpectRejected(m, "MaxRoiPool node: the data input has rank 3");
}

TEST(ShapeInferenceGuardTest, GemmOnScalarsIsRejected) {
  // Found by fuzz/onnx_schema_sweep.py: Gemm-6 read dim 0 of a scalar A (SEGV).
  onnx::ModelProto m = OneNode("Gemm", {}, {});
  auto* g = m.mutable_graph();
  m.mutable_opset_import(0)->set_version(6);
  AddFloatInitializer(g, "b", {});
  AddFloatInitializer(g, "c", {2, 3});
  g->mutable_node(0)->add_input("b");
  g->mutable_node(0)->add_input("c");
  ExpectRejected(m, "Gemm node: input 0 has rank 0");
  // Opset 13 checks the ranks itself; the guard gives the same answer.
  m.mutable_opset_import(0)->set_version(13);
  ExpectRejected(m, "Gemm node: input 0 has rank 0");
}

TEST(ShapeInferenceGuardTest, LayerNormalizationAxisOutOfRangeIsRejected) {
  // Found by fuzz/onnx_schema_sweep.py: the default axis -1 on a scalar wrote output dim -1.
  for (int64_t axis : {int64_t{-1}, int64_t{-4}, int64_t{3}}) {
    onnx::ModelProto m = OneNode(
        "LayerNormalization",
        axis == -1 ? std::initializer_list<int64_t>{} : std::initializer_list<int64_t>{2, 3, 4},
        {4});
    m.mutable_opset_import(0)->set_version(17);
    auto* node = m.mutable_graph()->mutable_node(0);
    node->add_output("mean");
    if (axis != -1) {
      auto* a = node->add_attribute();
      a->set_name("axis");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(axis);
    }
    ExpectRejected(m, "LayerNormalization node: axis " + std::to_string(axis) + " is out of range");
  }
  onnx::ModelProto ok = OneNode("LayerNormalization", {2, 3, 4}, {4});
  ok.mutable_opset_import(0)->set_version(17);
  ok.mutable_graph()->mutable_node(0)->add_output("mean");
  StatusOr<Model> r = Parse(ok);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_NE(r->graph.FindValueInfo("mean"), nullptr);
  EXPECT_EQ(r->graph.FindValueInfo("mean")->ShapeString(), "[2, 3, 1]");
}

TEST(ShapeInferenceGuardTest, MaxUnpoolWithUntypedIndicesLoadsWithoutInferredShape) {
  // onnx dereferenced the indices' type without checking it has one.
  // The indices come out of a Reshape to a shape only known at run time: no rank.
  onnx::ModelProto m = OneNode("MaxUnpool", {1, 1, 2, 2});
  auto* g = m.mutable_graph();
  for (const char* name : {"flat", "s"}) {
    auto* v = g->add_input();
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::INT64);
    tt->mutable_shape()->add_dim()->set_dim_param(std::string(name) + "_n");
  }
  auto* reshape = g->add_node();
  reshape->set_op_type("Reshape");
  reshape->add_input("flat");
  reshape->add_input("s");
  reshape->add_output("i");
  g->mutable_node(0)->add_input("i");
  g->mutable_node()->SwapElements(0, 1);  // the Reshape first
  SetInts(g->mutable_node(1), "kernel_shape", {2, 2});
  StatusOr<Model> r = Parse(m);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->graph.nodes.size(), 2u);
  const ValueInfo* i = r->graph.FindValueInfo("i");
  EXPECT_TRUE(i == nullptr || !i->shape.has_value());
}

TEST(ShapeInferenceGuardTest, ValidConvAndPoolStillGetInferredShapes) {
  onnx::ModelProto m = OneNode("Conv", {1, 1, 5, 5}, {2, 1, 3, 3});
  auto* g = m.mutable_graph();
  SetInts(g->mutable_node(0), "strides", {2, 2});
  SetInts(g->mutable_node(0), "pads", {1, 1, 1, 1});
  g->mutable_node(0)->set_output(0, "c");
  auto* pool = g->add_node();
  pool->set_op_type("MaxPool");
  pool->add_input("c");
  pool->add_output("y");
  SetInts(pool, "kernel_shape", {2, 2});
  StatusOr<Model> r = Parse(m);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ValueInfo* c = r->graph.FindValueInfo("c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->ShapeString(), "[1, 2, 3, 3]");
}

TEST(ShapeInferenceGuardTest, InstallingTwiceIsHarmless) {
  InstallShapeInferenceGuards();
  InstallShapeInferenceGuards();
  ExpectRejected(OneNode("Conv", {1, 1, 5}, {1, 1, 3, 3}), "weight has rank 4");
}

}  // namespace
}  // namespace inferd
