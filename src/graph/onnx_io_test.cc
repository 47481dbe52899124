#include "graph/onnx_io.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace inferd {
namespace {

namespace fs = std::filesystem;

class OnnxIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("inferd_onnx_io_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // y = Relu(x + w), x: float[batch, 3], w: float[3] initializer.
  static onnx::ModelProto MakeModel() {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    auto* g = m.mutable_graph();
    g->set_name("g");
    auto* x = g->add_input();
    x->set_name("x");
    auto* tt = x->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_param("batch");
    tt->mutable_shape()->add_dim()->set_dim_value(3);
    auto* y = g->add_output();
    y->set_name("y");
    auto* yt = y->mutable_type()->mutable_tensor_type();
    yt->set_elem_type(onnx::TensorProto::FLOAT);
    yt->mutable_shape()->add_dim()->set_dim_param("batch");
    yt->mutable_shape()->add_dim()->set_dim_value(3);
    auto* w = g->add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(3);
    for (float f : {1.f, -2.f, 3.f}) w->add_float_data(f);
    auto* add = g->add_node();
    add->set_op_type("Add");
    add->set_name("add");
    add->add_input("x");
    add->add_input("w");
    add->add_output("s");
    auto* relu = g->add_node();
    relu->set_op_type("Relu");
    relu->set_name("relu");
    relu->add_input("s");
    relu->add_output("y");
    return m;
  }

  fs::path Write(const std::string& name, const std::string& bytes) {
    fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }

  fs::path dir_;
};

TEST_F(OnnxIoTest, LoadsModel) {
  fs::path p = Write("m.onnx", MakeModel().SerializeAsString());
  StatusOr<Model> m = LoadOnnxModel(p);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->OpsetFor(""), 13);
  ASSERT_EQ(m->graph.nodes.size(), 2u);
  EXPECT_EQ(m->graph.nodes[0]->op_type, "Add");
  EXPECT_EQ(m->graph.nodes[1]->op_type, "Relu");
  ASSERT_EQ(m->graph.inputs.size(), 1u);
  EXPECT_EQ(m->graph.inputs[0].ShapeString(), "[batch, 3]");
  const Tensor& w = m->graph.initializers.at("w");
  EXPECT_EQ(w.shape(), Shape({3}));
  EXPECT_EQ(w.data<float>()[1], -2.f);
  // Shape inference filled in the intermediate value.
  EXPECT_EQ(m->graph.ValueType("s"), DataType::kFloat32);
}

TEST_F(OnnxIoTest, MissingFileIsNotFound) {
  StatusOr<Model> m = LoadOnnxModel(dir_ / "nope.onnx");
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("nope.onnx"), std::string::npos);
}

TEST_F(OnnxIoTest, CorruptAndTruncatedModelsFailCleanly) {
  std::string good = MakeModel().SerializeAsString();
  std::mt19937 rng(1);
  std::string noise(4096, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  for (const std::string& bytes : {std::string(), noise, good.substr(0, good.size() / 2),
                                   good.substr(0, good.size() - 3)}) {
    StatusOr<Model> m = ParseOnnxModel(bytes, dir_);
    EXPECT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument) << m.status().ToString();
  }
}

TEST_F(OnnxIoTest, CheckerRejectsInvalidModel) {
  onnx::ModelProto m = MakeModel();
  m.mutable_graph()->mutable_node(1)->set_op_type("NoSuchOp");
  StatusOr<Model> r = ParseOnnxModel(m.SerializeAsString(), dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("NoSuchOp"), std::string::npos) << r.status().ToString();
}

TEST_F(OnnxIoTest, ExternalDataIsResolvedRelativeToTheModel) {
  float values[3] = {0.5f, 1.5f, -4.f};
  std::string blob(8, 'x');  // offset 8
  blob.append(reinterpret_cast<const char*>(values), sizeof(values));
  Write("weights.bin", blob);
  onnx::ModelProto m = MakeModel();
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add_kv = [&](const char* k, const std::string& v) {
    auto* kv = w->add_external_data();
    kv->set_key(k);
    kv->set_value(v);
  };
  add_kv("location", "weights.bin");
  add_kv("offset", "8");
  add_kv("length", "12");
  fs::path p = Write("ext.onnx", m.SerializeAsString());
  StatusOr<Model> r = LoadOnnxModel(p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->graph.initializers.at("w").data<float>()[2], -4.f);

  // A location escaping the model folder is refused.
  w->mutable_external_data(0)->set_value("../weights.bin");
  StatusOr<Model> bad = ParseOnnxModel(m.SerializeAsString(), dir_, {.run_checker = false});
  EXPECT_FALSE(bad.ok());
  // A length beyond the file is refused.
  w->mutable_external_data(0)->set_value("weights.bin");
  w->mutable_external_data(2)->set_value("400");
  bad = ParseOnnxModel(m.SerializeAsString(), dir_, {.run_checker = false});
  EXPECT_FALSE(bad.ok());
}

// External data that is a symlink out of the model folder (to a file whose bytes would come back
// as a tensor) or a FIFO (whose open would block the load) is refused before it is opened; with
// and without the checker.
TEST_F(OnnxIoTest, ExternalDataSymlinkOutOfTheFolderAndFifoAreRefused) {
  const fs::path outside = dir_.parent_path() / (dir_.filename().string() + "_outside.bin");
  {
    float values[3] = {7.f, 8.f, 9.f};
    std::ofstream(outside, std::ios::binary)
        .write(reinterpret_cast<const char*>(values), sizeof(values));
  }
  const fs::path model_dir = dir_ / "m";
  fs::create_directories(model_dir);
  fs::create_symlink(outside, model_dir / "weights.bin");
  ASSERT_EQ(::mkfifo((model_dir / "fifo.bin").c_str(), 0600), 0);
  onnx::ModelProto m = MakeModel();
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = w->add_external_data();
  kv->set_key("location");
  for (bool checker : {false, true}) {
    kv->set_value("weights.bin");
    StatusOr<Model> r = ParseOnnxModel(m.SerializeAsString(), model_dir, {.run_checker = checker});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    if (!checker) {
      EXPECT_NE(r.status().message().find("outside the model folder"), std::string::npos)
          << r.status().ToString();
    }
    kv->set_value("fifo.bin");
    r = ParseOnnxModel(m.SerializeAsString(), model_dir, {.run_checker = checker});
    ASSERT_FALSE(r.ok());
    if (!checker) {
      EXPECT_NE(r.status().message().find("not a regular file"), std::string::npos)
          << r.status().ToString();
    }
  }
  // A symlink that stays inside the folder is fine.
  fs::copy_file(outside, model_dir / "real.bin");
  fs::create_symlink("real.bin", model_dir / "inside.bin");
  kv->set_value("inside.bin");
  StatusOr<Model> ok = ParseOnnxModel(m.SerializeAsString(), model_dir, {.run_checker = false});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->graph.initializers.at("w").data<float>()[2], 9.f);
  fs::remove(outside);
}

// A FIFO as the model file fails at once instead of blocking in open().
TEST_F(OnnxIoTest, FifoModelFileIsRefused) {
  ASSERT_EQ(::mkfifo((dir_ / "model.onnx").c_str(), 0600), 0);
  StatusOr<Model> m = LoadOnnxModel(dir_ / "model.onnx");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("not a regular file"), std::string::npos)
      << m.status().ToString();
}

TEST_F(OnnxIoTest, TypedFieldsConvert) {
  onnx::TensorProto t;
  t.set_name("h");
  t.set_data_type(onnx::TensorProto::FLOAT16);
  t.add_dims(2);
  t.add_int32_data(0x3c00);  // 1.0
  t.add_int32_data(0xc000);  // -2.0
  StatusOr<Tensor> r = TensorFromProto(t, dir_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->GetAsDouble(0), 1.0);
  EXPECT_EQ(r->GetAsDouble(1), -2.0);
  t.add_int32_data(0);  // 3 values for 2 elements
  EXPECT_FALSE(TensorFromProto(t, dir_).ok());
  // Absurd dims are refused before anything is allocated.
  onnx::TensorProto huge;
  huge.set_data_type(onnx::TensorProto::FLOAT);
  for (int i = 0; i < 4; ++i) huge.add_dims(int64_t{1} << 20);
  EXPECT_EQ(TensorFromProto(huge, dir_).status().code(), StatusCode::kInvalidArgument);
  huge.clear_dims();
  huge.add_dims(int64_t{1} << 33);
  huge.set_raw_data("abcd");
  EXPECT_EQ(TensorFromProto(huge, dir_).status().code(), StatusCode::kInvalidArgument);
  t.set_data_type(onnx::TensorProto::STRING);  // strings never come as raw data
  EXPECT_EQ(TensorFromProto(t, dir_).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(OnnxIoTest, StringTensorWhoseDimsOverflowIsRejected) {
  // Found by the onnx fuzz target (fuzz/corpus/onnx/crash_string_tensor_dims_overflow_*): the
  // dims' product wrapped past int64 (UBSan) before the string count was compared with it.
  onnx::TensorProto t;
  t.set_name("s");
  t.set_data_type(onnx::TensorProto::STRING);
  for (int64_t d : {int64_t{1} << 40, int64_t{1} << 30, int64_t{16}}) t.add_dims(d);
  t.add_string_data("x");
  StatusOr<Tensor> r = TensorFromProto(t, dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("too large"), std::string::npos) << r.status().ToString();
}

TEST_F(OnnxIoTest, StringTensorsImportAndExport) {
  onnx::TensorProto t;
  t.set_name("s");
  t.set_data_type(onnx::TensorProto::STRING);
  t.add_dims(3);
  t.add_string_data("");
  t.add_string_data(std::string("a\0b", 3));
  t.add_string_data("\xc3\xa9");
  StatusOr<Tensor> r = TensorFromProto(t, dir_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->dtype(), DataType::kString);
  EXPECT_EQ(r->data<std::string>()[0], "");
  EXPECT_EQ(r->data<std::string>()[1], std::string("a\0b", 3));
  EXPECT_EQ(r->data<std::string>()[2], "\xc3\xa9");
  t.add_string_data("extra");  // 4 values for 3 elements
  EXPECT_EQ(TensorFromProto(t, dir_).status().code(), StatusCode::kInvalidArgument);

  // A string initializer survives SaveOnnxModel / LoadOnnxModel.
  StatusOr<Model> m = ParseOnnxModel(MakeModel().SerializeAsString(), dir_);
  ASSERT_TRUE(m.ok());
  m->graph.initializers["names"] = *r;
  fs::path p = dir_ / "strings.onnx";
  ASSERT_TRUE(SaveOnnxModel(*m, p).ok());
  StatusOr<Model> back = LoadOnnxModel(p);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  const Tensor& names = back->graph.initializers.at("names");
  ASSERT_EQ(names.dtype(), DataType::kString);
  EXPECT_EQ(names.data<std::string>()[1], std::string("a\0b", 3));
}

TEST_F(OnnxIoTest, SerializeRoundTrips) {
  StatusOr<Model> m = ParseOnnxModel(MakeModel().SerializeAsString(), dir_);
  ASSERT_TRUE(m.ok());
  fs::path p = dir_ / "rt.onnx";
  ASSERT_TRUE(SaveOnnxModel(*m, p).ok());
  StatusOr<Model> back = LoadOnnxModel(p);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->graph.nodes.size(), 2u);
  EXPECT_EQ(back->graph.nodes[0]->op_type, "Add");
  EXPECT_EQ(back->graph.initializers.at("w").data<float>()[2], 3.f);
  EXPECT_EQ(back->graph.inputs[0].ShapeString(), "[batch, 3]");
}

}  // namespace
}  // namespace inferd
