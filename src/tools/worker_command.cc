#include "tools/worker_command.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "serving/model_manager.h"
#include "tools/batch_command.h"
#include "tools/log_level.h"
#include "workqueue/redis_client.h"
#include "workqueue/worker.h"

namespace inferd::tools {
namespace {

// Set by the SIGINT/SIGTERM handler (lock-free, so async-signal-safe); the worker polls it.
// (batch_command.cc has its own: each command owns its handlers for its lifetime.)
std::atomic<int> g_worker_stop{0};

extern "C" void OnWorkerStop(int sig) {
  if (g_worker_stop.exchange(sig) != 0) {  // the second signal: stop now
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  const char msg[] = "inferd worker: stopping: finishing the batch in flight\n";
  ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof(msg) - 1);
  (void)ignored;
}

std::string DefaultConsumer() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return fmt::format("{}-{}", host[0] ? host : "worker", ::getpid());
}

}  // namespace

CLI::App* AddWorkerSubcommand(CLI::App& app, WorkerCommandOptions* o) {
  CLI::App* cmd = app.add_subcommand(
      "worker", "Consume inference jobs from a Redis stream (consumer group) and store results");
  cmd->add_option("--redis", o->redis, "redis://HOST:PORT[/DB]")->required();
  cmd->add_option("--stream", o->stream, "The job stream")->required();
  cmd->add_option("--group", o->group, "The consumer group (created if absent)")->required();
  cmd->add_option("--model-repository", o->repository, "Triton-layout model repository")
      ->required();
  cmd->add_option("--consumer", o->consumer, "This worker's name in the group (default HOST-PID)");
  cmd->add_option("--model", o->models, "Load this model at start (repeatable; others load on "
                                        "first use)");
  cmd->add_option("--batch", o->batch,
                  "Items per read: XREADGROUP COUNT is this over the items per entry of the "
                  "last read (entries may be packs, see inferd batch --pack)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--batch-size", o->batch_size,
                  "Preferred batch size when a model's config has no dynamic_batching")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--claim-idle-ms", o->claim_idle_ms,
                  "Take over entries pending this long on another consumer (XAUTOCLAIM)")
      ->check(CLI::Range(int64_t{1}, int64_t{86400000}))
      ->capture_default_str();
  cmd->add_option("--claim-interval-ms", o->claim_interval_ms,
                  "Between claim passes (0 = half of --claim-idle-ms)")
      ->check(CLI::Range(int64_t{0}, int64_t{86400000}))
      ->capture_default_str();
  cmd->add_option("--max-deliveries", o->max_deliveries,
                  "Dead-letter an entry delivered this many times without an ack")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--result-ttl", o->result_ttl_s, "Seconds a stored result lives (0 = forever)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--redis-timeout-ms", o->timeout_ms, "Connect and reply timeout")
      ->check(CLI::Range(int64_t{1}, int64_t{600000}))
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "Cores for inference (0 = all)")
      ->check(CLI::Range(0, 4096));
  AddLogLevelOption(cmd, &o->log_level);
  return cmd;
}

Status WorkerCommand(const WorkerCommandOptions& o, std::ostream& log) {
  ApplyLogLevel(o.log_level);
  workqueue::WorkerOptions w;
  ASSIGN_OR_RETURN(w.redis, workqueue::ParseRedisUrl(o.redis));
  w.timeout = std::chrono::milliseconds(o.timeout_ms);
  w.stream = o.stream;
  w.group = o.group;
  w.consumer = o.consumer.empty() ? DefaultConsumer() : o.consumer;
  w.batch = o.batch;
  w.claim_idle = std::chrono::milliseconds(o.claim_idle_ms);
  w.claim_interval = std::chrono::milliseconds(
      o.claim_interval_ms > 0 ? o.claim_interval_ms : std::max<int64_t>(1, o.claim_idle_ms / 2));
  w.max_deliveries = o.max_deliveries;
  w.result_ttl = std::chrono::seconds(o.result_ttl_s);
  // Unreachable Redis is reported before any model loads (seconds saved, and a clear error).
  ASSIGN_OR_RETURN(auto probe, workqueue::RedisClient::Connect(w.redis, w.timeout));
  probe.reset();

  serving::ModelManagerOptions mo;
  mo.repository = o.repository;
  mo.control_mode = serving::ModelControlMode::kExplicit;
  mo.total_threads = o.threads;
  mo.autocomplete_max_batch_size = o.batch_size;
  ASSIGN_OR_RETURN(auto manager, serving::ModelManager::Create(mo));
  RETURN_IF_ERROR(manager->Start());
  for (const std::string& m : o.models) {
    RETURN_IF_ERROR(LoadBatchModel(*manager, o.repository, m, o.batch_size, log).status());
  }
  w.manager = manager.get();
  w.resolve_model = [&](const std::string& model) -> StatusOr<batchjob::ModelInputInfo> {
    ASSIGN_OR_RETURN(BatchModel loaded,
                     LoadBatchModel(*manager, o.repository, model, o.batch_size, log));
    return loaded.inputs;
  };
  w.log = &log;
  g_worker_stop = 0;
  struct sigaction sa {}, old_int {}, old_term {};
  sa.sa_handler = OnWorkerStop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  w.stop_signal = &g_worker_stop;
  log << fmt::format("inferd worker {}: consuming {} (group {}) on {}\n", w.consumer, w.stream,
                     w.group, w.redis.Describe());
  log.flush();
  auto summary = workqueue::RunWorker(w);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (!summary.ok()) return summary.status();
  log << workqueue::WorkerSummaryJson(*summary) << "\n";
  return Status::Ok();
}

}  // namespace inferd::tools
