#include "serving/model_config.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <set>

namespace inferd::serving {
namespace {

using inference::ModelConfig;

// Collects parser errors (and, for lenient parsing, warnings) as text.
class ErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    errors.push_back(fmt::format("line {}:{}: {}", line + 1, column + 1, message));
  }
  void AddWarning(int line, int column, const std::string& message) override {
    warnings.push_back(fmt::format("line {}:{}: {}", line + 1, column + 1, message));
  }
  std::vector<std::string> errors, warnings;
};

std::string DimsToString(const google::protobuf::RepeatedField<int64_t>& dims) {
  return ShapeToString(Shape(dims.begin(), dims.end()));
}

bool FirstDimFixed(const ValueInfo& v) {
  return v.shape.has_value() && !v.shape->empty() && (*v.shape)[0].known();
}

// Fills `dims` from a model value (dropping the batch dim when batching).
Status DimsFromModel(const ValueInfo& v, bool batching, const char* kind,
                     google::protobuf::RepeatedField<int64_t>* dims) {
  if (!v.shape.has_value()) {
    return InvalidArgument("{} '{}' has an unknown rank in the model; list its dims in "
                           "config.pbtxt",
                           kind, v.name);
  }
  size_t start = batching ? 1 : 0;
  if (batching && v.shape->empty()) {
    return InvalidArgument("max_batch_size > 0 but {} '{}' is a scalar in the model", kind, v.name);
  }
  for (size_t i = start; i < v.shape->size(); ++i) {
    dims->Add((*v.shape)[i].known() ? (*v.shape)[i].value : -1);
  }
  return Status::Ok();
}

// Config dims (plus the batch dim) against the model's declared shape.
Status CheckDims(const ValueInfo& v, const google::protobuf::RepeatedField<int64_t>& dims,
                 int max_batch_size, const char* kind) {
  if (!v.shape.has_value()) return Status::Ok();
  const bool batching = max_batch_size > 0;
  const size_t rank = dims.size() + (batching ? 1 : 0);
  if (rank != v.shape->size()) {
    return InvalidArgument("{} '{}': config dims {}{} have rank {} but the model's shape {} has "
                           "rank {}",
                           kind, v.name, DimsToString(dims),
                           batching ? " (plus the batch dim)" : "", rank, v.ShapeString(),
                           v.shape->size());
  }
  if (batching) {
    const Dim& b = (*v.shape)[0];
    if (b.known() && !(b.value == 1 && max_batch_size == 1)) {
      return InvalidArgument("{} '{}': max_batch_size is {} but the model fixes the first dim to "
                             "{}; set max_batch_size: 0",
                             kind, v.name, max_batch_size, b.value);
    }
  }
  for (int i = 0; i < dims.size(); ++i) {
    const Dim& d = (*v.shape)[i + (batching ? 1 : 0)];
    if (dims[i] < -1 || dims[i] == 0) {
      return InvalidArgument("{} '{}': dim {} must be positive or -1", kind, v.name, dims[i]);
    }
    if (d.known() && dims[i] != -1 && dims[i] != d.value) {
      return InvalidArgument("{} '{}': config dims {} do not match the model's shape {}", kind,
                             v.name, DimsToString(dims), v.ShapeString());
    }
  }
  return Status::Ok();
}

Status CheckType(const ValueInfo& v, inference::DataType config_type, const char* kind) {
  ASSIGN_OR_RETURN(DataType t, FromConfigDataType(config_type));
  if (v.dtype != DataType::kUndefined && v.dtype != t) {
    return InvalidArgument("{} '{}': config data_type {} but the model has {}", kind, v.name,
                           inference::DataType_Name(config_type), DataTypeName(v.dtype));
  }
  return Status::Ok();
}

Status CheckQueuePolicy(const inference::ModelQueuePolicy& p) {
  if (p.default_timeout_microseconds() > (1ull << 53)) {
    return InvalidArgument("default_timeout_microseconds {} is too large",
                           p.default_timeout_microseconds());
  }
  return Status::Ok();
}

batching::QueuePolicy ToQueuePolicy(const inference::ModelQueuePolicy& p) {
  batching::QueuePolicy q;
  q.timeout_action = p.timeout_action() == inference::ModelQueuePolicy::DELAY
                         ? batching::TimeoutAction::kDelay
                         : batching::TimeoutAction::kReject;
  q.default_timeout = std::chrono::microseconds(p.default_timeout_microseconds());
  q.allow_timeout_override = p.allow_timeout_override();
  q.max_queue_size = p.max_queue_size();
  return q;
}

}  // namespace

StatusOr<inference::ModelConfig> ParseModelConfig(const std::string& text, bool strict,
                                                  std::vector<std::string>* warnings) {
  google::protobuf::TextFormat::Parser parser;
  ErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  parser.AllowUnknownField(!strict);
  parser.AllowUnknownExtension(!strict);
  ModelConfig config;
  if (!parser.ParseFromString(text, &config)) {
    return InvalidArgument("config.pbtxt: {}",
                           errors.errors.empty() ? "parse error" : errors.errors.front());
  }
  if (warnings != nullptr) {
    for (auto& w : errors.warnings) warnings->push_back("config.pbtxt: " + w);
  }
  return config;
}

StatusOr<DataType> FromConfigDataType(inference::DataType t) {
  switch (t) {
    case inference::TYPE_BOOL: return DataType::kBool;
    case inference::TYPE_UINT8: return DataType::kUInt8;
    case inference::TYPE_UINT16: return DataType::kUInt16;
    case inference::TYPE_UINT32: return DataType::kUInt32;
    case inference::TYPE_UINT64: return DataType::kUInt64;
    case inference::TYPE_INT8: return DataType::kInt8;
    case inference::TYPE_INT16: return DataType::kInt16;
    case inference::TYPE_INT32: return DataType::kInt32;
    case inference::TYPE_INT64: return DataType::kInt64;
    case inference::TYPE_FP16: return DataType::kFloat16;
    case inference::TYPE_FP32: return DataType::kFloat32;
    case inference::TYPE_FP64: return DataType::kFloat64;
    case inference::TYPE_BF16: return DataType::kBFloat16;
    case inference::TYPE_STRING: return DataType::kString;  // KServe BYTES
    default: return InvalidArgument("data_type must be set (TYPE_FP32, TYPE_INT64, ...)");
  }
}

inference::DataType ToConfigDataType(DataType t) {
  for (int i = inference::DataType_MIN; i <= inference::DataType_MAX; ++i) {
    if (!inference::DataType_IsValid(i)) continue;
    auto ct = static_cast<inference::DataType>(i);
    auto r = FromConfigDataType(ct);
    if (r.ok() && *r == t) return ct;
  }
  return inference::TYPE_INVALID;
}

Status ValidateConfigStandalone(const ModelConfig& config) {
  const std::string& platform = config.platform();
  if (!platform.empty() && platform != "onnxruntime_onnx") {
    return InvalidArgument("platform '{}' is not supported (inferd serves ONNX models: use "
                           "'onnxruntime_onnx')",
                           platform);
  }
  static const std::set<std::string> kBackends = {"", "onnxruntime", "onnx", "inferd"};
  if (!kBackends.count(config.backend())) {
    return InvalidArgument("backend '{}' is not supported (use 'onnxruntime')", config.backend());
  }
  if (config.max_batch_size() < 0) {
    return InvalidArgument("max_batch_size must be >= 0, got {}", config.max_batch_size());
  }
  const std::string& precision = config.inferd().precision();
  if (!precision.empty() && precision != "fp32") {
    return InvalidArgument("inferd.precision '{}' is not supported yet (use 'fp32'; quantize the "
                           "model offline with `inferd quantize`)",
                           precision);
  }
  if (config.inferd().threads_per_instance() < 0) {
    return InvalidArgument("inferd.threads_per_instance must be >= 0");
  }
  for (const auto& g : config.instance_group()) {
    if (g.kind() == inference::ModelInstanceGroup::KIND_GPU || g.gpus_size() > 0) {
      return InvalidArgument("instance_group '{}': GPU instances are not supported (use "
                             "KIND_CPU)",
                             g.name());
    }
    if (g.count() < 0) return InvalidArgument("instance_group count must be >= 0");
  }
  if (config.has_dynamic_batching()) {
    const auto& db = config.dynamic_batching();
    for (int p : db.preferred_batch_size()) {
      if (p < 1 || (config.max_batch_size() > 0 && p > config.max_batch_size())) {
        return InvalidArgument("dynamic_batching.preferred_batch_size {} must be in [1, "
                               "max_batch_size {}]",
                               p, config.max_batch_size());
      }
    }
    if (db.max_queue_delay_microseconds() > (1ull << 53)) {
      return InvalidArgument("max_queue_delay_microseconds is too large");
    }
    if (db.priority_levels() > 1000) {
      return InvalidArgument("priority_levels {} is too many (at most 1000)", db.priority_levels());
    }
    const uint64_t levels = std::max<uint64_t>(1, db.priority_levels());
    if (db.default_priority_level() > levels) {
      return InvalidArgument("default_priority_level {} must be in [1, priority_levels {}]",
                             db.default_priority_level(), db.priority_levels());
    }
    if (db.priority_levels() > 0 && db.default_priority_level() == 0) {
      return InvalidArgument("default_priority_level must be set when priority_levels is set");
    }
    RETURN_IF_ERROR(CheckQueuePolicy(db.default_queue_policy()));
    for (const auto& [level, policy] : db.priority_queue_policy()) {
      if (level < 1 || level > levels) {
        return InvalidArgument("priority_queue_policy for level {} outside [1, priority_levels "
                               "{}]",
                               level, db.priority_levels());
      }
      RETURN_IF_ERROR(CheckQueuePolicy(policy));
    }
  }
  if (config.version_policy().has_specific()) {
    for (int64_t v : config.version_policy().specific().versions()) {
      if (v < 1) return InvalidArgument("version_policy.specific version {} must be >= 1", v);
    }
  }
  for (const auto& w : config.model_warmup()) {
    if (w.batch_size() < 1 || (config.max_batch_size() == 0 && w.batch_size() != 1) ||
        (config.max_batch_size() > 0 &&
         w.batch_size() > static_cast<uint32_t>(config.max_batch_size()))) {
      return InvalidArgument("model_warmup '{}': batch_size {} must be in [1, max(1, "
                             "max_batch_size)]",
                             w.name(), w.batch_size());
    }
  }
  return Status::Ok();
}

namespace {

// max_batch_size for a config that names no tensors: `default_max_batch_size` when every model
// input and output has a free first dimension, else 0.
void InferMaxBatchSize(const std::vector<ValueInfo>& inputs, const std::vector<ValueInfo>& outputs,
                       int default_max_batch_size, ModelConfig* config) {
  if (config->input_size() != 0 || config->output_size() != 0 || config->max_batch_size() != 0 ||
      default_max_batch_size <= 0 || inputs.empty()) {
    return;
  }
  for (const auto* list : {&inputs, &outputs}) {
    for (const ValueInfo& v : *list) {
      if (FirstDimFixed(v) || (v.shape.has_value() && v.shape->empty())) return;
    }
  }
  config->set_max_batch_size(default_max_batch_size);
}

Status CheckInputReshape(const ValueInfo& model_input, const inference::ModelInput& in,
                         int max_batch_size) {
  ValueInfo shaped = model_input;
  google::protobuf::RepeatedField<int64_t> rs(in.reshape().shape().begin(),
                                              in.reshape().shape().end());
  RETURN_IF_ERROR(CheckDims(shaped, rs, max_batch_size, "input (reshape)"));
  Shape a(in.dims().begin(), in.dims().end()), b(rs.begin(), rs.end());
  if (std::find(a.begin(), a.end(), -1) == a.end() && std::find(b.begin(), b.end(), -1) == b.end() &&
      NumElements(a) != NumElements(b)) {
    return InvalidArgument("input '{}': reshape {} has a different element count than dims {}",
                           in.name(), ShapeToString(b), ShapeToString(a));
  }
  return Status::Ok();
}

// Fills the inputs from the model when the config lists none, then checks each against it.
Status CompleteInputs(const std::vector<ValueInfo>& inputs, ModelConfig* config) {
  const bool batching = config->max_batch_size() > 0;
  if (config->input_size() == 0) {
    for (const ValueInfo& v : inputs) {
      auto* in = config->add_input();
      in->set_name(v.name);
      in->set_data_type(ToConfigDataType(v.dtype));
      RETURN_IF_ERROR(DimsFromModel(v, batching, "input", in->mutable_dims()));
    }
  }
  std::set<std::string> seen;
  for (const auto& in : config->input()) {
    if (!seen.insert(in.name()).second) {
      return InvalidArgument("input '{}' is listed twice", in.name());
    }
    auto it = std::find_if(inputs.begin(), inputs.end(),
                           [&](const ValueInfo& v) { return v.name == in.name(); });
    if (it == inputs.end()) {
      return InvalidArgument("input '{}' is not an input of the model", in.name());
    }
    RETURN_IF_ERROR(CheckType(*it, in.data_type(), "input"));
    if (in.has_reshape()) {
      RETURN_IF_ERROR(CheckInputReshape(*it, in, config->max_batch_size()));
    } else {
      RETURN_IF_ERROR(CheckDims(*it, in.dims(), config->max_batch_size(), "input"));
    }
  }
  for (const ValueInfo& v : inputs) {
    if (!seen.count(v.name)) {
      return InvalidArgument("model input '{}' is missing from config.pbtxt", v.name);
    }
  }
  return Status::Ok();
}

// Fills the outputs from the model when the config lists none, then checks each against it.
// Returns the names of the config's outputs in `seen`.
Status CompleteOutputs(const std::vector<ValueInfo>& outputs, ModelConfig* config,
                       std::set<std::string>* seen) {
  const bool batching = config->max_batch_size() > 0;
  if (config->output_size() == 0) {
    for (const ValueInfo& v : outputs) {
      auto* out = config->add_output();
      out->set_name(v.name);
      out->set_data_type(ToConfigDataType(v.dtype));
      if (v.shape.has_value()) {
        RETURN_IF_ERROR(DimsFromModel(v, batching, "output", out->mutable_dims()));
      } else {
        out->add_dims(-1);  // rank unknown until run
      }
    }
  }
  for (const auto& out : config->output()) {
    if (!seen->insert(out.name()).second) {
      return InvalidArgument("output '{}' is listed twice", out.name());
    }
    auto it = std::find_if(outputs.begin(), outputs.end(),
                           [&](const ValueInfo& v) { return v.name == out.name(); });
    if (it == outputs.end()) {
      return InvalidArgument("output '{}' is not an output of the model", out.name());
    }
    RETURN_IF_ERROR(CheckType(*it, out.data_type(), "output"));
    if (out.has_reshape()) {
      return InvalidArgument("output '{}': reshape is not supported for outputs", out.name());
    }
    if (!(out.dims_size() == 1 && out.dims(0) == -1 && !it->shape.has_value())) {
      RETURN_IF_ERROR(CheckDims(*it, out.dims(), config->max_batch_size(), "output"));
    }
  }
  return Status::Ok();
}

void CompleteInstanceGroups(ModelConfig* config) {
  if (config->instance_group_size() == 0) {
    auto* g = config->add_instance_group();
    g->set_kind(inference::ModelInstanceGroup::KIND_CPU);
    g->set_count(0);
  }
  for (int i = 0; i < config->instance_group_size(); ++i) {
    auto* g = config->mutable_instance_group(i);
    if (g->name().empty()) g->set_name(fmt::format("{}_{}", config->name(), i));
    if (g->kind() == inference::ModelInstanceGroup::KIND_AUTO) {
      g->set_kind(inference::ModelInstanceGroup::KIND_CPU);
    }
  }
}

// Every warmup input names a config input. (`output_names` are accepted too, as before.)
Status CheckWarmupInputs(const ModelConfig& config, const std::set<std::string>& output_names) {
  for (const auto& w : config.model_warmup()) {
    for (const auto& entry : w.inputs()) {
      const std::string& name = entry.first;  // a lambda may not capture a structured binding
      if (!output_names.count(name) &&
          std::none_of(config.input().begin(), config.input().end(),
                       [&](const auto& i) { return i.name() == name; })) {
        return InvalidArgument("model_warmup '{}': unknown input '{}'", w.name(), name);
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status CompleteConfig(const std::string& model_name, const std::vector<ValueInfo>& inputs,
                      const std::vector<ValueInfo>& outputs, int default_max_batch_size,
                      ModelConfig* config) {
  if (config->name().empty()) config->set_name(model_name);
  if (config->name() != model_name) {
    return InvalidArgument("config name '{}' does not match the model folder '{}'",
                           config->name(), model_name);
  }
  if (config->platform().empty() && config->backend().empty()) {
    config->set_platform("onnxruntime_onnx");
  }
  RETURN_IF_ERROR(ValidateConfigStandalone(*config));
  InferMaxBatchSize(inputs, outputs, default_max_batch_size, config);
  RETURN_IF_ERROR(CompleteInputs(inputs, config));
  std::set<std::string> output_names;
  RETURN_IF_ERROR(CompleteOutputs(outputs, config, &output_names));
  CompleteInstanceGroups(config);
  if (!config->has_version_policy()) config->mutable_version_policy()->mutable_latest();
  return CheckWarmupInputs(*config, output_names);
}

batching::BatchSchedulerOptions SchedulerOptionsFromConfig(const ModelConfig& config,
                                                           int num_workers) {
  batching::BatchSchedulerOptions o;
  o.num_workers = std::max(1, num_workers);
  o.max_batch_size = std::max(1, config.max_batch_size());
  o.enable_batching = config.max_batch_size() > 0 && config.has_dynamic_batching();
  if (config.has_dynamic_batching()) {
    const auto& db = config.dynamic_batching();
    if (o.enable_batching) {
      o.preferred_batch_sizes.assign(db.preferred_batch_size().begin(),
                                     db.preferred_batch_size().end());
      o.max_queue_delay = std::chrono::microseconds(db.max_queue_delay_microseconds());
    }
    o.priority_levels = static_cast<uint32_t>(db.priority_levels());
    o.default_priority = static_cast<uint32_t>(db.default_priority_level());
    o.default_queue_policy = ToQueuePolicy(db.default_queue_policy());
    for (const auto& [level, policy] : db.priority_queue_policy()) {
      o.priority_queue_policy[static_cast<uint32_t>(level)] = ToQueuePolicy(policy);
    }
  }
  return o;
}

int ConfiguredInstanceCount(const ModelConfig& config) {
  int n = 0;
  for (const auto& g : config.instance_group()) n += g.count();
  return n;
}

}  // namespace inferd::serving
