// The config-only checks of an ensemble (ensemble.h: CheckEnsembleConfig, EnsembleStepModels),
// apart from the runtime so that code parsing configs (model_config, the fuzz targets) links
// without the serving core.
#include "serving/ensemble.h"

#include <algorithm>
#include <map>
#include <set>

#include "serving/model_config.h"

namespace inferd::serving {

using inference::ModelConfig;

std::string EnsembleStepLabel(int index, const inference::ModelEnsembling::Step& step) {
  return fmt::format("step {} ('{}')", index, step.model_name());
}

// A proto map's entries sorted by key, so checks and messages do not depend on hash order.
std::vector<std::pair<std::string, std::string>> SortedMapEntries(
    const google::protobuf::Map<std::string, std::string>& m) {
  std::vector<std::pair<std::string, std::string>> v(m.begin(), m.end());
  std::sort(v.begin(), v.end());
  return v;
}

namespace {

// Who produces each ensemble tensor: -1 the request (an ensemble input), else the step index.
StatusOr<std::map<std::string, int>> Producers(const ModelConfig& c) {
  std::map<std::string, int> producer;
  for (const auto& in : c.input()) {
    if (!producer.emplace(in.name(), -1).second) {
      return InvalidArgument("ensemble input '{}' is listed twice", in.name());
    }
  }
  const auto& steps = c.ensemble_scheduling().step();
  for (int s = 0; s < steps.size(); ++s) {
    for (const auto& [key, tensor] : SortedMapEntries(steps[s].output_map())) {
      auto [it, added] = producer.emplace(tensor, s);
      if (added) continue;
      return InvalidArgument(
          "ensemble {}: output_map '{}' writes tensor '{}', which {} already produces",
          EnsembleStepLabel(s, steps[s]), key, tensor,
          it->second < 0 ? std::string("the ensemble input")
                         : EnsembleStepLabel(it->second, steps[it->second]));
    }
  }
  return producer;
}

// A cycle among the steps (each waiting for a tensor of the next), as "step 0 ('a') → step 1
// ('b') → step 0 ('a')"; empty when there is none.
std::string FindCycle(const ModelConfig& c, const std::map<std::string, int>& producer) {
  const auto& steps = c.ensemble_scheduling().step();
  const int n = steps.size();
  std::vector<std::set<int>> deps(n);  // steps whose outputs step s reads
  for (int s = 0; s < n; ++s) {
    for (const auto& [key, tensor] : steps[s].input_map()) {
      auto it = producer.find(tensor);
      if (it != producer.end() && it->second >= 0) deps[s].insert(it->second);
    }
  }
  std::vector<int> state(n, 0);  // 0 unvisited, 1 on the path, 2 done
  std::vector<int> path;
  std::function<int(int)> visit = [&](int s) -> int {  // returns the step closing a cycle, or -1
    state[s] = 1;
    path.push_back(s);
    for (int d : deps[s]) {
      if (state[d] == 1) return d;
      if (state[d] == 0) {
        if (int hit = visit(d); hit >= 0) return hit;
      }
    }
    state[s] = 2;
    path.pop_back();
    return -1;
  };
  for (int s = 0; s < n; ++s) {
    if (state[s] != 0) continue;
    const int hit = visit(s);
    if (hit < 0) continue;
    std::string text;
    for (auto it = std::find(path.begin(), path.end(), hit); it != path.end(); ++it) {
      text += EnsembleStepLabel(*it, steps[*it]) + " needs ";
    }
    return text + EnsembleStepLabel(hit, steps[hit]);
  }
  return "";
}

Status CheckDataflow(const ModelConfig& c) {
  ASSIGN_OR_RETURN(auto producer, Producers(c));
  const auto& steps = c.ensemble_scheduling().step();
  std::set<std::string> consumed;
  for (int s = 0; s < steps.size(); ++s) {
    for (const auto& [key, tensor] : SortedMapEntries(steps[s].input_map())) {
      consumed.insert(tensor);
      if (producer.count(tensor) == 0) {
        return InvalidArgument("ensemble {}: input_map '{}' reads tensor '{}', which is neither "
                               "an ensemble input nor produced by any step",
                               EnsembleStepLabel(s, steps[s]), key, tensor);
      }
    }
  }
  for (const auto& in : c.input()) {
    if (consumed.count(in.name()) == 0) {
      return InvalidArgument("ensemble input '{}' is consumed by no step", in.name());
    }
  }
  for (const auto& out : c.output()) {
    auto it = producer.find(out.name());
    if (it == producer.end() || it->second < 0) {
      return InvalidArgument("ensemble output '{}' is produced by no step", out.name());
    }
  }
  if (std::string cycle = FindCycle(c, producer); !cycle.empty()) {
    return InvalidArgument("ensemble steps form a cycle: {}", cycle);
  }
  return Status::Ok();
}

// The ensemble's own inputs and outputs: unique names, a data type, dims -1 or >= 1, no reshape.
Status CheckTensorList(const ModelConfig& c) {
  std::set<std::string> names;
  auto check = [&](const std::string& kind, const std::string& name, inference::DataType type,
                   const google::protobuf::RepeatedField<int64_t>& dims, bool reshape) {
    if (!names.insert(name).second) {
      return InvalidArgument("ensemble {} '{}': the name is used twice", kind, name);
    }
    RETURN_IF_ERROR(FromConfigDataType(type).status().WithContext(
        fmt::format("ensemble {} '{}'", kind, name)));
    for (int64_t d : dims) {
      if (d < -1 || d == 0) {
        return InvalidArgument("ensemble {} '{}': dim {} must be positive or -1", kind, name, d);
      }
    }
    if (reshape) {
      return InvalidArgument("ensemble {} '{}': reshape is not supported on an ensemble (reshape "
                             "in the composing model)",
                             kind, name);
    }
    return Status::Ok();
  };
  for (const auto& in : c.input()) {
    RETURN_IF_ERROR(check("input", in.name(), in.data_type(), in.dims(), in.has_reshape()));
  }
  for (const auto& out : c.output()) {
    RETURN_IF_ERROR(check("output", out.name(), out.data_type(), out.dims(), out.has_reshape()));
  }
  return Status::Ok();
}

}  // namespace

Status CheckEnsembleConfig(const ModelConfig& c) {
  const bool ensemble = c.platform() == "ensemble";
  if (!ensemble) {
    return InvalidArgument("ensemble_scheduling: requires platform \"ensemble\" (got '{}')",
                           c.platform());
  }
  if (!c.has_ensemble_scheduling()) {
    return InvalidArgument("platform 'ensemble' requires ensemble_scheduling with its steps");
  }
  if (c.input_size() == 0 || c.output_size() == 0) {
    return InvalidArgument("an ensemble must list its input and output tensors in config.pbtxt");
  }
  if (c.instance_group_size() > 0) {
    return InvalidArgument("instance_group: an ensemble has no instances (set instance_group on "
                           "its composing models)");
  }
  if (c.model_warmup_size() > 0) {
    return InvalidArgument("model_warmup: an ensemble is not warmed up (warm up its composing "
                           "models)");
  }
  RETURN_IF_ERROR(CheckTensorList(c));
  const auto& steps = c.ensemble_scheduling().step();
  if (steps.empty()) return InvalidArgument("ensemble_scheduling has no step");
  for (int s = 0; s < steps.size(); ++s) {
    const auto& step = steps[s];
    if (step.model_name().empty()) {
      return InvalidArgument("ensemble step {}: model_name is required", s);
    }
    if (!step.model_namespace().empty()) {
      return InvalidArgument("ensemble {}: model_namespace is not supported by inferd",
                             EnsembleStepLabel(s, step));
    }
    if (step.model_version() < -1) {
      return InvalidArgument("ensemble {}: model_version {} must be -1 (latest) or >= 1",
                             EnsembleStepLabel(s, step), step.model_version());
    }
    if (step.output_map().empty()) {
      return InvalidArgument("ensemble {}: output_map is empty (the step's outputs would be "
                             "lost)",
                             EnsembleStepLabel(s, step));
    }
  }
  return CheckDataflow(c);
}

std::vector<std::string> EnsembleStepModels(const ModelConfig& c) {
  std::vector<std::string> names;
  for (const auto& step : c.ensemble_scheduling().step()) {
    if (std::find(names.begin(), names.end(), step.model_name()) == names.end()) {
      names.push_back(step.model_name());
    }
  }
  return names;
}

}  // namespace inferd::serving
