// Warmup: requests a model version runs before it serves, so the kernels' per-shape state, the
// arenas and the worker threads exist before the first real request.
//
// The config's model_warmup entries (zero, random or file data, at their batch size), or by
// default zeros at batch 1 and at max_batch_size (variable dims as 1). A config warmup that fails
// fails the load; the default one only logs (zeros may not be valid input for every model).
#pragma once

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

// A batch-1 request of zeros for every input: what each scheduler worker runs once.
std::unique_ptr<InferenceRequest> ZeroRequest(const ModelSignature& signature);

// Runs the warmup plans on `session` from `instances` threads at once, as they will serve.
// `model_dir` holds the warmup/ folder that input_data_file names are relative to.
Status WarmupSession(const Session& session, const inference::ModelConfig& config,
                     const ModelSignature& signature, const std::filesystem::path& model_dir,
                     int instances);

}  // namespace inferd::serving
