#include "tools/batch_command.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "batchjob/inputs.h"
#include "batchjob/item_reader.h"
#include "batchjob/job.h"
#include "batchjob/output_file.h"
#include "batchjob/progress.h"
#include "batchjob/records.h"
#include "batchjob/timeline.h"
#include "serving/model_config.h"
#include "serving/model_manager.h"
#include "serving/repository.h"
#include "tools/log_level.h"
#include "workqueue/queue_job.h"
#include "workqueue/redis_client.h"

namespace inferd::tools {
namespace {

namespace fs = std::filesystem;
using namespace inferd::batchjob;

// Set by the SIGINT/SIGTERM handler (lock-free, so async-signal-safe); the job polls it.
std::atomic<int> g_stop_signal{0};

extern "C" void OnStopSignal(int sig) {
  if (g_stop_signal.exchange(sig) != 0) {  // the second signal: stop now
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  const char msg[] =
      "\ninferd batch: stopping: finishing the items in flight (signal again to abort)\n";
  ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof(msg) - 1);
  (void)ignored;
}

// Installs the handlers for the job's lifetime and restores the previous ones.
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = OnStopSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

using LoadedModel = BatchModel;

// The repository's config of `model` (empty when it has none or it does not parse: the load
// then reports the problem).
inference::ModelConfig RepositoryConfig(const std::string& repository, const std::string& model) {
  std::string text;
  if (!serving::ReadRepositoryFile(fs::path(repository) / model / "config.pbtxt", &text)) return {};
  std::vector<std::string> warnings;
  auto parsed = serving::ParseModelConfig(text, /*strict=*/false, &warnings);
  return parsed.ok() ? std::move(parsed).value() : inference::ModelConfig{};
}

// The config to load a (non-ensemble) model with so dynamic batching forms batches: nullopt when
// the repository's config already batches (or is a sequence model, or says max_batch_size 0),
// else the same config plus a dynamic_batching block, in Triton's JSON.
// `min_max_batch` (an ensemble's max_batch_size, for its steps) is the smallest max_batch_size a
// config left to auto-completion gets.
std::optional<std::string> BatchingOverride(const std::string& model, inference::ModelConfig config,
                                            int batch_size, int min_max_batch, std::ostream& log) {
  if (config.has_dynamic_batching() || config.has_sequence_batching()) return std::nullopt;
  if (config.max_batch_size() == 0 && config.input_size() > 0) {
    log << fmt::format("note: model '{}' has max_batch_size 0: it runs one item at a time\n",
                       model);
    return std::nullopt;
  }
  if (config.max_batch_size() == 0) {  // left to auto-completion (no inputs listed)
    config.set_max_batch_size(std::max(batch_size, min_max_batch));
  }
  int preferred = std::min(batch_size, config.max_batch_size());
  auto* batching = config.mutable_dynamic_batching();
  batching->add_preferred_batch_size(preferred);
  // Long enough for the readers to fill a batch; a full batch never waits.
  batching->set_max_queue_delay_microseconds(10000);
  auto json = serving::ModelConfigToJson(config);
  if (!json.ok()) return std::nullopt;
  log << fmt::format(
      "note: model '{}' has no dynamic_batching in its config; inferd batch adds one "
      "(preferred batch size {}, max queue delay 10 ms)\n",
      model, preferred);
  return json.value();
}

// Loads `model` so that it batches: with BatchingOverride's config when it needs one (falling
// back to its own config if that load fails). An ensemble's composing models are loaded first
// the same way (an ensemble load keeps composing models already loaded), then the ensemble.
Status LoadBatched(serving::ModelManager& manager, const BatchCommandOptions& o,
                   const std::string& model, int min_max_batch, int depth, std::ostream& log) {
  if (depth > 8) return InvalidArgument("ensembles nested deeper than 8 at '{}'", model);
  inference::ModelConfig config = RepositoryConfig(o.repository, model);
  if (config.platform() == "ensemble") {
    for (const auto& step : config.ensemble_scheduling().step()) {
      if (manager.IsModelReady(step.model_name())) continue;
      Status s = LoadBatched(manager, o, step.model_name(),
                             std::max(min_max_batch, config.max_batch_size()), depth + 1, log);
      if (!s.ok()) return s;
    }
    return manager.LoadModel(model);
  }
  std::optional<std::string> override = BatchingOverride(model, config, o.batch_size, min_max_batch, log);
  if (override.has_value()) {
    serving::LoadParameters params;
    params.config = *override;
    Status loaded = manager.LoadModel(model, params);
    if (loaded.ok()) return loaded;
    log << fmt::format("note: loading '{}' with dynamic batching failed ({}); loading its own "
                       "config\n",
                       model, loaded.message());
  }
  return manager.LoadModel(model);
}

StatusOr<LoadedModel> LoadModel(serving::ModelManager& manager, const BatchCommandOptions& o,
                                std::ostream& log) {
  Status loaded = LoadBatched(manager, o, o.model, 0, 0, log);
  if (!loaded.ok()) return loaded.WithContext(fmt::format("model '{}'", o.model));
  ASSIGN_OR_RETURN(auto config, manager.GetConfig(o.model));
  ASSIGN_OR_RETURN(serving::ModelMetadata metadata, manager.GetMetadata(o.model));
  LoadedModel m;
  m.inputs.batching = config->max_batch_size() > 0;
  for (int64_t size : config->dynamic_batching().preferred_batch_size()) {
    m.batch_size = std::max<int>(m.batch_size, static_cast<int>(size));
  }
  bool ensemble = config->platform() == "ensemble";  // its steps batch: feed its max batch
  if ((config->has_dynamic_batching() && config->dynamic_batching().preferred_batch_size_size() == 0) ||
      ensemble) {
    m.batch_size = std::max(1, config->max_batch_size());
  }
  m.instances = std::max(1, serving::ConfiguredInstanceCount(*config));
  for (const serving::TensorMetadata& t : metadata.inputs) {
    ModelInputInfo::Input in;
    in.name = t.name;
    ASSIGN_OR_RETURN(in.dtype, serving::DataTypeFromKServe(t.datatype));
    in.dims = t.shape;
    if (m.inputs.batching && !in.dims.empty()) in.dims.erase(in.dims.begin());
    m.inputs.inputs.push_back(std::move(in));
  }
  return m;
}

struct Plan {
  std::vector<InputItem> pending;
  int64_t total = 0;
  int64_t done = 0;
  bool truncate = false;
};

// Lists the inputs and, with --resume, what the output already has.
StatusOr<Plan> PlanJob(const BatchCommandOptions& o, std::ostream& log) {
  ASSIGN_OR_RETURN(std::vector<InputItem> items, ListInputs(o.input));
  Plan plan;
  plan.total = static_cast<int64_t>(items.size());
  std::error_code ec;
  bool exists = fs::exists(o.output, ec);
  if (!o.resume) {
    if (exists && fs::file_size(o.output, ec) > 0 && !ec) {
      return FailedPrecondition("output {} already has records: pass --resume to continue that "
                                "job, or remove the file",
                                o.output);
    }
    plan.pending = std::move(items);
    plan.truncate = true;
    return plan;
  }
  ASSIGN_OR_RETURN(RecoveredOutput recovered, RecoverOutput(o.output));
  if (recovered.truncated_bytes > 0) {
    log << fmt::format("note: removed a torn last line ({} bytes) from {}\n",
                       recovered.truncated_bytes, o.output);
  }
  std::set<std::string> listed;
  for (InputItem& item : items) {
    std::string key = SourceKey(item.source);
    listed.insert(key);
    if (recovered.done.count(key)) {
      ++plan.done;
    } else {
      plan.pending.push_back(std::move(item));
    }
  }
  int64_t stray = 0;
  for (const std::string& s : recovered.done) stray += listed.count(s) ? 0 : 1;
  if (stray > 0) {
    log << fmt::format("note: {} records in {} are for inputs not listed now\n", stray, o.output);
  }
  if (exists) {
    log << fmt::format("resuming: {} of {} inputs have records ({} errors)\n", plan.done,
                       plan.total, recovered.errors);
  }
  return plan;
}

// The job's items on the workers of a Redis stream (workqueue/queue_job.h) instead of in process.
Status QueueBatch(const BatchCommandOptions& o, const Plan& plan, OutputFile* output,
                  AppendLog* stats, std::ostream& log, JobSummary* summary) {
  workqueue::QueueJobOptions q;
  ASSIGN_OR_RETURN(q.redis, workqueue::ParseRedisUrl(o.redis));
  q.stream = o.stream;
  q.group = o.group;
  q.model = o.model;
  q.max_queued = o.max_queued;
  q.pack = o.pack;
  q.max_errors = o.max_errors;
  q.idle_timeout = std::chrono::seconds(o.queue_timeout_s);
  q.output = output;
  log << fmt::format("{} inputs to run ({} done before) on the workers of {} (stream {}, group {})\n",
                     plan.pending.size(), plan.done, q.redis.Describe(), o.stream, o.group);
  if (stats != nullptr) {
    stats->Write(fmt::format(
        "{{\"event\":\"start\",\"pid\":{},\"inputs\":{},\"pending\":{},\"redis\":{}}}",
        ::getpid(), plan.total, plan.pending.size(), JsonQuote(q.redis.Describe())));
  }
  Progress progress(RealClock::Get(), log, ::isatty(STDERR_FILENO) != 0, plan.total, plan.done,
                    std::chrono::seconds(o.progress_interval_s));
  q.progress = &progress;
  q.stop_signal = &g_stop_signal;
  StopSignals signals;
  ASSIGN_OR_RETURN(*summary, workqueue::RunQueueJob(q, plan.pending));
  progress.Finish(summary->records, summary->errors);
  log << workqueue::FormatQueueSummary(*summary, q);
  if (stats != nullptr) stats->Write(SummaryJson(*summary));
  return Status::Ok();
}

Status Finish(const JobSummary& s, const Plan& plan, const BatchCommandOptions& o) {
  int64_t have = plan.done + s.records;
  switch (s.stop) {
    case StopReason::kSignal:
      return Unavailable("interrupted by {}: {} of {} inputs have records in {}; run the same "
                         "command with --resume to finish",
                         s.signal == SIGINT ? "SIGINT" : "SIGTERM", have, plan.total, o.output);
    case StopReason::kMaxErrors:
      return InvalidArgument("stopped after {} error records (--max-errors {}); the last: {}",
                             s.errors, o.max_errors, s.last_error);
    case StopReason::kOutputFailed:
      return Internal("stopped: {}", s.last_error);
    case StopReason::kFinished:
      break;
  }
  return Status::Ok();
}

}  // namespace

StatusOr<BatchModel> LoadBatchModel(serving::ModelManager& manager, const std::string& repository,
                                    const std::string& model, int batch_size, std::ostream& log) {
  BatchCommandOptions o;
  o.repository = repository;
  o.model = model;
  o.batch_size = batch_size;
  return LoadModel(manager, o, log);
}

CLI::App* AddBatchSubcommand(CLI::App& app, BatchCommandOptions* o) {
  CLI::App* cmd = app.add_subcommand(
      "batch", "Run a model over files or JSONL requests offline (no server), with resume");
  cmd->add_option("--model-repository", o->repository,
                  "Triton-layout model repository (required unless --redis)");
  cmd->add_option("--model", o->model, "Model (or ensemble) of the repository")->required();
  cmd->add_option("--input", o->input,
                  "A folder (its files), a glob ('imgs/*.jpg') or a FILE.jsonl of requests")
      ->required();
  cmd->add_option("--output", o->output, "OUT.jsonl: one record per input (appended)")->required();
  cmd->add_flag("--resume", o->resume,
                "Continue a stopped job: keep OUT's records, skip their inputs, append the rest");
  cmd->add_option("--batch-size", o->batch_size,
                  "Preferred batch size when the model's config has no dynamic_batching")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--max-errors", o->max_errors,
                  "Stop after this many error records (0 = no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "Cores for inference (0 = all)")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--readers", o->readers, "Reader threads (read and parse inputs)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--timeline", o->timeline, "Write an SVG of the stages over time");
  cmd->add_option("--stats", o->stats,
                  "Append the job's events (start, one per inferred item, end summary) as JSONL");
  cmd->add_option("--progress-interval", o->progress_interval_s,
                  "Seconds between progress lines when stderr is not a terminal")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  // The work queue (docs/fleet.md): run the items on `inferd worker`s instead of in process.
  cmd->add_option("--redis", o->redis,
                  "redis://HOST:PORT[/DB]: submit the items to a Redis stream and collect the "
                  "workers' results (the model then runs on `inferd worker`s)");
  cmd->add_option("--stream", o->stream, "With --redis: the job stream")->capture_default_str();
  cmd->add_option("--group", o->group, "With --redis: the workers' consumer group")
      ->capture_default_str();
  cmd->add_option("--max-queued", o->max_queued,
                  "With --redis: items submitted and not yet answered, at most")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--pack", o->pack,
                  "With --redis: items per stream entry (one XADD, delivery, result and ack for "
                  "all of them; 1 = an entry per item)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--queue-timeout", o->queue_timeout_s,
                  "With --redis: give up after this many seconds without a result (0 = wait)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  AddLogLevelOption(cmd, &o->log_level);
  return cmd;
}

Status BatchCommand(const BatchCommandOptions& o, std::ostream& log) {
  ApplyLogLevel(o.log_level);
  if (o.batch_size < 1) return InvalidArgument("--batch-size must be >= 1, got {}", o.batch_size);
  if (o.readers < 1) return InvalidArgument("--readers must be >= 1, got {}", o.readers);
  if (o.redis.empty() && o.repository.empty()) {
    return InvalidArgument("--model-repository is required (unless the job runs on workers: "
                           "--redis)");
  }
  if (!o.redis.empty()) RETURN_IF_ERROR(workqueue::ParseRedisUrl(o.redis).status());
  ASSIGN_OR_RETURN(Plan plan, PlanJob(o, log));
  if (plan.pending.empty()) {
    log << fmt::format("nothing to do: all {} inputs have records in {}\n", plan.total, o.output);
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(auto output, OutputFile::Open(o.output, plan.truncate));
  std::unique_ptr<AppendLog> stats;
  if (!o.stats.empty()) {
    ASSIGN_OR_RETURN(stats, AppendLog::Open(o.stats));
  }

  if (!o.redis.empty()) {
    JobSummary summary;
    RETURN_IF_ERROR(QueueBatch(o, plan, output.get(), stats.get(), log, &summary));
    return Finish(summary, plan, o);
  }

  serving::ModelManagerOptions mo;
  mo.repository = o.repository;
  mo.control_mode = serving::ModelControlMode::kExplicit;
  mo.total_threads = o.threads;
  mo.autocomplete_max_batch_size = o.batch_size;
  ASSIGN_OR_RETURN(auto manager, serving::ModelManager::Create(mo));
  RETURN_IF_ERROR(manager->Start());
  ASSIGN_OR_RETURN(LoadedModel model, LoadModel(*manager, o, log));
  JobOptions job;
  job.manager = manager.get();
  job.model = o.model;
  job.model_inputs = model.inputs;
  job.max_in_flight = std::max(2, 2 * model.batch_size * model.instances);
  job.reader_threads = o.readers;
  job.max_errors = o.max_errors;
  job.output = output.get();
  job.stats = stats.get();
  log << fmt::format("{} inputs to run ({} done before), batch {}, {} in flight, {} readers\n",
                     plan.pending.size(), plan.done, model.batch_size, job.max_in_flight,
                     o.readers);
  if (stats) {
    stats->Write(fmt::format(
        "{{\"event\":\"start\",\"pid\":{},\"inputs\":{},\"pending\":{},\"batch_size\":{}}}",
        ::getpid(), plan.total, plan.pending.size(), model.batch_size));
  }
  Clock& clock = RealClock::Get();
  Progress progress(clock, log, ::isatty(STDERR_FILENO) != 0, plan.total, plan.done,
                    std::chrono::seconds(o.progress_interval_s));
  std::unique_ptr<Timeline> timeline;
  if (!o.timeline.empty()) timeline = std::make_unique<Timeline>(clock.Now());
  job.progress = &progress;
  job.timeline = timeline.get();
  job.stop_signal = &g_stop_signal;
  StopSignals signals;
  ASSIGN_OR_RETURN(JobSummary summary, RunJob(job, plan.pending));
  progress.Finish(summary.records, summary.errors);
  log << FormatSummary(summary);
  if (stats) stats->Write(SummaryJson(summary));
  if (timeline) {
    std::string title = fmt::format("inferd batch: {} ({} items, batch {}, {} readers)", o.model,
                                    summary.records, model.batch_size, o.readers);
    RETURN_IF_ERROR(WriteTextFile(o.timeline, timeline->RenderSvg(title)));
  }
  return Finish(summary, plan, o);
}

}  // namespace inferd::tools
