#include "common/clock.h"

namespace inferd {

void RealClock::WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                          TimePoint deadline) {
  // wait_until with time_point::max() overflows in some standard libraries.
  if (deadline == kForever) {
    cv.wait(lock);
  } else {
    cv.wait_until(lock, deadline);
  }
}

RealClock& RealClock::Get() {
  static RealClock* clock = new RealClock();  // never destroyed: usable during static teardown
  return *clock;
}

uint64_t WallMillis() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace inferd
