// A repository written for Triton loads unchanged: a config.pbtxt using every field the issue
// lists (and some Triton-only ones inferd ignores with a warning) is parsed, validated, applied
// (versions, batching, priorities, instances, warmup, parameters) and served. The whole schema
// parses; features inferd does not implement are errors naming the field; /config JSON prints
// int64 as numbers; reshape works on inputs and outputs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>

#include <google/protobuf/util/message_differencer.h>

#include "graph/onnx_io.h"
#include "model_config.pb.h"
#include "serving/model_config.h"
#include "serving/model_manager.h"

namespace inferd::serving {
namespace triton_config_test {
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

StatusOr<inference::ModelConfig> Parse(const std::string& text) {
  std::vector<std::string> warnings;
  return ParseModelConfig(text, /*strict=*/true, &warnings);
}

TEST(TritonConfigTest, PerformanceHintsAreNamedWarnings) {
  auto c = Parse(kTritonConfig);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(CheckImplemented(*c).ok());
  const std::vector<std::string> ignored = IgnoredConfigFields(*c);
  std::string all;
  for (const auto& w : ignored) all += w + "\n";
  for (const char* field : {"optimization.execution_accelerators",
                            "optimization.input_pinned_memory", "parameters 'intra_op_thread_count'",
                            "parameters 'cudnn_conv_algo_search'"}) {
    EXPECT_NE(all.find(field), std::string::npos) << field << " missing from\n" << all;
  }
  EXPECT_EQ(ignored.size(), 4u) << all;
  EXPECT_TRUE(IgnoredConfigFields(inference::ModelConfig()).empty());
}

TEST(TritonConfigTest, UnknownFieldsAreErrorsNamingThem) {
  for (const char* text : {"name: \"m\"\nbogus_field: 3\n", "bogus_field { a: 1 }",
                           "bogus_field [ { a: 1 }, { a: 2 } ]",
                           "input [ { name: \"x\" bogus_field: 1 } ]"}) {
    auto c = Parse(text);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_NE(c.status().message().find("bogus_field"), std::string::npos)
        << c.status().message();
    EXPECT_NE(c.status().message().find("line"), std::string::npos) << c.status().message();
  }
}

// protobuf's text parser accepts (and only logs) bytes that are not UTF-8 in a string field; the
// config is echoed as JSON, so they are refused naming the field (fuzz/corpus/model_config/
// crash_invalid_utf8_name_in_json).
TEST(TritonConfigTest, NonUtf8StringsAreErrorsNamingTheField) {
  auto c = Parse("name: \"m\\377\"\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("field 'name' is not valid UTF-8"), std::string::npos)
      << c.status().message();
  c = Parse(
      "name: \"m\"\ninput [ { name: \"x\\300\\200\" data_type: TYPE_FP32 dims: [ 1 ] } ]\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'input.name'"), std::string::npos) << c.status().message();
  c = Parse("name: \"caf\\303\\251\"\n");  // "café": valid UTF-8 in octal escapes
  EXPECT_TRUE(c.ok()) << c.status().ToString();
}

// Triton's stateful-model config (list syntax for control inputs, a strategy, implicit state).
constexpr const char* kSequenceConfig = R"pb(
name: "seq"
backend: "onnxruntime"
max_batch_size: 8
sequence_batching {
  max_sequence_idle_microseconds: 5000000
  oldest { max_candidate_sequences: 4 preferred_batch_size: [ 2, 4 ] }
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ] },
    { name: "END" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] },
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]
  state [
    { input_name: "state_in" output_name: "state_out" data_type: TYPE_FP32 dims: [ 1 ]
      initial_state: { name: "zero" data_type: TYPE_FP32 dims: [ 1 ] zero_data: true } }
  ]
}
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
)pb";

TEST(TritonConfigTest, SequenceBatchingParsesAndValidates) {
  auto c = Parse(kSequenceConfig);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->has_sequence_batching());
  const auto& sb = c->sequence_batching();
  EXPECT_EQ(sb.max_sequence_idle_microseconds(), 5000000u);
  EXPECT_EQ(sb.oldest().max_candidate_sequences(), 4);
  ASSERT_EQ(sb.control_input_size(), 4);
  EXPECT_EQ(sb.control_input(3).control(0).kind(),
            inference::ModelSequenceBatching::Control::CONTROL_SEQUENCE_CORRID);
  EXPECT_EQ(sb.state(0).initial_state(0).name(), "zero");
  Status s = ValidateConfigStandalone(*c);
  EXPECT_TRUE(s.ok()) << s.ToString();
  // What the sequence batcher does not implement, or an inconsistent block, names the field.
  const std::pair<std::string, std::string> bad[] = {
      {"data_type: TYPE_UINT64", "data_type: TYPE_STRING"},
      {"fp32_false_true: [ 0, 1 ]", "fp32_false_true: [ 0 ]"},
      {"kind: CONTROL_SEQUENCE_END", "kind: CONTROL_SEQUENCE_START"},
      {"zero_data: true", "data_file: \"init\""},
  };
  const char* expected[] = {"string CORRID", "2 values", "given twice", "data_file"};
  for (size_t i = 0; i < std::size(bad); ++i) {
    std::string text = kSequenceConfig;
    text.replace(text.find(bad[i].first), bad[i].first.size(), bad[i].second);
    auto b = Parse(text);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    Status e = ValidateConfigStandalone(*b);
    EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(e.message().find(expected[i]), std::string::npos) << e.message();
  }
}

TEST(TritonConfigTest, UnimplementedFeaturesNameTheirField) {
  const std::pair<const char*, const char*> cases[] = {
      {"backend: \"python\"", "backend 'python'"},
      // Ensembles are implemented (ensemble_test.cc); an incomplete one still names the field.
      {"platform: \"ensemble\"", "platform 'ensemble' requires ensemble_scheduling"},
      {"runtime: \"model.py\"", "runtime"},
      {"instance_group [ { kind: KIND_GPU } ]", "KIND_GPU"},
      {"instance_group [ { gpus: [ 0 ] } ]", "gpus"},
      {"instance_group [ { passive: true } ]", "passive"},
      {"ensemble_scheduling { step [ { model_name: \"a\" model_version: -1 } ] }",
       "ensemble_scheduling: requires platform \"ensemble\""},
      {"platform: \"ensemble\" input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 1 ] } ] "
       "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 1 ] } ] ensemble_scheduling { step "
       "[ { model_name: \"a\" model_namespace: \"n\" output_map { key: \"o\" value: \"y\" } "
       "input_map { key: \"i\" value: \"x\" } } ] }",
       "step 0 ('a'): model_namespace is not supported"},
      {"model_transaction_policy { decoupled: true }", "model_transaction_policy.decoupled"},
      {"model_operations { op_library_filename: \"libcustom.so\" }", "model_operations"},
      {"model_repository_agents { agents [ { name: \"checksum\" } ] }",
       "model_repository_agents"},
      {"batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: \"n\" } ]", "batch_input"},
      {"batch_output [ { target_name: \"y\" } ]", "batch_output"},
      {"input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 4 ] optional: true } ]",
       "input 'x' optional"},
      {"input [ { name: \"x\" data_type: TYPE_INT64 dims: [ 1 ] is_shape_tensor: true } ]",
       "input 'x' is_shape_tensor"},
      {"output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 4 ] is_shape_tensor: true } ]",
       "output 'y' is_shape_tensor"},
  };
  for (const auto& [text, field] : cases) {
    auto c = Parse(text);
    ASSERT_TRUE(c.ok()) << text << ": " << c.status().ToString();  // never a parse error
    Status s = ValidateConfigStandalone(*c);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(s.message().find(field), std::string::npos) << text << ": " << s.message();
  }
}

TEST(TritonConfigTest, JsonPrintsInt64AsNumbers) {
  auto c = Parse(std::string(kTritonConfig) +
                 "input [ { name: \"z\" data_type: TYPE_FP32 dims: [ 2, 2 ] "
                 "reshape: { shape: [ 4 ] } } ]");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto json = ModelConfigToJson(*c);
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  for (const char* expected :
       {"\"dims\":[4]", "\"dims\":[2,2]", "\"shape\":[4]", "\"versions\":[1,3]",
        "\"max_queue_delay_microseconds\":100", "\"default_timeout_microseconds\":5000000",
        "\"priority_levels\":3", "\"default_priority_level\":2", "\"max_batch_size\":8",
        "\"1\":{\"timeout_action\":\"REJECT\"", "\"format\":\"FORMAT_NONE\"",
        "\"preferred_batch_size\":[4,8]"}) {
    EXPECT_NE(json->find(expected), std::string::npos) << expected << " not in " << *json;
  }
  EXPECT_EQ(json->find("\"4\""), std::string::npos) << *json;  // no int64 left as a string
  auto seq = Parse(kSequenceConfig);
  ASSERT_TRUE(seq.ok());
  auto seq_json = ModelConfigToJson(*seq);
  ASSERT_TRUE(seq_json.ok());
  EXPECT_NE(seq_json->find("\"max_sequence_idle_microseconds\":5000000"), std::string::npos)
      << *seq_json;
  // The JSON reads back to the same message.
  auto back = ModelConfigFromJson(*json);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*back, *c));
}

TEST(TritonConfigTest, JsonConfigErrorsNameTheProblem) {
  auto ok = ModelConfigFromJson(
      R"({"max_batch_size": 4, "input": [{"name": "x", "data_type": "type_fp32", "dims": [4]}]})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->input(0).data_type(), inference::TYPE_FP32);
  EXPECT_EQ(ok->input(0).dims(0), 4);
  auto unknown = ModelConfigFromJson(R"({"max_batch_size": 4, "bogus": 1})");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("bogus"), std::string::npos)
      << unknown.status().message();
  EXPECT_FALSE(ModelConfigFromJson("{not json").ok());
  EXPECT_FALSE(ModelConfigFromJson(R"({"max_batch_size": "many"})").ok());
  EXPECT_FALSE(ModelConfigFromJson("").ok());
}

// y = x + x with x, y: FP32 [batch, 4], served as [batch, 2, 2] through reshape on both sides.
TEST(TritonConfigTest, ReshapeOnInputsAndOutputs) {
  const fs::path repo = fs::path(::testing::TempDir()) / "triton_reshape_repo";
  fs::remove_all(repo);
  WriteDoubleModel(repo / "m" / "1" / "model.onnx");
  std::ofstream(repo / "m" / "config.pbtxt") << R"pb(
    max_batch_size: 4
    input [ { name: "x" data_type: TYPE_FP32 dims: [ 2, 2 ] reshape: { shape: [ 4 ] } } ]
    output [ { name: "y" data_type: TYPE_FP32 dims: [ 2, -1 ] reshape: { shape: [ 4 ] } } ]
  )pb";
  WriteDoubleModel(repo / "bad" / "1" / "model.onnx");
  std::ofstream(repo / "bad" / "config.pbtxt")
      << "max_batch_size: 4\n"
         "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 3 ] reshape: { shape: [ 4 ] } } ]";
  ModelManagerOptions o;
  o.repository = repo;
  o.total_threads = 1;
  auto manager = std::move(ModelManager::Create(o)).value();
  ASSERT_TRUE(manager->LoadRepository().ok());
  ASSERT_TRUE(manager->IsModelReady("m"));
  EXPECT_FALSE(manager->IsModelReady("bad"));
  bool found = false;
  for (const auto& e : manager->Index()) {
    if (e.name != "bad") continue;
    found = true;
    EXPECT_NE(e.reason.find("element count"), std::string::npos) << e.reason;
  }
  EXPECT_TRUE(found);
  auto md = manager->GetMetadata("m");
  ASSERT_TRUE(md.ok());
  EXPECT_EQ(md->inputs[0].shape, (std::vector<int64_t>{-1, 2, 2}));
  EXPECT_EQ(md->outputs[0].shape, (std::vector<int64_t>{-1, 2, -1}));

  auto r = std::make_unique<InferenceRequest>();
  r->model_name = "m";
  r->inputs.push_back({"x", Tensor::FromVector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2})});
  std::promise<std::pair<Status, InferenceResponse>> p;
  auto f = p.get_future();
  manager->Infer(std::move(r), [&p](Status s, InferenceResponse resp) {
    p.set_value({std::move(s), std::move(resp)});
  });
  auto [status, response] = f.get();
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_EQ(response.outputs.size(), 1u);
  const Tensor& y = response.outputs[0].second;
  EXPECT_EQ(y.shape(), (Shape{2, 2, 2}));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y.data<float>()[i], 2.0f * (i + 1));
  manager.reset();
  fs::remove_all(repo);
}

// The classification extension: the top-k of an output as "score:index:label", labels from the
// output's label_filename.
TEST(TritonConfigTest, ClassificationUsesTheLabelFile) {
  const fs::path repo = fs::path(::testing::TempDir()) / "triton_classify_repo";
  fs::remove_all(repo);
  WriteDoubleModel(repo / "m" / "1" / "model.onnx");
  std::ofstream(repo / "m" / "config.pbtxt")
      << "max_batch_size: 4\n"
         "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 4 ] label_filename: \"l.txt\" } ]";
  std::ofstream(repo / "m" / "l.txt") << "a\nb\r\nc\nd\n";
  WriteDoubleModel(repo / "nolabels" / "1" / "model.onnx");
  std::ofstream(repo / "nolabels" / "config.pbtxt")
      << "max_batch_size: 4\n"
         "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 4 ] label_filename: \"gone.txt\" } ]";
  ModelManagerOptions o;
  o.repository = repo;
  o.total_threads = 1;
  auto manager = std::move(ModelManager::Create(o)).value();
  ASSERT_TRUE(manager->LoadRepository().ok());
  EXPECT_FALSE(manager->IsModelReady("nolabels"));  // a missing label file fails the load
  auto infer = [&](int64_t k, bool request_y) {
    auto r = std::make_unique<InferenceRequest>();
    r->model_name = "m";
    r->inputs.push_back({"x", Tensor::FromVector<float>({1, 4, 2, 3, 4, 1, 3, 2}, {2, 4})});
    if (request_y) r->requested_outputs = {"y"};
    r->classification["y"] = k;
    std::promise<std::pair<Status, InferenceResponse>> p;
    auto f = p.get_future();
    manager->Infer(std::move(r), [&p](Status s, InferenceResponse resp) {
      p.set_value({std::move(s), std::move(resp)});
    });
    return f.get();
  };
  auto [status, response] = infer(2, true);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_TRUE(response.outputs.empty());
  ASSERT_EQ(response.classified.size(), 1u);
  const ClassifiedOutput& c = response.classified[0];
  EXPECT_EQ(c.name, "y");
  EXPECT_EQ(c.shape, (Shape{2, 2}));
  EXPECT_EQ(c.values, (std::vector<std::string>{"8.000000:1:b", "6.000000:3:d", "8.000000:0:a",
                                                "6.000000:2:c"}));
  auto all = infer(10, true);  // k is capped at the class count
  ASSERT_TRUE(all.first.ok());
  EXPECT_EQ(all.second.classified.at(0).shape, (Shape{2, 4}));
  EXPECT_EQ(infer(2, false).first.code(), StatusCode::kInvalidArgument);  // y not requested
  EXPECT_EQ(infer(0, true).first.code(), StatusCode::kInvalidArgument);
  manager.reset();
  fs::remove_all(repo);
}

}  // namespace
}  // namespace triton_config_test
}  // namespace inferd::serving
