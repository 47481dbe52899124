// The model manager's lifecycle machinery, on the injected Clock (common/clock.h) so tests drive
// it with a FakeClock (src/testing/fake_clock.h) instead of sleeping:
//
//   LifecycleThread   one thread that runs repository-API operations in order and, while polling
//                     is on, calls the poll function every poll_interval;
//   WaitForSoleOwner  the retire deadline: waits until a replaced version is held by nobody else;
//   AbandonableWork   the load deadline: work on a thread of its own that its caller waits for
//                     until a deadline and may abandon, so a stuck load never holds the
//                     lifecycle thread (or shutdown) for good.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"

namespace inferd::serving {

// Starts its thread on construction. Operations run one at a time, in the order queued, on that
// thread; a poll runs between operations once poll_interval has passed since the previous poll
// ended (or since polling was turned on). Thread-safe.
class LifecycleThread {
 public:
  // run = true: do it; false: it was cancelled (the thread stopped first) and must only answer.
  using Op = std::function<void(bool run)>;

  LifecycleThread(Clock& clock, std::chrono::milliseconds poll_interval,
                  std::function<void()> poll);
  ~LifecycleThread();  // Stop()
  LifecycleThread(const LifecycleThread&) = delete;
  LifecycleThread& operator=(const LifecycleThread&) = delete;

  // Queues `op`; once stopped, calls op(false) at once on the caller's thread.
  void Enqueue(Op op) EXCLUDES(mu_);
  // Turns periodic polling on or off (off: no further poll starts; one running finishes).
  void SetPolling(bool on) EXCLUDES(mu_);
  // Lets the operation or poll in progress finish, cancels the queued ones (op(false), on the
  // lifecycle thread) and joins it. Idempotent.
  void Stop() EXCLUDES(mu_);

 private:
  // What the thread does next.
  struct Work {
    Op op;              // an operation, or
    bool poll = false;  // a poll; neither: stop
  };
  void Loop() EXCLUDES(mu_);
  // Waits for the next piece of work; `next_poll` is when the next poll is due.
  Work NextWorkLocked(Clock::TimePoint* next_poll) REQUIRES(mu_);

  Clock& clock_;
  const std::chrono::milliseconds poll_interval_;
  const std::function<void()> poll_;
  Mutex mu_;
  CondVar changed_;  // an operation queued, polling switched, stop
  std::deque<Op> ops_ GUARDED_BY(mu_);
  bool polling_ GUARDED_BY(mu_) = false;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// Blocks until `clock` reaches `t` (no notification can end it earlier).
void SleepUntil(Clock& clock, Clock::TimePoint t);

// The retire deadline: waits until `p` is the only reference to its object (use_count 1) or
// `clock` reaches `deadline`, checking every millisecond (nothing signals a dropped reference).
// True when `p` is the only one.
template <class T>
bool WaitForSoleOwner(const std::shared_ptr<T>& p, Clock& clock, Clock::TimePoint deadline) {
  while (p.use_count() > 1 && clock.Now() < deadline) {
    SleepUntil(clock, std::min(clock.Now() + std::chrono::milliseconds(1), deadline));
  }
  return p.use_count() <= 1;
}

// Runs `work` on a detached thread of its own; the caller waits for its result until a deadline,
// and may give up (the deadline passed, or Abandon() from another thread, e.g. on shutdown). An
// abandoned work is told so through the flag it is given (it should check it between stages and
// return early) and runs on to its end in the background; its result is then destroyed on its
// own thread. The work must therefore own or share everything it uses (never the caller's stack).
//
//   auto w = AbandonableWork<int>::Start([](const std::atomic<bool>& abandoned) { return 42; });
//   std::optional<int> r = w->Wait(clock, clock.Now() + 5s);  // nullopt: too late, abandoned
//
// Thread-safe. Running() counts the works of type T whose thread has not ended yet.
template <class T>
class AbandonableWork {
 public:
  using Fn = std::function<T(const std::atomic<bool>& abandoned)>;

  static std::shared_ptr<AbandonableWork> Start(Fn work) {
    std::shared_ptr<AbandonableWork> w(new AbandonableWork());
    RunningWorks().fetch_add(1);
    // The thread shares the state: whoever of caller and thread lets go last destroys it.
    std::thread([w, work = std::move(work)]() mutable {
      std::optional<T> result(work(w->abandoned_));
      work = nullptr;
      {
        MutexLock l(&w->mu_);
        w->finished_ = true;
        if (!w->abandoned_.load()) w->result_ = std::move(result);
      }
      w->changed_.NotifyAll();
      result.reset();  // an abandoned result is destroyed here, on this thread
      w.reset();
      RunningWorks().fetch_sub(1);
    }).detach();
    return w;
  }

  // The result once the work finished, or nullopt when `deadline` passed on `clock` or Abandon()
  // was called first (the work is then abandoned).
  std::optional<T> Wait(Clock& clock, Clock::TimePoint deadline) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    while (!finished_ && !abandoned_.load() && clock.Now() < deadline) {
      changed_.WaitUntil(&mu_, clock, deadline);
    }
    if (finished_ && !abandoned_.load()) return std::move(result_);
    abandoned_.store(true);
    return std::nullopt;
  }

  // Gives up on the work from any thread: a Wait returns nullopt at once.
  void Abandon() EXCLUDES(mu_) {
    {
      MutexLock l(&mu_);
      abandoned_.store(true);
    }
    changed_.NotifyAll();
  }

  // Works of type T started and not yet ended, process-wide (abandoned ones included).
  static int Running() { return RunningWorks().load(); }

 private:
  AbandonableWork() = default;
  static std::atomic<int>& RunningWorks() {
    static std::atomic<int> running{0};
    return running;
  }

  Mutex mu_;
  CondVar changed_;  // finished, abandoned
  std::atomic<bool> abandoned_{false};
  bool finished_ GUARDED_BY(mu_) = false;
  std::optional<T> result_ GUARDED_BY(mu_);
};

}  // namespace inferd::serving
