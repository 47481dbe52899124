// FakeClock: a Clock that moves only when a test advances it (test-only library inferd_testing;
// production code never links it).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <list>
#include <mutex>

#include "common/clock.h"
#include "common/mutex.h"

namespace inferd {

// A clock that only moves when Advance() is called. Threads in WaitUntil wake when the time
// reaches their deadline (or on their cv's notification). Starts at an arbitrary fixed time point.
//
// Tests synchronise with the waiting thread instead of sleeping:
//   uint64_t mark = clock.WaitMark();
//   scheduler->Schedule(&task);                         // the scheduler thread re-evaluates...
//   clock.BlockUntilWaiting(clock.Now() + 1ms, mark);   // ...and now sleeps until +1ms
//   clock.Advance(1ms);                                 // wakes it
// Thread-safe. Lock order: a waiter's own mutex (the `lock` passed to WaitUntil) before mu_;
// Advance takes the waiters' mutexes only after releasing mu_. A waiter's cv and mutex usually
// live on its stack (serving::SleepUntil), so Advance marks each waiter it is about to notify
// (Waiter::notifying) and a woken waiter leaves WaitUntil only once no Advance still holds a
// pointer to them (TSan found the cv destroyed while Advance notified it).
class FakeClock : public Clock {
 public:
  FakeClock();
  TimePoint Now() const override;
  void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 TimePoint deadline) override EXCLUDES(mu_);

  // Moves time forward and wakes every waiter (whose deadline has passed or not: they re-check).
  void Advance(std::chrono::microseconds d) EXCLUDES(mu_);
  // A mark for BlockUntilWaiting: waits that begin after this call have a larger sequence number.
  uint64_t WaitMark() const EXCLUDES(mu_);
  // Blocks until some thread is inside WaitUntil with exactly `deadline`, having entered it after
  // `mark` was taken (0: any time).
  void BlockUntilWaiting(TimePoint deadline, uint64_t mark = 0) EXCLUDES(mu_);

 private:
  struct Waiter {
    std::condition_variable* cv;
    std::mutex* mu;
    TimePoint deadline;
    uint64_t seq;
    int notifying = 0;  // guarded by mu_: Advance calls still to notify cv (under mu) or done
  };
  // mu_ guards the time and the list of waiters; it is never held while waiting on a waiter's cv.
  mutable Mutex mu_;
  CondVar waiters_changed_;  // with mu_: a thread entered WaitUntil
  CondVar notified_;         // with mu_: an Advance finished notifying (some notifying dropped)
  TimePoint now_ GUARDED_BY(mu_);
  uint64_t next_seq_ GUARDED_BY(mu_) = 1;
  std::list<Waiter> waiters_ GUARDED_BY(mu_);
};

}  // namespace inferd
