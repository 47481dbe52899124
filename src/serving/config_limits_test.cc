// Attack 4/5 of issue 15: huge numeric config values fail the load with an error naming the field
// and its bound, before anything is sized by them, and every other model keeps serving.
#include "serving/config_limits.h"

#include <gtest/gtest.h>

#include <string>

#include "serving/model_config.h"
#include "serving/test_models.h"

namespace inferd::serving {
namespace {

namespace fs = std::filesystem;

// The first error of ValidateConfigStandalone on `text` (parsed strictly), or "OK".
std::string Check(const std::string& text) {
  std::vector<std::string> warnings;
  auto config = ParseModelConfig(text, true, &warnings);
  if (!config.ok()) return "parse: " + config.status().message();
  Status s = ValidateConfigStandalone(*config);
  return s.ok() ? "OK" : s.message();
}

TEST(ConfigBoundsTest, EachHugeFieldIsRefusedNamingTheFieldAndItsBound) {
  EXPECT_EQ(Check("max_batch_size: 1000000000"),
            "max_batch_size 1000000000 exceeds the limit 65536");
  EXPECT_EQ(Check("max_batch_size: 8 input [{ name: \"x\" data_type: TYPE_FP32 "
                  "dims: [ 100000000000 ] }]"),
            "input 'x' dims dim 100000000000 exceeds the limit 2147483647");
  EXPECT_EQ(Check("input [{ name: \"x\" data_type: TYPE_FP32 dims: [ 2000000, 2000000 ] }]"),
            "input 'x' dims holds more than 1099511627776 elements (the limit)");
  EXPECT_EQ(Check("output [{ name: \"y\" data_type: TYPE_FP32 dims: [ -7 ] }]"),
            "output 'y' dims dim -7 must be >= -1");
  EXPECT_EQ(Check("instance_group [{ name: \"g\" count: 2147483647 kind: KIND_CPU }]"),
            "instance_group 'g' count 2147483647 exceeds the limit 256");
  // Two groups whose int32 sum would overflow.
  EXPECT_EQ(Check("instance_group [{ name: \"a\" count: 200 }, { name: \"b\" count: 200 }]"),
            "instance_group total count 400 exceeds the limit 256");
  EXPECT_EQ(Check("inferd { threads_per_instance: 100000 }"),
            "inferd.threads_per_instance 100000 exceeds the limit 1024");
  EXPECT_EQ(Check("max_batch_size: 8 dynamic_batching { max_queue_delay_microseconds: "
                  "9007199254740992 }"),
            "dynamic_batching.max_queue_delay_microseconds 9007199254740992 exceeds the limit "
            "60000000");
  EXPECT_EQ(Check("max_batch_size: 8 dynamic_batching { default_queue_policy { "
                  "default_timeout_microseconds: 9000000000000 } }"),
            "dynamic_batching.default_queue_policy.default_timeout_microseconds 9000000000000 "
            "exceeds the limit 86400000000");
  EXPECT_EQ(Check("max_batch_size: 8 dynamic_batching { default_queue_policy { "
                  "max_queue_size: 4294967295 } }"),
            "dynamic_batching.default_queue_policy.max_queue_size 4294967295 exceeds the limit "
            "10000000");
  EXPECT_EQ(Check("max_batch_size: 8 sequence_batching { max_sequence_idle_microseconds: "
                  "18446744073709551615 }"),
            "sequence_batching.max_sequence_idle_microseconds 18446744073709551615 exceeds the "
            "limit 86400000000");
  EXPECT_EQ(Check("max_batch_size: 8 sequence_batching { oldest { max_candidate_sequences: "
                  "2000000000 } }"),
            "sequence_batching.oldest.max_candidate_sequences 2000000000 exceeds the limit "
            "1048576");
  EXPECT_EQ(Check("model_warmup [{ name: \"w\" batch_size: 1 count: 4000000000 inputs { key: "
                  "\"x\" value: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } }]"),
            "model_warmup 'w' count 4000000000 exceeds the limit 1000");
  EXPECT_EQ(Check("model_warmup [{ name: \"w\" batch_size: 1 inputs { key: \"x\" value: { "
                  "data_type: TYPE_FP32 dims: [ 100000000000 ] zero_data: true } } }]"),
            "model_warmup 'w' input 'x' dims dim 100000000000 exceeds the limit 2147483647");
  // At the bounds: accepted.
  EXPECT_EQ(Check("max_batch_size: 65536 dynamic_batching { max_queue_delay_microseconds: "
                  "60000000 } instance_group [{ count: 256 }]"),
            "OK");
}

TEST(ConfigBoundsTest, ConfiguredInstanceCountNeverOverflows) {
  inference::ModelConfig c;
  c.add_instance_group()->set_count(2147483647);
  c.add_instance_group()->set_count(2147483647);
  EXPECT_EQ(ConfiguredInstanceCount(c), ConfigBounds::kMaxInstances);
}

// Through the manager: the huge configs fail their own model's load with the bound in the
// reason; the model beside them serves.
TEST(ConfigBoundsTest, HugeConfigFailsOnlyThatModel) {
  const fs::path repo = testing::FreshRepository("serving_bounds_");
  testing::WriteAddModel(repo / "good" / "1" / "model.onnx");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"batch", "max_batch_size: 1000000000"},
      {"instances", "instance_group [{ count: 2147483647 }]"},
      {"delay", "max_batch_size: 4 dynamic_batching { max_queue_delay_microseconds: "
                "9007199254740992 }"},
      {"warmup", "max_batch_size: 4 input [{ name: \"x\" data_type: TYPE_FP32 dims: [ -1 ] }] "
                 "output [{ name: \"y\" data_type: TYPE_FP32 dims: [ -1 ] }] "
                 "model_warmup [{ name: \"w\" batch_size: 1 inputs { key: \"x\" value: { "
                 "data_type: TYPE_FP32 dims: [ 100000000000 ] zero_data: true } } }]"},
  };
  for (const auto& [name, text] : bad) {
    testing::WriteAddModel(repo / name / "1" / "model.onnx");
    testing::WriteFile(repo / name / "config.pbtxt", text);
  }
  ModelManagerOptions o;
  o.repository = repo;
  o.total_threads = 1;
  auto manager = ModelManager::Create(o);
  ASSERT_TRUE(manager.ok());
  ASSERT_TRUE((*manager)->LoadRepository().ok());
  std::map<std::string, std::string> reasons;
  for (const auto& e : (*manager)->Index()) reasons[e.name] = e.state + ": " + e.reason;
  EXPECT_EQ(reasons["good"], "READY: ");
  EXPECT_NE(reasons["batch"].find("max_batch_size 1000000000 exceeds the limit 65536"),
            std::string::npos) << reasons["batch"];
  EXPECT_NE(reasons["instances"].find("count 2147483647 exceeds the limit 256"),
            std::string::npos) << reasons["instances"];
  EXPECT_NE(reasons["delay"].find("max_queue_delay_microseconds 9007199254740992 exceeds"),
            std::string::npos) << reasons["delay"];
  EXPECT_NE(reasons["warmup"].find("dim 100000000000 exceeds the limit"), std::string::npos)
      << reasons["warmup"];
  testing::Result r = testing::InferSync(
      **manager, testing::Request("good", Tensor::FromVector<float>({1.f, 2.f}, {1, 2})));
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  manager->reset();
  fs::remove_all(repo);
}

}  // namespace
}  // namespace inferd::serving
