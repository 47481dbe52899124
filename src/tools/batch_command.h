// `inferd batch`: an offline job over a model repository, no server. Lists the inputs (a folder,
// a glob or a JSONL file), runs them through the model (or ensemble) with serving::ModelManager
// in process, and appends one JSON record per input to the output; --resume continues a job that
// was stopped or killed. See docs/batch.md and src/batchjob/.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

#include "batchjob/item_reader.h"
#include "common/status.h"
#include "serving/model_manager.h"

namespace inferd::tools {

struct BatchCommandOptions {
  std::string repository;
  std::string model;
  std::string input;   // DIR, GLOB or FILE.jsonl
  std::string output;  // OUT.jsonl
  bool resume = false;
  // Preferred batch size given to a model whose config has no dynamic_batching (also its
  // max_batch_size when the config leaves that to auto-completion).
  int batch_size = 8;
  int64_t max_errors = 0;  // 0 = no limit
  int threads = 0;         // inference cores; 0 = all
  int readers = 2;         // reader threads
  std::string timeline;    // SVG path; "" = none
  std::string stats;       // event log path (JSONL, appended); "" = none
  int progress_interval_s = 5;  // plain progress lines (not a terminal): seconds between lines
  std::string log_level = "warn";
  // The work queue: with `redis` set, the items go to the stream's workers (inferd worker).
  std::string redis;  // redis://HOST:PORT[/DB]; "" = run in process
  std::string stream = "inferd:jobs";
  std::string group = "inferd";
  int max_queued = 4096;
  int pack = 64;  // items per stream entry (workqueue/protocol.h)
  int64_t queue_timeout_s = 0;  // 0 = wait for the workers forever
};

// What a job needs of a loaded model.
struct BatchModel {
  int batch_size = 1;  // the batch the scheduler forms (largest preferred size, else 1)
  int instances = 1;
  batchjob::ModelInputInfo inputs;
};

// Loads `model` (and an ensemble's steps) into `manager` so that it batches: a config without
// dynamic_batching gets one with preferred size `batch_size` (a note on `log`). Shared by
// `inferd batch` and `inferd worker`. The error names the model.
StatusOr<BatchModel> LoadBatchModel(serving::ModelManager& manager, const std::string& repository,
                                    const std::string& model, int batch_size, std::ostream& log);

// Registers the `batch` subcommand and its flags on `app`, filling `options` when parsed.
CLI::App* AddBatchSubcommand(CLI::App& app, BatchCommandOptions* options);

// Runs the job; progress, notes and the summary go to `log`. OK when every input has a record
// (error records included); an error when the job stopped early (a signal: resumable; too many
// errors; the output failed) or could not start.
Status BatchCommand(const BatchCommandOptions& options, std::ostream& log);

}  // namespace inferd::tools
