#include "server/server_extensions.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace inferd::server {
namespace {

TEST(ServerExtensionsTest, Identity) {
  EXPECT_EQ(ServerExtensions().id(), "inferd");
  EXPECT_EQ(ServerExtensions("triton").id(), "triton");
}

TEST(ServerExtensionsTest, LogSettings) {
  ServerExtensions ext;
  EXPECT_EQ(std::get<bool>(ext.GetLog().at("log_info")), true);
  ASSERT_TRUE(ext.UpdateLog({{"log_verbose_level", uint32_t{1}}}).ok());
  EXPECT_EQ(spdlog::get_level(), spdlog::level::debug);
  ASSERT_TRUE(ext.UpdateLog({{"log_verbose_level", uint32_t{0}}, {"log_info", false}}).ok());
  EXPECT_EQ(spdlog::get_level(), spdlog::level::warn);
  EXPECT_EQ(std::get<bool>(ext.GetLog().at("log_info")), false);
  // Bad updates name the setting and change nothing.
  const std::pair<LogSettings, const char*> bad[] = {
      {{{"log_colour", true}}, "log_colour"},
      {{{"log_info", std::string("yes")}}, "log_info"},
      {{{"log_format", std::string("xml")}}, "log_format"},
      {{{"log_file", std::string("/tmp/x.log")}}, "log_file"},
      {{{"log_error", false}, {"log_verbose_level", true}}, "log_verbose_level"},
  };
  for (const auto& [update, name] : bad) {
    Status s = ext.UpdateLog(update);
    ASSERT_FALSE(s.ok()) << name;
    EXPECT_NE(s.message().find(name), std::string::npos) << s.message();
  }
  EXPECT_EQ(std::get<bool>(ext.GetLog().at("log_error")), true);
  ASSERT_TRUE(ext.UpdateLog({{"log_info", true}}).ok());
  EXPECT_EQ(spdlog::get_level(), spdlog::level::info);
}

TEST(ServerExtensionsTest, TraceSettingsAndFile) {
  const auto file = std::filesystem::path(::testing::TempDir()) / "inferd_trace_test.jsonl";
  std::filesystem::remove(file);
  ServerExtensions ext;
  EXPECT_EQ(ext.GetTrace("")["trace_level"], std::vector<std::string>{"OFF"});
  EXPECT_FALSE(ext.StartTrace("m").has_value());  // off by default
  // Model m traces every request, twice; the global settings stay off.
  ASSERT_TRUE(ext.UpdateTrace("m", {{"trace_level", {"TIMESTAMPS"}},
                                    {"trace_rate", {"1"}},
                                    {"trace_count", {"2"}},
                                    {"trace_file", {file.string()}}})
                  .ok());
  EXPECT_EQ(ext.GetTrace("")["trace_level"], std::vector<std::string>{"OFF"});
  EXPECT_EQ(ext.GetTrace("m")["trace_rate"], std::vector<std::string>{"1"});
  EXPECT_FALSE(ext.StartTrace("other").has_value());
  for (int i = 0; i < 3; ++i) {
    auto t = ext.StartTrace("m");
    ASSERT_EQ(t.has_value(), i < 2) << i;
    if (t) ext.FinishTrace(*t, 1);
  }
  EXPECT_EQ(ext.GetTrace("m")["trace_count"], std::vector<std::string>{"0"});
  std::ifstream in(file);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    EXPECT_NE(line.find("\"model_name\":\"m\""), std::string::npos) << line;
    EXPECT_NE(line.find("REQUEST_END"), std::string::npos) << line;
  }
  EXPECT_EQ(lines, 2);
  // Clearing a model's setting falls back to the global one.
  ASSERT_TRUE(ext.UpdateTrace("m", {{"trace_level", {}}}).ok());
  EXPECT_EQ(ext.GetTrace("m")["trace_level"], std::vector<std::string>{"OFF"});
  const std::pair<TraceSettings, const char*> bad[] = {
      {{{"trace_level", {"TENSORS"}}}, "trace_level"},
      {{{"trace_rate", {"0"}}}, "trace_rate"},
      {{{"trace_count", {"x"}}}, "trace_count"},
      {{{"trace_mode", {"opentelemetry"}}}, "trace_mode"},
      {{{"trace_colour", {"1"}}}, "trace_colour"},
      {{{"trace_rate", {"1", "2"}}}, "trace_rate"},
  };
  for (const auto& [update, name] : bad) {
    Status s = ext.UpdateTrace("", update);
    ASSERT_FALSE(s.ok()) << name;
    EXPECT_NE(s.message().find(name), std::string::npos) << s.message();
  }
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace inferd::server
