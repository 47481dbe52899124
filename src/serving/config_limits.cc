#include "serving/config_limits.h"

#include <string>
#include <string_view>

#include <fmt/format.h>

namespace inferd::serving {
namespace {

using B = ConfigBounds;

template <class T, class L>
Status AtMost(std::string_view field, T value, L limit) {
  if (value <= static_cast<T>(limit)) return Status::Ok();
  return InvalidArgument("{} {} exceeds the limit {}", field, value, limit);
}

// Rank, each dim in [-1, kMaxDim] and the product of the fixed dims (checked without overflow:
// every factor is at most 2^31 and the product stays at most 2^40 before each step).
Status CheckDims(const std::string& field, const google::protobuf::RepeatedField<int64_t>& dims) {
  if (dims.size() > B::kMaxRank) {
    return InvalidArgument("{} has {} dims, over the limit {}", field, dims.size(), B::kMaxRank);
  }
  int64_t elements = 1;
  for (int64_t d : dims) {
    if (d < -1) return InvalidArgument("{} dim {} must be >= -1", field, d);
    RETURN_IF_ERROR(AtMost(field + " dim", d, B::kMaxDim));
    if (d > 0) elements *= d;
    if (elements > B::kMaxElements) {
      return InvalidArgument("{} holds more than {} elements (the limit)", field, B::kMaxElements);
    }
  }
  return Status::Ok();
}

Status CheckTensorBounds(const inference::ModelConfig& c) {
  for (const auto& in : c.input()) {
    const std::string f = fmt::format("input '{}'", in.name());
    RETURN_IF_ERROR(CheckDims(f + " dims", in.dims()));
    if (in.has_reshape()) RETURN_IF_ERROR(CheckDims(f + " reshape", in.reshape().shape()));
  }
  for (const auto& out : c.output()) {
    const std::string f = fmt::format("output '{}'", out.name());
    RETURN_IF_ERROR(CheckDims(f + " dims", out.dims()));
    if (out.has_reshape()) RETURN_IF_ERROR(CheckDims(f + " reshape", out.reshape().shape()));
  }
  for (const auto& w : c.model_warmup()) {
    const std::string f = fmt::format("model_warmup '{}'", w.name());
    RETURN_IF_ERROR(AtMost(f + " count", w.count(), B::kMaxWarmupCount));
    RETURN_IF_ERROR(AtMost(f + " batch_size", w.batch_size(), B::kMaxBatchSize));
    for (const auto& [name, in] : w.inputs()) {
      RETURN_IF_ERROR(CheckDims(fmt::format("{} input '{}' dims", f, name), in.dims()));
    }
  }
  return Status::Ok();
}

Status CheckQueuePolicyBounds(const std::string& field, const inference::ModelQueuePolicy& p) {
  RETURN_IF_ERROR(
      AtMost(field + ".default_timeout_microseconds", p.default_timeout_microseconds(),
             B::kMaxTimeoutUs));
  return AtMost(field + ".max_queue_size", p.max_queue_size(), B::kMaxQueueSize);
}

Status CheckSchedulingBounds(const inference::ModelConfig& c) {
  if (c.has_dynamic_batching()) {
    const auto& db = c.dynamic_batching();
    RETURN_IF_ERROR(AtMost("dynamic_batching.max_queue_delay_microseconds",
                           db.max_queue_delay_microseconds(), B::kMaxQueueDelayUs));
    RETURN_IF_ERROR(CheckQueuePolicyBounds("dynamic_batching.default_queue_policy",
                                           db.default_queue_policy()));
    for (const auto& [level, policy] : db.priority_queue_policy()) {
      RETURN_IF_ERROR(CheckQueuePolicyBounds(
          fmt::format("dynamic_batching.priority_queue_policy[{}]", level), policy));
    }
  }
  if (c.has_sequence_batching()) {
    const auto& sb = c.sequence_batching();
    RETURN_IF_ERROR(AtMost("sequence_batching.max_sequence_idle_microseconds",
                           sb.max_sequence_idle_microseconds(), B::kMaxSequenceIdleUs));
    RETURN_IF_ERROR(AtMost("sequence_batching.direct.max_queue_delay_microseconds",
                           sb.direct().max_queue_delay_microseconds(), B::kMaxQueueDelayUs));
    RETURN_IF_ERROR(AtMost("sequence_batching.oldest.max_queue_delay_microseconds",
                           sb.oldest().max_queue_delay_microseconds(), B::kMaxQueueDelayUs));
    RETURN_IF_ERROR(AtMost("sequence_batching.oldest.max_candidate_sequences",
                           sb.oldest().max_candidate_sequences(), B::kMaxCandidateSequences));
    for (const auto& st : sb.state()) {
      RETURN_IF_ERROR(
          CheckDims(fmt::format("sequence_batching state '{}' dims", st.input_name()), st.dims()));
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckConfigBounds(const inference::ModelConfig& c) {
  RETURN_IF_ERROR(AtMost("max_batch_size", c.max_batch_size(), B::kMaxBatchSize));
  RETURN_IF_ERROR(AtMost("inferd.threads_per_instance", c.inferd().threads_per_instance(),
                         B::kMaxThreadsPerInstance));
  int64_t instances = 0;  // int64: the sum of int32 counts cannot overflow it
  for (const auto& g : c.instance_group()) {
    RETURN_IF_ERROR(AtMost(fmt::format("instance_group '{}' count", g.name()), g.count(),
                           B::kMaxInstances));
    instances += g.count();
  }
  RETURN_IF_ERROR(AtMost("instance_group total count", instances, B::kMaxInstances));
  RETURN_IF_ERROR(CheckTensorBounds(c));
  return CheckSchedulingBounds(c);
}

}  // namespace inferd::serving
