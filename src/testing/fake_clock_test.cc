#include "testing/fake_clock.h"

#include <gtest/gtest.h>

#include <thread>

namespace inferd {
namespace {

TEST(FakeClockTest, AdvanceWakesWaiter) {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  const auto deadline = clock.Now() + std::chrono::microseconds(100);
  std::thread waiter([&] {
    std::unique_lock<std::mutex> l(mu);
    while (clock.Now() < deadline) clock.WaitUntil(cv, l, deadline);
  });
  clock.BlockUntilWaiting(deadline);
  clock.Advance(std::chrono::microseconds(100));
  waiter.join();
  EXPECT_GE(clock.Now(), deadline);
}

}  // namespace
}  // namespace inferd
