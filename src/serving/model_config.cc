#include "serving/model_config.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "common/utf8.h"
#include "serving/autoscale_config.h"
#include "serving/config_limits.h"
#include "serving/ensemble.h"

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

namespace {

// The first string field (at any depth, map keys and values included) that is not UTF-8, as a
// dotted path; "" when all are. protobuf's text parser only logs such a field, and the config is
// echoed as JSON (ModelConfigToJson), which must be UTF-8 (found by fuzz/model_config_fuzz).
std::string FirstNonUtf8Field(const google::protobuf::Message& m, const std::string& prefix) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* r = m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const FieldDescriptor* f : fields) {
    const std::string path = prefix.empty() ? f->name() : prefix + "." + f->name();
    const int n = f->is_repeated() ? r->FieldSize(m, f) : 1;
    for (int i = 0; i < n; ++i) {
      if (f->type() == FieldDescriptor::TYPE_STRING) {
        std::string scratch;
        const std::string& v = f->is_repeated() ? r->GetRepeatedStringReference(m, f, i, &scratch)
                                                : r->GetStringReference(m, f, &scratch);
        if (!IsValidUtf8(v)) return path;
      } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        const auto& sub = f->is_repeated() ? r->GetRepeatedMessage(m, f, i) : r->GetMessage(m, f);
        std::string bad = FirstNonUtf8Field(sub, path);
        if (!bad.empty()) return bad;
      }
    }
  }
  return "";
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
  if (std::string bad = FirstNonUtf8Field(config, ""); !bad.empty()) {
    return InvalidArgument("config.pbtxt: field '{}' is not valid UTF-8", bad);
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
  RETURN_IF_ERROR(CheckConfigBounds(config));  // first: the checks below may size things by them
  const std::string& platform = config.platform();
  if (!platform.empty() && platform != "onnxruntime_onnx" && platform != "ensemble") {
    return InvalidArgument("platform '{}' is not supported (inferd serves ONNX models: use "
                           "'onnxruntime_onnx')",
                           platform);
  }
  // inferd_image and inferd_classify: the built-in processing models (processing_models.h).
  static const std::set<std::string> kBackends = {"",       "onnxruntime",  "onnx",
                                                  "inferd", "inferd_image", "inferd_classify"};
  if (!kBackends.count(config.backend())) {
    return InvalidArgument("backend '{}' is not supported: inferd serves ONNX models only (use "
                           "backend 'onnxruntime')",
                           config.backend());
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
    if (g.count() < 0) return InvalidArgument("instance_group count must be >= 0");
  }
  RETURN_IF_ERROR(AutoscaleOptionsFromConfig(config).status());
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
  return CheckImplemented(config);
}

namespace {

Status NotImplemented(std::string_view field, std::string_view what) {
  return InvalidArgument("{}: {} not supported by inferd", field, what);
}

Status CheckTensorsImplemented(const ModelConfig& c) {
  for (const auto& in : c.input()) {
    const std::string f = fmt::format("input '{}'", in.name());
    if (in.is_shape_tensor()) return NotImplemented(f + " is_shape_tensor", "shape tensors are");
    if (in.optional()) return NotImplemented(f + " optional", "optional inputs are");
    if (in.is_non_linear_format_io()) {
      return NotImplemented(f + " is_non_linear_format_io", "non-linear formats are");
    }
  }
  for (const auto& out : c.output()) {
    const std::string f = fmt::format("output '{}'", out.name());
    if (out.is_shape_tensor()) return NotImplemented(f + " is_shape_tensor", "shape tensors are");
    if (out.is_non_linear_format_io()) {
      return NotImplemented(f + " is_non_linear_format_io", "non-linear formats are");
    }
  }
  if (c.batch_input_size() > 0) return NotImplemented("batch_input", "batch inputs are");
  if (c.batch_output_size() > 0) return NotImplemented("batch_output", "batch outputs are");
  return Status::Ok();
}

Status CheckInstancesImplemented(const ModelConfig& c) {
  for (const auto& g : c.instance_group()) {
    const std::string f = fmt::format("instance_group '{}'", g.name());
    if (g.kind() == inference::ModelInstanceGroup::KIND_GPU || g.gpus_size() > 0) {
      return NotImplemented(f + " kind KIND_GPU/gpus", "GPU instances are (use KIND_CPU)");
    }
    if (g.secondary_devices_size() > 0) {
      return NotImplemented(f + " secondary_devices", "secondary devices are");
    }
    if (g.passive()) return NotImplemented(f + " passive", "passive instances are");
  }
  return Status::Ok();
}

Status CheckControl(const std::string& name, const inference::ModelSequenceBatching::Control& c,
                    std::set<int>* kinds) {
  const std::string f = fmt::format("sequence_batching control_input '{}'", name);
  if (!kinds->insert(c.kind()).second) {
    return InvalidArgument("{}: control kind {} is given twice", f,
                           inference::ModelSequenceBatching::Control::Kind_Name(c.kind()));
  }
  if (c.kind() == inference::ModelSequenceBatching::Control::CONTROL_SEQUENCE_CORRID) {
    if (c.data_type() == inference::TYPE_STRING) {
      return NotImplemented(f + " data_type TYPE_STRING", "string CORRID control inputs are");
    }
    return SequenceControlDataType(c).status().WithContext(f);
  }
  const int given = (c.int32_false_true_size() > 0) + (c.fp32_false_true_size() > 0) +
                    (c.bool_false_true_size() > 0);
  if (given != 1) {
    return InvalidArgument("{}: exactly one of int32_false_true, fp32_false_true and "
                           "bool_false_true must be given", f);
  }
  if (c.int32_false_true_size() + c.fp32_false_true_size() + c.bool_false_true_size() != 2) {
    return InvalidArgument("{}: the false/true list must have 2 values", f);
  }
  return Status::Ok();
}

Status CheckSequenceImplemented(const ModelConfig& c) {
  const auto& sb = c.sequence_batching();
  if (sb.iterative_sequence()) {
    return NotImplemented("sequence_batching iterative_sequence", "iterative sequences are");
  }
  std::set<int> kinds;
  std::set<std::string> names;
  for (const auto& ci : sb.control_input()) {
    if (!names.insert(ci.name()).second) {
      return InvalidArgument("sequence_batching: control_input '{}' is given twice", ci.name());
    }
    if (ci.control_size() != 1) {
      return InvalidArgument("sequence_batching control_input '{}': exactly one control needed",
                             ci.name());
    }
    RETURN_IF_ERROR(CheckControl(ci.name(), ci.control(0), &kinds));
  }
  for (const auto& st : sb.state()) {
    const std::string f = fmt::format("sequence_batching state '{}'", st.input_name());
    if (st.input_name().empty() || st.output_name().empty()) {
      return InvalidArgument("sequence_batching state: input_name and output_name are required");
    }
    if (!names.insert(st.input_name()).second) {
      return InvalidArgument("{}: the name is used twice", f);
    }
    RETURN_IF_ERROR(FromConfigDataType(st.data_type()).status().WithContext(f));
    for (int64_t d : st.dims()) {
      if (d < 1) return InvalidArgument("{}: dims must be fixed and >= 1", f);
    }
    for (const auto& init : st.initial_state()) {
      if (init.has_data_file()) {
        return NotImplemented(f + " initial_state data_file", "initial state files are");
      }
    }
    if (st.use_growable_memory()) {
      return NotImplemented(f + " use_growable_memory", "growable state buffers are");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<DataType> SequenceControlDataType(const inference::ModelSequenceBatching::Control& c) {
  using Control = inference::ModelSequenceBatching::Control;
  if (c.kind() == Control::CONTROL_SEQUENCE_CORRID) {
    switch (c.data_type()) {
      case inference::TYPE_UINT64: return DataType::kUInt64;
      case inference::TYPE_INT64: return DataType::kInt64;
      case inference::TYPE_UINT32: return DataType::kUInt32;
      case inference::TYPE_INT32: return DataType::kInt32;
      default:
        return InvalidArgument("CORRID data_type must be TYPE_UINT64, TYPE_INT64, TYPE_UINT32, "
                               "TYPE_INT32 or TYPE_STRING");
    }
  }
  if (c.int32_false_true_size() > 0) return DataType::kInt32;
  if (c.fp32_false_true_size() > 0) return DataType::kFloat32;
  if (c.bool_false_true_size() > 0) return DataType::kBool;
  return InvalidArgument("control {} gives no false/true values", Control::Kind_Name(c.kind()));
}

std::set<std::string> SequenceInputNames(const ModelConfig& c) {
  std::set<std::string> names;
  for (const auto& ci : c.sequence_batching().control_input()) names.insert(ci.name());
  for (const auto& st : c.sequence_batching().state()) names.insert(st.input_name());
  return names;
}

Status CheckImplemented(const ModelConfig& c) {
  if (!c.runtime().empty()) {
    return NotImplemented(fmt::format("runtime '{}'", c.runtime()), "backend runtimes are");
  }
  RETURN_IF_ERROR(CheckTensorsImplemented(c));
  RETURN_IF_ERROR(CheckInstancesImplemented(c));
  if (c.has_ensemble_scheduling() || c.platform() == "ensemble") {
    RETURN_IF_ERROR(CheckEnsembleConfig(c));  // ensemble.h
  }
  if (c.model_operations().op_library_filename_size() > 0) {
    return NotImplemented("model_operations.op_library_filename", "custom operation libraries are");
  }
  if (c.model_transaction_policy().decoupled()) {
    return NotImplemented("model_transaction_policy.decoupled", "decoupled models are");
  }
  if (c.model_repository_agents().agents_size() > 0) {
    return NotImplemented("model_repository_agents", "repository agents are");
  }
  if (c.has_sequence_batching()) RETURN_IF_ERROR(CheckSequenceImplemented(c));
  return Status::Ok();
}

std::vector<std::string> IgnoredConfigFields(const ModelConfig& c) {
  std::vector<std::string> out;
  auto note = [&out](bool set, std::string field) {
    if (set) out.push_back(std::move(field) + " is ignored (no effect on a CPU server)");
  };
  const auto& o = c.optimization();
  note(o.priority() != inference::ModelOptimizationPolicy::PRIORITY_DEFAULT,
       "optimization.priority");
  note(o.has_cuda(), "optimization.cuda");
  note(o.execution_accelerators().gpu_execution_accelerator_size() > 0 ||
           o.execution_accelerators().cpu_execution_accelerator_size() > 0,
       "optimization.execution_accelerators");
  note(o.has_input_pinned_memory(), "optimization.input_pinned_memory");
  note(o.has_output_pinned_memory(), "optimization.output_pinned_memory");
  note(o.gather_kernel_buffer_threshold() != 0, "optimization.gather_kernel_buffer_threshold");
  note(o.eager_batching(), "optimization.eager_batching");
  for (const auto& g : c.instance_group()) {
    note(g.has_rate_limiter(), fmt::format("instance_group '{}' rate_limiter", g.name()));
    note(g.profile_size() > 0, fmt::format("instance_group '{}' profile", g.name()));
    note(!g.host_policy().empty(), fmt::format("instance_group '{}' host_policy", g.name()));
  }
  note(c.cc_model_filenames_size() > 0, "cc_model_filenames");
  note(c.metric_tags_size() > 0, "metric_tags");
  note(c.response_cache().enable(), "response_cache.enable (responses are not cached)");
  note(c.model_metrics().metric_control_size() > 0, "model_metrics");
  for (const auto& [key, value] : c.parameters()) {
    // The processing backends read their parameters (and fail the load on an unknown one).
    note(c.backend() != "inferd_image" && c.backend() != "inferd_classify",
         fmt::format("parameters '{}' (a backend parameter inferd does not use)", key));
  }
  return out;
}

namespace {

// Turns protobuf's JSON strings for int64/uint64 fields of `d` (message type `desc`) into numbers,
// recursively.
void FixInt64(const google::protobuf::Descriptor& desc, rapidjson::Value* obj,
              rapidjson::Document::AllocatorType& alloc) {
  using FD = google::protobuf::FieldDescriptor;
  if (!obj->IsObject()) return;
  auto fix_scalar = [](const FD& f, rapidjson::Value* v) {
    if (!v->IsString()) return;
    if (f.cpp_type() == FD::CPPTYPE_INT64) {
      v->SetInt64(std::strtoll(v->GetString(), nullptr, 10));
    } else {
      v->SetUint64(std::strtoull(v->GetString(), nullptr, 10));
    }
  };
  for (int i = 0; i < desc.field_count(); ++i) {
    const FD& f = *desc.field(i);
    auto m = obj->FindMember(f.name().c_str());
    if (m == obj->MemberEnd()) continue;
    rapidjson::Value& v = m->value;
    const bool is64 = f.cpp_type() == FD::CPPTYPE_INT64 || f.cpp_type() == FD::CPPTYPE_UINT64;
    if (f.is_map()) {
      const FD& value = *f.message_type()->map_value();
      if (!v.IsObject()) continue;
      for (auto& e : v.GetObject()) {
        if (value.cpp_type() == FD::CPPTYPE_MESSAGE) FixInt64(*value.message_type(), &e.value, alloc);
        else if (value.cpp_type() == FD::CPPTYPE_INT64 || value.cpp_type() == FD::CPPTYPE_UINT64)
          fix_scalar(value, &e.value);
      }
    } else if (f.is_repeated() && v.IsArray()) {
      for (auto& e : v.GetArray()) {
        if (f.cpp_type() == FD::CPPTYPE_MESSAGE) FixInt64(*f.message_type(), &e, alloc);
        else if (is64) fix_scalar(f, &e);
      }
    } else if (f.cpp_type() == FD::CPPTYPE_MESSAGE) {
      FixInt64(*f.message_type(), &v, alloc);
    } else if (is64) {
      fix_scalar(f, &v);
    }
  }
}

}  // namespace

StatusOr<std::string> ModelConfigToJson(const ModelConfig& config) {
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  o.always_print_primitive_fields = true;
  std::string json;
  auto s = google::protobuf::util::MessageToJsonString(config, &json, o);
  if (!s.ok()) return Internal("config to JSON: {}", s.ToString());
  rapidjson::Document doc;
  if (doc.Parse(json.data(), json.size()).HasParseError()) {
    return Internal("config to JSON: protobuf printed invalid JSON");
  }
  FixInt64(*ModelConfig::descriptor(), &doc, doc.GetAllocator());
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  doc.Accept(w);
  return std::string(sb.GetString(), sb.GetSize());
}

StatusOr<ModelConfig> ModelConfigFromJson(const std::string& json) {
  google::protobuf::util::JsonParseOptions o;
  o.case_insensitive_enum_parsing = true;
  o.ignore_unknown_fields = false;
  ModelConfig config;
  auto s = google::protobuf::util::JsonStringToMessage(json, &config, o);
  if (!s.ok()) {
    return InvalidArgument("config: {}", std::string(s.message().data(), s.message().size()));
  }
  return config;
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

// `reshape` (what the model sees) against the model, and its element count against `dims` (what
// the client sees). `kind` is "input" or "output".
Status CheckReshape(const ValueInfo& model_value, const std::string& name,
                    const google::protobuf::RepeatedField<int64_t>& dims,
                    const inference::ModelTensorReshape& reshape, int max_batch_size,
                    const char* kind) {
  google::protobuf::RepeatedField<int64_t> rs(reshape.shape().begin(), reshape.shape().end());
  const std::string what = fmt::format("{} (reshape)", kind);
  RETURN_IF_ERROR(CheckDims(model_value, rs, max_batch_size, what.c_str()));
  Shape a(dims.begin(), dims.end()), b(rs.begin(), rs.end());
  const auto variable = [](const Shape& s) { return std::count(s.begin(), s.end(), -1); };
  if (variable(a) == 0 && variable(b) == 0 && NumElements(a) != NumElements(b)) {
    return InvalidArgument("{} '{}': reshape {} has a different element count than dims {}", kind,
                           name, ShapeToString(b), ShapeToString(a));
  }
  if (std::string_view(kind) == "output" && variable(a) > 1) {
    return InvalidArgument("output '{}': with reshape, dims {} may have at most one -1", name,
                           ShapeToString(a));
  }
  return Status::Ok();
}

// Fills the inputs from the model when the config lists none, then checks each against it.
Status CompleteInputs(const std::vector<ValueInfo>& inputs, ModelConfig* config) {
  const bool batching = config->max_batch_size() > 0;
  // The sequence batcher feeds the control and state inputs; they are not client inputs.
  const std::set<std::string> sequence = SequenceInputNames(*config);
  if (config->input_size() == 0) {
    for (const ValueInfo& v : inputs) {
      if (sequence.count(v.name)) continue;
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
      RETURN_IF_ERROR(
          CheckReshape(*it, in.name(), in.dims(), in.reshape(), config->max_batch_size(), "input"));
    } else {
      RETURN_IF_ERROR(CheckDims(*it, in.dims(), config->max_batch_size(), "input"));
    }
  }
  for (const std::string& name : sequence) {
    if (seen.count(name)) {
      return InvalidArgument("input '{}' is a sequence_batching control or state input and "
                             "cannot also be listed as an input", name);
    }
    if (std::none_of(inputs.begin(), inputs.end(),
                     [&](const ValueInfo& v) { return v.name == name; })) {
      return InvalidArgument("sequence_batching input '{}' is not an input of the model", name);
    }
  }
  for (const ValueInfo& v : inputs) {
    if (!seen.count(v.name) && !sequence.count(v.name)) {
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
  std::set<std::string> state_outputs;
  for (const auto& st : config->sequence_batching().state()) state_outputs.insert(st.output_name());
  if (config->output_size() == 0) {
    for (const ValueInfo& v : outputs) {
      if (state_outputs.count(v.name)) continue;  // the sequence batcher takes it
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
      RETURN_IF_ERROR(CheckReshape(*it, out.name(), out.dims(), out.reshape(),
                                   config->max_batch_size(), "output"));
    } else if (!(out.dims_size() == 1 && out.dims(0) == -1 && !it->shape.has_value())) {
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
  if (config.has_sequence_batching()) {
    // Requests of different sequences batch together (serving/sequence_batcher.h).
    const auto& sb = config.sequence_batching();
    o.enable_batching = config.max_batch_size() > 0;
    if (sb.has_direct()) {
      o.max_queue_delay = std::chrono::microseconds(sb.direct().max_queue_delay_microseconds());
    } else if (sb.has_oldest()) {
      o.max_queue_delay = std::chrono::microseconds(sb.oldest().max_queue_delay_microseconds());
      for (int32_t p : sb.oldest().preferred_batch_size()) {
        if (p >= 1 && p <= o.max_batch_size) o.preferred_batch_sizes.push_back(p);
      }
    }
  }
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
  int64_t n = 0;  // counts are bounded by validation; int64 keeps an unvalidated sum exact
  for (const auto& g : config.instance_group()) n += std::max(0, g.count());
  return static_cast<int>(std::min<int64_t>(n, ConfigBounds::kMaxInstances));
}

}  // namespace inferd::serving
