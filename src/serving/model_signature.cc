#include "serving/model_signature.h"

#include <algorithm>
#include <fstream>
#include <numeric>
#include <set>
#include <type_traits>

#include "serving/model_config.h"
#include "serving/repository.h"

namespace inferd::serving {
namespace {

StatusOr<InputSpec> MakeInputSpec(const inference::ModelInput& in,
                                  const std::vector<ValueInfo>& model_inputs) {
  InputSpec spec;
  spec.name = in.name();
  ASSIGN_OR_RETURN(spec.dtype, FromConfigDataType(in.data_type()));
  spec.dims.assign(in.dims().begin(), in.dims().end());
  spec.ragged = in.allow_ragged_batch();
  if (in.has_reshape()) {
    spec.reshape = Shape(in.reshape().shape().begin(), in.reshape().shape().end());
  }
  for (const ValueInfo& vi : model_inputs) {
    if (vi.name == in.name() && vi.shape) {
      for (const Dim& d : *vi.shape) spec.params.push_back(d.known() ? "" : d.param);
    }
  }
  return spec;
}

// The (input, dim) a symbolic output dim follows: the ragged input dim with the same name.
std::pair<int, int> FollowedInputDim(const Dim& d, const std::vector<InputSpec>& inputs) {
  std::pair<int, int> f{-1, -1};
  for (size_t k = 0; k < inputs.size() && !d.param.empty() && f.first < 0; ++k) {
    if (!inputs[k].ragged) continue;
    const auto& ps = inputs[k].params;
    for (size_t e = 1; e < ps.size(); ++e) {
      if (ps[e] == d.param) f = {static_cast<int>(k), static_cast<int>(e)};
    }
  }
  return f;
}

StatusOr<OutputSpec> MakeOutputSpec(const inference::ModelOutput& out,
                                    const std::vector<ValueInfo>& model_outputs,
                                    const std::vector<InputSpec>& inputs) {
  OutputSpec spec;
  spec.name = out.name();
  ASSIGN_OR_RETURN(spec.dtype, FromConfigDataType(out.data_type()));
  spec.dims.assign(out.dims().begin(), out.dims().end());
  if (out.has_reshape()) {
    spec.reshape = Shape(out.reshape().shape().begin(), out.reshape().shape().end());
  }
  for (size_t i = 0; i < model_outputs.size(); ++i) {
    if (model_outputs[i].name != out.name()) continue;
    spec.model_index = i;
    if (!model_outputs[i].shape || spec.reshape) continue;  // a reshaped output follows no input
    for (const Dim& d : *model_outputs[i].shape) spec.follows.push_back(FollowedInputDim(d, inputs));
  }
  return spec;
}

// The control and state inputs and the state outputs of a config with sequence_batching.
Status AddSequenceSpecs(const inference::ModelConfig& config,
                        const std::vector<ValueInfo>& model_outputs, ModelSignature* sig) {
  const auto& sb = config.sequence_batching();
  for (const auto& ci : sb.control_input()) {
    InputSpec spec;
    spec.name = ci.name();
    if (ci.control_size() != 1) {
      return InvalidArgument("sequence_batching: control_input '{}' must have exactly one control",
                             ci.name());
    }
    ASSIGN_OR_RETURN(spec.dtype, SequenceControlDataType(ci.control(0)));
    spec.dims = {1};
    spec.internal = true;
    sig->inputs.push_back(std::move(spec));
  }
  for (const auto& st : sb.state()) {
    InputSpec in;
    in.name = st.input_name();
    ASSIGN_OR_RETURN(in.dtype, FromConfigDataType(st.data_type()));
    in.dims.assign(st.dims().begin(), st.dims().end());
    in.internal = true;
    OutputSpec out;
    out.name = st.output_name();
    out.dtype = in.dtype;
    out.dims = in.dims;
    out.internal = true;
    auto it = std::find_if(model_outputs.begin(), model_outputs.end(),
                           [&](const ValueInfo& v) { return v.name == st.output_name(); });
    if (it == model_outputs.end()) {
      return InvalidArgument("sequence_batching: state output '{}' is not an output of the model",
                             st.output_name());
    }
    out.model_index = it - model_outputs.begin();
    sig->inputs.push_back(std::move(in));
    sig->outputs.push_back(std::move(out));
  }
  return Status::Ok();
}

// Matches the request's inputs to the specs: given[k] is the tensor for inputs[k].
Status MatchInputs(const ModelSignature& sig, const InferenceRequest& r,
                   std::vector<const Tensor*>* given) {
  given->assign(sig.inputs.size(), nullptr);
  for (const InferInput& in : r.inputs) {
    auto it = std::find_if(sig.inputs.begin(), sig.inputs.end(),
                           [&](const InputSpec& s) { return s.name == in.name && !s.internal; });
    if (it == sig.inputs.end()) {
      std::string names;
      for (const auto& s : sig.inputs) {
        if (!s.internal) names += (names.empty() ? "" : ", ") + s.name;
      }
      return InvalidArgument("unexpected input '{}' for model '{}' (expected: {})", in.name,
                             sig.name, names);
    }
    const size_t k = it - sig.inputs.begin();
    if ((*given)[k] != nullptr) return InvalidArgument("input '{}' is given twice", in.name);
    (*given)[k] = &in.tensor;
  }
  return Status::Ok();
}

// Checks one input tensor; *batch is the batch size of the inputs checked so far (-1: none yet).
Status CheckInput(const ModelSignature& sig, const InputSpec& spec, const Tensor& t,
                  int64_t* batch) {
  Shape expected = spec.dims;
  if (sig.batching()) expected.insert(expected.begin(), -1);
  if (t.dtype() != spec.dtype) {
    return InvalidArgument("input '{}': datatype {} but model '{}' expects {}", spec.name,
                           KServeName(t.dtype()), sig.name, KServeName(spec.dtype));
  }
  bool match = t.rank() == static_cast<int64_t>(expected.size());
  for (size_t d = 0; match && d < expected.size(); ++d) {
    match = expected[d] == -1 || expected[d] == t.dim(d);
  }
  if (!match) {
    return InvalidArgument("input '{}': shape {} does not match the model's {}", spec.name,
                           ShapeToString(t.shape()), ShapeToString(expected));
  }
  if (t.NumElements() > 0 && t.raw_data() == nullptr) {
    return InvalidArgument("input '{}' has no data", spec.name);
  }
  if (!sig.batching()) return Status::Ok();
  if (t.dim(0) < 1 || t.dim(0) > sig.max_batch_size) {
    return InvalidArgument("input '{}': batch size {} is outside [1, max_batch_size {}]",
                           spec.name, t.dim(0), sig.max_batch_size);
  }
  if (*batch != -1 && t.dim(0) != *batch) {
    return InvalidArgument("input '{}': batch size {} differs from the other inputs' {}",
                           spec.name, t.dim(0), *batch);
  }
  *batch = t.dim(0);
  return Status::Ok();
}

Status CheckRequestedOutputs(const ModelSignature& sig, const InferenceRequest& r) {
  std::set<std::string> requested;
  for (const std::string& o : r.requested_outputs) {
    if (std::none_of(sig.outputs.begin(), sig.outputs.end(),
                     [&](const OutputSpec& s) { return s.name == o && !s.internal; })) {
      return InvalidArgument("unknown output '{}' requested from model '{}'", o, sig.name);
    }
    if (!requested.insert(o).second) return InvalidArgument("output '{}' requested twice", o);
  }
  for (const auto& [name, k] : r.classification) {
    if (!requested.count(name)) {
      return InvalidArgument("output '{}': classification is asked for an output not requested",
                             name);
    }
    if (k < 1) return InvalidArgument("output '{}': classification must be >= 1, got {}", name, k);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ModelSignature> BuildSignature(const std::string& name, int64_t version,
                                        const inference::ModelConfig& config,
                                        const std::vector<ValueInfo>& model_inputs,
                                        const std::vector<ValueInfo>& model_outputs) {
  ModelSignature sig;
  sig.name = name;
  sig.version = version;
  sig.max_batch_size = config.max_batch_size();
  sig.pad_value = config.inferd().ragged_pad_value();
  for (const auto& in : config.input()) {
    ASSIGN_OR_RETURN(InputSpec spec, MakeInputSpec(in, model_inputs));
    sig.inputs.push_back(std::move(spec));
  }
  for (const auto& out : config.output()) {
    ASSIGN_OR_RETURN(OutputSpec spec, MakeOutputSpec(out, model_outputs, sig.inputs));
    sig.outputs.push_back(std::move(spec));
  }
  if (config.has_sequence_batching()) RETURN_IF_ERROR(AddSequenceSpecs(config, model_outputs, &sig));
  return sig;
}

Status LoadLabels(const std::filesystem::path& model_dir, const inference::ModelConfig& config,
                  ModelSignature* sig) {
  for (const auto& out : config.output()) {
    if (out.label_filename().empty()) continue;
    ASSIGN_OR_RETURN(const std::filesystem::path path,
                     ResolveModelFile(model_dir, config.name(), "", out.label_filename(),
                                      fmt::format("output '{}' label_filename", out.name())));
    std::ifstream in(path);
    if (!in) {
      return InvalidArgument("output '{}': cannot read label_filename '{}'", out.name(),
                             out.label_filename());
    }
    for (OutputSpec& spec : sig->outputs) {
      if (spec.name != out.name()) continue;
      std::string line;
      while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        spec.labels.push_back(line);
      }
    }
  }
  return Status::Ok();
}

StatusOr<ClassifiedOutput> Classify(const OutputSpec& spec, const Tensor& t, bool batching,
                                    int64_t k) {
  if (k < 1) return InvalidArgument("output '{}': classification count must be >= 1", spec.name);
  const int64_t rows = batching && t.rank() > 0 ? t.dim(0) : 1;
  const int64_t per_row = rows > 0 ? t.NumElements() / rows : 0;
  std::vector<double> values(static_cast<size_t>(t.NumElements()));
  bool numeric = false;
  DispatchAll(
      t.dtype(),
      [&](auto tag) {
        using T = decltype(tag);
        numeric = true;
        const T* p = t.data<T>();
        for (size_t i = 0; i < values.size(); ++i) {
          if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
            values[i] = static_cast<float>(p[i]);
          } else {
            values[i] = static_cast<double>(p[i]);
          }
        }
      },
      [] {});
  if (!numeric) {
    return InvalidArgument("output '{}': classification needs a numeric output", spec.name);
  }
  k = std::min(k, per_row);
  ClassifiedOutput c{spec.name, batching ? Shape{rows, k} : Shape{k}, {}};
  std::vector<int64_t> order(static_cast<size_t>(per_row));
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = values.data() + r * per_row;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
      return row[a] > row[b] || (row[a] == row[b] && a < b);
    });
    for (int64_t j = 0; j < k; ++j) {
      const int64_t idx = order[j];
      std::string s = std::to_string(static_cast<float>(row[idx])) + ":" + std::to_string(idx);
      if (static_cast<size_t>(idx) < spec.labels.size()) s += ":" + spec.labels[idx];
      c.values.push_back(std::move(s));
    }
  }
  return c;
}

StatusOr<int64_t> ValidateRequest(const ModelSignature& sig, const InferenceRequest& r) {
  std::vector<const Tensor*> given;
  RETURN_IF_ERROR(MatchInputs(sig, r, &given));
  int64_t batch = -1;
  for (size_t k = 0; k < sig.inputs.size(); ++k) {
    if (sig.inputs[k].internal) continue;
    if (given[k] == nullptr) {
      return InvalidArgument("missing input '{}' for model '{}'", sig.inputs[k].name, sig.name);
    }
    RETURN_IF_ERROR(CheckInput(sig, sig.inputs[k], *given[k], &batch));
  }
  RETURN_IF_ERROR(CheckRequestedOutputs(sig, r));
  return sig.batching() ? std::max<int64_t>(batch, 1) : 1;
}

}  // namespace inferd::serving
