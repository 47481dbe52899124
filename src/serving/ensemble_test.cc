// Ensembles through the ModelManager: chains, fan-out/fan-in, requested outputs, a failing step
// (named, other requests unaffected), a composing model unloaded under the ensemble, explicit
// mode loading the composing models, max_inflight_requests, statistics and metadata, and every
// kind of bad ensemble config failing its load with a message naming the step and tensor.
#include <gtest/gtest.h>

#include <filesystem>
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "serving/model_manager.h"
#include "serving/test_models.h"

namespace inferd::serving {
namespace {

namespace fs = std::filesystem;
using testing::InferAsync;
using testing::InferSync;
using testing::Request;
using testing::WriteFile;

const char* kIn = R"(platform: "ensemble"
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
)";

// A step mapping one input and one output.
std::string Step(const std::string& model, const std::string& in, const std::string& out,
                 const std::string& in_key = "x", const std::string& out_key = "y") {
  return "{ model_name: \"" + model + "\" model_version: -1 input_map { key: \"" + in_key +
         "\" value: \"" + in + "\" } output_map { key: \"" + out_key + "\" value: \"" + out +
         "\" } }";
}

std::string Output(const std::string& name, const std::string& type = "TYPE_FP32",
                   const std::string& dims = "-1") {
  return "output [ { name: \"" + name + "\" data_type: " + type + " dims: [ " + dims + " ] } ]\n";
}

std::string Steps(const std::vector<std::string>& steps, const std::string& extra = "") {
  std::string s = "ensemble_scheduling { " + extra + " step [ ";
  for (size_t i = 0; i < steps.size(); ++i) s += (i ? ", " : "") + steps[i];
  return s + " ] }\n";
}

// The chain IN → double → t → neg → OUT (OUT = -2 IN).
std::string Chain(const std::string& extra = "") {
  return kIn + Output("OUT") + Steps({Step("double", "IN", "t"), Step("neg", "t", "OUT")}, extra);
}

class EnsembleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = testing::FreshRepository("ensemble_repo_");
    testing::WriteAddModel(repo_ / "double" / "1" / "model.onnx");
    testing::WriteUnaryModel(repo_ / "neg" / "1" / "model.onnx", "Neg");
    testing::WriteSumModel(repo_ / "sum" / "1" / "model.onnx");
    testing::WriteUnaryModel(repo_ / "fixed4" / "1" / "model.onnx", "Identity");
    WriteFile(repo_ / "fixed4" / "config.pbtxt",
              "max_batch_size: 8\n"
              "input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
              "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n");
  }
  void TearDown() override {
    manager_.reset();
    fs::remove_all(repo_);
  }
  void WriteEnsemble(const std::string& name, const std::string& config) {
    WriteFile(repo_ / name / "config.pbtxt", config);
    fs::create_directories(repo_ / name / "1");
  }
  void Start(ModelControlMode mode = ModelControlMode::kNone) {
    ModelManagerOptions o;
    o.repository = repo_;
    o.control_mode = mode;
    o.total_threads = 1;
    auto m = ModelManager::Create(o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    manager_ = std::move(m).value();
    ASSERT_TRUE(manager_->Start().ok());
  }
  // Why `name` is unavailable (its Index() rows' reasons), "" when it is READY.
  std::string Reason(const std::string& name) {
    std::string why;
    for (const auto& e : manager_->Index()) {
      if (e.name == name && e.state != "READY") why += e.reason;
    }
    return why;
  }
  static Tensor Row(std::vector<float> v) {
    const int64_t n = static_cast<int64_t>(v.size());
    return Tensor::FromVector<float>(v, {1, n});
  }
  static std::vector<float> Values(const InferenceResponse& r, const std::string& name) {
    for (const auto& [n, t] : r.outputs) {
      if (n == name) return std::vector<float>(t.values<float>().begin(), t.values<float>().end());
    }
    return {};
  }

  fs::path repo_;
  std::unique_ptr<ModelManager> manager_;
};

TEST_F(EnsembleTest, ChainRunsStepsInOrder) {
  WriteEnsemble("chain", Chain());
  Start();
  ASSERT_TRUE(manager_->IsModelReady("chain")) << Reason("chain");
  auto r = InferSync(*manager_, Request("chain", Row({1, 2, 3}), "IN"));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.response.model_name, "chain");
  EXPECT_EQ(r.response.id, "req");
  ASSERT_EQ(r.response.outputs.size(), 1u);
  EXPECT_EQ(r.response.outputs[0].second.shape(), (Shape{1, 3}));
  EXPECT_EQ(Values(r.response, "OUT"), (std::vector<float>{-2, -4, -6}));
}

TEST_F(EnsembleTest, FanOutAndFanIn) {
  // A = 2 IN and B = -IN in parallel, then OUT = A + B = IN; A is an output too.
  WriteEnsemble("fan", kIn + Output("OUT") + Output("A") +
                           Steps({Step("double", "IN", "A"), Step("neg", "IN", "B"),
                                  "{ model_name: \"sum\" model_version: -1 input_map { key: "
                                  "\"a\" value: \"A\" } input_map { key: \"b\" value: \"B\" } "
                                  "output_map { key: \"sum\" value: \"OUT\" } }"}));
  Start();
  ASSERT_TRUE(manager_->IsModelReady("fan")) << Reason("fan");
  auto r = InferSync(*manager_, Request("fan", Row({1, -5}), "IN"));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.response.outputs.size(), 2u);
  EXPECT_EQ(r.response.outputs[0].first, "OUT");  // config order when none is requested
  EXPECT_EQ(Values(r.response, "OUT"), (std::vector<float>{1, -5}));
  EXPECT_EQ(Values(r.response, "A"), (std::vector<float>{2, -10}));
  // Only the outputs asked for, in the order asked.
  auto req = Request("fan", Row({3}), "IN");
  req->requested_outputs = {"A"};
  r = InferSync(*manager_, std::move(req));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.response.outputs.size(), 1u);
  EXPECT_EQ(Values(r.response, "A"), (std::vector<float>{6}));
}

TEST_F(EnsembleTest, BatchedRequestsAndClassification) {
  WriteEnsemble("chain", Chain());
  Start();
  auto r = InferSync(*manager_, Request("chain", Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2}),
                                        "IN"));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.response.outputs[0].second.shape(), (Shape{2, 2}));
  EXPECT_EQ(Values(r.response, "OUT"), (std::vector<float>{-2, -4, -6, -8}));
  auto req = Request("chain", Row({1, 3, 2}), "IN");
  req->requested_outputs = {"OUT"};
  req->classification["OUT"] = 1;
  r = InferSync(*manager_, std::move(req));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.response.classified.size(), 1u);
  EXPECT_EQ(r.response.classified[0].values, (std::vector<std::string>{"-2.000000:0"}));
}

TEST_F(EnsembleTest, FailingStepFailsOnlyItsRequestNamingTheStep) {
  WriteEnsemble("fx", kIn + Output("OUT", "TYPE_FP32", "4") +
                          Steps({Step("fixed4", "IN", "t"), Step("neg", "t", "OUT")}));
  Start();
  ASSERT_TRUE(manager_->IsModelReady("fx")) << Reason("fx");
  auto bad = InferAsync(*manager_, Request("fx", Row({1, 2, 3, 4, 5}), "IN"));
  auto good = InferAsync(*manager_, Request("fx", Row({1, 2, 3, 4}), "IN"));
  auto b = bad.get();
  EXPECT_EQ(b.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(b.status.message().find("ensemble 'fx' step 0 ('fixed4')"), std::string::npos)
      << b.status.message();
  EXPECT_TRUE(b.response.outputs.empty());
  auto g = good.get();
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  EXPECT_EQ(Values(g.response, "OUT"), (std::vector<float>{-1, -2, -3, -4}));
  auto stats = manager_->GetStatistics("fx");
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].success.count, 1u);
  EXPECT_EQ(stats[0].fail.count, 1u);
  EXPECT_EQ(stats[0].failures[FailureReason::kInvalidInput], 1u);
}

TEST_F(EnsembleTest, UnloadedComposingModelFailsRequestsClearly) {
  WriteEnsemble("chain", Chain());
  Start(ModelControlMode::kExplicit);
  ASSERT_TRUE(manager_->LoadModel("chain").ok());
  ASSERT_TRUE(manager_->UnloadModel("neg").ok());
  EXPECT_TRUE(manager_->IsModelReady("chain"));
  auto r = InferSync(*manager_, Request("chain", Row({1}), "IN"));
  EXPECT_EQ(r.status.code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status.message().find("step 1 ('neg')"), std::string::npos) << r.status.message();
  EXPECT_NE(r.status.message().find("unloaded"), std::string::npos) << r.status.message();
  // Loading it again brings the ensemble back.
  ASSERT_TRUE(manager_->LoadModel("neg").ok());
  EXPECT_TRUE(InferSync(*manager_, Request("chain", Row({1}), "IN")).status.ok());
}

TEST_F(EnsembleTest, ExplicitLoadOfAnEnsembleLoadsItsComposingModels) {
  WriteEnsemble("chain", Chain());
  Start(ModelControlMode::kExplicit);
  EXPECT_FALSE(manager_->IsModelReady("double"));
  ASSERT_TRUE(manager_->LoadModel("chain").ok()) << Reason("chain");
  EXPECT_TRUE(manager_->IsModelReady("double"));
  EXPECT_TRUE(manager_->IsModelReady("neg"));
  EXPECT_FALSE(manager_->IsModelReady("sum"));  // not a step of it
  EXPECT_TRUE(InferSync(*manager_, Request("chain", Row({1}), "IN")).status.ok());
}

TEST_F(EnsembleTest, MaxInflightRequestsQueuesStepsWithoutLosingAny) {
  WriteEnsemble("capped", Chain("max_inflight_requests: 1"));
  Start();
  ASSERT_TRUE(manager_->IsModelReady("capped")) << Reason("capped");
  std::vector<std::future<testing::Result>> results;
  for (int i = 0; i < 24; ++i) {
    results.push_back(InferAsync(*manager_, Request("capped", Row({float(i)}), "IN")));
  }
  for (int i = 0; i < 24; ++i) {
    auto r = results[i].get();
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(Values(r.response, "OUT"), (std::vector<float>{-2.0f * i}));
  }
  // The last answer reaches its future inside the callback, before the manager counts the request
  // done as the callback returns: wait for that (WaitForIdle) instead of reading the count at once.
  EXPECT_TRUE(manager_->WaitForIdle(std::chrono::seconds(30)));
  EXPECT_EQ(manager_->InFlight(), 0);
}

TEST_F(EnsembleTest, StatisticsAndMetadata) {
  WriteEnsemble("chain", Chain());
  Start();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(InferSync(*manager_, Request("chain", Row({1, 2}), "IN")).status.ok());
  }
  auto e = manager_->GetStatistics("chain");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].name, "chain");
  EXPECT_EQ(e[0].inference_count, 3u);
  EXPECT_EQ(e[0].success.count, 3u);
  EXPECT_EQ(e[0].pending, 0);
  EXPECT_EQ(e[0].request_us.count, 3u);
  // Each step shows in its own model's statistics.
  auto d = manager_->GetStatistics("double");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].success.count, 3u);
  EXPECT_EQ(d[0].inference_count, 3u);
  auto md = manager_->GetMetadata("chain");
  ASSERT_TRUE(md.ok());
  EXPECT_EQ(md->platform, "ensemble");
  ASSERT_EQ(md->inputs.size(), 1u);
  EXPECT_EQ(md->inputs[0].name, "IN");
  EXPECT_EQ(md->inputs[0].shape, (std::vector<int64_t>{-1, -1}));
  EXPECT_EQ(md->outputs[0].datatype, "FP32");
  auto json = manager_->GetConfigJson("chain");
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find("\"ensemble_scheduling\""), std::string::npos);
  EXPECT_NE(json->find("\"model_name\":\"neg\""), std::string::npos) << *json;
  // A request the ensemble rejects (wrong input) is counted as its failure.
  auto r = InferSync(*manager_, Request("chain", Row({1}), "nope"));
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->GetStatistics("chain")[0].fail.count, 1u);
}

TEST_F(EnsembleTest, EnsembleOfEnsembles) {
  WriteEnsemble("chain", Chain());
  WriteEnsemble("outer", kIn + Output("OUT") +
                             Steps({Step("chain", "IN", "t", "IN", "OUT"),
                                    Step("chain", "t", "OUT", "IN", "OUT")}));
  Start();
  ASSERT_TRUE(manager_->IsModelReady("outer")) << Reason("outer");
  auto r = InferSync(*manager_, Request("outer", Row({1}), "IN"));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Values(r.response, "OUT"), (std::vector<float>{4}));
}

struct BadCase {
  std::string name, config, needle;
};

TEST_F(EnsembleTest, BadConfigsFailTheirLoadNamingStepAndTensor) {
  const std::string sum_step =
      "{ model_name: \"sum\" model_version: -1 input_map { key: \"a\" value: \"IN\" } "
      "output_map { key: \"sum\" value: \"OUT\" } }";
  const std::vector<BadCase> cases = {
      {"cycle", kIn + Output("OUT") +
                    Steps({Step("double", "t2", "t1"), Step("neg", "t1", "t2"),
                           Step("neg", "IN", "OUT")}),
       "ensemble steps form a cycle: step 0 ('double') needs step 1 ('neg') needs step 0"},
      {"unknown_model", kIn + Output("OUT") + Steps({Step("nope", "IN", "OUT")}),
       "ensemble 'unknown_model' step 0 ('nope'): Request for unknown model: 'nope' is not found"},
      {"unknown_version", kIn + Output("OUT") +
                              Steps({"{ model_name: \"neg\" model_version: 7 input_map { key: "
                                     "\"x\" value: \"IN\" } output_map { key: \"y\" value: "
                                     "\"OUT\" } }"}),
       "step 0 ('neg'): Request for unknown model: 'neg' version 7 is not found"},
      {"unknown_input_key", kIn + Output("OUT") + Steps({Step("neg", "IN", "OUT", "q")}),
       "step 0 ('neg'): input_map key 'q' is not an input of model 'neg' (inputs: x)"},
      {"unknown_output_key", kIn + Output("OUT") + Steps({Step("neg", "IN", "OUT", "x", "z")}),
       "step 0 ('neg'): output_map key 'z' is not an output of model 'neg' (outputs: y)"},
      {"unmapped_input", kIn + Output("OUT") + Steps({sum_step}),
       "step 0 ('sum'): input 'b' of model 'sum' is not in input_map"},
      {"unknown_tensor", kIn + Output("OUT") + Steps({Step("neg", "IN", "t"),
                                                      Step("neg", "tt", "OUT")}),
       "ensemble step 1 ('neg'): input_map 'x' reads tensor 'tt', which is neither an ensemble "
       "input nor produced by any step"},
      {"input_unused", std::string(kIn) +
                           "input [ { name: \"EXTRA\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n" +
                           Output("OUT") + Steps({Step("neg", "IN", "OUT")}),
       "ensemble input 'EXTRA' is consumed by no step"},
      {"output_unproduced", kIn + Output("OUT") + Output("W") + Steps({Step("neg", "IN", "OUT")}),
       "ensemble output 'W' is produced by no step"},
      {"produced_twice", kIn + Output("OUT") + Steps({Step("neg", "IN", "OUT"),
                                                      Step("double", "IN", "OUT")}),
       "ensemble step 1 ('double'): output_map 'y' writes tensor 'OUT', which step 0 ('neg') "
       "already produces"},
      {"dtype", R"(platform: "ensemble"
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_INT64 dims: [ -1 ] } ]
)" + Output("OUT") + Steps({Step("neg", "IN", "OUT")}),
       "ensemble 'dtype': step 0 ('neg') input 'x' (tensor 'IN') is float32 but ensemble input "
       "'IN' is int64"},
      {"shape", kIn + Output("OUT", "TYPE_FP32", "-1, 3") + Steps({Step("neg", "IN", "OUT")}),
       "ensemble 'shape': ensemble output 'OUT' (tensor 'OUT') has shape [-1, -1, 3] but step 0 "
       "('neg') output 'y' has [-1, -1]"},
      {"fixed_dims", kIn + Output("OUT", "TYPE_FP32", "5") + Steps({Step("fixed4", "IN", "OUT")}),
       "ensemble output 'OUT' (tensor 'OUT') has shape [-1, 5] but step 0 ('fixed4') output 'y' "
       "has [-1, 4]"},
      {"batch_too_big", std::string("platform: \"ensemble\"\nmax_batch_size: 16\n") +
                            "input [ { name: \"IN\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n" +
                            Output("OUT") + Steps({Step("neg", "IN", "OUT")}),
       "step 0 ('neg'): model 'neg' has max_batch_size 8, below the ensemble's 16"},
      {"no_steps", kIn + Output("OUT") + "ensemble_scheduling { }\n",
       "ensemble_scheduling has no step"},
      {"no_scheduling", kIn + Output("OUT"), "platform 'ensemble' requires ensemble_scheduling"},
      {"no_outputs", kIn + Steps({Step("neg", "IN", "OUT")}),
       "an ensemble must list its input and output tensors"},
      {"instances", kIn + Output("OUT") + "instance_group [ { count: 2 } ]\n" +
                        Steps({Step("neg", "IN", "OUT")}),
       "instance_group: an ensemble has no instances"},
      {"no_output_map", kIn + Output("OUT") +
                            Steps({"{ model_name: \"neg\" input_map { key: \"x\" value: \"IN\" "
                                   "} }"}),
       "step 0 ('neg'): output_map is empty"},
      {"not_platform", "max_batch_size: 8\n" + Steps({Step("neg", "IN", "OUT")}),
       "ensemble_scheduling: requires platform \"ensemble\""},
  };
  for (const BadCase& c : cases) WriteEnsemble(c.name, c.config);
  Start();
  for (const BadCase& c : cases) {
    EXPECT_FALSE(manager_->IsModelReady(c.name)) << c.name;
    const std::string why = Reason(c.name);
    EXPECT_NE(why.find(c.needle), std::string::npos) << c.name << ": " << why;
  }
  // The composing models themselves are fine.
  EXPECT_TRUE(manager_->IsModelReady("neg"));
}

}  // namespace
}  // namespace inferd::serving
