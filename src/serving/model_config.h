// Model configuration: parsing config.pbtxt (Triton's text format, our proto/model_config.proto),
// auto-completing it from the ONNX model, validating it, and mapping it to scheduler options.
//
// The schema is all of Triton's model_config.proto, so a field unknown to it is a typo: with
// `strict` (the server's default, as Triton) it is an error naming the field (line:column);
// otherwise it is skipped with a warning (protobuf cannot skip an unknown field written in list
// form, `f [ {...} ]`, so that stays an error).
//
// Features: a field inferd does not implement is an error naming the field when it changes what
// the model computes or how requests are answered (CheckImplemented: Python and other backends,
// GPU instances, ensembles, decoupled models, custom op libraries, shape tensors, batch
// inputs/outputs, optional inputs, repository agents, sequence_batching's string CORRID and
// initial state files),
// and a warning when it is only a performance hint with no effect on results on a CPU server
// (IgnoredConfigFields: CUDA graphs, pinned memory, accelerators, rate limiter, response cache,
// metric tags, backend parameters, ...). Nothing is dropped silently.
//
// Auto-completion (CompleteConfig), for a config that is missing or partial:
//   - name: the model folder's name (a different non-empty name is an error);
//   - platform: "onnxruntime_onnx" (accepted: "", "onnxruntime_onnx"; backend "", "onnxruntime",
//     "onnx", "inferd");
//   - max_batch_size: if the config lists no inputs and no outputs and leaves it 0, it becomes
//     `default_max_batch_size` when every model input and output has a non-fixed first dim
//     (symbolic or unknown), else stays 0 (no batching);
//   - input/output: when none are listed, every model input/output with its data type and dims
//     (without the batch dim when max_batch_size > 0; symbolic dims become -1);
//   - instance_group: one KIND_CPU group with count 0 (= the server default) when absent.
// `reshape` on an input is the shape the model receives (the request carries `dims`); on an
// output it is the shape the model produces (the response carries `dims`); both have the same
// element count (plus the batch dim when max_batch_size > 0).
// Validation checks listed tensors against the model (names exist, data types equal, ranks and
// fixed dims compatible), preferred batch sizes, priority levels, instance kinds (CPU only) and
// precision.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "batching/batch_scheduler.h"
#include "common/data_type.h"
#include "common/status.h"
#include "graph/graph.h"
#include "model_config.pb.h"

namespace inferd::serving {

// Parses config.pbtxt text. Errors name the line and column.
StatusOr<inference::ModelConfig> ParseModelConfig(const std::string& text, bool strict,
                                                  std::vector<std::string>* warnings);

// Fills in what `config` leaves out from the model's signature and validates the result against
// it. `inputs` are the inputs the model requires, `outputs` all its outputs.
Status CompleteConfig(const std::string& model_name, const std::vector<ValueInfo>& inputs,
                      const std::vector<ValueInfo>& outputs, int default_max_batch_size,
                      inference::ModelConfig* config);

// Checks what needs no model: name, platform, batching and instance settings, and
// CheckImplemented.
Status ValidateConfigStandalone(const inference::ModelConfig& config);

// INVALID_ARGUMENT naming the first field that asks for a feature inferd does not implement
// (see above), including sequence_batching's unsupported parts (string CORRID, initial state
// files, iterative sequences) and its consistency (one control per control_input, each kind once,
// false/true pairs, fixed state dims).
Status CheckImplemented(const inference::ModelConfig& config);

// The tensor type of a sequence control: CORRID's data_type, else the type of the false/true
// list given (int32, fp32 or bool). INVALID_ARGUMENT when there is none.
StatusOr<DataType> SequenceControlDataType(const inference::ModelSequenceBatching::Control& c);
// The names of the control and state inputs of sequence_batching (fed by the sequence batcher).
std::set<std::string> SequenceInputNames(const inference::ModelConfig& config);

// One line per field set in `config` that inferd accepts but ignores (performance hints without
// effect on results here), naming the field; empty when there is none.
std::vector<std::string> IgnoredConfigFields(const inference::ModelConfig& config);

// The config as Triton's /config JSON: protobuf's JSON mapping with the proto field names, every
// primitive field printed, and every int64/uint64 field as a JSON number (protobuf prints them as
// strings; Triton converts them back, and tritonclient users index dims as numbers). Map keys stay
// strings (JSON keys are strings).
StatusOr<std::string> ModelConfigToJson(const inference::ModelConfig& config);

// A config from Triton's JSON form (the repository API's `config` load parameter): field names as
// in the proto (or their JSON camelCase), enums by name (case-insensitive, as Triton), int64 as
// numbers or strings. INVALID_ARGUMENT for invalid JSON or an unknown field, naming it.
StatusOr<inference::ModelConfig> ModelConfigFromJson(const std::string& json);

// TYPE_* ↔ DataType (TYPE_STRING ↔ kString). TYPE_INVALID is INVALID_ARGUMENT.
StatusOr<DataType> FromConfigDataType(inference::DataType t);
inference::DataType ToConfigDataType(DataType t);  // TYPE_INVALID when there is none

// Scheduler options for a validated config: dynamic batching when the config has a
// dynamic_batching block and max_batch_size > 0, else one request per batch.
batching::BatchSchedulerOptions SchedulerOptionsFromConfig(const inference::ModelConfig& config,
                                                           int num_workers);

// Total instances the config asks for (sum of instance_group counts); 0 when none is given.
int ConfiguredInstanceCount(const inference::ModelConfig& config);

}  // namespace inferd::serving
