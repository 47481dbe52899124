// The per-shape plan cache of the oneDNN kernels: a plan (primitive and memory descriptors) is
// built once per key (usually the input shape) and thread count (dnnl_util.h, PrimitiveThreads:
// a primitive runs on the threads it was created for) and shared by every later run with both.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "common/status.h"
#include "kernels/cpu/onednn/dnnl_util.h"

namespace inferd::cpu {

// Thread safe. The build runs outside the lock, so a slow primitive creation blocks no run of
// another shape; two threads missing the same key at once both build, and the plan inserted first
// is the one both get (the other is dropped).
template <typename Key, typename Plan>
class PlanCache {
 public:
  // The cached plan for `key`, building it with `build` (returning
  // StatusOr<std::shared_ptr<const Plan>>) on a miss. A failed build caches nothing.
  template <typename Build>
  StatusOr<std::shared_ptr<const Plan>> Get(const Key& key, Build&& build) const {
    std::pair<int, Key> full(PrimitiveThreads(), key);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cache_.find(full);
      if (it != cache_.end()) return it->second;
    }
    ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, build());
    std::lock_guard<std::mutex> lock(mu_);
    return cache_.emplace(std::move(full), std::move(plan)).first->second;
  }

 private:
  mutable std::mutex mu_;
  mutable std::map<std::pair<int, Key>, std::shared_ptr<const Plan>> cache_;  // guarded by mu_
};

}  // namespace inferd::cpu
