// Model configuration: parsing config.pbtxt (Triton's text format, our proto/model_config.proto),
// auto-completing it from the ONNX model, validating it, and mapping it to scheduler options.
//
// Unknown fields: a full Triton config may carry fields inferd does not model (sequence batching,
// TensorRT optimisation, ...). With `strict` they are an error naming the field (line:column);
// otherwise they are skipped and reported in `warnings`, so a Triton repository loads unchanged.
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
// Validation checks listed tensors against the model (names exist, data types equal, ranks and
// fixed dims compatible), preferred batch sizes, priority levels, instance kinds (CPU only) and
// precision.
#pragma once

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

// Checks what needs no model: name, platform, batching and instance settings.
Status ValidateConfigStandalone(const inference::ModelConfig& config);

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
