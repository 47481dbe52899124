// SequenceBatcher: Triton's sequence batcher for stateful models (config `sequence_batching`). It
// sits in front of the version's BatchScheduler and decides *when* each request of a sequence may
// run; the BatchScheduler then batches the requests of different sequences together.
//
// A sequence is named by its correlation ID (InferenceRequest::sequence_id, an unsigned integer,
// or sequence_id_string); its first request carries sequence_start, its last sequence_end.
//   - Order: at most one request per sequence is in the scheduler at a time; the next one is
//     handed over when the previous one completed, so a sequence's requests run in order and each
//     sees the state its predecessor left. Requests of different sequences share batches.
//   - Slots: a sequence holds a slot from its START to its END (or until it is idle longer than
//     max_sequence_idle_microseconds). `direct` has max_batch_size (at least 1) slots per
//     instance; `oldest` has max_candidate_sequences (default: as direct). A START when every slot
//     is taken waits in a backlog, in arrival order, until a slot frees. Unlike Triton's direct
//     strategy a sequence is not pinned to one instance's batch row: its state lives here, so any
//     instance may run its next request, and no padding (READY = false) rows are run.
//   - Controls: each control_input is fed per request: START / END as the config's false/true
//     value (int32, fp32 or bool), READY as true, CORRID as the correlation ID in the config's
//     data type; shape [1] (plus the batch dim when the model batches).
//   - Implicit state (`state`): request k's state output becomes request k+1's state input; a
//     START request gets the initial state (zeros). A failed request leaves the state unchanged.
//     State outputs are never returned to the client.
//   - Idle: a sequence without a request in flight or pending for longer than
//     max_sequence_idle_microseconds (default 1 s, as Triton) is released by the batcher's reaper
//     thread (which waits on the injected Clock) and its slot goes to the backlog; a later request
//     for it without START then fails with Triton's "must specify the START flag" error.
// Errors (INVALID_ARGUMENT, answered at once): no correlation ID, a batch size other than 1, a
// request without START for a sequence that is not active, a string ID for a numeric CORRID.
//
// Thread-safety: Enqueue from any thread. Lock order: mu_ is never held while calling the
// schedule/fail callbacks or a client's callback (they may re-enter Enqueue's completion path).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "model_config.pb.h"
#include "serving/model_instance.h"
#include "serving/model_signature.h"
#include "serving/model_stats.h"

namespace inferd::serving {

class SequenceBatcher {
 public:
  // Hands a task ready to run (control and state inputs added) to the batch scheduler. On error
  // the task is still the caller's (*task non-null).
  using ScheduleFn = std::function<Status(std::unique_ptr<InferTask>* task)>;
  // Fails a task (its callback runs): FailTask with the version's signature and stats.
  using FailFn = std::function<void(InferTask& task, FailureReason reason, Status status)>;

  // `signature` (with the internal control/state specs BuildSignature adds) outlives the
  // batcher; `config` has sequence_batching and passed CheckImplemented.
  static StatusOr<std::unique_ptr<SequenceBatcher>> Create(const ModelSignature& signature,
                                                           const inference::ModelConfig& config,
                                                           int instances, Clock& clock,
                                                           ScheduleFn schedule, FailFn fail);
  ~SequenceBatcher();  // Shutdown()
  SequenceBatcher(const SequenceBatcher&) = delete;
  SequenceBatcher& operator=(const SequenceBatcher&) = delete;

  // Takes a validated request (task->rows set). Its callback is called exactly once.
  void Enqueue(std::unique_ptr<InferTask> task) EXCLUDES(mu_);

  // Stops handing requests over: requests waiting for their turn fail (UNAVAILABLE); requests
  // already in the scheduler complete normally. Call before the scheduler drains.
  void Shutdown() EXCLUDES(mu_);

  size_t slots() const { return slots_; }
  // Sequences holding a slot / waiting for one (for tests and statistics).
  size_t ActiveSequences() const EXCLUDES(mu_);
  size_t BackloggedSequences() const EXCLUDES(mu_);

 private:
  struct Sequence {
    std::string label;  // the correlation ID as Triton prints it
    uint64_t id = 0;
    bool string_id = false;
    std::deque<std::unique_ptr<InferTask>> pending;
    NamedTensors state;  // state input name → the last state output
    bool has_slot = false;
    bool in_flight = false;
    Clock::TimePoint last;  // last request or completion
  };
  // Work decided under mu_ and done after it is released.
  struct Actions {
    std::vector<std::unique_ptr<InferTask>> run;
    std::vector<std::pair<std::unique_ptr<InferTask>, Status>> fail;
  };

  SequenceBatcher(const ModelSignature& signature, const inference::ModelConfig& config,
                  size_t slots, Clock& clock, ScheduleFn schedule, FailFn fail);
  static std::string Key(const InferenceRequest& r);
  Status CheckRequest(const InferenceRequest& r) const;
  // Queues a checked task for its sequence (creating it on START) or fails it.
  void AddLocked(const std::string& key, std::unique_ptr<InferTask> task, Clock::TimePoint now,
                 Actions* actions) REQUIRES(mu_);
  void ExpireIdleLocked(Clock::TimePoint now, Actions* actions) REQUIRES(mu_);
  void ReleaseLocked(const std::string& key, Actions* actions) REQUIRES(mu_);
  // Hands the sequence's next pending request over when it has a slot and nothing in flight.
  void AdvanceLocked(const std::string& key, Sequence& seq, Actions* actions) REQUIRES(mu_);
  // Adds the controls and state to the task's request and wraps its callback.
  Status PrepareLocked(const std::string& key, Sequence& seq, InferTask& task) REQUIRES(mu_);
  // The earliest time a sequence holding a slot becomes idle; Clock::kForever when none can.
  Clock::TimePoint NextIdleLocked() const REQUIRES(mu_);
  void ReaperLoop() EXCLUDES(mu_);
  void OnDone(const std::string& key, bool end, const Status& status,
              InferenceResponse* response) EXCLUDES(mu_);
  void Run(Actions actions) EXCLUDES(mu_);

  const ModelSignature& signature_;
  const inference::ModelSequenceBatching config_;
  const size_t slots_;
  const std::chrono::microseconds idle_;
  Clock& clock_;
  const ScheduleFn schedule_;
  const FailFn fail_;

  mutable Mutex mu_;
  std::map<std::string, Sequence> sequences_ GUARDED_BY(mu_);
  std::deque<std::string> backlog_ GUARDED_BY(mu_);  // sequences waiting for a slot
  size_t used_slots_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  CondVar reaper_cv_;   // with mu_: a sequence may have become idle, or stopping_
  std::thread reaper_;  // started in the constructor, joined by Shutdown
};

}  // namespace inferd::serving
