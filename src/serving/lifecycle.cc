#include "serving/lifecycle.h"

#include <utility>

namespace inferd::serving {

LifecycleThread::LifecycleThread(Clock& clock, std::chrono::milliseconds poll_interval,
                                 std::function<void()> poll)
    : clock_(clock), poll_interval_(poll_interval), poll_(std::move(poll)) {
  thread_ = std::thread([this] { Loop(); });
}

LifecycleThread::~LifecycleThread() { Stop(); }

void LifecycleThread::Enqueue(Op op) {
  {
    MutexLock l(&mu_);
    if (!stop_) {
      ops_.push_back(std::move(op));
      op = nullptr;
    }
  }
  if (op) {
    op(false);
  } else {
    changed_.NotifyAll();
  }
}

void LifecycleThread::SetPolling(bool on) {
  {
    MutexLock l(&mu_);
    polling_ = on;
  }
  changed_.NotifyAll();
}

void LifecycleThread::Stop() {
  {
    MutexLock l(&mu_);
    stop_ = true;
  }
  changed_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

LifecycleThread::Work LifecycleThread::NextWorkLocked(Clock::TimePoint* next_poll) {
  while (true) {
    if (stop_) return Work{};
    if (!ops_.empty()) {
      Work w{std::move(ops_.front())};
      ops_.pop_front();
      return w;
    }
    if (polling_ && clock_.Now() >= *next_poll) return Work{nullptr, true};
    if (polling_) {
      changed_.WaitUntil(&mu_, clock_, *next_poll);
    } else {
      changed_.Wait(&mu_);
      // Polling may just have been turned on: the first poll is one interval from now.
      *next_poll = clock_.Now() + poll_interval_;
    }
  }
}

void LifecycleThread::Loop() {
  Clock::TimePoint next_poll = clock_.Now() + poll_interval_;
  while (true) {
    Work work;
    {
      MutexLock l(&mu_);
      work = NextWorkLocked(&next_poll);
    }
    if (work.op) {
      work.op(true);
    } else if (work.poll) {
      poll_();
      next_poll = clock_.Now() + poll_interval_;
    } else {
      break;
    }
  }
  std::deque<Op> cancelled;
  {
    MutexLock l(&mu_);
    cancelled.swap(ops_);
  }
  for (auto& op : cancelled) op(false);
}

void SleepUntil(Clock& clock, Clock::TimePoint t) {
  Mutex mu;
  CondVar never_notified;
  MutexLock l(&mu);
  while (clock.Now() < t) never_notified.WaitUntil(&mu, clock, t);
}

}  // namespace inferd::serving
