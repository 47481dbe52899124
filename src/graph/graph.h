// The in-memory graph IR.
//
// A Model owns a Graph; a Graph owns Nodes, initializers (constant tensors) and the declared types
// and shapes of its inputs, outputs and intermediate values. Values are named by strings, exactly as
// in ONNX, so every intermediate keeps its model name for debugging and error messages. An empty
// input name means an omitted optional input.
//
// Nodes are kept in topological order (the importer sorts them; passes that insert nodes must keep
// the order, or call Graph::TopologicalSort()).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"

namespace inferd {

class Graph;

// One dimension of a declared shape: a known size, a symbolic name, or unknown.
struct Dim {
  int64_t value = -1;  // >= 0 when known
  std::string param;   // symbolic name ("batch", "seq"), may be empty
  bool known() const { return value >= 0; }
};

// Declared type and (optional) shape of a named value.
struct ValueInfo {
  std::string name;
  DataType dtype = DataType::kUndefined;
  std::optional<std::vector<Dim>> shape;  // nullopt: rank unknown
  std::string ShapeString() const;        // "[batch, 3, 224, 224]" or "?"
};

struct Attribute {
  enum class Type { kUndefined, kFloat, kInt, kString, kTensor, kGraph, kFloats, kInts, kStrings,
                    kTensors, kGraphs };
  Type type = Type::kUndefined;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::shared_ptr<Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;
};

class Node {
 public:
  std::string name;
  std::string op_type;
  std::string domain;  // "" (== "ai.onnx") for standard ops
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::map<std::string, Attribute> attributes;

  bool HasAttribute(const std::string& key) const { return attributes.count(key) > 0; }
  const Attribute* FindAttribute(const std::string& key) const;
  // Typed getters with a default for absent attributes.
  int64_t GetInt(const std::string& key, int64_t def) const;
  float GetFloat(const std::string& key, float def) const;
  std::string GetString(const std::string& key, const std::string& def) const;
  std::vector<int64_t> GetInts(const std::string& key, std::vector<int64_t> def = {}) const;
  std::vector<float> GetFloats(const std::string& key, std::vector<float> def = {}) const;
  // Returns nullptr when absent.
  const Tensor* GetTensor(const std::string& key) const;
  std::shared_ptr<Graph> GetGraph(const std::string& key) const;

  // Number of inputs actually given (trailing omitted inputs dropped).
  size_t NumInputs() const;
  bool HasInput(size_t i) const { return i < inputs.size() && !inputs[i].empty(); }
  // "Conv 'resnet/conv1'" for error messages.
  std::string Describe() const;
};

class Graph {
 public:
  std::string name;
  std::vector<std::unique_ptr<Node>> nodes;
  // Graph inputs (excluding those that are only initializers) and outputs, in declared order.
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
  // Constant tensors by name. A graph input with the same name overrides the initializer at run
  // time (ONNX "inputs that shadow initializers"); such inputs are listed in `inputs`.
  std::map<std::string, Tensor> initializers;
  // Declared or inferred type/shape of intermediate values.
  std::map<std::string, ValueInfo> value_info;

  Node* AddNode(std::string op_type, std::vector<std::string> inputs,
                std::vector<std::string> outputs, std::string name = "");
  // Sorts nodes topologically (stable for already-sorted graphs). Values not produced by any node
  // must be graph inputs, initializers or `outer_scope` names (for subgraphs); otherwise it fails.
  Status TopologicalSort(const std::vector<std::string>& outer_scope = {});
  // Type/shape info for a value from inputs, outputs, value_info or initializers; nullptr if none.
  const ValueInfo* FindValueInfo(const std::string& value) const;
  // Element type of a value if known (initializer, declared input/output or value_info).
  DataType ValueType(const std::string& value) const;
  bool IsInitializer(const std::string& value) const { return initializers.count(value) > 0; }
  bool IsGraphInput(const std::string& value) const;
  bool IsGraphOutput(const std::string& value) const;
  // Names this graph uses but neither produces nor declares (captured from an outer scope).
  std::vector<std::string> OuterScopeValues() const;
};

struct Model {
  int64_t ir_version = 8;
  std::string producer_name;
  std::string producer_version;
  std::map<std::string, int64_t> opsets;  // domain ("" for ai.onnx) → version
  Graph graph;
  // Metadata props from the model file.
  std::map<std::string, std::string> metadata;

  int64_t OpsetFor(const std::string& domain) const;
};

}  // namespace inferd
