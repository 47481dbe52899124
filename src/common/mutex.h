// Mutex, MutexLock, CondVar: std::mutex and std::condition_variable with Clang thread-safety
// annotations (common/thread_annotations.h), as leveldb's port::Mutex. Use these, not std::mutex,
// for any state shared between threads, and mark that state GUARDED_BY the mutex.
//
//   Mutex mu_;
//   CondVar changed_;
//   std::deque<Task> queue_ GUARDED_BY(mu_);
//
//   void Push(Task t) EXCLUDES(mu_) {
//     MutexLock l(&mu_);
//     queue_.push_back(std::move(t));
//     changed_.NotifyOne();
//   }
//   Task Pop() EXCLUDES(mu_) {
//     MutexLock l(&mu_);
//     while (queue_.empty()) changed_.Wait(&mu_);   // a loop, not a predicate lambda: the
//     ...                                           // analysis cannot see a lambda runs locked
//   }
//
// Timed waits go through the injected Clock (common/clock.h), so tests drive them with a FakeClock.
//
// Also here: ReleasableMutexLock (a scoped lock that can let go and take the mutex again inside its
// scope, to run a callback unlocked) and RecursiveMutex/RecursiveMutexLock (for reactions that
// re-enter on the same thread where the analysis cannot see it).
#pragma once

#include <condition_variable>
#include <mutex>

#include "common/clock.h"
#include "common/thread_annotations.h"

namespace inferd {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A MutexLock that may release the mutex and take it again within its scope, e.g. to call out of a
// loop that otherwise runs locked. The analysis follows Unlock/Lock; the destructor unlocks only
// if held.
//
//   ReleasableMutexLock l(&mu_);
//   while (...) {
//     Work w = TakeLocked();
//     l.Unlock();
//     Run(w);  // unlocked: may call back into this class
//     l.Lock();
//   }
class SCOPED_CAPABILITY ReleasableMutexLock {
 public:
  explicit ReleasableMutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~ReleasableMutexLock() RELEASE() {
    if (held_) mu_->Unlock();
  }
  ReleasableMutexLock(const ReleasableMutexLock&) = delete;
  ReleasableMutexLock& operator=(const ReleasableMutexLock&) = delete;

  // Must be held (resp. not held) by this lock.
  void Unlock() RELEASE() {
    held_ = false;
    mu_->Unlock();
  }
  void Lock() ACQUIRE() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

// A mutex the owning thread may lock again while holding it (each Lock needs its Unlock). Only for
// callbacks that re-enter on the same thread behind the analysis' back (a gRPC reactor's reaction
// may run inline from StartWrite, called under the lock); the analysis treats it as a plain mutex,
// so a re-entry it can see is still an error. Prefer Mutex.
class CAPABILITY("mutex") RecursiveMutex {
 public:
  RecursiveMutex() = default;
  RecursiveMutex(const RecursiveMutex&) = delete;
  RecursiveMutex& operator=(const RecursiveMutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }

 private:
  std::recursive_mutex mu_;
};

// Holds a RecursiveMutex for its scope.
class SCOPED_CAPABILITY RecursiveMutexLock {
 public:
  explicit RecursiveMutexLock(RecursiveMutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~RecursiveMutexLock() RELEASE() { mu_->Unlock(); }
  RecursiveMutexLock(const RecursiveMutexLock&) = delete;
  RecursiveMutexLock& operator=(const RecursiveMutexLock&) = delete;

 private:
  RecursiveMutex* const mu_;
};

// A condition variable used with one Mutex. Waits may return spuriously: re-check in a loop.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases `mu` while waiting for a notification; holds it again on return.
  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> l(mu->mu_, std::adopt_lock);
    cv_.wait(l);
    l.release();
  }
  // As Wait, also returning once `clock` reaches `deadline` (Clock::kForever: never).
  void WaitUntil(Mutex* mu, Clock& clock, Clock::TimePoint deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> l(mu->mu_, std::adopt_lock);
    clock.WaitUntil(cv_, l, deadline);
    l.release();
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace inferd
