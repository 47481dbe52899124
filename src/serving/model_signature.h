// What one loaded model version accepts and produces: its input and output specs, built once at
// load from the effective (auto-completed) config and the session's signature, and the validation
// of a request against them. Immutable after load; shared by the version's instances.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/data_type.h"
#include "common/status.h"
#include "common/tensor.h"
#include "graph/graph.h"
#include "model_config.pb.h"
#include "serving/inference.h"

namespace inferd::serving {

struct InputSpec {
  std::string name;
  DataType dtype;
  Shape dims;  // config dims, without the batch dim
  bool ragged = false;
  std::optional<Shape> reshape;
  std::vector<std::string> params;  // the model's symbolic dim names (with the batch dim)
  // A sequence control or implicit-state input: fed by the sequence batcher, never by a client.
  bool internal = false;
};

struct OutputSpec {
  std::string name;
  DataType dtype;
  Shape dims;               // config dims (what the response carries), without the batch dim
  std::optional<Shape> reshape;  // the model's shape when the config has `reshape`
  size_t model_index = 0;  // position in the session's outputs
  // Per output dim: the (input, dim) it follows under ragged batching, or (-1, -1).
  std::vector<std::pair<int, int>> follows;
  // An implicit-state output: always computed, taken by the sequence batcher, never returned.
  bool internal = false;
};

struct ModelSignature {
  std::string name;
  int64_t version = 0;
  int max_batch_size = 0;  // 0: no batching (no batch dim)
  double pad_value = 0;    // ragged inputs are padded with it
  std::vector<InputSpec> inputs;
  std::vector<OutputSpec> outputs;

  bool batching() const { return max_batch_size > 0; }
};

// The signature of a validated, completed `config` (with sequence_batching, its control and
// state inputs and state outputs are appended as `internal` specs) for a session with `model_inputs` and
// `model_outputs`. INVALID_ARGUMENT for a config data type with no tensor type.
StatusOr<ModelSignature> BuildSignature(const std::string& name, int64_t version,
                                        const inference::ModelConfig& config,
                                        const std::vector<ValueInfo>& model_inputs,
                                        const std::vector<ValueInfo>& model_outputs);

// The request's batch rows (1 without batching), or INVALID_ARGUMENT naming what is wrong:
// unknown, missing or duplicate inputs, dtype, rank or fixed dims, a batch outside
// [1, max_batch_size] or differing between inputs, unknown or repeated requested outputs.
StatusOr<int64_t> ValidateRequest(const ModelSignature& signature, const InferenceRequest& request);

}  // namespace inferd::serving
