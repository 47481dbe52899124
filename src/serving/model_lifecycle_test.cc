// ModelManager's lifecycle on a FakeClock, without sleeps: reload, repository polling, retiring a
// replaced version (its queued requests first; released at the retire deadline if still held), a
// failed reload keeping the running version, shutdown draining, and failure reasons of the queue.
//
// Requests are held "in flight" deterministically: a model with one instance runs one request at
// a time on one worker thread, and a request whose callback blocks keeps that worker busy, so the
// next request waits in the queue until the test releases the first.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "serving/model_manager.h"
#include "serving/test_models.h"
#include "testing/fake_clock.h"

namespace inferd::serving {
namespace model_lifecycle_test {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Request;
using testing::Result;
using testing::WriteAddModel;
using testing::WriteFile;

// One instance, one request per batch.
constexpr const char* kOneWorkerConfig = R"pb(
  max_batch_size: 4
  instance_group [ { count: 1 kind: KIND_CPU } ]
)pb";

// An inference whose callback blocks its worker thread until Release().
class HeldRequest {
 public:
  explicit HeldRequest(std::unique_ptr<InferenceRequest> request)
      : request_(std::move(request)), released_(release_.get_future().share()) {}
  ~HeldRequest() { Release(); }

  // Infers on this thread; the callback (on a worker, or here if rejected at once) blocks.
  void Start(ModelManager& manager) {
    // The callback keeps its own handle on the release: it may still be returning from the wait
    // when this object is destroyed.
    manager.Infer(std::move(request_),
                  [this, released = released_](Status s, InferenceResponse r) {
                    result_.set_value(Result{std::move(s), std::move(r)});
                    released.wait();
                  });
  }
  // Waits until the callback runs (and blocks).
  const Result& WaitEntered() {
    if (!got_) {
      got_ = true;
      value_ = result_future_.get();
    }
    return value_;
  }
  void Release() {
    if (!released_set_) release_.set_value();
    released_set_ = true;
  }

 private:
  std::unique_ptr<InferenceRequest> request_;
  std::promise<Result> result_;
  std::future<Result> result_future_ = result_.get_future();
  std::promise<void> release_;
  std::shared_future<void> released_;
  bool released_set_ = false;
  bool got_ = false;
  Result value_;
};

bool IsReady(const std::future<Status>& f) {
  return f.wait_for(milliseconds(0)) == std::future_status::ready;
}

Tensor Row(int n = 3) { return Tensor::FromVector<float>(std::vector<float>(n, 1.0f), {1, n}); }

class ModelLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override { repo_ = testing::FreshRepository("lifecycle_repo_"); }
  void TearDown() override {
    manager_.reset();
    fs::remove_all(repo_);
  }
  void Create(ModelControlMode mode = ModelControlMode::kNone) {
    ModelManagerOptions o;
    o.repository = repo_;
    o.control_mode = mode;
    o.total_threads = 1;
    o.poll_interval = seconds(1);
    o.retire_timeout = milliseconds(5);
    o.clock = &clock_;
    auto m = ModelManager::Create(o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    manager_ = std::move(m).value();
  }
  void WriteOneWorkerModel(int version) {
    WriteFile(repo_ / "m" / "config.pbtxt", kOneWorkerConfig);
    WriteAddModel(repo_ / "m" / std::to_string(version) / "model.onnx");
  }
  void LoadOneWorkerModel() {
    WriteOneWorkerModel(1);
    Create();
    ASSERT_TRUE(manager_->LoadRepository().ok());
  }
  // Occupies model m's only worker with a request whose callback blocks until released.
  std::unique_ptr<HeldRequest> OccupyTheWorker() {
    auto held = std::make_unique<HeldRequest>(Request("m", Row()));
    held->Start(*manager_);
    EXPECT_TRUE(held->WaitEntered().status.ok());
    return held;
  }
  Result Infer(Tensor x = Row()) { return testing::InferSync(*manager_, Request("m", std::move(x))); }
  std::future<Result> InferAsync() { return testing::InferAsync(*manager_, Request("m", Row())); }

  FakeClock clock_;  // outlives the manager
  fs::path repo_;
  std::unique_ptr<ModelManager> manager_;
};

TEST_F(ModelLifecycleTest, ReloadServesTheNewVersion) {
  WriteAddModel(repo_ / "m" / "1" / "model.onnx");
  Create();
  ASSERT_TRUE(manager_->LoadRepository().ok());
  EXPECT_EQ(Infer().response.model_version, 1);

  WriteAddModel(repo_ / "m" / "2" / "model.onnx");
  ASSERT_TRUE(manager_->LoadModel("m").ok());
  EXPECT_TRUE(manager_->IsModelReady("m", 2));
  EXPECT_FALSE(manager_->IsModelReady("m", 1));  // version_policy latest 1: retired
  const Result r = Infer();
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.response.model_version, 2);
  EXPECT_EQ(r.response.outputs.at(0).second.data<float>()[0], 2.0f);
  auto stats = manager_->GetStatistics("m");
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].version, 2);
  EXPECT_EQ(stats[0].success_requests, 1u);
}

TEST_F(ModelLifecycleTest, PollLoadsANewVersionOnceTheIntervalPassed) {
  WriteAddModel(repo_ / "m" / "1" / "model.onnx");
  Create(ModelControlMode::kPoll);
  ASSERT_TRUE(manager_->Start().ok());
  const Clock::TimePoint t0 = clock_.Now();
  clock_.BlockUntilWaiting(t0 + seconds(1));  // the lifecycle thread waits for the first poll
  WriteAddModel(repo_ / "m" / "2" / "model.onnx");

  const uint64_t mark = clock_.WaitMark();
  clock_.Advance(milliseconds(999));
  clock_.BlockUntilWaiting(t0 + seconds(1), mark);  // woke, found it too early, waits again
  EXPECT_FALSE(manager_->IsModelReady("m", 2));

  clock_.Advance(milliseconds(1));
  clock_.BlockUntilWaiting(t0 + seconds(2));  // polled; the next poll is an interval later
  EXPECT_TRUE(manager_->IsModelReady("m", 2));
  EXPECT_FALSE(manager_->IsModelReady("m", 1));
  EXPECT_EQ(Infer().response.model_version, 2);
}

TEST_F(ModelLifecycleTest, PollUnloadsARemovedModel) {
  WriteAddModel(repo_ / "m" / "1" / "model.onnx");
  Create(ModelControlMode::kPoll);
  ASSERT_TRUE(manager_->Start().ok());
  const Clock::TimePoint t0 = clock_.Now();
  clock_.BlockUntilWaiting(t0 + seconds(1));
  fs::remove_all(repo_ / "m");
  clock_.Advance(seconds(1));
  clock_.BlockUntilWaiting(t0 + seconds(2));
  EXPECT_FALSE(manager_->IsModelReady("m"));
  EXPECT_EQ(Infer().status.code(), StatusCode::kUnavailable);
}

TEST_F(ModelLifecycleTest, RetiredVersionFinishesItsQueuedRequestsFirst) {
  LoadOneWorkerModel();
  std::unique_ptr<HeldRequest> running = OccupyTheWorker();  // version 1's only worker is busy
  std::future<Result> queued = InferAsync();      // waits in version 1's queue

  WriteAddModel(repo_ / "m" / "2" / "model.onnx");
  std::future<Status> load = std::async(std::launch::async, [&] { return manager_->LoadModel("m"); });
  while (!manager_->IsModelReady("m", 2)) std::this_thread::yield();
  // Version 2 serves while version 1 is still retiring (its queue drains behind the held one).
  EXPECT_EQ(Infer().response.model_version, 2);
  EXPECT_FALSE(IsReady(load));

  running->Release();
  const Result q = queued.get();
  ASSERT_TRUE(q.status.ok()) << q.status.ToString();
  EXPECT_EQ(q.response.model_version, 1);
  EXPECT_TRUE(load.get().ok());
  EXPECT_EQ(running->WaitEntered().response.model_version, 1);
}

TEST_F(ModelLifecycleTest, RetireReleasesAVersionStillHeldAtTheDeadline) {
  LoadOneWorkerModel();
  // An invalid request is answered inside Infer, which holds the version meanwhile.
  HeldRequest holder(Request("m", Row(), "not_an_input"));
  std::thread infer([&] { holder.Start(*manager_); });
  ASSERT_EQ(holder.WaitEntered().status.code(), StatusCode::kInvalidArgument);

  std::future<Status> unload =
      std::async(std::launch::async, [&] { return manager_->UnloadModel("m"); });
  const Clock::TimePoint t0 = clock_.Now();
  clock_.BlockUntilWaiting(t0 + milliseconds(1));  // retire checks every millisecond
  EXPECT_FALSE(IsReady(unload));
  clock_.Advance(milliseconds(1));
  clock_.BlockUntilWaiting(t0 + milliseconds(2));
  EXPECT_FALSE(IsReady(unload));
  clock_.Advance(milliseconds(4));  // t0 + 5 ms: the retire deadline (retire_timeout)
  EXPECT_TRUE(unload.get().ok());   // released anyway, while still held
  EXPECT_FALSE(manager_->IsModelReady("m"));
  holder.Release();
  infer.join();  // the last reference goes here
}

TEST_F(ModelLifecycleTest, FailedReloadKeepsTheRunningVersionServing) {
  WriteAddModel(repo_ / "m" / "1" / "model.onnx");
  Create();
  ASSERT_TRUE(manager_->LoadRepository().ok());

  WriteFile(repo_ / "m" / "2" / "model.onnx", "not a model");
  EXPECT_FALSE(manager_->LoadModel("m").ok());
  EXPECT_TRUE(manager_->IsModelReady("m", 1));
  EXPECT_FALSE(manager_->IsModelReady("m", 2));
  EXPECT_EQ(Infer().response.model_version, 1);
  auto index = manager_->Index();
  ASSERT_EQ(index.size(), 2u);
  EXPECT_EQ(index[0].state, "READY");
  EXPECT_NE(index[0].reason.find("reload failed"), std::string::npos) << index[0].reason;
  EXPECT_EQ(index[1].version, 2);
  EXPECT_EQ(index[1].state, "UNAVAILABLE");

  // The running version's own file broken: that version keeps serving from memory.
  fs::remove_all(repo_ / "m" / "2");
  WriteFile(repo_ / "m" / "1" / "model.onnx", "not a model either");
  // (LoadModel reports OK here: a version of the model serves; the index carries the failure.)
  (void)manager_->LoadModel("m");
  const Result r = Infer();
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.response.model_version, 1);
  EXPECT_TRUE(manager_->IsReady());
  index = manager_->Index();
  ASSERT_EQ(index.size(), 1u);
  EXPECT_NE(index[0].reason.find("reload failed"), std::string::npos) << index[0].reason;
}

TEST_F(ModelLifecycleTest, ShutdownDrainsAcceptedRequests) {
  LoadOneWorkerModel();
  std::unique_ptr<HeldRequest> running = OccupyTheWorker();
  std::future<Result> queued = InferAsync();

  manager_->BeginShutdown();
  EXPECT_FALSE(manager_->IsReady());
  EXPECT_EQ(Infer().status.code(), StatusCode::kUnavailable);  // new requests are refused
  EXPECT_EQ(manager_->InFlight(), 2);
  std::future<bool> idle =
      std::async(std::launch::async, [&] { return manager_->WaitForIdle(std::chrono::hours(1)); });
  running->Release();
  EXPECT_TRUE(idle.get());
  const Result q = queued.get();
  EXPECT_TRUE(q.status.ok()) << q.status.ToString();
  EXPECT_EQ(manager_->InFlight(), 0);
}

TEST_F(ModelLifecycleTest, WaitForIdleGivesUpAtItsTimeoutOnTheClock) {
  LoadOneWorkerModel();
  std::unique_ptr<HeldRequest> running = OccupyTheWorker();
  manager_->BeginShutdown();
  const Clock::TimePoint t0 = clock_.Now();
  std::future<bool> idle =
      std::async(std::launch::async, [&] { return manager_->WaitForIdle(milliseconds(10)); });
  clock_.BlockUntilWaiting(t0 + milliseconds(10));
  clock_.Advance(milliseconds(10));
  EXPECT_FALSE(idle.get());
  running->Release();
}

TEST_F(ModelLifecycleTest, DestructionRunsQueuedRequests) {
  LoadOneWorkerModel();
  std::unique_ptr<HeldRequest> running = OccupyTheWorker();
  std::future<Result> queued = InferAsync();
  std::future<void> destroyed = std::async(std::launch::async, [&] { manager_.reset(); });
  running->Release();
  destroyed.get();
  const Result q = queued.get();
  EXPECT_TRUE(q.status.ok()) << q.status.ToString();
}

TEST_F(ModelLifecycleTest, QueueFailuresAreCountedByReason) {
  WriteFile(repo_ / "m" / "config.pbtxt", R"pb(
    max_batch_size: 4
    instance_group [ { count: 1 kind: KIND_CPU } ]
    dynamic_batching {
      default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 1000
                             max_queue_size: 1 }
    }
  )pb");
  WriteAddModel(repo_ / "m" / "1" / "model.onnx");
  Create();
  ASSERT_TRUE(manager_->LoadRepository().ok());
  std::unique_ptr<HeldRequest> running = OccupyTheWorker();
  const Clock::TimePoint t0 = clock_.Now();
  std::future<Result> queued = InferAsync();  // the queue's one place
  const Result full = Infer();
  EXPECT_EQ(full.status.code(), StatusCode::kUnavailable);
  clock_.BlockUntilWaiting(t0 + milliseconds(1));  // the scheduler waits for the queue timeout
  clock_.Advance(milliseconds(1));
  EXPECT_EQ(queued.get().status.code(), StatusCode::kUnavailable);
  running->Release();
  auto stats = manager_->GetStatistics("m");
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].failures[FailureReason::kQueueFull], 1u);
  EXPECT_EQ(stats[0].failures[FailureReason::kTimeout], 1u);
  EXPECT_EQ(stats[0].fail.count, 2u);
}

}  // namespace
}  // namespace model_lifecycle_test
}  // namespace inferd::serving
