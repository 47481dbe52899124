// Map fields of the config proto, through both halves of protobuf: our compiled code (the
// generated model_config.pb.cc, the inline map accessors) and Debian's prebuilt libprotobuf
// (text format, reflection, MessageDifferencer), which meet in MapFieldBase. If a build's flags
// give MapFieldBase another layout than the library's, as -fsanitize=thread did
// (tests/sanitizers/protobuf_tsan_abi.h), the first parse below crashes: this is the regression
// test for that SEGV, and it runs in `make tsan` (inferd_serving_test) and `make asan`.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>

#include "model_config.pb.h"
#include "serving/model_config.h"

namespace inferd::serving {
namespace protobuf_map_abi_test {
namespace {

// A uint64 -> message map, a string -> message map, and a map inside a repeated message.
constexpr const char* kConfig = R"pb(
  name: "m"
  dynamic_batching {
    priority_levels: 3
    priority_queue_policy { key: 1 value { max_queue_size: 8 } }
    priority_queue_policy { key: 3 value { max_queue_size: 50 timeout_action: DELAY } }
  }
  parameters { key: "foo" value { string_value: "bar" } }
  parameters { key: "baz" value { string_value: "qux" } }
  model_warmup [ { name: "w" batch_size: 1
                   inputs { key: "x" value { data_type: TYPE_FP32 dims: [ 3 ] zero_data: true } }
                   inputs { key: "y"
                            value { data_type: TYPE_INT64 dims: [ 2 ] random_data: true } } } ]
)pb";

TEST(ProtobufMapAbiTest, TextFormatMapsReadBackThroughTheGeneratedApi) {
  auto parsed = ParseModelConfig(kConfig, /*strict=*/true, nullptr);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const inference::ModelConfig& c = *parsed;
  const auto& policies = c.dynamic_batching().priority_queue_policy();
  ASSERT_EQ(policies.size(), 2u);
  EXPECT_EQ(policies.at(1).max_queue_size(), 8u);
  EXPECT_EQ(policies.at(3).max_queue_size(), 50u);
  EXPECT_EQ(policies.at(3).timeout_action(), inference::ModelQueuePolicy::DELAY);
  ASSERT_EQ(c.parameters().size(), 2u);
  EXPECT_EQ(c.parameters().at("foo").string_value(), "bar");
  EXPECT_EQ(c.parameters().at("baz").string_value(), "qux");
  ASSERT_EQ(c.model_warmup_size(), 1);
  const auto& inputs = c.model_warmup(0).inputs();
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_TRUE(inputs.at("x").zero_data());
  EXPECT_EQ(inputs.at("y").data_type(), inference::TYPE_INT64);
  EXPECT_EQ(inputs.at("y").dims(0), 2);
}

TEST(ProtobufMapAbiTest, MapsWrittenByUsReadBackThroughTheLibrary) {
  inference::ModelConfig c;
  auto& policies = *c.mutable_dynamic_batching()->mutable_priority_queue_policy();
  policies[7].set_max_queue_size(11);
  policies[2].set_max_queue_size(5);
  (*c.mutable_parameters())["k"].set_string_value("v");

  // Reflection sees the map as a repeated field of entries (the library syncs it from the map).
  const google::protobuf::Descriptor* db = inference::ModelDynamicBatching::descriptor();
  const google::protobuf::FieldDescriptor* f = db->FindFieldByName("priority_queue_policy");
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(f->is_map());
  EXPECT_EQ(c.dynamic_batching().GetReflection()->FieldSize(c.dynamic_batching(), f), 2);

  // Text out (library) and back in (library, then our map again).
  std::string text;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(c, &text));
  EXPECT_NE(text.find("max_queue_size: 11"), std::string::npos) << text;
  inference::ModelConfig back;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &back)) << text;
  EXPECT_EQ(back.dynamic_batching().priority_queue_policy().at(7).max_queue_size(), 11u);
  EXPECT_EQ(back.parameters().at("k").string_value(), "v");
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(c, back));

  // Binary round trip (generated code both ways), then compared by the library.
  inference::ModelConfig wire;
  ASSERT_TRUE(wire.ParseFromString(c.SerializeAsString()));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(c, wire));
  wire.mutable_dynamic_batching()->mutable_priority_queue_policy()->erase(2);
  EXPECT_FALSE(google::protobuf::util::MessageDifferencer::Equals(c, wire));
}

}  // namespace
}  // namespace protobuf_map_abi_test
}  // namespace inferd::serving
