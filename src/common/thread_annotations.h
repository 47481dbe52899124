// Clang thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html), in the
// manner of leveldb's port/thread_annotations.h. They compile to nothing on other compilers; the
// clang build in .ci/run (scripts/check_thread_safety.sh) turns -Wthread-safety into errors.
//
// Mark what a lock guards, and what a function needs held:
//   Mutex mu_;
//   int64_t count_ GUARDED_BY(mu_);
//   void BumpLocked() REQUIRES(mu_);
//   void Drain() EXCLUDES(mu_);
// Use the annotated Mutex/MutexLock/CondVar of common/mutex.h: libstdc++'s std::mutex carries no
// annotations, so the analysis cannot see it.
#pragma once

#if defined(__clang__)
#define INFERD_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define INFERD_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) INFERD_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY INFERD_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) INFERD_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) INFERD_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) INFERD_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) INFERD_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define REQUIRES(...) INFERD_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) INFERD_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE(...) INFERD_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) INFERD_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) INFERD_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) INFERD_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) INFERD_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) INFERD_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) INFERD_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) INFERD_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS INFERD_THREAD_ANNOTATION(no_thread_safety_analysis)
