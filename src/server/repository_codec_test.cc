#include "server/repository_codec.h"

#include <gtest/gtest.h>

namespace inferd::server {
namespace {

TEST(RepositoryCodecTest, Base64) {
  EXPECT_EQ(*DecodeBase64(""), "");
  EXPECT_EQ(*DecodeBase64("TQ=="), "M");
  EXPECT_EQ(*DecodeBase64("TWE="), "Ma");
  EXPECT_EQ(*DecodeBase64("TWFu"), "Man");
  EXPECT_EQ(*DecodeBase64("AP8A/w=="), std::string("\x00\xff\x00\xff", 4));
  for (const char* bad : {"TWF", "TW=u", "T===", "TWF*", "TW\nu", "====", "TWFu="}) {
    EXPECT_FALSE(DecodeBase64(bad).ok()) << bad;
  }
}

TEST(RepositoryCodecTest, HttpLoadRequest) {
  auto empty = DecodeHttpLoadRequest("");
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->config.has_value());
  EXPECT_TRUE(DecodeHttpLoadRequest("{}").ok());
  auto p = DecodeHttpLoadRequest(
      R"({"parameters": {"config": "{\"max_batch_size\": 2}", "file:1/model.onnx": "TWFu",
                         "unload_dependents": true}})");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(*p->config, "{\"max_batch_size\": 2}");
  ASSERT_EQ(p->files.size(), 1u);
  EXPECT_EQ(p->files.at("1/model.onnx"), "Man");
  const std::pair<const char*, const char*> bad[] = {
      {"{oops", "JSON object"},
      {"[1]", "JSON object"},
      {R"({"parameters": 3})", "'parameters'"},
      {R"({"parameters": {"config": {"max_batch_size": 2}}})", "'config' must have string type"},
      {R"({"parameters": {"file:1/model.onnx": 3}})", "file:1/model.onnx"},
      {R"({"parameters": {"file:1/model.onnx": "not base64!"}})", "file:1/model.onnx"},
  };
  for (const auto& [body, why] : bad) {
    auto r = DecodeHttpLoadRequest(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
  }
}

TEST(RepositoryCodecTest, GrpcLoadRequest) {
  inference::RepositoryModelLoadRequest req;
  req.set_model_name("m");
  (*req.mutable_parameters())["config"].set_string_param("{}");
  (*req.mutable_parameters())["file:1/model.onnx"].set_bytes_param(std::string("\0x", 2));
  auto p = DecodeGrpcLoadRequest(req);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(*p->config, "{}");
  EXPECT_EQ(p->files.at("1/model.onnx"), std::string("\0x", 2));
  (*req.mutable_parameters())["config"].set_int64_param(3);
  EXPECT_FALSE(DecodeGrpcLoadRequest(req).ok());
  (*req.mutable_parameters())["config"].set_string_param("{}");
  (*req.mutable_parameters())["file:2/model.onnx"].set_string_param("text");
  auto bad = DecodeGrpcLoadRequest(req);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("file:2/model.onnx"), std::string::npos);
}

}  // namespace
}  // namespace inferd::server
