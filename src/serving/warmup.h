// Warmup: requests a model version runs before it serves, so the kernels' per-shape state, the
// arenas and the worker threads exist before the first real request.
//
// The config's model_warmup entries (zero, random or file data, at their batch size), or by
// default zeros at batch 1 and at max_batch_size (variable dims as 1). A config warmup that fails
// fails the load; the default one only logs (zeros may not be valid input for every model).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>

#include "common/status.h"
#include "common/tensor.h"
#include "model_config.pb.h"
#include "session/session.h"
#include "serving/inference.h"
#include "serving/model_signature.h"

namespace inferd::serving {

// A zero-filled tensor for `spec` with `batch` rows (no batch dim when the model does not batch);
// variable dims are 1. String (BYTES) inputs hold "0". The spec's reshape is not applied.
Tensor ZeroInput(const ModelSignature& signature, const InputSpec& spec, int64_t batch);

// A request of zeros with `batch` rows for every input: what each scheduler worker runs once.
std::unique_ptr<InferenceRequest> ZeroRequest(const ModelSignature& signature, int64_t batch = 1);

// Bytes of a tensor of `dtype` and `shape` (strings counted as 32 bytes each), computed without
// overflow: UINT64_MAX when it does not fit. Negative dims count as 1.
uint64_t TensorBytes(DataType dtype, const Shape& shape);
// Bytes of ZeroRequest(signature, batch).
uint64_t ZeroRequestBytes(const ModelSignature& signature, int64_t batch);

struct WarmupLimits {
  // Most bytes of input one warmup sample may hold, checked before anything is allocated: a
  // config warmup over it fails the load naming it; a default warmup step over it is skipped.
  uint64_t max_bytes = uint64_t{1} << 30;
  // Set when the load is abandoned: warmup stops before its next run (DEADLINE_EXCEEDED).
  const std::atomic<bool>* abandoned = nullptr;
};

// Runs the warmup plans on `session` from `instances` threads at once, as they will serve.
// `model_dir` holds the warmup/ folder that input_data_file names are relative to (each file must
// lie inside it: repository.h's ResolveModelFile).
Status WarmupSession(const Session& session, const inference::ModelConfig& config,
                     const ModelSignature& signature, const std::filesystem::path& model_dir,
                     int instances, const WarmupLimits& limits = {});

}  // namespace inferd::serving
