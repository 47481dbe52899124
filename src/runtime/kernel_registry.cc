#include "runtime/kernel_registry.h"

#include <algorithm>

#include <fmt/format.h>

#include "runtime/execution_provider.h"

namespace inferd {

void KernelRegistry::Register(KernelDef def) {
  auto key = std::make_pair(def.domain, def.op_type);
  defs_[key].push_back(std::move(def));
}

void KernelRegistry::Add(const std::string& op_type, int since, int until,
                         std::vector<DataType> types, KernelFactory factory, int type_input) {
  KernelDef def;
  def.op_type = op_type;
  def.since_version = since;
  def.until_version = until;
  def.types = std::move(types);
  def.type_input = type_input;
  def.factory = std::move(factory);
  Register(std::move(def));
}

static std::string NormalizeDomain(const std::string& d) { return d == "ai.onnx" ? "" : d; }

StatusOr<const KernelDef*> KernelRegistry::Find(const Node& node, int64_t opset,
                                                const std::vector<DataType>& input_types) const {
  auto it = defs_.find({NormalizeDomain(node.domain), node.op_type});
  std::string domain = node.domain.empty() ? "ai.onnx" : node.domain;
  if (it == defs_.end()) {
    return Unimplemented("unsupported operator {} (domain {}, opset {}) in node '{}'",
                         node.op_type, domain, opset, node.name);
  }
  bool opset_matched = false;
  DataType bad_type = DataType::kUndefined;
  for (const KernelDef& def : it->second) {
    if (opset < def.since_version || opset > def.until_version) continue;
    opset_matched = true;
    if (!def.types.empty() && static_cast<size_t>(def.type_input) < input_types.size()) {
      DataType t = input_types[def.type_input];
      if (t != DataType::kUndefined &&
          std::find(def.types.begin(), def.types.end(), t) == def.types.end()) {
        bad_type = t;
        continue;
      }
    }
    return &def;
  }
  if (!opset_matched) {
    return Unimplemented("unsupported operator {} at opset {} (domain {}) in node '{}'",
                         node.op_type, opset, domain, node.name);
  }
  return Unimplemented("unsupported operator {} (domain {}, opset {}) for element type {} in node "
                       "'{}'", node.op_type, domain, opset, DataTypeName(bad_type), node.name);
}

std::vector<DataType> FloatTypes() {
  return {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16};
}

std::vector<DataType> IntegerTypes() {
  return {DataType::kInt8,  DataType::kInt16,  DataType::kInt32,  DataType::kInt64,
          DataType::kUInt8, DataType::kUInt16, DataType::kUInt32, DataType::kUInt64};
}

std::vector<DataType> NumericTypes() {
  std::vector<DataType> t = FloatTypes();
  for (DataType i : IntegerTypes()) t.push_back(i);
  return t;
}

std::vector<DataType> AllTypes() {
  std::vector<DataType> t = NumericTypes();
  t.push_back(DataType::kBool);
  return t;
}

bool ExecutionProvider::SupportsNode(const Node& node, int64_t opset) const {
  return Registry().Find(node, opset, {}).ok();
}

}  // namespace inferd
