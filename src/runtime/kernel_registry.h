// KernelRegistry: (domain, op type, opset range, type constraint) → kernel factory.
//
// Registration sits next to each kernel: every kernel file exposes a Register*Kernels(registry)
// function, and a provider calls them in one explicit list (no static initializers).
#pragma once

#include <climits>
#include <map>
#include <string>
#include <vector>

#include "common/data_type.h"
#include "runtime/op_kernel.h"

namespace inferd {

inline constexpr int kOpsetMax = INT_MAX;

struct KernelDef {
  std::string domain;  // "" for ai.onnx
  std::string op_type;
  int since_version = 1;
  int until_version = kOpsetMax;  // inclusive
  // Element types accepted for input `type_input` (empty: any). Checked when the type is known.
  std::vector<DataType> types;
  int type_input = 0;
  KernelFactory factory;
};

class KernelRegistry {
 public:
  void Register(KernelDef def);
  // Shorthand for the ai.onnx domain.
  void Add(const std::string& op_type, int since, int until, std::vector<DataType> types,
           KernelFactory factory, int type_input = 0);

  // Finds the kernel for a node. `type` is the element type of input def.type_input (kUndefined if
  // unknown). Fails with UNIMPLEMENTED naming op, domain, opset and type when nothing matches.
  StatusOr<const KernelDef*> Find(const Node& node, int64_t opset,
                                  const std::vector<DataType>& input_types) const;

 private:
  std::map<std::pair<std::string, std::string>, std::vector<KernelDef>> defs_;
};

// Common type lists.
std::vector<DataType> FloatTypes();    // float32, float64, float16, bfloat16
std::vector<DataType> NumericTypes();  // FloatTypes + all integers
std::vector<DataType> AllTypes();      // NumericTypes + bool
std::vector<DataType> IntegerTypes();  // signed + unsigned integers

}  // namespace inferd
