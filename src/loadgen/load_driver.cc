#include "loadgen/load_driver.h"

#include <atomic>
#include <condition_variable>
#include <thread>

namespace inferd::loadgen {

using Clock = std::chrono::steady_clock;

void Recorder::Add(std::chrono::nanoseconds latency, std::string_view error) {
  MutexLock l(&mu_);
  if (error.empty()) {
    current_.latencies_us.push_back(
        std::chrono::duration_cast<std::chrono::microseconds>(latency).count());
  } else {
    ++current_.errors[std::string(error)];
  }
}

Recorder::Window Recorder::Take() {
  MutexLock l(&mu_);
  Window w = std::move(current_);
  current_ = Window();
  return w;
}

namespace {

// State shared with completion callbacks, which may outlive a driver whose drain timed out.
struct Shared {
  std::shared_ptr<Recorder> recorder;
  std::atomic<bool> running{true};
  std::atomic<int64_t> outstanding{0};
  std::mutex mu;
  std::condition_variable cv;

  void Done() {
    if (outstanding.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> l(mu);
      cv.notify_all();
    }
  }
  void Drain(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> l(mu);
    cv.wait_for(l, timeout, [&] { return outstanding.load() == 0; });
  }
};

class ClosedLoop final : public LoadDriver {
 public:
  ClosedLoop(InferenceClient& client, std::shared_ptr<Recorder> recorder, int concurrency)
      : client_(client), shared_(std::make_shared<Shared>()) {
    shared_->recorder = std::move(recorder);
    for (int i = 0; i < concurrency; ++i) Issue(client_, shared_);
  }
  ~ClosedLoop() override { Stop(std::chrono::milliseconds(30000)); }

  void Stop(std::chrono::milliseconds drain) override {
    shared_->running = false;
    shared_->Drain(drain);
  }
  int64_t outstanding() const override { return shared_->outstanding.load(); }

 private:
  static void Issue(InferenceClient& client, const std::shared_ptr<Shared>& shared) {
    shared->outstanding.fetch_add(1);
    const auto sent = Clock::now();
    client.AsyncInfer([&client, shared, sent](std::string_view error) {
      shared->recorder->Add(Clock::now() - sent, error);
      if (shared->running) Issue(client, shared);
      shared->Done();
    });
  }

  InferenceClient& client_;
  std::shared_ptr<Shared> shared_;
};

class OpenLoop final : public LoadDriver {
 public:
  OpenLoop(InferenceClient& client, std::shared_ptr<Recorder> recorder, double rate,
           ArrivalSchedule::Distribution distribution, uint64_t seed)
      : client_(client), shared_(std::make_shared<Shared>()),
        schedule_(rate, distribution, seed) {
    shared_->recorder = std::move(recorder);
    thread_ = std::thread([this] { Run(); });
  }
  ~OpenLoop() override { Stop(std::chrono::milliseconds(30000)); }

  void Stop(std::chrono::milliseconds drain) override {
    {
      std::lock_guard<std::mutex> l(shared_->mu);
      shared_->running = false;
      shared_->cv.notify_all();
    }
    if (thread_.joinable()) thread_.join();
    shared_->Drain(drain);
  }
  int64_t outstanding() const override { return shared_->outstanding.load(); }

 private:
  void Run() {
    auto next = Clock::now();
    while (true) {
      next += schedule_.NextGap();
      {
        std::unique_lock<std::mutex> l(shared_->mu);
        if (shared_->cv.wait_until(l, next, [&] { return !shared_->running.load(); })) return;
      }
      // When this thread wakes late, the request still counts from `next`.
      shared_->outstanding.fetch_add(1);
      const auto intended = next;
      auto shared = shared_;
      client_.AsyncInfer([shared, intended](std::string_view error) {
        shared->recorder->Add(Clock::now() - intended, error);
        shared->Done();
      });
    }
  }

  InferenceClient& client_;
  std::shared_ptr<Shared> shared_;
  ArrivalSchedule schedule_;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<LoadDriver> StartClosedLoop(InferenceClient& client,
                                            std::shared_ptr<Recorder> recorder, int concurrency) {
  return std::make_unique<ClosedLoop>(client, std::move(recorder), concurrency);
}

std::unique_ptr<LoadDriver> StartOpenLoop(InferenceClient& client,
                                          std::shared_ptr<Recorder> recorder, double rate_per_s,
                                          ArrivalSchedule::Distribution distribution,
                                          uint64_t seed) {
  return std::make_unique<OpenLoop>(client, std::move(recorder), rate_per_s, distribution, seed);
}

}  // namespace inferd::loadgen
