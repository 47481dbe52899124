// What one loaded model version accepts and produces: its input and output specs, built once at
// load from the effective (auto-completed) config and the session's signature, and the validation
// of a request against them. Immutable after load; shared by the version's instances.
#pragma once

#include <cstdint>
#include <filesystem>
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
  std::vector<std::string> labels;  // label_filename's lines (classification), may be empty
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

// Reads each output's label_filename (relative to `model_dir`; one label per line) into its
// spec. INVALID_ARGUMENT naming the output when a file cannot be read.
Status LoadLabels(const std::filesystem::path& model_dir, const inference::ModelConfig& config,
                  ModelSignature* signature);

// The classification results of one task's output `t` ([rows, ...] with batching, else any
// shape): for each row, the `k` largest elements as "score:index[:label]" (score as
// std::to_string prints it, as Triton), best first; ties by the lower index. INVALID_ARGUMENT for
// k < 1 or a non-numeric output.
StatusOr<ClassifiedOutput> Classify(const OutputSpec& spec, const Tensor& t, bool batching,
                                    int64_t k);

// The request's batch rows (1 without batching), or INVALID_ARGUMENT naming what is wrong:
// unknown, missing or duplicate inputs, dtype, rank or fixed dims, a batch outside
// [1, max_batch_size] or differing between inputs, unknown or repeated requested outputs.
StatusOr<int64_t> ValidateRequest(const ModelSignature& signature, const InferenceRequest& request);

}  // namespace inferd::serving
