#include "batching/batch_scheduler.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "testing/fake_clock.h"

namespace inferd::batching {
namespace {

using std::chrono::microseconds;

struct FakeTask {
  int64_t rows = 1;
  int id = 0;
  int64_t size() const { return rows; }
};

// Records processed batches and rejected tasks; lets tests block a worker. mu_ guards everything;
// cv_ (with mu_) signals every change.
class Recorder {
 public:
  void Process(int worker, BatchScheduler<FakeTask>::Batch batch) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    ++started_;
    cv_.NotifyAll();
    while (hold_) cv_.Wait(&mu_);
    std::vector<int> ids;
    for (auto& t : batch) ids.push_back(t->id);
    for (int id : ids) worker_of_[id] = worker;
    batches_.push_back(ids);
    cv_.NotifyAll();
  }
  void Reject(std::unique_ptr<FakeTask> task, Status s) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    rejected_.push_back({task->id, s});
    cv_.NotifyAll();
  }
  void WaitForBatches(size_t n) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    while (batches_.size() < n) cv_.Wait(&mu_);
  }
  // Waits until n batches have reached a worker (held ones included).
  void WaitForStarted(size_t n) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    while (started_ < n) cv_.Wait(&mu_);
  }
  void WaitForRejected(size_t n) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    while (rejected_.size() < n) cv_.Wait(&mu_);
  }
  void Hold(bool hold) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    hold_ = hold;
    cv_.NotifyAll();
  }
  std::vector<std::vector<int>> batches() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    return batches_;
  }
  // The worker that processed task `id`'s batch.
  std::map<int, int> worker_of() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    return worker_of_;
  }
  std::vector<std::pair<int, Status>> rejected() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    return rejected_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool hold_ GUARDED_BY(mu_) = false;
  size_t started_ GUARDED_BY(mu_) = 0;
  std::vector<std::vector<int>> batches_ GUARDED_BY(mu_);
  std::map<int, int> worker_of_ GUARDED_BY(mu_);
  std::vector<std::pair<int, Status>> rejected_ GUARDED_BY(mu_);
};

class BatchSchedulerTest : public ::testing::Test {
 protected:
  void Start(BatchSchedulerOptions opts) {
    auto s = BatchScheduler<FakeTask>::Create(
        std::move(opts), clock_,
        [this](int w, BatchScheduler<FakeTask>::Batch b) { rec_.Process(w, std::move(b)); },
        [this](std::unique_ptr<FakeTask> t, Status st) { rec_.Reject(std::move(t), st); });
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    scheduler_ = std::move(s).value();
  }
  Status Add(int id, int64_t rows = 1, ScheduleOptions so = {}) {
    auto t = std::make_unique<FakeTask>(FakeTask{rows, id});
    return scheduler_->Schedule(&t, so);
  }
  // Schedules and waits until the scheduler sleeps until `wake`. (Schedule wakes the scheduler
  // thread only when the new task needs it earlier than it sleeps; a task that joins a forming
  // batch leaves it asleep, already waiting for `wake`.)
  void AddAndWaitSleeping(int id, int64_t rows, Clock::TimePoint wake, ScheduleOptions so = {}) {
    ASSERT_TRUE(Add(id, rows, so).ok());
    clock_.BlockUntilWaiting(wake);
  }

  FakeClock clock_;
  Recorder rec_;
  std::unique_ptr<BatchScheduler<FakeTask>> scheduler_;
};

TEST_F(BatchSchedulerTest, CreateValidatesOptions) {
  auto make = [&](BatchSchedulerOptions o) {
    return BatchScheduler<FakeTask>::Create(
               o, clock_, [](int, BatchScheduler<FakeTask>::Batch) {},
               [](std::unique_ptr<FakeTask>, Status) {})
        .status();
  };
  BatchSchedulerOptions o;
  o.max_batch_size = 0;
  EXPECT_EQ(make(o).code(), StatusCode::kInvalidArgument);
  o.max_batch_size = 4;
  o.preferred_batch_sizes = {8};
  EXPECT_EQ(make(o).code(), StatusCode::kInvalidArgument);
  o.preferred_batch_sizes = {};
  o.priority_levels = 2;
  o.default_priority = 3;
  EXPECT_EQ(make(o).code(), StatusCode::kInvalidArgument);
  o.default_priority = 1;
  o.priority_queue_policy[5] = QueuePolicy{};
  EXPECT_EQ(make(o).code(), StatusCode::kInvalidArgument);
  o.priority_queue_policy.clear();
  o.num_workers = 0;
  EXPECT_EQ(make(o).code(), StatusCode::kInvalidArgument);
  o.active_workers = 2;  // more than num_workers
  EXPECT_EQ(make(o).code(), StatusCode::kInvalidArgument);
  o.active_workers = 0;
  o.num_workers = 1;
  o.max_queue_delay = microseconds(-1);
  EXPECT_EQ(make(o).code(), StatusCode::kInvalidArgument);
  o.max_queue_delay = microseconds(0);
  EXPECT_TRUE(make(o).ok());
}

TEST_F(BatchSchedulerTest, WaitsForDelayThenDispatchesWhatIsQueued) {
  BatchSchedulerOptions o;
  o.max_batch_size = 8;
  o.max_queue_delay = microseconds(1000);
  Start(o);
  const auto t0 = clock_.Now();
  AddAndWaitSleeping(1, 1, t0 + microseconds(1000));
  clock_.Advance(microseconds(400));
  AddAndWaitSleeping(2, 2, t0 + microseconds(1000));  // the oldest task sets the deadline
  EXPECT_TRUE(rec_.batches().empty());
  clock_.Advance(microseconds(599));
  clock_.BlockUntilWaiting(t0 + microseconds(1000));
  EXPECT_TRUE(rec_.batches().empty());
  clock_.Advance(microseconds(1));
  rec_.WaitForBatches(1);
  EXPECT_EQ(rec_.batches()[0], (std::vector<int>{1, 2}));
}

TEST_F(BatchSchedulerTest, TasksJoiningAFormingBatchDoNotWakeTheScheduler) {
  BatchSchedulerOptions o;
  o.max_batch_size = 64;
  o.max_queue_delay = microseconds(1000);
  o.default_queue_policy.allow_timeout_override = true;
  Start(o);
  const auto t0 = clock_.Now();
  AddAndWaitSleeping(1, 1, t0 + microseconds(1000));
  const uint64_t mark = clock_.WaitMark();
  for (int i = 2; i <= 10; ++i) ASSERT_TRUE(Add(i).ok());  // the oldest task's delay still rules
  // An earlier deadline does need the scheduler: it wakes once and sleeps until then.
  AddAndWaitSleeping(11, 1, t0 + microseconds(500), ScheduleOptions{0, microseconds(500)});
  EXPECT_EQ(clock_.WaitMark(), mark + 1);  // had tasks 2..10 woken it, it would have slept again
  clock_.Advance(microseconds(1000));
  rec_.WaitForRejected(1);
  rec_.WaitForBatches(1);
  EXPECT_EQ(rec_.rejected()[0].first, 11);
  EXPECT_EQ(rec_.batches()[0].size(), 10u);
}

TEST_F(BatchSchedulerTest, ZeroDelayDispatchesAtOnce) {
  BatchSchedulerOptions o;
  o.max_batch_size = 8;
  Start(o);
  ASSERT_TRUE(Add(1).ok());
  rec_.WaitForBatches(1);
  EXPECT_EQ(rec_.batches()[0], (std::vector<int>{1}));
}

TEST_F(BatchSchedulerTest, PreferredSizeDispatchesWithoutWaiting) {
  BatchSchedulerOptions o;
  o.max_batch_size = 16;
  o.preferred_batch_sizes = {4, 8};
  o.max_queue_delay = microseconds(1000000);
  Start(o);
  const auto due = clock_.Now() + microseconds(1000000);
  AddAndWaitSleeping(1, 1, due);
  AddAndWaitSleeping(2, 2, due);
  ASSERT_TRUE(Add(3, 1).ok());  // 1+2+1 = 4: preferred
  rec_.WaitForBatches(1);
  EXPECT_EQ(rec_.batches()[0], (std::vector<int>{1, 2, 3}));
}

TEST_F(BatchSchedulerTest, TakesLargestPreferredPrefixWhenWorkerFrees) {
  BatchSchedulerOptions o;
  o.max_batch_size = 16;
  o.preferred_batch_sizes = {2, 4};
  o.max_queue_delay = microseconds(1000000);
  Start(o);
  rec_.Hold(true);
  ASSERT_TRUE(Add(0, 2).ok());  // preferred: dispatched, worker blocks
  rec_.WaitForStarted(1);
  // While the only worker is busy, 5 rows queue up: prefixes 1,2,3,4,5 → largest preferred is 4.
  for (int i = 1; i <= 5; ++i) ASSERT_TRUE(Add(i, 1).ok());
  rec_.Hold(false);
  rec_.WaitForBatches(2);
  EXPECT_EQ(rec_.batches()[1], (std::vector<int>{1, 2, 3, 4}));
  // Task 5 alone is not preferred: it waits for its delay.
  clock_.Advance(microseconds(1000000));
  rec_.WaitForBatches(3);
  EXPECT_EQ(rec_.batches()[2], (std::vector<int>{5}));
}

TEST_F(BatchSchedulerTest, FullBatchDispatchesAtOnceAndRespectsMaxSize) {
  BatchSchedulerOptions o;
  o.max_batch_size = 4;
  o.max_queue_delay = microseconds(1000000);
  Start(o);
  const auto due = clock_.Now() + microseconds(1000000);
  AddAndWaitSleeping(1, 3, due);
  ASSERT_TRUE(Add(2, 2).ok());  // 3+2 > 4: the batch {1} cannot grow
  rec_.WaitForBatches(1);
  EXPECT_EQ(rec_.batches()[0], (std::vector<int>{1}));
  ASSERT_TRUE(Add(3, 2).ok());  // 2+2 == max
  rec_.WaitForBatches(2);
  EXPECT_EQ(rec_.batches()[1], (std::vector<int>{2, 3}));
  EXPECT_EQ(Add(4, 5).code(), StatusCode::kInvalidArgument);  // larger than max_batch_size
}

TEST_F(BatchSchedulerTest, WithoutBatchingEachTaskIsABatch) {
  BatchSchedulerOptions o;
  o.max_batch_size = 8;
  o.enable_batching = false;
  Start(o);
  rec_.Hold(true);
  ASSERT_TRUE(Add(1).ok());
  ASSERT_TRUE(Add(2).ok());
  ASSERT_TRUE(Add(3).ok());
  rec_.Hold(false);
  rec_.WaitForBatches(3);
  EXPECT_EQ(rec_.batches(), (std::vector<std::vector<int>>{{1}, {2}, {3}}));
}

TEST_F(BatchSchedulerTest, HigherPriorityFirst) {
  BatchSchedulerOptions o;
  o.max_batch_size = 1;
  o.priority_levels = 3;
  o.default_priority = 2;
  Start(o);
  rec_.Hold(true);
  ASSERT_TRUE(Add(0).ok());
  rec_.WaitForStarted(1);
  ASSERT_TRUE(Add(1, 1, {.priority = 3}).ok());
  ASSERT_TRUE(Add(2, 1, {.priority = 0}).ok());  // default level 2
  ASSERT_TRUE(Add(3, 1, {.priority = 1}).ok());
  ASSERT_TRUE(Add(4, 1, {.priority = 9}).ok());  // out of range: default level 2
  rec_.Hold(false);
  rec_.WaitForBatches(5);
  EXPECT_EQ(rec_.batches(), (std::vector<std::vector<int>>{{0}, {3}, {2}, {4}, {1}}));
}

TEST_F(BatchSchedulerTest, FullQueueIsUnavailableAndKeepsOwnership) {
  BatchSchedulerOptions o;
  o.max_batch_size = 1;
  o.default_queue_policy.max_queue_size = 2;
  Start(o);
  rec_.Hold(true);
  ASSERT_TRUE(Add(0).ok());
  rec_.WaitForStarted(1);
  ASSERT_TRUE(Add(1).ok());
  ASSERT_TRUE(Add(2).ok());
  EXPECT_EQ(Add(3).code(), StatusCode::kUnavailable);
  auto t = std::make_unique<FakeTask>(FakeTask{1, 99});
  EXPECT_EQ(scheduler_->Schedule(&t).code(), StatusCode::kUnavailable);
  ASSERT_NE(t, nullptr);  // ownership stays with the caller
  EXPECT_EQ(t->id, 99);
  rec_.Hold(false);
}

TEST_F(BatchSchedulerTest, TimeoutRejectsAtOnceWhileWorkerBusy) {
  BatchSchedulerOptions o;
  o.max_batch_size = 1;
  o.default_queue_policy.default_timeout = microseconds(500);
  Start(o);
  rec_.Hold(true);
  const auto t0 = clock_.Now();
  ASSERT_TRUE(Add(0).ok());  // occupies the worker (held)
  rec_.WaitForStarted(1);
  AddAndWaitSleeping(1, 1, t0 + microseconds(500));
  clock_.Advance(microseconds(500));
  rec_.WaitForRejected(1);  // the worker is still busy: rejection does not wait for it
  auto rejected = rec_.rejected();
  EXPECT_EQ(rejected[0].first, 1);
  EXPECT_EQ(rejected[0].second.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(rec_.batches().empty());
  rec_.Hold(false);
  rec_.WaitForBatches(1);
}

TEST_F(BatchSchedulerTest, TimeoutOverrideOnlyShortens) {
  BatchSchedulerOptions o;
  o.max_batch_size = 1;
  o.default_queue_policy.default_timeout = microseconds(1000);
  o.default_queue_policy.allow_timeout_override = true;
  Start(o);
  rec_.Hold(true);
  const auto t0 = clock_.Now();
  ASSERT_TRUE(Add(0).ok());
  rec_.WaitForStarted(1);
  AddAndWaitSleeping(1, 1, t0 + microseconds(200), {.timeout = microseconds(200)});
  AddAndWaitSleeping(2, 1, t0 + microseconds(200), {.timeout = microseconds(5000)});
  clock_.Advance(microseconds(200));
  rec_.WaitForRejected(1);
  EXPECT_EQ(rec_.rejected()[0].first, 1);
  clock_.BlockUntilWaiting(t0 + microseconds(1000));  // task 2 keeps the default 1000µs
  clock_.Advance(microseconds(800));
  rec_.WaitForRejected(2);
  EXPECT_EQ(rec_.rejected()[1].first, 2);
  rec_.Hold(false);
}

TEST(DeadlineAfterTest, SaturatesInsteadOfOverflowing) {
  const Clock::TimePoint now = Clock::TimePoint(std::chrono::hours(24));
  EXPECT_EQ(DeadlineAfter(now, microseconds(5)), now + microseconds(5));
  EXPECT_EQ(DeadlineAfter(now, microseconds(0)), now);
  EXPECT_EQ(DeadlineAfter(now, microseconds(-7)), now);
  // Three hours is kept as asked: only sums past the clock's range saturate.
  EXPECT_EQ(DeadlineAfter(now, std::chrono::hours(3)), now + std::chrono::hours(3));
  EXPECT_EQ(DeadlineAfter(now, microseconds::max()), Clock::kForever);
  // Just past the range in nanoseconds (the µs count itself would overflow as ns).
  EXPECT_EQ(DeadlineAfter(now, microseconds(std::numeric_limits<int64_t>::max() / 1000)),
            Clock::kForever);
  EXPECT_EQ(DeadlineAfter(Clock::kForever - std::chrono::seconds(1), std::chrono::seconds(2)),
            Clock::kForever);
}

// A request timeout near INT64_MAX µs used to overflow `now + timeout` into the past, so the task
// was rejected as expired at once; now it simply has no deadline.
TEST_F(BatchSchedulerTest, HugeTimeoutMeansNoDeadline) {
  BatchSchedulerOptions o;
  o.max_batch_size = 1;
  o.default_queue_policy.allow_timeout_override = true;
  Start(o);
  rec_.Hold(true);
  const auto t0 = clock_.Now();
  ASSERT_TRUE(Add(0).ok());
  rec_.WaitForStarted(1);
  ASSERT_TRUE(Add(1, 1, {.timeout = microseconds::max()}).ok());
  ASSERT_TRUE(
      Add(2, 1, {.timeout = microseconds(std::numeric_limits<int64_t>::max() / 1000)}).ok());
  AddAndWaitSleeping(3, 1, t0 + microseconds(100), {.timeout = microseconds(100)});
  clock_.Advance(microseconds(100));
  rec_.WaitForRejected(1);
  ASSERT_EQ(rec_.rejected().size(), 1u);
  EXPECT_EQ(rec_.rejected()[0].first, 3);
  rec_.Hold(false);
  rec_.WaitForBatches(3);
  EXPECT_EQ(rec_.batches(), (std::vector<std::vector<int>>{{0}, {1}, {2}}));
}

TEST_F(BatchSchedulerTest, DelayActionMovesBehindOthers) {
  BatchSchedulerOptions o;
  o.max_batch_size = 1;
  o.default_queue_policy.default_timeout = microseconds(100);
  o.default_queue_policy.timeout_action = TimeoutAction::kDelay;
  Start(o);
  rec_.Hold(true);
  const auto t0 = clock_.Now();
  ASSERT_TRUE(Add(0).ok());
  rec_.WaitForStarted(1);
  AddAndWaitSleeping(1, 1, t0 + microseconds(100));
  clock_.Advance(microseconds(50));
  AddAndWaitSleeping(2, 1, t0 + microseconds(100));
  clock_.Advance(microseconds(50));  // task 1 expires → delayed; task 2 expires at 150
  clock_.BlockUntilWaiting(t0 + microseconds(150));
  ASSERT_TRUE(Add(3).ok());
  rec_.Hold(false);
  rec_.WaitForBatches(4);
  EXPECT_EQ(rec_.batches(), (std::vector<std::vector<int>>{{0}, {2}, {3}, {1}}));
  EXPECT_TRUE(rec_.rejected().empty());
}

TEST_F(BatchSchedulerTest, ShutdownDrainsQueuedTasks) {
  BatchSchedulerOptions o;
  o.max_batch_size = 2;
  o.max_queue_delay = microseconds(1000000);  // never reached: shutdown ignores the delay
  o.num_workers = 2;
  Start(o);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Add(i).ok());
  scheduler_.reset();
  size_t total = 0;
  for (const auto& b : rec_.batches()) total += b.size();
  EXPECT_EQ(total, 5u);
  EXPECT_TRUE(rec_.rejected().empty());
}

TEST_F(BatchSchedulerTest, ManyThreadsScheduleConcurrently) {
  BatchSchedulerOptions o;
  o.max_batch_size = 8;
  o.num_workers = 3;
  Start(o);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t] {
      for (int i = 0; i < 250; ++i) EXPECT_TRUE(Add(t * 1000 + i).ok());
    });
  }
  for (auto& th : threads) th.join();
  scheduler_.reset();
  size_t total = 0;
  for (const auto& b : rec_.batches()) {
    EXPECT_LE(b.size(), 8u);
    total += b.size();
  }
  EXPECT_EQ(total, 1000u);
}

TEST_F(BatchSchedulerTest, OnlyActiveWorkersTakeBatches) {
  BatchSchedulerOptions o;
  o.enable_batching = false;
  o.num_workers = 3;
  o.active_workers = 1;
  Start(o);
  EXPECT_EQ(scheduler_->active_workers(), 1);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(Add(i).ok());
  rec_.WaitForBatches(6);
  for (const auto& [id, worker] : rec_.worker_of()) EXPECT_EQ(worker, 0) << "task " << id;
  EXPECT_EQ(scheduler_->SetActiveWorkers(10), 3);  // clamped to [1, num_workers]
  EXPECT_EQ(scheduler_->SetActiveWorkers(0), 1);
}

TEST_F(BatchSchedulerTest, RaisingActiveWorkersStartsQueuedWorkAtOnce) {
  BatchSchedulerOptions o;
  o.enable_batching = false;
  o.num_workers = 3;
  o.active_workers = 1;
  Start(o);
  rec_.Hold(true);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Add(i).ok());
  rec_.WaitForStarted(1);
  EXPECT_EQ(scheduler_->SetActiveWorkers(3), 3);
  rec_.WaitForStarted(3);  // the two unparked workers took the queued tasks while 0 still runs
  rec_.Hold(false);
  rec_.WaitForBatches(3);
  std::set<int> workers;
  for (const auto& [id, worker] : rec_.worker_of()) workers.insert(worker);
  EXPECT_EQ(workers, (std::set<int>{0, 1, 2}));
}

TEST_F(BatchSchedulerTest, LoweringActiveWorkersFinishesRunningBatchesAndDropsNothing) {
  BatchSchedulerOptions o;
  o.enable_batching = false;
  o.num_workers = 3;
  Start(o);
  rec_.Hold(true);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Add(i).ok());
  rec_.WaitForStarted(3);  // one task running on each worker
  EXPECT_EQ(scheduler_->SetActiveWorkers(1), 1);
  for (int i = 3; i < 9; ++i) ASSERT_TRUE(Add(i).ok());
  rec_.Hold(false);
  rec_.WaitForBatches(9);  // the running ones finished, the queued ones ran
  EXPECT_TRUE(rec_.rejected().empty());
  const std::map<int, int> worker_of = rec_.worker_of();
  ASSERT_EQ(worker_of.size(), 9u);
  std::set<int> early;
  for (int i = 0; i < 3; ++i) early.insert(worker_of.at(i));
  EXPECT_EQ(early, (std::set<int>{0, 1, 2}));
  // Once lowered, only the remaining active worker takes new batches.
  for (int i = 3; i < 9; ++i) EXPECT_EQ(worker_of.at(i), 0) << "task " << i;
}

}  // namespace
}  // namespace inferd::batching
