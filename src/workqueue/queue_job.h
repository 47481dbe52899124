// The submitting side of the work queue: `inferd batch --redis URL` runs a job's items on the
// workers (worker.h) instead of in process, with the same inputs, records and progress display.
//
//   submit   up to `pack` consecutive items become one job entry (protocol.h: a pack; one item
//            per entry with pack 1), a JSONL line as `request` (its bytes as read: nothing is
//            parsed here), a file's bytes as `file`; a pack closes early once its payloads reach
//            `pack_bytes`. At most `max_queued` items are submitted and not yet answered
//            (pipelined XADDs, up to 1024 items a round trip);
//   collect  XREAD BLOCK on the job's own reply stream (S:reply:JOB) gives the ids whose results
//            are stored; MGET fetches the records and DEL removes their keys (one round trip),
//            and they are appended to the output exactly as a local job writes them (fdatasync
//            per burst). An id seen twice (a redelivered entry notifies again) is written once. A
//            result that is missing (expired) or does not hold one record per item of its entry
//            gives each of the entry's items an error record.
//   finish   when every submitted entry has a record; then the reply stream is deleted and the
//            job stream trimmed to what every group has read and acknowledged (XTRIM MINID,
//            protocol.h SafeTrimId). On a signal (or --max-errors) no more entries are submitted and the
//            ones submitted are still collected; a second signal kills the process as usual.
// Items that cannot be read here (an unreadable file) become error records without a round trip.
// If no result arrives for `idle_timeout` the job stops (DEADLINE_EXCEEDED: are workers running
// on the group?); what it wrote so far stays, and --resume submits the rest again.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "batchjob/inputs.h"
#include "batchjob/job.h"
#include "batchjob/output_file.h"
#include "batchjob/progress.h"
#include "common/status.h"
#include "workqueue/redis_client.h"

namespace inferd::workqueue {

struct QueueJobOptions {
  RedisEndpoint redis;
  std::chrono::milliseconds timeout{2000};  // connect and reply wait
  std::string stream;                       // required
  std::string group;                        // created at the stream's start if absent; required
  std::string model;                        // required
  int max_queued = 4096;                    // items submitted and not answered; >= 1
  int pack = 64;                            // items per stream entry, 1..kMaxPackItems
  size_t pack_bytes = size_t{1} << 20;      // a pack closes once its payloads reach this
  int64_t max_errors = 0;                   // 0 = no limit
  std::chrono::seconds idle_timeout{0};     // 0 = wait for results forever
  const std::atomic<int>* stop_signal = nullptr;
  batchjob::OutputFile* output = nullptr;   // required
  batchjob::Progress* progress = nullptr;   // optional
};

// The summary uses batchjob's JobSummary (submitted, records, errors, seconds, stop, signal,
// last_error; the per-stage utilization fields stay 0: the work ran elsewhere).
// UNAVAILABLE when Redis cannot be reached; DEADLINE_EXCEEDED after `idle_timeout` without a
// result; INVALID_ARGUMENT for bad options.
StatusOr<batchjob::JobSummary> RunQueueJob(const QueueJobOptions& options,
                                           const std::vector<batchjob::InputItem>& items);

// "N records (E errors) in S s: R items/s (on the workers of STREAM/GROUP)\n"
std::string FormatQueueSummary(const batchjob::JobSummary& summary, const QueueJobOptions& options);

}  // namespace inferd::workqueue
