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
// so inferd defaults to PASSIVE. libgomp reads the variable once, when it is loaded, before main()
// runs; setting it in main() is too late, so main() re-executes the binary with it set. A user who
// sets OMP_WAIT_POLICY or GOMP_SPINCOUNT explicitly (e.g. ACTIVE on a dedicated, idle machine,
// where spinning saves the futex wake-up at each barrier) keeps their choice.
#pragma once

namespace inferd::tools {

// If neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set: sets OMP_WAIT_POLICY=PASSIVE and re-execs
// /proc/self/exe with `argv`. Returns only when nothing needed doing or the exec failed (then the
// process continues with libgomp's defaults).
void EnsurePassiveOpenMpWait(char** argv);

}  // namespace inferd::tools
