// The model manager's lifecycle machinery, on the injected Clock (common/clock.h) so tests drive
// it with a FakeClock (src/testing/fake_clock.h) instead of sleeping:
//
//   LifecycleThread   one thread that runs repository-API operations in order and, while polling
//                     is on, calls the poll function every poll_interval;
//   WaitForSoleOwner  the retire deadline: waits until a replaced version is held by nobody else.
#pragma once

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <thread>

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

}  // namespace inferd::serving
