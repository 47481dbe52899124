#include "serving/lifecycle.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <string>
#include <vector>

#include "testing/fake_clock.h"

namespace inferd::serving {
namespace {

using std::chrono::milliseconds;

TEST(LifecycleThreadTest, RunsOperationsInOrderThenCancelsAfterStop) {
  FakeClock clock;
  LifecycleThread thread(clock, milliseconds(100), [] {});
  std::promise<void> entered, release;
  std::vector<std::string> log;  // written on the lifecycle thread, read after Stop joined it
  thread.Enqueue([&](bool run) {
    entered.set_value();
    release.get_future().wait();
    log.push_back(run ? "first" : "first cancelled");
  });
  entered.get_future().wait();
  thread.Enqueue([&](bool run) { log.push_back(run ? "second" : "second cancelled"); });
  std::promise<void> third;
  thread.Enqueue([&](bool run) {
    log.push_back(run ? "third" : "third cancelled");
    third.set_value();
  });
  release.set_value();
  third.get_future().wait();
  thread.Stop();
  EXPECT_EQ(log, (std::vector<std::string>{"first", "second", "third"}));
  bool ran = true;
  thread.Enqueue([&](bool run) { ran = run; });  // after Stop: answered at once, not run
  EXPECT_FALSE(ran);
}

TEST(LifecycleThreadTest, PollsEveryIntervalOnTheClockWhilePolling) {
  FakeClock clock;
  std::atomic<int> polls{0};
  LifecycleThread thread(clock, milliseconds(100), [&] { ++polls; });
  const Clock::TimePoint t0 = clock.Now();
  thread.SetPolling(true);
  clock.BlockUntilWaiting(t0 + milliseconds(100));
  EXPECT_EQ(polls.load(), 0);
  clock.Advance(milliseconds(100));
  clock.BlockUntilWaiting(t0 + milliseconds(200));
  EXPECT_EQ(polls.load(), 1);
  clock.Advance(milliseconds(100));
  clock.BlockUntilWaiting(t0 + milliseconds(300));
  EXPECT_EQ(polls.load(), 2);
  thread.SetPolling(false);
  std::promise<void> idle;
  thread.Enqueue([&](bool) { idle.set_value(); });  // the thread has seen polling stop
  idle.get_future().wait();
  clock.Advance(milliseconds(500));
  std::promise<void> after;
  thread.Enqueue([&](bool) { after.set_value(); });
  after.get_future().wait();
  EXPECT_EQ(polls.load(), 2);
}

TEST(WaitForSoleOwnerTest, ReturnsOnceOthersDropTheirReferenceOrAtTheDeadline) {
  FakeClock clock;
  auto p = std::make_shared<int>(1);
  EXPECT_TRUE(WaitForSoleOwner(p, clock, clock.Now() + milliseconds(5)));

  auto other = p;
  const Clock::TimePoint t0 = clock.Now();
  std::future<bool> sole =
      std::async(std::launch::async, [&] { return WaitForSoleOwner(p, clock, t0 + milliseconds(5)); });
  clock.BlockUntilWaiting(t0 + milliseconds(1));
  other.reset();
  clock.Advance(milliseconds(1));
  EXPECT_TRUE(sole.get());

  other = p;
  const Clock::TimePoint t1 = clock.Now();
  sole = std::async(std::launch::async,
                    [&] { return WaitForSoleOwner(p, clock, t1 + milliseconds(5)); });
  clock.BlockUntilWaiting(t1 + milliseconds(1));
  clock.Advance(milliseconds(5));
  EXPECT_FALSE(sole.get());
}

}  // namespace
}  // namespace inferd::serving
