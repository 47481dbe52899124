#include "serving/autoscaler.h"

#include <utility>

namespace inferd::serving {

Autoscaler::Autoscaler(AutoscalePolicy policy, Clock& clock, SampleFn sample, ApplyFn apply)
    : policy_(std::move(policy)),
      clock_(clock),
      sample_(std::move(sample)),
      apply_(std::move(apply)),
      thread_([this] { Loop(); }) {}

Autoscaler::~Autoscaler() {
  {
    MutexLock l(&mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
}

void Autoscaler::Loop() {
  const auto period = policy_.options().sample_period;
  ReleasableMutexLock l(&mu_);
  Clock::TimePoint next = clock_.Now();
  while (!stop_) {
    const Clock::TimePoint now = clock_.Now();
    if (now < next) {
      cv_.WaitUntil(&mu_, clock_, next);
      continue;
    }
    l.Unlock();  // sampling and applying take other locks (stats, scheduler)
    LoadSample s = sample_();
    s.time = now;
    const ScaleDecision d = policy_.Observe(s);
    if (d.direction != ScaleDirection::kNone) apply_(d);
    l.Lock();
    // The next sample one period after this one; after a stall, one period from now (a late
    // sample just covers a longer period).
    next += period;
    if (next <= now) next = now + period;
  }
}

}  // namespace inferd::serving
