// Clock: an injectable time source, so code that waits on time (batch queue delays, request
// timeouts) can be tested by advancing a FakeClock by hand instead of sleeping.
//
// Every timed wait goes through Clock::WaitUntil, which a FakeClock wakes when its time is
// advanced (src/testing/fake_clock.h, test-only). Time is steady (monotonic); wall-clock timestamps for reports use WallMillis().
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace inferd {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  // WaitUntil(..., kForever) waits for a notification only.
  static constexpr TimePoint kForever = TimePoint::max();

  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
  // Waits on `cv` (atomically releasing `lock`, which must be held and guard the state the
  // caller checks) until it is notified or this clock reaches `deadline`. May return spuriously:
  // callers re-check their condition in a loop, as with std::condition_variable.
  virtual void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                         TimePoint deadline) = 0;
};

// The process's steady clock.
class RealClock : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 TimePoint deadline) override;
  // A shared instance for production code.
  static RealClock& Get();
};

// Milliseconds since the Unix epoch (for "last inference" style reports, not for waiting).
uint64_t WallMillis();

}  // namespace inferd
