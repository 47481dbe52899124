// A queue worker: consumes job entries (protocol.h) from a Redis stream with a consumer group and
// runs them through serving::ModelManager in process, as `inferd batch` does.
//
// The loop, one batch at a time:
//   1. claim (every `claim_interval`): XAUTOCLAIM entries idle longer than `claim_idle` — their
//      consumer died or hung — and look up their delivery counts (XPENDING); an entry delivered
//      more than `max_deliveries` times is not run again but dead-lettered (S:dead, with the
//      reason and its fields) and answered with an error record;
//   2. otherwise read: XREADGROUP GROUP G C COUNT batch BLOCK block STREAMS S >;
//   3. run: every valid entry is submitted to the engine at once (its dynamic batching forms the
//      batches); an entry that is not a valid request (protocol.h, item_reader.h) is dead-lettered
//      with the reason and gets an error record; a request the model refuses gets an error record
//      (as in a local job); a transient failure (protocol.h IsTransient) is left pending, so it
//      comes back after `claim_idle`;
//   4. store, pipelined with the next batch's read (XREADGROUP without BLOCK) in one round trip:
//      SET result:S:ID RECORD NX [EX ttl] per entry, XADD to S:dead, XADD the ids to each entry's
//      reply stream, then XACK (when nothing is waiting, the stores go alone and the next read
//      blocks). The ack comes after the result in the same connection's order (Redis runs a
//      client's commands in order), so an acknowledged entry always has its result,
//      and a worker killed before the ack leaves the entry pending for another worker, whose
//      SET NX then keeps the first result: at most one result per entry, none lost.
// On start the worker first re-runs the entries already pending under its own consumer name (a
// restart with the same --consumer).
//
// Stopping: when *stop_signal becomes non-zero (SIGTERM), the worker reads nothing new, finishes
// the batch in flight, stores and acks it, and returns.
// Redis going away mid-run: each failed round trip reconnects (with backoff, up to
// `reconnect_for`); what was not acked stays pending and is claimed again, so nothing is lost.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "batchjob/item_reader.h"
#include "common/clock.h"
#include "common/status.h"
#include "serving/model_manager.h"
#include "workqueue/redis_client.h"

namespace inferd::workqueue {

struct WorkerOptions {
  RedisEndpoint redis;
  std::chrono::milliseconds timeout{2000};  // connect and reply wait
  std::string stream;                       // required
  std::string group;                        // required; created (at the stream's start) if absent
  std::string consumer;                     // required; unique per live worker
  int batch = 256;                          // items per read (see AdaptReadCount); >= 1
  std::chrono::milliseconds block{500};     // XREADGROUP BLOCK: bounds how late a stop is seen
  std::chrono::milliseconds claim_idle{30000};     // >= 1 ms; longer than a batch ever takes
  std::chrono::milliseconds claim_interval{5000};  // between XAUTOCLAIM passes; >= 1 ms
  int max_deliveries = 3;                   // >= 1
  std::chrono::seconds result_ttl{86400};   // EX of result keys; 0 = no expiry
  std::chrono::seconds reconnect_for{30};   // give up after Redis is unreachable this long
  serving::ModelManager* manager = nullptr;  // required, started
  // Loads a model on first use and says what its inputs are; an error dead-letters the entry.
  // Called on the worker's thread only.
  std::function<StatusOr<batchjob::ModelInputInfo>(const std::string& model)> resolve_model;
  const std::atomic<int>* stop_signal = nullptr;  // optional
  std::ostream* log = nullptr;                    // optional: one line per notable event
};

struct WorkerSummary {
  int64_t entries = 0;        // entries this worker handled (read or claimed)
  int64_t results = 0;        // result records stored (error records included)
  int64_t duplicates = 0;     // results already stored by an earlier delivery (SET NX refused)
  int64_t errors = 0;         // error records among `results`
  int64_t dead_lettered = 0;  // entries moved to the dead-letter stream
  int64_t claimed = 0;        // entries taken over from other consumers (XAUTOCLAIM)
  int64_t retried = 0;        // transient failures left pending
  int64_t batches = 0;
  double seconds = 0;    // wall time of the loop
  double read_s = 0;     // reads and claims that returned entries (may include waiting for them)
  double store_s = 0;    // storing results, dead letters, notifications and acks, with the
                         // next read when entries are waiting (one round trip per batch)
  double idle_s = 0;     // reads that returned nothing (waiting for work)
  double work_s = 0;     // time decoding entries, running the engine and formatting records
};

// Runs until stopped. INVALID_ARGUMENT for bad options, UNAVAILABLE when Redis cannot be reached
// at start (or for longer than `reconnect_for` later).
StatusOr<WorkerSummary> RunWorker(const WorkerOptions& options);

// The summary as one JSON object (printed by `inferd worker` at exit).
std::string WorkerSummaryJson(const WorkerSummary& summary);

}  // namespace inferd::workqueue
