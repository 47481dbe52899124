#include "server/metrics.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace inferd::server {
namespace {

serving::ModelStatisticsSnapshot Snapshot(const std::string& name, int64_t version) {
  serving::ModelStatisticsSnapshot s;
  s.name = name;
  s.version = version;
  s.success_requests = 10;
  s.inference_count = 12;
  s.execution_count = 4;
  s.failures[serving::FailureReason::kInvalidInput] = 2;
  s.failures[serving::FailureReason::kTimeout] = 1;
  s.pending = 3;
  s.instances = 2;
  s.scale_ups = 4;
  s.memory_plans_recorded = 7;
  s.busy_ns = 1'500'000'000;
  s.request_us.bounds = {100, 1000, 10000};
  s.request_us.counts = {1, 5, 3, 1};
  s.request_us.count = 10;
  s.request_us.sum = 25000;
  s.batch_size.bounds = {1, 2, 4};
  s.batch_size.counts = {2, 1, 1, 0};
  s.batch_size.count = 4;
  s.batch_size.sum = 8;
  return s;
}

TEST(Metrics, RendersFamiliesWithLabels) {
  std::vector<serving::ModelStatisticsSnapshot> models = {Snapshot("m\"1", 1), Snapshot("m2", 3)};
  ProcessStats p{1.5, 1 << 20, 1.7e9};
  std::string text = RenderPrometheusMetrics(models, &p);
  EXPECT_NE(text.find("inferd_request_success_total{model=\"m\\\"1\",version=\"1\"} 10\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("inferd_request_failure_total{model=\"m2\",version=\"3\",reason=\"timeout\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("inferd_request_duration_seconds_bucket{model=\"m2\",version=\"3\",le=\"0.001\"} 6"),
            std::string::npos);
  EXPECT_NE(text.find("inferd_request_duration_seconds_bucket{model=\"m2\",version=\"3\",le=\"+Inf\"} 10"),
            std::string::npos);
  EXPECT_NE(text.find("inferd_request_duration_seconds_sum{model=\"m2\",version=\"3\"} 0.025"),
            std::string::npos);
  EXPECT_NE(text.find("inferd_batch_size_bucket{model=\"m2\",version=\"3\",le=\"4\"} 4"),
            std::string::npos);
  EXPECT_NE(text.find("inferd_pending_requests{model=\"m2\",version=\"3\"} 3"), std::string::npos);
  EXPECT_NE(text.find("inferd_model_instances{model=\"m2\",version=\"3\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE inferd_model_instances gauge\n"), std::string::npos);
  EXPECT_NE(text.find("inferd_model_scale_events_total{model=\"m2\",version=\"3\",direction=\"up\"} 4\n"),
            std::string::npos);
  EXPECT_NE(text.find("inferd_model_busy_seconds_total{model=\"m2\",version=\"3\"} 1.5\n"),
            std::string::npos);
  EXPECT_NE(text.find("inferd_memory_plans_recorded_total{model=\"m2\",version=\"3\"} 7\n"),
            std::string::npos);
  EXPECT_NE(text.find("process_resident_memory_bytes 1048576"), std::string::npos);
}

TEST(Metrics, ProcessStatsFromProc) {
  auto p = ReadProcessStats();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_GT(p->resident_bytes, 0);
  EXPECT_GE(p->cpu_seconds, 0);
  EXPECT_GT(p->start_time_seconds, 1e9);
}

// The exposition must pass Prometheus' own linter (Debian package `prometheus`).
TEST(Metrics, PassesPromtool) {
  if (!std::filesystem::exists("/usr/bin/promtool")) GTEST_SKIP() << "promtool not installed";
  auto p = ReadProcessStats();
  ASSERT_TRUE(p.ok());
  GenerationMetrics gen;
  gen.model = "tiny-llama";
  gen.kv_blocks_total = 8;
  gen.ttft.bounds = {0.01, 0.1};
  gen.ttft.counts = {1, 0, 1};
  gen.ttft.count = 2;
  gen.ttft.sum = 0.5;
  std::string text = RenderPrometheusMetrics({Snapshot("a", 1), Snapshot("b", 2)}, &*p) +
                     RenderGenerationMetrics({gen});
  auto path = std::filesystem::temp_directory_path() / "inferd_metrics_test.prom";
  std::ofstream(path) << text;
  std::string cmd = "/usr/bin/promtool check metrics < " + path.string() + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string out;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof(buf), f)) out.append(buf, n);
  int rc = pclose(f);
  std::filesystem::remove(path);
  EXPECT_EQ(rc, 0) << out << "\n---\n" << text;
}

}  // namespace
}  // namespace inferd::server
