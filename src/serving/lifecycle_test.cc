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

namespace inferd::serving {
namespace {

// The work's thread has ended (Running() counts it until then). Not a timing wait: it ends right
// after the work returns.
void WaitForWorksToEnd() {
  while (AbandonableWork<int>::Running() != 0) std::this_thread::yield();
}

TEST(AbandonableWorkTest, ReturnsTheResultWhenTheWorkFinishesInTime) {
  FakeClock clock;
  auto w = AbandonableWork<int>::Start([](const std::atomic<bool>&) { return 42; });
  std::optional<int> r = w->Wait(clock, Clock::kForever);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, 42);
  WaitForWorksToEnd();
}

// A load that never finishes (here: until the test lets it) no longer holds its caller: past the
// deadline Wait returns nullopt, the work is told it was abandoned, and it ends on its own later.
TEST(AbandonableWorkTest, GivesUpAtTheDeadlineAndTellsTheWork) {
  FakeClock clock;
  auto release = std::make_shared<std::promise<void>>();
  auto saw_abandoned = std::make_shared<std::promise<bool>>();
  std::shared_future<void> released = release->get_future().share();
  auto w = AbandonableWork<int>::Start([released, saw_abandoned](const std::atomic<bool>& a) {
    released.wait();
    saw_abandoned->set_value(a.load());
    return 1;
  });
  const Clock::TimePoint deadline = clock.Now() + milliseconds(300000);
  auto waited = std::async(std::launch::async, [&] { return w->Wait(clock, deadline); });
  clock.BlockUntilWaiting(deadline);
  EXPECT_EQ(AbandonableWork<int>::Running(), 1);
  clock.Advance(milliseconds(300000));
  EXPECT_FALSE(waited.get().has_value());
  release->set_value();
  EXPECT_TRUE(saw_abandoned->get_future().get());
  w.reset();  // the work's thread now holds the last reference
  WaitForWorksToEnd();
}

// Shutdown abandons a load from another thread: the waiter returns at once, time never moves.
TEST(AbandonableWorkTest, AbandonFromAnotherThreadEndsTheWait) {
  FakeClock clock;
  auto release = std::make_shared<std::promise<void>>();
  std::shared_future<void> released = release->get_future().share();
  auto w = AbandonableWork<int>::Start([released](const std::atomic<bool>&) {
    released.wait();
    return 1;
  });
  const Clock::TimePoint deadline = clock.Now() + milliseconds(1000);
  auto waited = std::async(std::launch::async, [&] { return w->Wait(clock, deadline); });
  clock.BlockUntilWaiting(deadline);
  w->Abandon();
  EXPECT_FALSE(waited.get().has_value());
  release->set_value();
  w.reset();
  WaitForWorksToEnd();
}

}  // namespace
}  // namespace inferd::serving
