// GraphExecutor: runs one Graph (a model's main graph or a control-flow body) with kernels from an
// ExecutionProvider. Built once; Run() is const and thread-safe (each call has its own frame).
//
// Run binds inputs by position (Graph::inputs order), initializers as read-only views, and values
// captured from enclosing scopes through the parent frame. Intermediate tensors are released after
// their last consumer.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/graph.h"
#include "runtime/execution_provider.h"
#include "runtime/op_kernel.h"

namespace inferd {

struct ExecutorOptions {
  // Intra-op threads for kernels (OpenMP); >= 1.
  int num_threads = 1;
};

// Values of one run of one graph; the parent is the frame of the enclosing graph (for subgraphs).
class ExecutionFrame {
 public:
  // Finds a value by name in this frame or any enclosing one; nullptr if absent.
  virtual const Tensor* Lookup(const std::string& name) const = 0;

 protected:
  ~ExecutionFrame() = default;
};

class GraphExecutor {
 public:
  // `graph` must outlive the executor. `outer_scope` lists names the graph may capture from
  // enclosing graphs (resolved at run time). `model` gives opset versions.
  static StatusOr<std::shared_ptr<GraphExecutor>> Create(
      const Graph& graph, const Model& model, std::shared_ptr<ExecutionProvider> provider,
      const ExecutorOptions& options, const std::vector<std::string>& outer_scope = {});

  const Graph& graph() const { return graph_; }

  // inputs: one per graph input, in order. outputs: one per graph output. `parent` resolves
  // captured values (null for a main graph). Output tensors always own their memory or share
  // ownership of an initializer; never views into `inputs`.
  Status Run(std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
             const ExecutionFrame* parent = nullptr) const;

 private:
  struct Step {
    const Node* node;
    std::unique_ptr<OpKernel> kernel;
    std::vector<int> inputs;           // value slot per input; -1 for omitted
    std::vector<int> outputs;          // value slot per output; -1 for omitted
    std::vector<int> release_after;    // slots whose last use is this step
  };
  GraphExecutor(const Graph& graph, const Model& model) : graph_(graph), model_(model) {}
  int SlotOf(const std::string& name);

  const Graph& graph_;
  const Model& model_;
  ExecutorOptions options_;
  std::shared_ptr<ExecutionProvider> provider_;
  std::unordered_map<std::string, int> slots_;
  std::vector<std::string> slot_names_;
  std::vector<Step> steps_;
  std::vector<int> input_slots_;
  std::vector<int> output_slots_;
  std::vector<std::pair<int, const Tensor*>> constant_slots_;  // initializers
  std::vector<int> outer_slots_;                              // captured from parent frames
};

}  // namespace inferd
