// A repository written for Triton loads unchanged: a config.pbtxt using every field the issue
// lists (and some Triton-only ones inferd ignores with a warning) is parsed, validated, applied
// (versions, batching, priorities, instances, warmup, parameters) and served.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "graph/onnx_io.h"
#include "model_config.pb.h"
#include "serving/model_config.h"
#include "serving/model_manager.h"

namespace inferd::serving {
namespace {

namespace fs = std::filesystem;

// y = x + x, x: FP32 [batch, 4].
void WriteDoubleModel(const fs::path& path) {
  Model m;
  m.opsets[""] = 13;
  m.graph.name = "double";
  ValueInfo x{.name = "x", .dtype = DataType::kFloat32, .shape = {{Dim{-1, "batch"}, Dim{4, ""}}}};
  ValueInfo y{.name = "y", .dtype = DataType::kFloat32, .shape = {{Dim{-1, "batch"}, Dim{4, ""}}}};
  m.graph.inputs.push_back(x);
  m.graph.outputs.push_back(y);
  m.graph.AddNode("Add", {"x", "x"}, {"y"}, "add");
  fs::create_directories(path.parent_path());
  ASSERT_TRUE(SaveOnnxModel(m, path).ok());
}

// As a Triton user writes it for the onnxruntime backend (field order and spelling as in
// Triton's documentation), plus Triton-only blocks inferd does not model.
constexpr const char* kTritonConfig = R"pb(
name: "triton_model"
backend: "onnxruntime"
max_batch_size: 8
version_policy: { specific: { versions: [ 1, 3 ] } }
input [
  {
    name: "x"
    data_type: TYPE_FP32
    format: FORMAT_NONE
    dims: [ 4 ]
  }
]
output [
  {
    name: "y"
    data_type: TYPE_FP32
    dims: [ 4 ]
    label_filename: "labels.txt"
  }
]
dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 100
  preserve_ordering: true
  priority_levels: 3
  default_priority_level: 2
  default_queue_policy {
    timeout_action: DELAY
    default_timeout_microseconds: 5000000
    allow_timeout_override: true
    max_queue_size: 100
  }
  priority_queue_policy [
    { key: 1 value: { timeout_action: REJECT default_timeout_microseconds: 1000000
                      allow_timeout_override: false max_queue_size: 10 } },
    { key: 3 value: { max_queue_size: 50 } }
  ]
}
instance_group [
  { name: "triton_model_0" count: 1 kind: KIND_CPU },
  { count: 1 kind: KIND_CPU }
]
parameters: { key: "intra_op_thread_count" value: { string_value: "1" } }
parameters: { key: "cudnn_conv_algo_search" value: { string_value: "0" } }
model_warmup [
  {
    name: "zeros"
    batch_size: 1
    inputs: { key: "x" value: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } }
  },
  {
    name: "random"
    batch_size: 8
    count: 2
    inputs: { key: "x" value: { data_type: TYPE_FP32 dims: [ 4 ] random_data: true } }
  }
]
optimization {
  graph: { level: 1 }
  execution_accelerators { cpu_execution_accelerator: [ { name: "openvino" } ] }
  input_pinned_memory: { enable: true }
}
response_cache { enable: false }
model_transaction_policy { decoupled: false }
)pb";

TEST(TritonConfigTest, FullTritonRepositoryLoadsUnchanged) {
  const fs::path repo = fs::path(::testing::TempDir()) / "triton_config_repo";
  fs::remove_all(repo);
  for (int v : {1, 2, 3}) WriteDoubleModel(repo / "triton_model" / std::to_string(v) / "model.onnx");
  std::ofstream(repo / "triton_model" / "config.pbtxt") << kTritonConfig;
  std::ofstream(repo / "triton_model" / "labels.txt") << "a\nb\nc\nd\n";

  ModelManagerOptions o;
  o.repository = repo;
  o.total_threads = 2;
  auto created = ModelManager::Create(o);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::unique_ptr<ModelManager> manager = std::move(created).value();
  ASSERT_TRUE(manager->LoadRepository().ok());

  // version_policy: specific versions 1 and 3, not 2.
  EXPECT_TRUE(manager->IsReady());
  EXPECT_TRUE(manager->IsModelReady("triton_model", 1));
  EXPECT_FALSE(manager->IsModelReady("triton_model", 2));
  EXPECT_TRUE(manager->IsModelReady("triton_model", 3));
  auto md = manager->GetMetadata("triton_model");
  ASSERT_TRUE(md.ok()) << md.status().ToString();
  EXPECT_EQ(md->versions, (std::vector<std::string>{"1", "3"}));
  ASSERT_EQ(md->inputs.size(), 1u);
  EXPECT_EQ(md->inputs[0].shape, (std::vector<int64_t>{-1, 4}));

  // The effective config keeps what the user wrote.
  auto config = manager->GetConfig("triton_model");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const inference::ModelConfig& c = **config;
  EXPECT_EQ(c.backend(), "onnxruntime");
  EXPECT_EQ(c.max_batch_size(), 8);
  EXPECT_EQ(c.dynamic_batching().priority_levels(), 3u);
  EXPECT_TRUE(c.dynamic_batching().preserve_ordering());
  EXPECT_EQ(c.dynamic_batching().priority_queue_policy().at(1).max_queue_size(), 10u);
  EXPECT_EQ(c.instance_group_size(), 2);
  EXPECT_EQ(c.parameters().at("intra_op_thread_count").string_value(), "1");
  EXPECT_EQ(c.model_warmup_size(), 2);
  EXPECT_EQ(c.output(0).label_filename(), "labels.txt");
  auto json = manager->GetConfigJson("triton_model");
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find("\"preferred_batch_size\":[4,8]"), std::string::npos) << *json;

  // The scheduler options follow the config.
  batching::BatchSchedulerOptions so = SchedulerOptionsFromConfig(c, 2);
  EXPECT_TRUE(so.enable_batching);
  EXPECT_EQ(so.max_batch_size, 8);
  EXPECT_EQ(so.preferred_batch_sizes, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(so.max_queue_delay, std::chrono::microseconds(100));
  EXPECT_EQ(so.priority_levels, 3u);
  EXPECT_EQ(so.default_priority, 2u);
  EXPECT_EQ(so.default_queue_policy.timeout_action, batching::TimeoutAction::kDelay);
  EXPECT_EQ(so.default_queue_policy.max_queue_size, 100u);
  EXPECT_EQ(so.priority_queue_policy.at(1).timeout_action, batching::TimeoutAction::kReject);
  EXPECT_EQ(so.priority_queue_policy.at(1).default_timeout, std::chrono::microseconds(1000000));

  // It serves: a high-priority request to version 1 and a default one to the latest version.
  for (auto [version, priority] : {std::pair<int64_t, uint32_t>{1, 1}, {-1, 0}}) {
    auto r = std::make_unique<InferenceRequest>();
    r->model_name = "triton_model";
    r->model_version = version;
    r->priority = priority;
    r->inputs.push_back({"x", Tensor::FromVector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4})});
    std::promise<std::pair<Status, InferenceResponse>> p;
    auto f = p.get_future();
    manager->Infer(std::move(r), [&p](Status s, InferenceResponse resp) {
      p.set_value({std::move(s), std::move(resp)});
    });
    auto [status, response] = f.get();
    ASSERT_TRUE(status.ok()) << status.ToString();
    EXPECT_EQ(response.model_version, version == -1 ? 3 : version);
    ASSERT_EQ(response.outputs.size(), 1u);
    const Tensor& y = response.outputs[0].second;
    ASSERT_EQ(y.shape(), (Shape{2, 4}));
    for (int i = 0; i < 8; ++i) EXPECT_EQ(y.data<float>()[i], 2.0f * (i + 1));
  }
  manager.reset();
  fs::remove_all(repo);
}

TEST(TritonConfigTest, TritonOnlyFieldsAreWarningsUnlessStrict) {
  std::vector<std::string> warnings;
  auto lenient = ParseModelConfig(kTritonConfig, /*strict=*/false, &warnings);
  ASSERT_TRUE(lenient.ok()) << lenient.status().ToString();
  EXPECT_FALSE(warnings.empty());
  std::vector<std::string> unused;
  EXPECT_FALSE(ParseModelConfig(kTritonConfig, /*strict=*/true, &unused).ok());
}

}  // namespace
}  // namespace inferd::serving
