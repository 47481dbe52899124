#include "testing/fake_clock.h"

#include <algorithm>
#include <vector>

namespace inferd {

FakeClock::FakeClock() : now_(TimePoint(std::chrono::hours(1))) {}

Clock::TimePoint FakeClock::Now() const {
  MutexLock l(&mu_);
  return now_;
}

void FakeClock::WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                          TimePoint deadline) {
  std::list<Waiter>::iterator it;
  {
    MutexLock l(&mu_);
    if (now_ >= deadline) return;
    it = waiters_.insert(waiters_.end(), Waiter{&cv, lock.mutex(), deadline, next_seq_++});
  }
  waiters_changed_.NotifyAll();
  // `lock` has been held since the caller checked its condition, and Advance() takes that same
  // mutex to notify, so no wake-up is lost between registering and waiting.
  cv.wait(lock);
  // The caller may destroy cv and its mutex as soon as this returns: first let every Advance that
  // has taken this waiter notify it. `lock` is released meanwhile (that Advance may be waiting for
  // it); a waiter re-checks its condition after WaitUntil anyway, as after any wait.
  lock.unlock();
  {
    MutexLock l(&mu_);
    while (it->notifying > 0) notified_.Wait(&mu_);
    waiters_.erase(it);
  }
  lock.lock();
}

void FakeClock::Advance(std::chrono::microseconds d) {
  std::vector<std::list<Waiter>::iterator> to_wake;
  {
    MutexLock l(&mu_);
    now_ += d;
    for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
      ++it->notifying;  // keeps the waiter, its cv and its mutex in place until we are done
      to_wake.push_back(it);
    }
  }
  // cv and mu of a waiter never change after it registered, and it stays registered while
  // notifying > 0, so they are read without mu_ (which must not be held with a waiter's mutex).
  for (auto it : to_wake) {
    std::lock_guard<std::mutex> l(*it->mu);
    it->cv->notify_all();
  }
  {
    MutexLock l(&mu_);
    for (auto it : to_wake) --it->notifying;
  }
  notified_.NotifyAll();
}

uint64_t FakeClock::WaitMark() const {
  MutexLock l(&mu_);
  return next_seq_ - 1;
}

void FakeClock::BlockUntilWaiting(TimePoint deadline, uint64_t mark) {
  MutexLock l(&mu_);
  auto found = [&](const Waiter& w) { return w.deadline == deadline && w.seq > mark; };
  while (std::none_of(waiters_.begin(), waiters_.end(), found)) waiters_changed_.Wait(&mu_);
}

}  // namespace inferd
