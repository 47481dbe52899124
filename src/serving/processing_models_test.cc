// The built-in processing models through the ModelManager: both backends load from a temporary
// repository and infer; bad parameters fail the load naming the parameter; a batch that merges a
// corrupt image with good ones fails only the request with the corrupt image (INVALID_ARGUMENT,
// kInvalidInput), the others succeed, and the split is counted.
#include "serving/processing_models.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "kernels/cpu/image/image_test_util.h"
#include "serving/model_manager.h"
#include "serving/test_models.h"
#include "testing/fake_clock.h"

namespace inferd::serving {
namespace processing_models_test {
namespace {

namespace fs = std::filesystem;
using testing::InferAsync;
using testing::Result;
using testing::WriteFile;

std::string Param(const std::string& key, const std::string& value) {
  return "parameters { key: \"" + key + "\" value { string_value: \"" + value + "\" } }\n";
}

std::string Png(int w, int h) {
  return cpu::image_testing::EncodePng(cpu::image_testing::TestPicture(w, h), w, h,
                                       PNG_COLOR_TYPE_RGB);
}

Tensor Bytes(std::vector<std::string> images) {
  const auto n = static_cast<int64_t>(images.size());
  auto t = Tensor::FromStrings(std::move(images), {n, 1});
  EXPECT_TRUE(t.ok());
  return *t;
}

class ProcessingModelsTest : public ::testing::Test {
 protected:
  void SetUp() override { repo_ = testing::FreshRepository("processing_repo_"); }
  void TearDown() override {
    manager_.reset();
    fs::remove_all(repo_);
  }
  void AddModel(const std::string& name, const std::string& config) {
    WriteFile(repo_ / name / "config.pbtxt", config);
    fs::create_directories(repo_ / name / "1");
  }
  void Load() {
    ModelManagerOptions o;
    o.repository = repo_;
    o.total_threads = 2;
    o.clock = &clock_;
    auto m = ModelManager::Create(o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    manager_ = std::move(m).value();
    ASSERT_TRUE(manager_->LoadRepository().ok());
  }
  std::string Reason(const std::string& name) {
    for (const auto& e : manager_->Index()) {
      if (e.name == name) return e.state + ": " + e.reason;
    }
    return "not in the index";
  }
  Result Infer(const std::string& model, Tensor x, const std::string& input = "INPUT") {
    return testing::InferSync(*manager_, testing::Request(model, std::move(x), input));
  }

  fs::path repo_;
  FakeClock clock_;
  std::unique_ptr<ModelManager> manager_;
};

TEST_F(ProcessingModelsTest, BothBackendsLoadAndInfer) {
  AddModel("pre", "backend: \"inferd_image\"\nmax_batch_size: 4\n" + Param("resize", "12") +
                      Param("crop", "8x10") + Param("mean", "0.5, 0.5, 0.5") +
                      Param("std", "0.5,0.5,0.5"));
  AddModel("post", R"(backend: "inferd_classify"
max_batch_size: 8
input { name: "scores" data_type: TYPE_FP32 dims: [ 3 ] }
output { name: "top" data_type: TYPE_STRING dims: [ 2 ] }
)" + Param("k", "2") + Param("softmax", "true") + Param("labels", "labels.txt"));
  WriteFile(repo_ / "post" / "labels.txt", "cat\r\ndog\nfish\n");
  Load();
  ASSERT_TRUE(manager_->IsModelReady("pre")) << Reason("pre");
  ASSERT_TRUE(manager_->IsModelReady("post")) << Reason("post");

  auto md = manager_->GetMetadata("pre");
  ASSERT_TRUE(md.ok());
  EXPECT_EQ(md->platform, "inferd_image");
  ASSERT_EQ(md->inputs.size(), 1u);
  EXPECT_EQ(md->inputs[0].datatype, "BYTES");
  EXPECT_EQ(md->outputs[0].shape, (std::vector<int64_t>{-1, 3, 8, 10}));

  Result r = Infer("pre", Bytes({Png(24, 16), Png(16, 16)}));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.response.outputs.size(), 1u);
  const Tensor& y = r.response.outputs[0].second;
  EXPECT_EQ(y.shape(), (Shape{2, 3, 8, 10}));
  EXPECT_EQ(y.dtype(), DataType::kFloat32);
  for (int64_t i = 0; i < y.NumElements(); ++i) {
    ASSERT_GE(y.data<float>()[i], -1.0f);  // (v / 255 - 0.5) / 0.5
    ASSERT_LE(y.data<float>()[i], 1.0f);
  }

  Result c = Infer("post", Tensor::FromVector<float>({0, 2, 1}, {1, 3}), "scores");
  ASSERT_TRUE(c.status.ok()) << c.status.ToString();
  const Tensor& top = c.response.outputs[0].second;
  ASSERT_EQ(top.shape(), (Shape{1, 2}));
  EXPECT_EQ(top.data<std::string>()[0], "0.665241:1:dog");
  EXPECT_EQ(top.data<std::string>()[1], "0.244728:2:fish");
}

TEST_F(ProcessingModelsTest, BadParametersFailTheLoadNamingThem) {
  const std::string image = "backend: \"inferd_image\"\nmax_batch_size: 2\n";
  const std::string classify = "backend: \"inferd_classify\"\nmax_batch_size: 2\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {image + Param("crop", "224") + Param("resise", "256"), "unknown parameter 'resise'"},
      {image, "parameter 'crop' is required"},
      {image + Param("crop", "0"), "parameter 'crop': '0' is not a size"},
      {image + Param("crop", "224x") , "parameter 'crop': '224x' is not a size"},
      {image + Param("crop", "224") + Param("resize", "25x"), "parameter 'resize': '25x'"},
      {image + Param("crop", "224") + Param("resize", "100"), "parameter 'resize': 100 is smaller"},
      {image + Param("crop", "8") + Param("mean", "1,2"), "parameter 'mean': '1,2' is not 3"},
      {image + Param("crop", "8") + Param("std", "1,0,1"), "parameter 'std'"},
      {image + Param("crop", "8") + Param("layout", "NCWH"), "parameter 'layout': 'NCWH'"},
      {image + Param("crop", "8") + Param("dct_scaling", "maybe"), "parameter 'dct_scaling'"},
      {image + Param("crop", "8") + Param("max_pixels", "-5"), "parameter 'max_pixels'"},
      {image + Param("crop", "8") + Param("data_type", "UINT8") + Param("mean", "1,1,1"),
       "'mean', 'std' and 'scale' apply to FP32 output only"},
      {image + Param("crop", "8") + "output { name: \"o\" data_type: TYPE_INT32 dims: [3,8,8] }",
       "output 'o': it writes TYPE_FP32 or TYPE_UINT8"},
      {classify + Param("k", "0"), "parameter 'k': '0' is not an integer >= 1"},
      {classify + Param("labels", "missing.txt"), "parameter 'labels': cannot read 'missing.txt'"},
      {classify + Param("labels", "../x.txt"), "parameter 'labels': cannot read '../x.txt'"},
      {classify + Param("softmax", "yes"), "parameter 'softmax'"},
      {classify + Param("k", "5") + "input { name: \"s\" data_type: TYPE_FP32 dims: [ 3 ] }",
       "parameter 'k': 5 is more than the 3 classes"},
  };
  for (size_t i = 0; i < cases.size(); ++i) AddModel("bad" + std::to_string(i), cases[i].first);
  Load();
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string reason = Reason("bad" + std::to_string(i));
    EXPECT_NE(reason.find(cases[i].second), std::string::npos) << i << ": " << reason;
    EXPECT_NE(reason.find("backend 'inferd_"), std::string::npos) << i << ": " << reason;
  }
}

// The image model has no default warmup (zeros are not an image), but a model_warmup with an
// encoded image (Triton's TYPE_STRING input_data_file: 4-byte length, bytes) runs; a warmup image
// that does not decode fails the load with the reason.
TEST_F(ProcessingModelsTest, WarmupWithAnImageFile) {
  auto prefixed = [](const std::string& bytes) {
    std::string out(4, '\0');
    for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((bytes.size() >> (8 * i)) & 0xff);
    return out + bytes;
  };
  const std::string warmup = R"(model_warmup { name: "photo" batch_size: 2 inputs { key: "INPUT"
  value { data_type: TYPE_STRING dims: [ 1 ] input_data_file: "image.bin" } } }
)";
  const std::string config = "backend: \"inferd_image\"\nmax_batch_size: 2\n" + Param("crop", "8");
  AddModel("plain", config);
  AddModel("warm", config + warmup);
  WriteFile(repo_ / "warm" / "warmup" / "image.bin", prefixed(Png(9, 9)) + prefixed(Png(20, 8)));
  AddModel("short", config + warmup);
  WriteFile(repo_ / "short" / "warmup" / "image.bin", prefixed(Png(9, 9)));
  AddModel("corrupt", config + warmup);
  WriteFile(repo_ / "corrupt" / "warmup" / "image.bin",
            prefixed(Png(9, 9)) + prefixed(Png(9, 9).substr(0, 40)));
  Load();
  EXPECT_TRUE(manager_->IsModelReady("plain")) << Reason("plain");
  EXPECT_TRUE(manager_->IsModelReady("warm")) << Reason("warm");
  EXPECT_NE(Reason("short").find("must hold 2 string element(s)"), std::string::npos)
      << Reason("short");
  EXPECT_NE(Reason("corrupt").find("model_warmup 'photo'"), std::string::npos) << Reason("corrupt");
  EXPECT_NE(Reason("corrupt").find("batch row 1: truncated PNG"), std::string::npos)
      << Reason("corrupt");
}

// Three requests merged into one batch (a full batch of max_batch_size 3: the queue delay never
// elapses on the fake clock); the corrupt image fails only its own request.
TEST_F(ProcessingModelsTest, CorruptImageFailsOnlyItsRequestInABatch) {
  AddModel("pre", "backend: \"inferd_image\"\nmax_batch_size: 3\n" + Param("crop", "8") +
                      "dynamic_batching { max_queue_delay_microseconds: 60000000 }\n");
  Load();
  ASSERT_TRUE(manager_->IsModelReady("pre")) << Reason("pre");
  std::vector<std::future<Result>> results;
  const std::string truncated = Png(10, 10).substr(0, 60);
  for (const std::string& image : {Png(10, 10), truncated, Png(12, 9)}) {
    results.push_back(
        InferAsync(*manager_, testing::Request("pre", Bytes({image}), "INPUT")));
  }
  Result good1 = results[0].get(), bad = results[1].get(), good2 = results[2].get();
  EXPECT_TRUE(good1.status.ok()) << good1.status.ToString();
  EXPECT_TRUE(good2.status.ok()) << good2.status.ToString();
  EXPECT_EQ(bad.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status.message().find("batch row 0: truncated PNG"), std::string::npos)
      << bad.status.message();
  auto stats = manager_->GetStatistics("pre");
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].batches_split, 1u);
  EXPECT_EQ(stats[0].success_requests, 2u);
  EXPECT_EQ(stats[0].failures[FailureReason::kInvalidInput], 1u);
  EXPECT_EQ(stats[0].execution_count, 2u);  // the two good requests, each alone
}

}  // namespace
}  // namespace processing_models_test
}  // namespace inferd::serving
