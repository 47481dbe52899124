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
  // mutex before notifying, so no wake-up is lost between registering and waiting.
  cv.wait(lock);
  {
    MutexLock l(&mu_);
    waiters_.erase(it);
  }
}

void FakeClock::Advance(std::chrono::microseconds d) {
  std::vector<Waiter> to_wake;
  {
    MutexLock l(&mu_);
    now_ += d;
    to_wake.assign(waiters_.begin(), waiters_.end());
  }
  for (const Waiter& w : to_wake) {
    { std::lock_guard<std::mutex> l(*w.mu); }
    w.cv->notify_all();
  }
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
