// OpenMP wait policy of the `inferd` process.
//
// libgomp (which oneDNN and our kernels use) lets idle worker threads busy-wait after every
// parallel region unless OMP_WAIT_POLICY=PASSIVE. Between requests, or when other processes want
// the cores, those spinning threads burn CPU that the thread doing real work needs. Measured on the
// 2-core development VM under load (load average 8-12, ResNet-50 batch 1, 2 threads, `inferd
// bench`, medians of 10 runs, three alternating rounds):
//
//   OMP_WAIT_POLICY unset (libgomp default spinning)   1396-2857 ms, 600-1340 ms CPU per run
//   GOMP_SPINCOUNT=10000 (bounded spin)                  210-479 ms, ~200 ms CPU per run
//   OMP_WAIT_POLICY=PASSIVE                              202-290 ms, ~100 ms CPU per run
//
// On the same VM when idle (load average < 1, `inferd bench --batch 1 --threads 2`, medians of
// 50-200 runs), PASSIVE pays a futex wake-up at every parallel region:
//
//                        PASSIVE     GOMP_SPINCOUNT=10000   ACTIVE (unbounded spin)
//   DLRM                 0.212 ms    0.038 ms               0.039 ms
//   MobileNetV2          6.99 ms     4.57 ms                4.71 ms
//   ResNet-50            44.1 ms     41.3 ms                -
//
// A bounded spin of 10000 iterations (a few microseconds) keeps back-to-back regions of one run
// hot and still puts threads to sleep right after a request, so it is inferd's default: close to
// PASSIVE under load and to ACTIVE when idle. libgomp reads these variables once, when it is
// loaded, before main() runs; setting them in main() is too late, so main() re-executes the binary
// with GOMP_SPINCOUNT set. A user who sets OMP_WAIT_POLICY or GOMP_SPINCOUNT explicitly keeps
// their choice (`bench/serving/run_bench.py --omp-wait-policy passive` sets PASSIVE; its default
// keeps this policy, under which DLRM dynamic batching measures 5.27x against 3.30x with PASSIVE,
// docs/serving.md).
#pragma once

namespace inferd::tools {

// If neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set: sets GOMP_SPINCOUNT=10000 and re-execs
// /proc/self/exe with `argv`. Returns only when nothing needed doing or the exec failed (then the
// process continues with libgomp's defaults).
void EnsureBoundedOpenMpSpin(char** argv);

}  // namespace inferd::tools
