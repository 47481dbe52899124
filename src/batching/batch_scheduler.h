// BatchScheduler: a model-agnostic dynamic batcher. Tasks (anything with `int64_t size() const`,
// the number of batch rows it contributes) are queued per priority level and batched for N worker
// threads (one per model instance) that run ProcessBatchFn.
//
// Batch forming, whenever a worker is idle and tasks are queued (tasks are taken in order: priority
// level 1 first, FIFO within a level, then tasks delayed by a DELAY timeout action):
//   1. If a prefix of the queue sums to one of `preferred_batch_sizes`, the largest such prefix is
//      dispatched at once.
//   2. Else if the batch cannot grow (the next task would exceed max_batch_size, or it is exactly
//      max_batch_size) it is dispatched at once.
//   3. Else it is dispatched when its oldest task has waited `max_queue_delay`; until then the
//      scheduler sleeps on the Clock (new tasks wake it).
// Batches form only when a worker is free, so under load they grow while the workers are busy.
// Who forms them: Schedule, when a worker is idle and a batch can go at once (the task goes
// straight to that worker); a worker that finishes a batch, for its own next batch (under load a
// worker runs batch after batch without sleeping or a thread hand-off); and the scheduler thread,
// which only times queue delays and deadlines. So a request costs one thread wake-up at most.
//
// Timeouts: a task's queue timeout (its level's default_timeout, lowered by the request's own
// when allow_timeout_override) is checked by the scheduler thread, so an expired task is rejected
// at once (RejectFn with UNAVAILABLE "timeout expired"), even while every worker is busy. With
// the DELAY action it is instead moved behind every non-delayed task.
//
// Example:
//   BatchSchedulerOptions opts;
//   opts.max_batch_size = 32;
//   opts.max_queue_delay = std::chrono::microseconds(500);
//   ASSIGN_OR_RETURN(auto scheduler, BatchScheduler<MyTask>::Create(
//       opts, RealClock::Get(),
//       [](int worker, std::vector<std::unique_ptr<MyTask>> batch) { ... },
//       [](std::unique_ptr<MyTask> task, Status why) { task->Fail(why); }));
//   RETURN_IF_ERROR(scheduler->Schedule(&task));  // on error `task` is still ours
//
// Thread-safety: Schedule and options() may be called from any thread. ProcessBatchFn runs on the
// worker threads (never two calls on the same worker at once); RejectFn runs on the scheduler
// thread; neither runs under the scheduler's lock (mu_), so both may call back into Schedule.
// Lock discipline (checked by clang's -Wthread-safety, scripts/check_thread_safety.sh): one mutex,
// mu_, guards every queue and all scheduling state (the members marked GUARDED_BY(mu_)); the
// *Locked helpers run under it (REQUIRES(mu_)), the entry points and thread loops take it
// (EXCLUDES(mu_)). No other lock is taken while mu_ is held except the Clock's own (FakeClock).
// Active workers: all num_workers threads start, but only the first active_workers (0 .. n - 1)
// take batches; the others are parked (no batch, no CPU). SetActiveWorkers moves the count at
// run time (in-node autoscaling): raising it lets parked workers take queued work at once;
// lowering it lets each worker past the new count finish the batch it runs, then park — no task
// is dropped or failed, and at most active_workers batches run at a time once those finish.
// Destruction stops accepting tasks, then drains: every queued task is still batched (ignoring
// max_queue_delay; timeouts still apply) and processed before the threads are joined.
#pragma once

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"

namespace inferd::batching {

enum class TimeoutAction {
  kReject,  // the task is rejected (UNAVAILABLE) as soon as its timeout expires
  kDelay,   // the task stays queued but goes behind every task that has not timed out
};

// Per priority level queue policy (Triton's ModelQueuePolicy).
struct QueuePolicy {
  TimeoutAction timeout_action = TimeoutAction::kReject;
  // Time a task may wait in the queue; 0 = forever.
  std::chrono::microseconds default_timeout{0};
  // A task may ask for a shorter timeout (ScheduleOptions::timeout), never a longer one.
  bool allow_timeout_override = false;
  // Most tasks queued at this level; 0 = unlimited. Schedule answers UNAVAILABLE beyond it.
  size_t max_queue_size = 0;
};

struct BatchSchedulerOptions {
  // Most rows (sum of Task::size()) in one batch; >= 1.
  int64_t max_batch_size = 1;
  // false: every batch is exactly one task (no dynamic batching; queueing, priorities and
  // timeouts still apply).
  bool enable_batching = true;
  // Batch sizes dispatched without waiting; each in [1, max_batch_size]. Empty: none.
  std::vector<int64_t> preferred_batch_sizes;
  // Longest a task waits for others to join its batch; 0 = dispatch what is queued at once.
  std::chrono::microseconds max_queue_delay{0};
  // Priority levels 1 (highest) .. priority_levels; 0 = a single level.
  uint32_t priority_levels = 0;
  // Level of tasks scheduled with priority 0 or out of range; 0 = the lowest level.
  uint32_t default_priority = 0;
  QueuePolicy default_queue_policy;
  // Overrides default_queue_policy for some levels (keys in [1, priority_levels]).
  std::map<uint32_t, QueuePolicy> priority_queue_policy;
  // Worker threads, i.e. the most batches processed concurrently; >= 1.
  int num_workers = 1;
  // Workers taking batches at the start, in [1, num_workers]; 0 = num_workers.
  int active_workers = 0;
};

// `now + delay`, saturating: a sum past the clock's range (a request `timeout` of 2^63 µs, say)
// is Clock::kForever, i.e. no deadline, instead of overflowing into the past. Deadlines within
// range are kept as asked, however far away (a 3-hour timeout is 3 hours). delay <= 0 gives `now`.
inline Clock::TimePoint DeadlineAfter(Clock::TimePoint now, std::chrono::microseconds delay) {
  if (delay.count() <= 0) return now;
  const auto room = std::chrono::duration_cast<std::chrono::microseconds>(Clock::kForever - now);
  if (delay >= room) return Clock::kForever;
  return now + std::chrono::duration_cast<Clock::TimePoint::duration>(delay);
}

struct ScheduleOptions {
  uint32_t priority = 0;               // 0 or out of range: default_priority
  std::chrono::microseconds timeout{0};  // 0: the level's default (see QueuePolicy)
};

template <class Task>
class BatchScheduler {
 public:
  using Options = BatchSchedulerOptions;
  using Batch = std::vector<std::unique_ptr<Task>>;
  // Processes one batch (tasks in queue order) on worker `worker` (0 .. num_workers - 1).
  using ProcessBatchFn = std::function<void(int worker, Batch batch)>;
  // Takes a task the scheduler gave up on (timeout) with the reason.
  using RejectFn = std::function<void(std::unique_ptr<Task> task, Status status)>;

  static StatusOr<std::unique_ptr<BatchScheduler>> Create(Options options, Clock& clock,
                                                          ProcessBatchFn process,
                                                          RejectFn reject);
  ~BatchScheduler();
  BatchScheduler(const BatchScheduler&) = delete;
  BatchScheduler& operator=(const BatchScheduler&) = delete;

  // Queues *task. Ownership moves only on OK (*task becomes null); on error *task is untouched.
  // INVALID_ARGUMENT: null task, or size() outside [1, max_batch_size].
  // UNAVAILABLE: the level's queue is full, or the scheduler is shutting down.
  Status Schedule(std::unique_ptr<Task>* task, const ScheduleOptions& options = {}) EXCLUDES(mu_);

  const Options& options() const { return options_; }

  // Sets the number of workers taking batches (see the header comment), clamped to
  // [1, num_workers]. Returns the count now in effect.
  int SetActiveWorkers(int n) EXCLUDES(mu_);
  int active_workers() const EXCLUDES(mu_);

 private:
  struct Entry {
    std::unique_ptr<Task> task;
    Clock::TimePoint enqueued;
    Clock::TimePoint deadline;  // Clock::kForever: no timeout
  };

  BatchScheduler(Options options, Clock& clock, ProcessBatchFn process, RejectFn reject);
  const QueuePolicy& PolicyFor(uint32_t level) const;
  uint32_t NumLevels() const { return std::max<uint32_t>(1, options_.priority_levels); }
  // Moves expired tasks out (REJECT) or to the delayed queues (DELAY).
  void ExpireLocked(Clock::TimePoint now, std::vector<std::unique_ptr<Task>>* rejected)
      REQUIRES(mu_);
  // Number of queued tasks (in order) to dispatch now, or 0 and *wake = when to look again.
  size_t DecideLocked(Clock::TimePoint now, Clock::TimePoint* wake) const REQUIRES(mu_);
  template <class Fn>
  void ForEachQueuedLocked(Fn&& fn) const REQUIRES(mu_);  // fn(const Entry&) -> bool continue
  Batch TakeLocked(size_t n) REQUIRES(mu_);
  // Batches that may start now: active workers minus batches running or handed out, >= 0.
  int FreeSlotsLocked() const REQUIRES(mu_) {
    return std::max(0, active_workers_ - busy_workers_ - static_cast<int>(ready_.size()));
  }
  // Hands batches that can be formed now to idle workers (into ready_; the caller notifies them).
  // Returns when the scheduler thread must look again for what is queued: `now` when a deadline
  // has passed, the end of a queue delay an idle worker waits for, or Clock::kForever.
  Clock::TimePoint DispatchLocked(Clock::TimePoint now) REQUIRES(mu_);
  void SchedulerLoop() EXCLUDES(mu_);
  void WorkerLoop(int worker) EXCLUDES(mu_);

  const Options options_;
  Clock& clock_;
  const ProcessBatchFn process_;
  const RejectFn reject_;

  mutable Mutex mu_;
  CondVar scheduler_cv_;  // with mu_: new task, idle worker, shutdown
  CondVar worker_cv_;     // with mu_: batch ready, exit (active workers wait here)
  CondVar parked_cv_;     // with mu_: active count changed, exit (parked workers wait here)
  // Index level - 1.
  std::vector<std::deque<Entry>> queues_ GUARDED_BY(mu_);
  std::vector<std::deque<Entry>> delayed_ GUARDED_BY(mu_);
  size_t num_queued_ GUARDED_BY(mu_) = 0;
  Clock::TimePoint earliest_deadline_ GUARDED_BY(mu_) = Clock::kForever;  // a lower bound
  int active_workers_ GUARDED_BY(mu_) = 1;
  int busy_workers_ GUARDED_BY(mu_) = 0;  // workers holding a batch (active or finishing)
  std::deque<Batch> ready_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  bool workers_exit_ GUARDED_BY(mu_) = false;
  // While the scheduler thread sleeps: the time it sleeps until. Schedule wakes it only when a
  // new task needs it earlier (a burst of tasks forming one batch costs no wake-ups).
  bool scheduler_sleeping_ GUARDED_BY(mu_) = false;
  Clock::TimePoint scheduler_wake_ GUARDED_BY(mu_) = Clock::kForever;
  // Set in the constructor, joined in the destructor; no lock.
  std::thread scheduler_thread_;
  std::vector<std::thread> workers_;
};

// ---- implementation ----

template <class Task>
StatusOr<std::unique_ptr<BatchScheduler<Task>>> BatchScheduler<Task>::Create(
    Options options, Clock& clock, ProcessBatchFn process, RejectFn reject) {
  if (options.max_batch_size < 1) {
    return InvalidArgument("max_batch_size must be >= 1, got {}", options.max_batch_size);
  }
  for (int64_t p : options.preferred_batch_sizes) {
    if (p < 1 || p > options.max_batch_size) {
      return InvalidArgument("preferred batch size {} is outside [1, max_batch_size {}]", p,
                             options.max_batch_size);
    }
  }
  if (options.max_queue_delay.count() < 0) {
    return InvalidArgument("max_queue_delay must be >= 0");
  }
  const uint32_t levels = std::max<uint32_t>(1, options.priority_levels);
  if (options.default_priority > levels) {
    return InvalidArgument("default priority level {} is outside [1, {}]", options.default_priority,
                           levels);
  }
  for (const auto& [level, policy] : options.priority_queue_policy) {
    if (level < 1 || level > levels) {
      return InvalidArgument("queue policy for priority level {} is outside [1, {}]", level,
                             levels);
    }
    if (policy.default_timeout.count() < 0) return InvalidArgument("negative queue timeout");
  }
  if (options.default_queue_policy.default_timeout.count() < 0) {
    return InvalidArgument("negative queue timeout");
  }
  if (options.num_workers < 1) {
    return InvalidArgument("num_workers must be >= 1, got {}", options.num_workers);
  }
  if (options.active_workers < 0 || options.active_workers > options.num_workers) {
    return InvalidArgument("active_workers {} is outside [0, num_workers {}]",
                           options.active_workers, options.num_workers);
  }
  if (!process || !reject) return InvalidArgument("batch and reject callbacks are required");
  if (options.default_priority == 0) options.default_priority = levels;
  return std::unique_ptr<BatchScheduler>(
      new BatchScheduler(std::move(options), clock, std::move(process), std::move(reject)));
}

template <class Task>
BatchScheduler<Task>::BatchScheduler(Options options, Clock& clock, ProcessBatchFn process,
                                     RejectFn reject)
    : options_(std::move(options)),
      clock_(clock),
      process_(std::move(process)),
      reject_(std::move(reject)),
      queues_(NumLevels()),
      delayed_(NumLevels()),
      active_workers_(options_.active_workers > 0 ? options_.active_workers
                                                  : options_.num_workers) {
  for (int i = 0; i < options_.num_workers; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
  scheduler_thread_ = std::thread([this] { SchedulerLoop(); });
}

template <class Task>
BatchScheduler<Task>::~BatchScheduler() {
  {
    MutexLock l(&mu_);
    stopping_ = true;
  }
  scheduler_cv_.NotifyAll();
  scheduler_thread_.join();  // returns once every queued task is dispatched or rejected
  {
    MutexLock l(&mu_);
    workers_exit_ = true;
  }
  worker_cv_.NotifyAll();
  parked_cv_.NotifyAll();
  for (std::thread& t : workers_) t.join();  // workers finish ready_ first
}

template <class Task>
int BatchScheduler<Task>::SetActiveWorkers(int n) {
  n = std::clamp(n, 1, options_.num_workers);
  {
    MutexLock l(&mu_);
    if (n == active_workers_) return n;
    active_workers_ = n;
    // New slots take what is queued now; workers past n see the change when they next look.
    DispatchLocked(clock_.Now());
  }
  parked_cv_.NotifyAll();  // unparked workers go to worker_cv_ (and take what was dispatched);
  worker_cv_.NotifyAll();  // idle workers past n go to parked_cv_
  scheduler_cv_.NotifyOne();  // a queue delay it timed may now have a free worker
  return n;
}

template <class Task>
int BatchScheduler<Task>::active_workers() const {
  MutexLock l(&mu_);
  return active_workers_;
}

template <class Task>
const QueuePolicy& BatchScheduler<Task>::PolicyFor(uint32_t level) const {
  auto it = options_.priority_queue_policy.find(level);
  return it == options_.priority_queue_policy.end() ? options_.default_queue_policy : it->second;
}

template <class Task>
Status BatchScheduler<Task>::Schedule(std::unique_ptr<Task>* task, const ScheduleOptions& so) {
  if (task == nullptr || *task == nullptr) return InvalidArgument("null task");
  const int64_t size = (*task)->size();
  if (size < 1 || size > options_.max_batch_size) {
    return InvalidArgument("task batch size {} is outside [1, max_batch_size {}]", size,
                           options_.max_batch_size);
  }
  const uint32_t level =
      (so.priority == 0 || so.priority > NumLevels()) ? options_.default_priority : so.priority;
  const QueuePolicy& policy = PolicyFor(level);
  std::chrono::microseconds timeout = policy.default_timeout;
  if (policy.allow_timeout_override && so.timeout.count() > 0) {
    timeout = timeout.count() == 0 ? so.timeout : std::min(timeout, so.timeout);
  }
  size_t wake_workers = 0;
  bool wake_scheduler = false;
  {
    MutexLock l(&mu_);
    if (stopping_) return Unavailable("the batch scheduler is shutting down");
    const size_t level_size = queues_[level - 1].size() + delayed_[level - 1].size();
    if (policy.max_queue_size > 0 && level_size >= policy.max_queue_size) {
      return Unavailable("queue is full ({} requests queued at priority level {})", level_size,
                         level);
    }
    const Clock::TimePoint now = clock_.Now();
    const Clock::TimePoint deadline =
        timeout.count() > 0 ? DeadlineAfter(now, timeout) : Clock::kForever;
    queues_[level - 1].push_back(Entry{std::move(*task), now, deadline});
    ++num_queued_;
    earliest_deadline_ = std::min(earliest_deadline_, deadline);
    // Hand a batch straight to an idle worker when one can be formed now; the scheduler thread
    // is only needed to time a queue delay or a deadline.
    const size_t ready_before = ready_.size();
    const Clock::TimePoint look_again = std::min(DispatchLocked(now), deadline);
    wake_workers = ready_.size() - ready_before;
    // A scheduler thread that is awake re-evaluates before it sleeps again.
    wake_scheduler = scheduler_sleeping_ && look_again < scheduler_wake_;
  }
  for (size_t i = 0; i < wake_workers; ++i) worker_cv_.NotifyOne();
  if (wake_scheduler) scheduler_cv_.NotifyOne();
  return Status::Ok();
}

template <class Task>
Clock::TimePoint BatchScheduler<Task>::DispatchLocked(Clock::TimePoint now) {
  if (now >= earliest_deadline_) return now;  // expired tasks: the scheduler thread rejects them
  while (FreeSlotsLocked() > 0) {
    Clock::TimePoint wake;
    const size_t n = DecideLocked(now, &wake);
    if (n == 0) return wake;
    ready_.push_back(TakeLocked(n));
  }
  return Clock::kForever;  // no idle worker: the next one to finish looks at the queue
}

template <class Task>
void BatchScheduler<Task>::ExpireLocked(Clock::TimePoint now,
                                        std::vector<std::unique_ptr<Task>>* rejected) {
  if (now < earliest_deadline_) return;
  earliest_deadline_ = Clock::kForever;
  for (uint32_t level = 0; level < queues_.size(); ++level) {
    std::deque<Entry>& q = queues_[level];
    const QueuePolicy& policy = PolicyFor(level + 1);
    for (auto it = q.begin(); it != q.end();) {
      if (it->deadline > now) {
        earliest_deadline_ = std::min(earliest_deadline_, it->deadline);
        ++it;
        continue;
      }
      if (policy.timeout_action == TimeoutAction::kReject) {
        rejected->push_back(std::move(it->task));
        --num_queued_;
      } else {
        it->deadline = Clock::kForever;
        delayed_[level].push_back(std::move(*it));
      }
      it = q.erase(it);
    }
  }
}

template <class Task>
template <class Fn>
void BatchScheduler<Task>::ForEachQueuedLocked(Fn&& fn) const {
  for (const auto* queues : {&queues_, &delayed_}) {
    for (const std::deque<Entry>& q : *queues) {
      for (const Entry& e : q) {
        if (!fn(e)) return;
      }
    }
  }
}

template <class Task>
size_t BatchScheduler<Task>::DecideLocked(Clock::TimePoint now, Clock::TimePoint* wake) const {
  *wake = Clock::kForever;
  if (num_queued_ == 0) return 0;
  if (!options_.enable_batching) return 1;
  int64_t rows = 0;
  size_t n = 0, best_preferred = 0;
  bool full = false;
  Clock::TimePoint oldest = Clock::kForever;
  const auto& preferred = options_.preferred_batch_sizes;
  ForEachQueuedLocked([&](const Entry& e) {
    const int64_t size = e.task->size();
    if (rows + size > options_.max_batch_size) {
      full = true;
      return false;
    }
    rows += size;
    ++n;
    oldest = std::min(oldest, e.enqueued);
    if (std::find(preferred.begin(), preferred.end(), rows) != preferred.end()) best_preferred = n;
    if (rows == options_.max_batch_size) {
      full = true;
      return false;
    }
    return true;
  });
  if (best_preferred > 0) return best_preferred;
  if (full || stopping_) return n;
  const Clock::TimePoint due = DeadlineAfter(oldest, options_.max_queue_delay);
  if (now >= due) return n;
  *wake = due;
  return 0;
}

template <class Task>
typename BatchScheduler<Task>::Batch BatchScheduler<Task>::TakeLocked(size_t n) {
  Batch batch;
  batch.reserve(n);
  for (auto* queues : {&queues_, &delayed_}) {
    for (std::deque<Entry>& q : *queues) {
      while (batch.size() < n && !q.empty()) {
        batch.push_back(std::move(q.front().task));
        q.pop_front();
      }
    }
  }
  num_queued_ -= batch.size();
  return batch;
}

template <class Task>
void BatchScheduler<Task>::SchedulerLoop() {
  pthread_setname_np(pthread_self(), "batch-sched");  // for top -H, perf, /proc/PID/task
  ReleasableMutexLock l(&mu_);
  while (true) {
    const Clock::TimePoint now = clock_.Now();
    std::vector<std::unique_ptr<Task>> rejected;
    ExpireLocked(now, &rejected);
    if (!rejected.empty()) {
      l.Unlock();
      for (auto& t : rejected) {
        reject_(std::move(t), Unavailable("request timeout expired while queued"));
      }
      l.Lock();
      continue;
    }
    if (stopping_ && num_queued_ == 0) return;
    Clock::TimePoint wake = earliest_deadline_;
    if (FreeSlotsLocked() > 0) {
      Clock::TimePoint batch_wake;
      const size_t n = DecideLocked(now, &batch_wake);
      if (n > 0) {
        ready_.push_back(TakeLocked(n));
        worker_cv_.NotifyOne();
        continue;
      }
      wake = std::min(wake, batch_wake);
    }
    scheduler_sleeping_ = true;
    scheduler_wake_ = wake;
    scheduler_cv_.WaitUntil(&mu_, clock_, wake);
    scheduler_sleeping_ = false;
  }
}

template <class Task>
void BatchScheduler<Task>::WorkerLoop(int worker) {
  // OpenMP threads the worker's runs start inherit the name (Linux copies it to a new thread).
  pthread_setname_np(pthread_self(), "batch-worker");
  ReleasableMutexLock l(&mu_);
  while (true) {
    // A parked worker (index past the active count) waits apart, so NotifyOne on worker_cv_
    // always reaches a worker that may take the batch. At exit every worker helps drain ready_.
    while (!workers_exit_ && (worker >= active_workers_ || ready_.empty())) {
      (worker >= active_workers_ ? parked_cv_ : worker_cv_).Wait(&mu_);
    }
    if (ready_.empty()) return;
    Batch batch = std::move(ready_.front());
    ready_.pop_front();
    ++busy_workers_;
    while (true) {
      l.Unlock();
      process_(worker, std::move(batch));
      l.Lock();
      // Lowered past this worker (or still above the count while others finish): stop here.
      // A batch handed out earlier goes first (after a lowering it may have no idle worker left).
      if (worker >= active_workers_ || busy_workers_ > active_workers_ || !ready_.empty()) break;
      // Form the next batch here rather than handing over to the scheduler thread and back: under
      // load a worker goes from batch to batch without sleeping.
      const Clock::TimePoint now = clock_.Now();
      if (now >= earliest_deadline_) break;  // expired tasks: the scheduler thread rejects them
      Clock::TimePoint wake;
      const size_t n = DecideLocked(now, &wake);
      if (n == 0) break;
      batch = TakeLocked(n);
    }
    --busy_workers_;
    // The scheduler thread times a pending queue delay or deadline, and finishes a shutdown.
    if (num_queued_ > 0 || stopping_) scheduler_cv_.NotifyOne();
  }
}

}  // namespace inferd::batching
