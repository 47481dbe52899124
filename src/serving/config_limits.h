// Upper bounds on the numeric fields of a model config (config.pbtxt or the repository API's
// `config` load parameter), checked by ValidateConfigStandalone before anything is sized by them.
// Triton's schema types these fields int32/int64/uint64, so without bounds a typo or a hostile
// config (max_batch_size 1000000000, dims [100000000000], instance_group count 2147483647, a
// max_queue_delay of centuries, a warmup count of 4e9) makes a load allocate without end,
// overflow a sum or never finish. Each error names the field, the value and its bound:
//   "max_batch_size 1000000000 exceeds the limit 65536"
//
// The bounds are fixed (documented in docs/serving.md, "Limits (serving)"); sizes that depend on
// the machine (warmup bytes, load time) are ModelManagerOptions instead.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "model_config.pb.h"

namespace inferd::serving {

struct ConfigBounds {
  static constexpr int64_t kMaxBatchSize = 65536;
  static constexpr int kMaxRank = 32;                         // dims of a tensor
  static constexpr int64_t kMaxDim = 2147483647;              // one dim (2^31 - 1)
  static constexpr int64_t kMaxElements = int64_t{1} << 40;   // product of a tensor's fixed dims
  static constexpr int kMaxInstances = 256;                   // per group and in all
  static constexpr int kMaxThreadsPerInstance = 1024;
  static constexpr uint64_t kMaxQueueDelayUs = 60'000'000;    // 60 s
  static constexpr uint64_t kMaxTimeoutUs = 86'400'000'000;   // 24 h
  static constexpr uint64_t kMaxSequenceIdleUs = 86'400'000'000;  // 24 h
  static constexpr uint64_t kMaxQueueSize = 10'000'000;
  static constexpr uint64_t kMaxCandidateSequences = 1 << 20;
  static constexpr uint32_t kMaxWarmupCount = 1000;
};

// INVALID_ARGUMENT naming the first numeric field over its bound (ConfigBounds), or OK.
Status CheckConfigBounds(const inference::ModelConfig& config);

}  // namespace inferd::serving
