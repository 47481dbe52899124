#include "serving/generative_config.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "serving/model_config.h"
#include "serving/test_models.h"

namespace inferd::serving {
namespace {

namespace fs = std::filesystem;

inference::ModelConfig Parse(const std::string& text) {
  auto c = ParseModelConfig(text, /*strict=*/false, nullptr);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : inference::ModelConfig();
}

std::string Param(const std::string& key, const std::string& value) {
  return "parameters { key: \"" + key + "\" value: { string_value: \"" + value + "\" } }\n";
}

class GenerativeConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = testing::FreshRepository("generative_config_");
    for (const char* f : {"model.onnx", "config.json", "tokenizer.model"}) {
      testing::WriteFile(repo_ / "gen" / "1" / f, "x");
    }
    testing::WriteFile(repo_ / "gen" / "config.pbtxt", "backend: \"inferd_generate\"\n");
    testing::WriteFile(repo_ / "onnx" / "config.pbtxt", "backend: \"onnxruntime\"\n");
    testing::WriteFile(repo_ / "broken" / "config.pbtxt", "backend: {");
  }
  void TearDown() override { fs::remove_all(repo_); }
  fs::path repo_;
};

TEST_F(GenerativeConfigTest, ReadsParameters) {
  auto config = Parse("backend: \"inferd_generate\"\n" + Param("kv_cache_bytes", "64MiB") +
                      Param("block_size", "32") + Param("max_num_batched_tokens", "256") +
                      Param("max_num_seqs", "8") + Param("max_context", "512") +
                      Param("int8_weights", "true") + Param("enable_prefix_caching", "false") +
                      Param("kv_cache_dtype", "int8"));
  EXPECT_TRUE(IsGenerativeConfig(config));
  auto c = ReadGenerativeConfig(config, repo_ / "gen");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->kv_cache_bytes, size_t{64} << 20);
  EXPECT_EQ(c->block_size, 32);
  EXPECT_EQ(c->max_num_batched_tokens, 256);
  EXPECT_EQ(c->max_num_seqs, 8);
  EXPECT_EQ(c->max_context, 512);
  EXPECT_TRUE(c->int8_weights);
  EXPECT_EQ(c->kv_cache_dtype, "int8");
  EXPECT_FALSE(c->enable_prefix_caching);
  EXPECT_TRUE(c->chunked_prefill);
  EXPECT_EQ(c->model_dir, repo_ / "gen" / "1");
}

TEST_F(GenerativeConfigTest, RejectsBadParametersAndMissingFiles) {
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"kv_cache_bytes", "lots"},
                                                        {"kv_cache_bytes", "0"},
                                                        {"block_size", "0"},
                                                        {"max_num_seqs", "-1"},
                                                        {"int8_weights", "yes"},
                                                        {"kv_cache_dtype", "fp8"},
                                                        {"kv_cache_dtype", "INT8"},
                                                        {"kv_cache", "1MiB"}}) {
    auto c = ReadGenerativeConfig(Parse(Param(key, value)), repo_ / "gen");
    ASSERT_FALSE(c.ok()) << key << "=" << value;
    EXPECT_NE(c.status().message().find(key), std::string::npos) << c.status().message();
  }
  fs::remove(repo_ / "gen" / "1" / "tokenizer.model");
  auto c = ReadGenerativeConfig(Parse(""), repo_ / "gen");
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("tokenizer.model"), std::string::npos);
}

TEST_F(GenerativeConfigTest, RefusesFilesLinkedFromOutsideTheFolder) {
  testing::WriteFile(repo_ / "outside.model", "x");
  fs::remove(repo_ / "gen" / "1" / "tokenizer.model");
  fs::create_symlink(repo_ / "outside.model", repo_ / "gen" / "1" / "tokenizer.model");
  auto c = ReadGenerativeConfig(Parse(""), repo_ / "gen");
  ASSERT_EQ(c.status().code(), StatusCode::kInvalidArgument) << c.status().ToString();
  EXPECT_NE(c.status().message().find("gen/1/tokenizer.model' is outside"), std::string::npos)
      << c.status().message();
  EXPECT_EQ(c.status().message().find(repo_.string()), std::string::npos) << c.status().message();
}

TEST_F(GenerativeConfigTest, ListsGenerativeFolders) {
  EXPECT_EQ(ListGenerativeModels(repo_), std::vector<std::string>{"gen"});
  EXPECT_TRUE(ListGenerativeModels(repo_ / "missing").empty());
}

}  // namespace
}  // namespace inferd::serving
