#include "serving/autoscale_policy.h"

#include <algorithm>
#include <cmath>

#include "serving/config_limits.h"

namespace inferd::serving {
namespace {

Status CheckWindow(const char* field, std::chrono::milliseconds v, bool zero_ok) {
  if (v.count() < 0 || (!zero_ok && v.count() == 0) || v > std::chrono::hours(24)) {
    return InvalidArgument("autoscaling.{} {} ms is outside {} .. 86400000 ms", field, v.count(),
                           zero_ok ? "[0" : "(0");
  }
  return Status::Ok();
}

double Seconds(Clock::TimePoint a, Clock::TimePoint b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

const char* ScaleDirectionName(ScaleDirection direction) {
  switch (direction) {
    case ScaleDirection::kUp:
      return "up";
    case ScaleDirection::kDown:
      return "down";
    case ScaleDirection::kNone:
      return "none";
  }
  return "none";
}

Status ValidateAutoscaleOptions(const AutoscaleOptions& o) {
  if (o.min_instances < 1) {
    return InvalidArgument("autoscaling.min_instances must be >= 1, got {}", o.min_instances);
  }
  if (o.max_instances < o.min_instances) {
    return InvalidArgument("autoscaling.max_instances {} is below min_instances {}",
                           o.max_instances, o.min_instances);
  }
  if (o.max_instances > ConfigBounds::kMaxInstances) {
    return InvalidArgument("autoscaling.max_instances {} exceeds the limit {}", o.max_instances,
                           ConfigBounds::kMaxInstances);
  }
  // Written so that NaN fails every range check.
  if (!(o.scale_up_utilization > 0 && o.scale_up_utilization <= 1)) {
    return InvalidArgument("autoscaling.scale_up_utilization {} is outside (0, 1]",
                           o.scale_up_utilization);
  }
  if (!(o.scale_down_qps >= 0 && std::isfinite(o.scale_down_qps))) {
    return InvalidArgument("autoscaling.scale_down_qps {} must be a finite number >= 0",
                           o.scale_down_qps);
  }
  if (!(o.hysteresis >= 0 && o.hysteresis < o.scale_up_utilization)) {
    return InvalidArgument("autoscaling.hysteresis {} is outside [0, scale_up_utilization {})",
                           o.hysteresis, o.scale_up_utilization);
  }
  RETURN_IF_ERROR(CheckWindow("scale_up_window_ms", o.scale_up_window, false));
  RETURN_IF_ERROR(CheckWindow("scale_down_window_ms", o.scale_down_window, false));
  RETURN_IF_ERROR(CheckWindow("cooldown_ms", o.cooldown, true));
  RETURN_IF_ERROR(CheckWindow("sample_period_ms", o.sample_period, false));
  if (o.sample_period > std::min(o.scale_up_window, o.scale_down_window)) {
    return InvalidArgument("autoscaling.sample_period_ms {} is longer than a window ({} / {} ms)",
                           o.sample_period.count(), o.scale_up_window.count(),
                           o.scale_down_window.count());
  }
  return Status::Ok();
}

StatusOr<AutoscalePolicy> AutoscalePolicy::Create(const AutoscaleOptions& options,
                                                  int initial_instances) {
  RETURN_IF_ERROR(ValidateAutoscaleOptions(options));
  if (initial_instances < options.min_instances || initial_instances > options.max_instances) {
    return InvalidArgument("the starting instance count {} is outside autoscaling's [{}, {}]",
                           initial_instances, options.min_instances, options.max_instances);
  }
  return AutoscalePolicy(options, initial_instances);
}

int AutoscalePolicy::UpTarget(double utilization) const {
  const double want = std::ceil(instances_ * utilization / options_.scale_up_utilization);
  const int target =
      want >= options_.max_instances ? options_.max_instances : static_cast<int>(want);
  return std::clamp(std::max(target, instances_ + 1), options_.min_instances,
                    options_.max_instances);
}

bool AutoscalePolicy::DownAllowed(double utilization, double qps) const {
  if (instances_ <= options_.min_instances || !(qps < options_.scale_down_qps)) return false;
  const double after = utilization * instances_ / (instances_ - 1);
  return after < options_.scale_up_utilization - options_.hysteresis;
}

ScaleDecision AutoscalePolicy::Observe(const LoadSample& s) {
  ScaleDecision d;
  d.instances = instances_;
  if (!last_) {
    last_ = s;
    return d;
  }
  if (s.time <= last_->time) return d;
  const LoadSample prev = *last_;
  last_ = s;
  const double dt = Seconds(prev.time, s.time);
  // Counters never go backwards; if they do (a reset), the period counts as idle.
  const uint64_t busy = s.busy_ns >= prev.busy_ns ? s.busy_ns - prev.busy_ns : 0;
  const uint64_t done = s.requests >= prev.requests ? s.requests - prev.requests : 0;
  d.utilization = std::clamp(static_cast<double>(busy) / 1e9 / (dt * instances_), 0.0, 1.0);
  d.qps = static_cast<double>(done) / dt;

  const bool up =
      d.utilization > options_.scale_up_utilization && instances_ < options_.max_instances;
  const bool down = !up && DownAllowed(d.utilization, d.qps);
  if (!up) up_since_.reset();
  if (!down) down_since_.reset();
  if (up && !up_since_) up_since_ = prev.time;
  if (down && !down_since_) down_since_ = prev.time;
  const bool cooled = !last_event_ || s.time - *last_event_ >= options_.cooldown;
  if (!cooled) return d;
  if (up && s.time - *up_since_ >= options_.scale_up_window) {
    d.instances = UpTarget(d.utilization);
    d.direction = ScaleDirection::kUp;
  } else if (down && s.time - *down_since_ >= options_.scale_down_window) {
    d.instances = instances_ - 1;
    d.direction = ScaleDirection::kDown;
  } else {
    return d;
  }
  instances_ = d.instances;
  last_event_ = s.time;
  up_since_.reset();
  down_since_.reset();
  return d;
}

}  // namespace inferd::serving
