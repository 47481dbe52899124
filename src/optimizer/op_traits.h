// Facts about standard ONNX ops that several passes need.
#pragma once

#include <string>

namespace inferd {

// Ops whose output is random (RandomNormal, Bernoulli, ...): never folded or deduplicated.
bool IsNondeterministicOp(const std::string& op_type);

}  // namespace inferd
