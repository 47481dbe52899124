#include "tools/thread_policy.h"

#include <unistd.h>

#include <cstdlib>

namespace inferd::tools {

void EnsureBoundedOpenMpSpin(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (setenv("GOMP_SPINCOUNT", "10000", 1) != 0) return;
  execv("/proc/self/exe", argv);
  // exec failed (no /proc): carry on with libgomp's defaults; the variable set above stops any
  // child process from retrying.
}

}  // namespace inferd::tools
