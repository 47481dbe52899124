// A batch job's pipeline: reader threads → engine (serving::ModelManager::Infer) → one writer.
//
//   reader 0..R-1   take the next input, read/parse it (item_reader.h), and submit it; at most
//                   `max_in_flight` requests are submitted and not yet taken by the writer, so
//                   readers run ahead of the engine by that much and no further (the bound
//                   queue). With max_in_flight = 2 × the batch size, one batch runs while the
//                   next one waits full in the model's queue: double buffering.
//   engine          the model's own scheduler and instances form batches (dynamic batching).
//                   Its callbacks only queue the response (formatting is the writer's work, so
//                   the engine threads run the model only).
//   writer          the calling thread: takes every finished item, formats records
//                   (records.h), appends them with one write and fdatasyncs: one flush per
//                   burst, which is one batch when the writer keeps up. Records are in completion
//                   order (each names its source), not input order.
// An item that fails (unreadable file, malformed line, the model refusing the request or failing
// it) becomes an error record; the job goes on unless `max_errors` is reached.
//
// Stopping: when *stop_signal becomes non-zero (a SIGINT/SIGTERM handler sets it), or max_errors
// is reached, or the output cannot be written, readers take no new input; everything already
// submitted finishes and is written; RunJob then returns. Each input has then either exactly one
// record or none, so a resumed job (output_file.h) completes the set.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "batchjob/inputs.h"
#include "batchjob/item_reader.h"
#include "batchjob/output_file.h"
#include "batchjob/progress.h"
#include "batchjob/timeline.h"
#include "common/clock.h"
#include "common/status.h"
#include "serving/model_manager.h"

namespace inferd::batchjob {

struct JobOptions {
  serving::ModelManager* manager = nullptr;  // with `model` loaded; required
  std::string model;
  ModelInputInfo model_inputs;
  int max_in_flight = 16;   // requests submitted and not yet written; >= 1
  int reader_threads = 2;   // >= 1
  int64_t max_errors = 0;   // stop after this many error records of this run; 0 = no limit
  const std::atomic<int>* stop_signal = nullptr;  // optional; non-zero = stop
  OutputFile* output = nullptr;  // required
  // Optional event log (--stats): one {"event":"inferred",...} line per item the engine
  // answered, written on the engine's callback before the record is written.
  AppendLog* stats = nullptr;
  Progress* progress = nullptr;  // optional
  Timeline* timeline = nullptr;  // optional
  Clock* clock = nullptr;        // nullptr = RealClock
};

enum class StopReason { kFinished, kSignal, kMaxErrors, kOutputFailed };

// What one model did during the job (from ModelManager statistics, before vs after).
struct ModelUse {
  std::string name;
  uint64_t executions = 0;  // batches
  uint64_t rows = 0;        // items inferred
  double compute_s = 0;     // batch assembly + run + split, summed over batches
};

struct JobSummary {
  int64_t submitted = 0;  // requests given to the engine
  int64_t records = 0;    // records written (this run)
  int64_t errors = 0;     // of which error records
  double seconds = 0;     // wall time of the pipeline
  int reader_threads = 0;
  double reader_busy = 0;  // fraction of reader-thread time spent reading/parsing
  double writer_busy = 0;  // fraction of the writer's time spent formatting/writing/syncing
  int engine_threads = 0;  // distinct engine threads that answered
  // The busiest model's compute time over the wall time (above 1 when its instances overlap):
  // how close the pipeline keeps its slowest engine stage to fully busy.
  double engine_busy = 0;
  std::vector<ModelUse> models;
  StopReason stop = StopReason::kFinished;
  int signal = 0;           // kSignal: the signal number
  std::string last_error;   // the last error record's reason (or the output failure)
};

// Runs `items` through the pipeline. Returns once every submitted item is written (or the
// output failed). INVALID_ARGUMENT only for bad options.
StatusOr<JobSummary> RunJob(const JobOptions& options, const std::vector<InputItem>& items);

// One finished request as the engine answered it: which thread, when submitted and answered.
struct Completion {
  size_t thread = 0;  // index of the answering thread (order of first appearance)
  Clock::TimePoint submitted, answered;
};
// A batch the engine ran, inferred from its answers: answers on one thread less than `gap`
// apart form one batch; it ran from max(its last submission, the thread's previous batch end)
// to its first answer. (The job sees only answers; this is what the timeline draws.)
struct EngineBatch {
  size_t thread = 0;
  Clock::TimePoint start, end;
  int64_t items = 0;
};
std::vector<EngineBatch> GroupBatches(std::vector<Completion> completions,
                                      std::chrono::microseconds gap);

// The end summary: items, errors, items/s, per-stage utilization, models' batches.
std::string FormatSummary(const JobSummary& summary);
// The summary as one JSON object (the --stats "end" event).
std::string SummaryJson(const JobSummary& summary);

}  // namespace inferd::batchjob
