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

// The names Abseil's legacy absl/base/internal/thread_annotations.h also defines (it comes with
// gRPC's headers) are spelled with the same tokens as there, so either header may come first
// without a macro-redefinition error.
#if defined(__clang__)
#define THREAD_ANNOTATION_ATTRIBUTE__(x) __attribute__((x))
#else
#define THREAD_ANNOTATION_ATTRIBUTE__(x)
#endif
#define INFERD_THREAD_ANNOTATION(x) THREAD_ANNOTATION_ATTRIBUTE__(x)

#define GUARDED_BY(x) THREAD_ANNOTATION_ATTRIBUTE__(guarded_by(x))
#define PT_GUARDED_BY(x) THREAD_ANNOTATION_ATTRIBUTE__(pt_guarded_by(x))
#define ACQUIRED_AFTER(...) THREAD_ANNOTATION_ATTRIBUTE__(acquired_after(__VA_ARGS__))
#define ACQUIRED_BEFORE(...) THREAD_ANNOTATION_ATTRIBUTE__(acquired_before(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS THREAD_ANNOTATION_ATTRIBUTE__(no_thread_safety_analysis)

#define CAPABILITY(x) INFERD_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY INFERD_THREAD_ANNOTATION(scoped_lockable)
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
