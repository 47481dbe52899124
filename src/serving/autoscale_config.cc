#include "serving/autoscale_config.h"

#include <utility>

#include "serving/model_config.h"

namespace inferd::serving {

using std::chrono::milliseconds;

StatusOr<std::optional<AutoscaleOptions>> AutoscaleOptionsFromConfig(
    const inference::ModelConfig& config) {
  if (!config.inferd().has_autoscaling()) return std::optional<AutoscaleOptions>();
  const auto& a = config.inferd().autoscaling();
  if (config.platform() == "ensemble") {
    return InvalidArgument(
        "inferd.autoscaling: an ensemble has no instances of its own (set it "
        "on the composing models)");
  }
  if (config.has_sequence_batching()) {
    return InvalidArgument(
        "inferd.autoscaling is not supported with sequence_batching (its "
        "sequence slots are sized by the instance count)");
  }
  AutoscaleOptions o;
  if (a.has_min_instances()) o.min_instances = a.min_instances();
  o.max_instances = a.max_instances();
  if (a.has_scale_up_utilization()) o.scale_up_utilization = a.scale_up_utilization();
  if (a.has_scale_down_qps()) o.scale_down_qps = a.scale_down_qps();
  if (a.has_hysteresis()) o.hysteresis = a.hysteresis();
  // Range-check the int64 milliseconds before converting, so a huge value cannot overflow.
  const std::pair<const char*, std::pair<bool, int64_t>> windows[] = {
      {"scale_up_window_ms", {a.has_scale_up_window_ms(), a.scale_up_window_ms()}},
      {"scale_down_window_ms", {a.has_scale_down_window_ms(), a.scale_down_window_ms()}},
      {"cooldown_ms", {a.has_cooldown_ms(), a.cooldown_ms()}},
      {"sample_period_ms", {a.has_sample_period_ms(), a.sample_period_ms()}},
  };
  for (const auto& [field, value] : windows) {
    if (value.first && (value.second < 0 || value.second > 86'400'000)) {
      return InvalidArgument("inferd.autoscaling.{} {} is outside [0, 86400000]", field,
                             value.second);
    }
  }
  if (a.has_scale_up_window_ms()) o.scale_up_window = milliseconds(a.scale_up_window_ms());
  if (a.has_scale_down_window_ms()) o.scale_down_window = milliseconds(a.scale_down_window_ms());
  if (a.has_cooldown_ms()) o.cooldown = milliseconds(a.cooldown_ms());
  if (a.has_sample_period_ms()) o.sample_period = milliseconds(a.sample_period_ms());
  if (Status s = ValidateAutoscaleOptions(o); !s.ok()) {
    return InvalidArgument("inferd.{}", s.message());
  }
  const int start = AutoscaleStartCount(config, o);
  if (start < o.min_instances || start > o.max_instances) {
    return InvalidArgument(
        "instance_group count {} is outside inferd.autoscaling's "
        "[min_instances {}, max_instances {}]",
        start, o.min_instances, o.max_instances);
  }
  return std::optional<AutoscaleOptions>(o);
}

int AutoscaleStartCount(const inference::ModelConfig& config, const AutoscaleOptions& options) {
  const int configured = ConfiguredInstanceCount(config);
  return configured > 0 ? configured : options.min_instances;
}

}  // namespace inferd::serving
