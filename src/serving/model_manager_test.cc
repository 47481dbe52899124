#include "serving/model_manager.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "graph/onnx_io.h"
#include "model_config.pb.h"
#include "serving/model_config.h"
#include "serving/test_models.h"

namespace inferd::serving {
namespace {

namespace fs = std::filesystem;

using testing::Result;
using testing::WriteAddModel;
using testing::WriteFile;

ValueInfo Info(const std::string& name, std::vector<Dim> dims) {
  return testing::FloatInfo(name, std::move(dims));
}

class ModelManagerTest : public ::testing::Test {
 protected:
  void SetUp() override { repo_ = testing::FreshRepository("serving_repo_"); }
  void TearDown() override {
    manager_.reset();
    fs::remove_all(repo_);
  }
  void Load() {
    ModelManagerOptions o;
    o.repository = repo_;
    o.total_threads = 2;
    auto m = ModelManager::Create(o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    manager_ = std::move(m).value();
    ASSERT_TRUE(manager_->LoadRepository().ok());
  }
  Result Infer(std::unique_ptr<InferenceRequest> r) {
    return testing::InferSync(*manager_, std::move(r));
  }
  static std::unique_ptr<InferenceRequest> Request(const std::string& model, Tensor x,
                                                   const std::string& input = "x") {
    return testing::Request(model, std::move(x), input);
  }

  fs::path repo_;
  std::unique_ptr<ModelManager> manager_;
};

TEST_F(ModelManagerTest, AutoCompletesMissingConfigAndInfers) {
  WriteAddModel(repo_ / "double" / "1" / "model.onnx");
  Load();
  EXPECT_TRUE(manager_->IsLive());
  EXPECT_TRUE(manager_->IsReady());
  EXPECT_TRUE(manager_->IsModelReady("double"));
  EXPECT_TRUE(manager_->IsModelReady("double", 1));
  EXPECT_FALSE(manager_->IsModelReady("double", 2));
  auto md = manager_->GetMetadata("double");
  ASSERT_TRUE(md.ok()) << md.status().ToString();
  EXPECT_EQ(md->versions, std::vector<std::string>{"1"});
  ASSERT_EQ(md->inputs.size(), 1u);
  EXPECT_EQ(md->inputs[0].datatype, "FP32");
  EXPECT_EQ(md->inputs[0].shape, (std::vector<int64_t>{-1, -1}));
  auto config = manager_->GetConfig("double");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ((*config)->max_batch_size(), 8);  // symbolic first dims: autocomplete default
  auto json = manager_->GetConfigJson("double");
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find("\"max_batch_size\":8"), std::string::npos) << *json;

  auto r = Infer(Request("double", Tensor::FromVector<float>({1, 2, 3}, {1, 3})));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.response.model_version, 1);
  EXPECT_EQ(r.response.id, "req");
  ASSERT_EQ(r.response.outputs.size(), 1u);
  EXPECT_EQ(r.response.outputs[0].first, "y");
  const Tensor& y = r.response.outputs[0].second;
  EXPECT_EQ(y.shape(), (Shape{1, 3}));
  EXPECT_EQ(y.data<float>()[2], 6.0f);

  auto stats = manager_->GetStatistics("double");
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].inference_count, 1u);
  EXPECT_EQ(stats[0].execution_count, 1u);
  EXPECT_EQ(stats[0].success.count, 1u);
  EXPECT_EQ(stats[0].pending, 0);
  EXPECT_EQ(stats[0].batch_size.count, 1u);
}

TEST_F(ModelManagerTest, BadRequests) {
  WriteAddModel(repo_ / "double" / "1" / "model.onnx");
  Load();
  auto code = [&](std::unique_ptr<InferenceRequest> r) { return Infer(std::move(r)).status.code(); };
  EXPECT_EQ(code(Request("nope", Tensor::FromVector<float>({1}, {1, 1}))), StatusCode::kNotFound);
  auto wrong_version = Request("double", Tensor::FromVector<float>({1}, {1, 1}));
  wrong_version->model_version = 7;
  EXPECT_EQ(code(std::move(wrong_version)), StatusCode::kNotFound);
  EXPECT_EQ(code(Request("double", Tensor::FromVector<float>({1}, {1, 1}), "z")),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Request("double", Tensor::FromVector<int64_t>({1}, {1, 1}))),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Request("double", Tensor::FromVector<float>({1, 2}, {2}))),
            StatusCode::kInvalidArgument);  // rank
  EXPECT_EQ(code(Request("double", Tensor::Allocate(DataType::kFloat32, {9, 1}))),
            StatusCode::kInvalidArgument);  // batch > max_batch_size 8
  auto dup = Request("double", Tensor::FromVector<float>({1}, {1, 1}));
  dup->inputs.push_back(dup->inputs[0]);
  EXPECT_EQ(code(std::move(dup)), StatusCode::kInvalidArgument);
  auto missing = Request("double", Tensor::FromVector<float>({1}, {1, 1}));
  missing->inputs.clear();
  EXPECT_EQ(code(std::move(missing)), StatusCode::kInvalidArgument);
  auto bad_out = Request("double", Tensor::FromVector<float>({1}, {1, 1}));
  bad_out->requested_outputs = {"nope"};
  EXPECT_EQ(code(std::move(bad_out)), StatusCode::kInvalidArgument);
  auto stats = manager_->GetStatistics("double");
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].failures[FailureReason::kInvalidInput], 7u);
}

TEST_F(ModelManagerTest, TritonConfigWithBatchingRaggedAndBrokenModels) {
  WriteAddModel(repo_ / "ragged" / "1" / "model.onnx");
  WriteAddModel(repo_ / "ragged" / "2" / "model.onnx");
  WriteFile(repo_ / "ragged" / "config.pbtxt", R"pb(
    name: "ragged"
    platform: "onnxruntime_onnx"
    max_batch_size: 4
    version_policy: { all: {} }
    input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
    output [ { name: "y" data_type: TYPE_FP32 dims: [ -1 ] } ]
    dynamic_batching {
      preferred_batch_size: [ 2, 4 ]
      max_queue_delay_microseconds: 100
      priority_levels: 2
      default_priority_level: 2
      default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 10000000
                             allow_timeout_override: true max_queue_size: 16 }
      priority_queue_policy { key: 1 value { max_queue_size: 8 } }
    }
    instance_group [ { count: 2 kind: KIND_CPU } ]
    parameters { key: "foo" value { string_value: "bar" } }
    model_warmup [ { name: "w" batch_size: 2
                     inputs { key: "x" value { data_type: TYPE_FP32 dims: [ 3 ] zero_data: true } } } ]
    inferd { ragged_pad_value: 0 }
  )pb");
  WriteFile(repo_ / "bad_config" / "config.pbtxt", "max_batch_size: [oops");
  WriteAddModel(repo_ / "bad_config" / "1" / "model.onnx");
  WriteFile(repo_ / "bad_model" / "1" / "model.onnx", "not a model");
  Load();
  EXPECT_FALSE(manager_->IsReady());  // strict readiness: two models failed
  EXPECT_TRUE(manager_->IsModelReady("ragged", 1));
  EXPECT_TRUE(manager_->IsModelReady("ragged", 2));
  auto index = manager_->Index();
  ASSERT_EQ(index.size(), 4u);
  EXPECT_EQ(index[0].name, "bad_config");
  EXPECT_EQ(index[0].state, "UNAVAILABLE");
  EXPECT_NE(index[0].reason.find("line"), std::string::npos) << index[0].reason;
  EXPECT_EQ(index[1].name, "bad_model");
  EXPECT_EQ(index[1].state, "UNAVAILABLE");
  EXPECT_EQ(index[2].state, "READY");
  EXPECT_EQ(Infer(Request("bad_model", Tensor::FromVector<float>({1}, {1, 1}))).status.code(),
            StatusCode::kUnavailable);

  // Two ragged requests (lengths 2 and 3) concurrently; each gets its own unpadded output.
  std::vector<std::future<Result>> futures;
  std::vector<std::promise<Result>> promises(2);
  for (int i = 0; i < 2; ++i) {
    futures.push_back(promises[i].get_future());
    std::vector<float> values(2 + i, static_cast<float>(i + 1));
    manager_->Infer(Request("ragged", Tensor::FromVector<float>(values, {1, 2 + i})),
                    [&promises, i](Status s, InferenceResponse r) {
                      promises[i].set_value(Result{std::move(s), std::move(r)});
                    });
  }
  for (int i = 0; i < 2; ++i) {
    Result r = futures[i].get();
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(r.response.model_version, 2);
    const Tensor& y = r.response.outputs.at(0).second;
    EXPECT_EQ(y.shape(), (Shape{1, 2 + i}));
    for (int64_t e = 0; e < y.NumElements(); ++e) EXPECT_EQ(y.data<float>()[e], 2.0f * (i + 1));
  }
  auto stats = manager_->GetStatistics("ragged", 2);
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].inference_count, 2u);
  auto config = manager_->GetConfig("ragged");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ((*config)->parameters().at("foo").string_value(), "bar");
  EXPECT_TRUE(manager_->UnloadModel("ragged").ok());
  EXPECT_EQ(Infer(Request("ragged", Tensor::FromVector<float>({1}, {1, 1}))).status.code(),
            StatusCode::kUnavailable);
}

// A merged batch's outputs are split as views of one buffer (batching::SplitBatchShared): each
// request still gets exactly its own rows, they outlive the batch and the other responses, and a
// request whose input has the wrong size is refused with a clear INVALID_ARGUMENT while the
// requests queued with it are batched and answered.
TEST_F(ModelManagerTest, BatchedRequestsGetTheirOwnRowsAndABadOneFailsAlone) {
  WriteAddModel(repo_ / "pairs" / "1" / "model.onnx");
  WriteFile(repo_ / "pairs" / "config.pbtxt", R"pb(
    name: "pairs"
    platform: "onnxruntime_onnx"
    max_batch_size: 8
    input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ]
    output [ { name: "y" data_type: TYPE_FP32 dims: [ 2 ] } ]
    dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 200000 }
  )pb");
  Load();
  const int n = 4;
  std::vector<std::promise<Result>> promises(n);
  std::vector<std::future<Result>> futures;
  for (int i = 0; i < n; ++i) {
    futures.push_back(promises[i].get_future());
    // Request 2 sends three values per row where the model takes two.
    Tensor x = i == 2 ? Tensor::FromVector<float>({1, 2, 3}, {1, 3})
                      : Tensor::FromVector<float>({float(i), float(10 + i)}, {1, 2});
    manager_->Infer(Request("pairs", std::move(x)), [&promises, i](Status s, InferenceResponse r) {
      promises[i].set_value(Result{std::move(s), std::move(r)});
    });
  }
  std::vector<Result> results;
  for (auto& f : futures) results.push_back(f.get());
  ASSERT_FALSE(results[2].status.ok());
  EXPECT_EQ(results[2].status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(results[2].status.message().find("x"), std::string::npos)
      << results[2].status.ToString();
  // Drop two good responses first: the last one's rows must still be readable.
  results[0] = Result{};
  Tensor kept = results[3].response.outputs.at(0).second;
  results.clear();
  EXPECT_EQ(kept.shape(), (Shape{1, 2}));
  EXPECT_EQ(kept.data<float>()[0], 6.0f);
  EXPECT_EQ(kept.data<float>()[1], 26.0f);
  auto stats = manager_->GetStatistics("pairs");
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].inference_count, 3u);
  EXPECT_EQ(stats[0].execution_count, 1u);  // the three good requests ran as one batch
  EXPECT_EQ(stats[0].failures[FailureReason::kInvalidInput], 1u);
}

// A batching model keeps a memory plan per batch size up to max_batch_size: a second pass over
// every size records none (the executor's default of 8 plans re-recorded each of the 16 sizes).
TEST_F(ModelManagerTest, SteadyStateBatchesAreNotReplanned) {
  WriteAddModel(repo_ / "rows" / "1" / "model.onnx");
  WriteFile(repo_ / "rows" / "config.pbtxt", R"pb(
    name: "rows"
    platform: "onnxruntime_onnx"
    max_batch_size: 16
    input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ]
    output [ { name: "y" data_type: TYPE_FP32 dims: [ 2 ] } ]
    instance_group [ { count: 1 kind: KIND_CPU } ]
    dynamic_batching { max_queue_delay_microseconds: 0 }
  )pb");
  Load();
  auto plans = [&] {
    auto stats = manager_->GetStatistics("rows");
    EXPECT_EQ(stats.size(), 1u);
    return stats.empty() ? int64_t{-1} : stats[0].memory_plans_recorded;
  };
  int64_t after_first = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (int n = 1; n <= 16; ++n) {  // one request at a time: each batch is that request's rows
      std::vector<float> v(2 * n, 1.5f);
      Result r = Infer(Request("rows", Tensor::FromVector<float>(v, {n, 2})));
      ASSERT_TRUE(r.status.ok()) << r.status.ToString();
      ASSERT_EQ(r.response.outputs.at(0).second.shape(), (Shape{n, 2}));
    }
    if (pass == 0) after_first = plans();
  }
  EXPECT_GE(after_first, 16);  // every size was planned once (warmup may add its own runs)
  EXPECT_EQ(plans(), after_first);
}

TEST(ModelConfigTest, StrictParsingNamesUnknownField) {
  std::vector<std::string> warnings;
  auto c = ParseModelConfig("name: \"m\"\nbogus_field: 3\n", /*strict=*/true, &warnings);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("bogus_field"), std::string::npos) << c.status().message();
  EXPECT_TRUE(ParseModelConfig("name: \"m\"\nbogus_field: 3\n", false, &warnings).ok());
}

TEST(ModelConfigTest, ValidationErrors) {
  std::vector<ValueInfo> ins = {Info("x", {Dim{-1, "batch"}, Dim{4, ""}})};
  std::vector<ValueInfo> outs = {Info("y", {Dim{-1, "batch"}, Dim{4, ""}})};
  auto check = [&](const std::string& text) {
    std::vector<std::string> w;
    auto c = ParseModelConfig(text, false, &w);
    if (!c.ok()) return c.status();
    return CompleteConfig("m", ins, outs, 8, &c.value());
  };
  EXPECT_TRUE(check("max_batch_size: 4").ok());
  EXPECT_FALSE(check("name: \"other\"").ok());
  EXPECT_FALSE(check("platform: \"tensorflow_graphdef\"").ok());
  EXPECT_FALSE(check("max_batch_size: 4 input [{ name: \"q\" data_type: TYPE_FP32 dims: [4] }]").ok());
  EXPECT_FALSE(check("max_batch_size: 4 input [{ name: \"x\" data_type: TYPE_INT64 dims: [4] }]").ok());
  EXPECT_FALSE(check("max_batch_size: 4 input [{ name: \"x\" data_type: TYPE_FP32 dims: [5] }]").ok());
  EXPECT_FALSE(check("max_batch_size: 4 input [{ name: \"x\" data_type: TYPE_FP32 dims: [4, 1] }]").ok());
  EXPECT_FALSE(check("max_batch_size: 4 dynamic_batching { preferred_batch_size: [8] }").ok());
  EXPECT_FALSE(check("instance_group [{ kind: KIND_GPU }]").ok());
  EXPECT_FALSE(check("max_batch_size: 4 dynamic_batching { priority_levels: 2 default_priority_level: 3 }").ok());
  EXPECT_FALSE(check("inferd { precision: \"int3\" }").ok());
  // Complete from the model: batch dim dropped, dims filled.
  std::vector<std::string> w;
  auto c = ParseModelConfig("", false, &w);
  ASSERT_TRUE(CompleteConfig("m", ins, outs, 8, &c.value()).ok());
  EXPECT_EQ(c->max_batch_size(), 8);
  ASSERT_EQ(c->input_size(), 1);
  EXPECT_EQ(c->input(0).dims_size(), 1);
  EXPECT_EQ(c->input(0).dims(0), 4);
  EXPECT_EQ(c->output(0).data_type(), inference::TYPE_FP32);
}

}  // namespace
}  // namespace inferd::serving

namespace inferd::serving {
namespace {

// A generative folder handed to another frontend is not loaded, listed or needed for readiness.
TEST(ModelManagerExternal, SkipsExternalModels) {
  const fs::path repo = testing::FreshRepository("serving_external_");
  WriteAddModel(repo / "double" / "1" / "model.onnx");
  WriteFile(repo / "gen" / "config.pbtxt", "backend: \"inferd_generate\"\n");
  ModelManagerOptions o;
  o.repository = repo;
  o.total_threads = 2;
  o.external_models = {"gen"};
  auto m = ModelManager::Create(o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_TRUE((*m)->Start().ok());
  EXPECT_TRUE((*m)->IsReady());
  auto index = (*m)->Index();
  ASSERT_EQ(index.size(), 1u);
  EXPECT_EQ(index[0].name, "double");
  EXPECT_EQ((*m)->LoadModel("gen").code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE((*m)->GetMetadata("gen").ok());
  m->reset();
  fs::remove_all(repo);
}

}  // namespace
}  // namespace inferd::serving
