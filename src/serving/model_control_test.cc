// The repository API's load as Triton has it: a load request always reloads; the `config` load
// parameter (Triton's JSON) replaces config.pbtxt, and a bad one fails the load with the model
// left as it was; file overrides load a model from the request's files only; unknown models get
// Triton's error texts.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include "model_config.pb.h"
#include "serving/model_manager.h"
#include "serving/test_models.h"

namespace inferd::serving {
namespace {

namespace fs = std::filesystem;
using testing::Request;
using testing::WriteAddModel;
using testing::WriteFile;

Tensor Row() { return Tensor::FromVector<float>({1, 2, 3}, {1, 3}); }

class ModelControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = testing::FreshRepository("control_repo_");
    WriteFile(repo_ / "m" / "config.pbtxt",
              "max_batch_size: 4\ninstance_group [ { count: 1 kind: KIND_CPU } ]\n");
    WriteAddModel(repo_ / "m" / "1" / "model.onnx");
    ModelManagerOptions o;
    o.repository = repo_;
    o.control_mode = ModelControlMode::kExplicit;
    o.startup_models = {"m"};
    o.total_threads = 1;
    auto m = ModelManager::Create(o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    manager_ = std::move(m).value();
    ASSERT_TRUE(manager_->Start().ok());
    ASSERT_TRUE(manager_->IsModelReady("m"));
  }
  void TearDown() override {
    manager_.reset();
    fs::remove_all(repo_);
  }
  Status Load(const std::string& name, LoadParameters params = {}) {
    std::promise<Status> p;
    auto f = p.get_future();
    manager_->RequestLoad(name, std::move(params), [&p](Status s) { p.set_value(std::move(s)); });
    return f.get();
  }
  testing::Result Infer(const std::string& model = "m") {
    return testing::InferSync(*manager_, Request(model, Row()));
  }
  uint64_t InferenceCount() {
    auto stats = manager_->GetStatistics("m");
    return stats.empty() ? 0 : stats[0].inference_count;
  }
  int MaxBatchSize() { return (*manager_->GetConfig("m"))->max_batch_size(); }
  std::string ModelBytes() {
    const fs::path p = repo_ / "scratch" / "model.onnx";
    WriteAddModel(p);
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    fs::remove_all(repo_ / "scratch");
    return ss.str();
  }

  fs::path repo_;
  std::unique_ptr<ModelManager> manager_;
};

TEST_F(ModelControlTest, LoadingALoadedModelReloadsIt) {
  ASSERT_TRUE(Infer().status.ok());
  EXPECT_EQ(InferenceCount(), 1u);
  ASSERT_TRUE(Load("m").ok());
  EXPECT_EQ(InferenceCount(), 0u);  // a new version: its statistics start again
  EXPECT_TRUE(Infer().status.ok());
}

TEST_F(ModelControlTest, ConfigParameterReplacesTheConfig) {
  // As Triton's model-control example sends it: a partial config, int64 as a string.
  ASSERT_TRUE(Load("m", {.config = R"({"max_batch_size":"2"})", .files = {}}).ok());
  EXPECT_EQ(MaxBatchSize(), 2);
  EXPECT_TRUE(Infer().status.ok());
  auto json = manager_->GetConfigJson("m");
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find("\"max_batch_size\":2"), std::string::npos) << *json;
  // A plain load goes back to config.pbtxt.
  ASSERT_TRUE(Load("m").ok());
  EXPECT_EQ(MaxBatchSize(), 4);
}

TEST_F(ModelControlTest, BadConfigParameterLeavesTheModelAsItWas) {
  ASSERT_TRUE(Infer().status.ok());
  for (const char* bad : {R"("parameters": {"config": {{"max_batch_size": "16"}}})",
                          R"({"max_batch_size": 2, "no_such_field": 1})",
                          R"({"max_batch_size": "lots"})"}) {
    Status s = Load("m", {.config = bad, .files = {}});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("failed to load 'm'"), std::string::npos) << s.message();
  }
  // Valid JSON the model rejects: the running version keeps serving, untouched.
  Status s = Load("m", {.config = R"({"input": [{"name": "nope", "data_type": "TYPE_FP32",
                                                "dims": [3]}]})",
                        .files = {}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("nope"), std::string::npos) << s.message();
  EXPECT_EQ(MaxBatchSize(), 4);
  EXPECT_EQ(InferenceCount(), 1u);  // never replaced
  EXPECT_TRUE(Infer().status.ok());
}

TEST_F(ModelControlTest, FileOverridesLoadFromTheRequestFiles) {
  const std::string bytes = ModelBytes();
  // A model that is not in the repository at all, from its files and config.
  ASSERT_TRUE(Load("fresh", {.config = R"({"max_batch_size": 2})",
                             .files = {{"1/model.onnx", bytes}}})
                  .ok());
  auto r = Infer("fresh");
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.response.outputs.at(0).second.data<float>()[2], 6.0f);
  // Version 3 from the request files replaces the repository's version 1.
  ASSERT_TRUE(Load("m", {.config = "{}", .files = {{"3/model.onnx", bytes}}}).ok());
  EXPECT_EQ(Infer().response.model_version, 3);
  // The scratch folder is gone once loaded; the model still serves.
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path())) {
    EXPECT_EQ(e.path().filename().string().find("inferd-load-" + std::to_string(getpid())),
              std::string::npos)
        << e.path();
  }
}

TEST_F(ModelControlTest, BadFileOverridesAreRejected) {
  const std::string bytes = ModelBytes();
  Status s = Load("m", {.config = std::nullopt, .files = {{"1/model.onnx", bytes}}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'config' must be specified"), std::string::npos) << s.message();
  for (const char* path : {"../escape/1/model.onnx", "/etc/passwd", "", "1/.."}) {
    s = Load("m", {.config = "{}", .files = {{path, bytes}}});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << path;
    EXPECT_NE(s.message().find("invalid file parameter"), std::string::npos) << s.message();
  }
  EXPECT_FALSE(fs::exists(repo_.parent_path() / "escape"));
  s = Load("m", {.config = "{}", .files = {{"1/model.onnx", "not a model"}}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Infer().status.ok());  // the repository's version still serves
  EXPECT_EQ(Infer().response.model_version, 1);
}

TEST_F(ModelControlTest, UnknownModelsGetTritonsWording) {
  auto unknown = Infer("nosuch");
  EXPECT_EQ(unknown.status.code(), StatusCode::kNotFound);
  EXPECT_EQ(unknown.status.message(), "Request for unknown model: 'nosuch' is not found");
  auto r = Request("m", Row());
  r->model_version = 7;
  auto version = testing::InferSync(*manager_, std::move(r));
  EXPECT_EQ(version.status.message(), "Request for unknown model: 'm' version 7 is not found");
  EXPECT_EQ(manager_->GetMetadata("nosuch").status().message(),
            "Request for unknown model: 'nosuch' is not found");
  Status load = Load("nosuch");
  EXPECT_EQ(load.code(), StatusCode::kNotFound);
  EXPECT_NE(load.message().find("failed to load 'nosuch'"), std::string::npos) << load.message();
  ASSERT_TRUE(manager_->UnloadModel("m").ok());
  auto unloaded = Infer();
  EXPECT_EQ(unloaded.status.code(), StatusCode::kUnavailable);
  EXPECT_NE(unloaded.status.message().find("Request for unknown model: 'm'"), std::string::npos)
      << unloaded.status.message();
}

}  // namespace
}  // namespace inferd::serving
