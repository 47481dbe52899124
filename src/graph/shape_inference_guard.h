// Guards Debian libonnx 1.12's shape inference against malformed nodes.
//
// Several of onnx's shape-inference functions index vectors and protobuf repeated fields without
// bounds checks, or divide by an attribute: a Conv whose weight has a different rank than its
// data input reads past an empty `dilations` vector (fuzz/corpus/onnx/crash_conv_weight_rank_*),
// a stride of 0 divides by zero, a MaxRoiPool on a 3-D input reads `pooled_shape[1]` of a
// one-element vector. A model file can therefore take the process down at load.
//
// InstallShapeInferenceGuards() wraps the inference function of each such operator schema (all
// versions) in onnx's registry with a check that runs on the node's real inferred input types and
// attributes first:
//   - the node is invalid whatever its shapes (a stride of 0, a kernel of rank 2 on a 1-D image):
//     throws ShapeGuardError, which onnx does not catch; ParseOnnxModel turns it into an
//     InvalidArgument naming the operator and the fault;
//   - onnx's function cannot run safely on what is known (an input it dereferences has no shape):
//     the original function is skipped and the outputs stay without shape (shape inference only
//     adds information; kernels compute shapes themselves);
//   - otherwise the original function runs.
// The list of operators and what each check covers: shape_inference_guard.cc.
//
// Thread-safety: InstallShapeInferenceGuards() is idempotent and thread-safe (std::call_once); it
// must run before any onnx shape inference in the process, which ParseOnnxModel/LoadOnnxModel
// ensure by calling it first.
#pragma once

#include <stdexcept>
#include <string>

namespace inferd {

// A node that onnx's shape inference must not see. Deliberately not onnx::InferenceError: onnx
// swallows those per node (error_mode 0) and would go on to the next, unguarded, node.
class ShapeGuardError : public std::logic_error {
 public:
  explicit ShapeGuardError(const std::string& what) : std::logic_error(what) {}
};

void InstallShapeInferenceGuards();

}  // namespace inferd
