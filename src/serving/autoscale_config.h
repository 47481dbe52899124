// The config.pbtxt block that turns in-node autoscaling on, `inferd { autoscaling { ... } }`
// (proto/model_config.proto, InferdOptions.Autoscaling), read into AutoscaleOptions. Pure, apart
// from the Autoscaler thread (autoscaler.h), so the config fuzzer links it without the engine.
#pragma once

#include <optional>

#include "common/status.h"
#include "model_config.pb.h"
#include "serving/autoscale_policy.h"

namespace inferd::serving {

// The config's autoscaling options with defaults filled in, or nullopt when the config has no
// `inferd { autoscaling { ... } }`. INVALID_ARGUMENT (naming the field) for bad values — min >
// max, thresholds or windows out of range, a starting instance_group count outside [min, max] —
// and for configs it cannot apply to (ensembles, sequence_batching), so that model's load fails.
StatusOr<std::optional<AutoscaleOptions>> AutoscaleOptionsFromConfig(
    const inference::ModelConfig& config);

// The starting instance count of an autoscaled config: instance_group's total count, or
// min_instances when none is given.
int AutoscaleStartCount(const inference::ModelConfig& config, const AutoscaleOptions& options);

}  // namespace inferd::serving
