// The kernel interface: what every operator implementation (CPU, CUDA) provides.
//
// A kernel is created once per node when a Session is built: Init() parses attributes and may
// pre-process constant inputs (weights). Compute() is const and may run concurrently from several
// threads, each with its own KernelContext; per-shape caches inside a kernel must be guarded.
//
// Adding a kernel:
//   class ReluKernel final : public OpKernel {
//     Status Compute(KernelContext& ctx) const override { ... }
//   };
//   registry.Add("Relu", 6, kOpsetMax, FloatTypes(), KernelFactory::Of<ReluKernel>());
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "graph/graph.h"

namespace inferd {

class GraphExecutor;
class ExecutionFrame;

// What a kernel may look at when it is created.
class KernelInfo {
 public:
  KernelInfo(const Node& node, int64_t opset, const Graph& graph, int num_threads,
             std::function<StatusOr<std::shared_ptr<GraphExecutor>>(const Graph&)> make_subgraph)
      : node_(node), opset_(opset), graph_(graph), num_threads_(num_threads),
        make_subgraph_(std::move(make_subgraph)) {}

  const Node& node() const { return node_; }
  int64_t opset() const { return opset_; }
  int num_threads() const { return num_threads_; }
  size_t NumInputs() const { return node_.inputs.size(); }
  size_t NumOutputs() const { return node_.outputs.size(); }
  // Declared/inferred element type of input i; kUndefined when unknown or omitted.
  DataType InputType(size_t i) const;
  DataType OutputType(size_t i) const;
  // The constant value of input i if it is an initializer that no graph input shadows, else null.
  const Tensor* ConstantInput(size_t i) const;
  // Declares that the kernel keeps what it needs of constant input i (e.g. a packed copy of a
  // weight, holding the initializer's buffer only until it has packed it) and never reads its data
  // in Compute. When every reader of an initializer says so, the session frees it (no second copy
  // of the weights stays resident); Compute then sees a tensor of the same type and shape whose
  // data is null.
  void ReleaseConstantInput(size_t i) const {
    if (i >= released_.size()) released_.resize(i + 1, false);
    released_[i] = true;
  }
  bool Released(size_t i) const { return i < released_.size() && released_[i]; }
  // ExecutorOptions::batch_invariant_matmul of the executor creating the kernel.
  bool batch_invariant_matmul() const { return batch_invariant_matmul_; }
  void set_batch_invariant_matmul(bool on) { batch_invariant_matmul_ = on; }
  // Builds an executor for a subgraph attribute (If/Loop/Scan bodies); values the subgraph captures
  // from enclosing scopes are resolved at run time through the KernelContext.
  StatusOr<std::shared_ptr<GraphExecutor>> CreateSubgraph(const Graph& subgraph) const {
    return make_subgraph_(subgraph);
  }

 private:
  const Node& node_;
  int64_t opset_;
  const Graph& graph_;
  int num_threads_;
  std::function<StatusOr<std::shared_ptr<GraphExecutor>>(const Graph&)> make_subgraph_;
  mutable std::vector<bool> released_;
  bool batch_invariant_matmul_ = false;
};

// What a kernel sees while it runs: its input tensors and the slots for its outputs.
class KernelContext {
 public:
  KernelContext(const Node& node, std::span<const Tensor* const> inputs,
                std::span<Tensor> outputs, const ExecutionFrame* frame, int num_threads)
      : node_(node), inputs_(inputs), outputs_(outputs), frame_(frame), num_threads_(num_threads) {}

  const Node& node() const { return node_; }
  size_t NumInputs() const { return inputs_.size(); }
  // nullptr when the input is omitted (empty name) or i >= NumInputs().
  const Tensor* Input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  size_t NumOutputs() const { return outputs_.size(); }
  // Whether output i is consumed at all (optional outputs with empty names are not).
  bool OutputRequested(size_t i) const {
    return i < node_.outputs.size() && !node_.outputs[i].empty();
  }
  // Allocates output i with the given type and shape and returns it (never null), zero-filled.
  Tensor* AllocateOutput(size_t i, DataType dtype, Shape shape);
  // The same without the zero fill, for kernels that write every byte of the output (a dense
  // convolution or GEMM): filling a large activation only to overwrite it costs memory bandwidth.
  // Required for outputs the kernel allows in place (OpKernel::InPlaceInput): such an output may
  // share the storage of that input, which holds the input's values when Compute starts.
  Tensor* AllocateOutputUninitialized(size_t i, DataType dtype, Shape shape);
  // Sets output i to an existing tensor (a view or a shared buffer, e.g. Reshape of its input).
  void SetOutput(size_t i, Tensor t) { outputs_[i] = std::move(t); }
  int num_threads() const { return num_threads_; }

  // Runs a subgraph with this node's scope as its outer scope.
  Status RunSubgraph(const GraphExecutor& subgraph, std::span<const Tensor> inputs,
                     std::vector<Tensor>* outputs) const;

 private:
  const Node& node_;
  std::span<const Tensor* const> inputs_;
  std::span<Tensor> outputs_;
  const ExecutionFrame* frame_;
  int num_threads_;
};

class OpKernel {
 public:
  virtual ~OpKernel() = default;
  // Parses attributes and prepares constant inputs. Errors fail Session creation.
  virtual Status Init(const KernelInfo& info) {
    (void)info;
    return Status::Ok();
  }
  virtual Status Compute(KernelContext& ctx) const = 0;
  // The input whose storage output `output` may take over when this node is that input's last
  // reader (-1: none). The planner then places both in one arena buffer, so Compute may find the
  // output (from AllocateOutputUninitialized) at the same address as the input and must be correct
  // then, e.g. a convolution whose residual input is accumulated onto its output in place.
  virtual int InPlaceInput(size_t output) const {
    (void)output;
    return -1;
  }
};

using KernelFactory = std::function<StatusOr<std::unique_ptr<OpKernel>>(const KernelInfo&)>;

// Factory for a default-constructible kernel class whose Init() parses the node.
template <typename K>
KernelFactory MakeKernel() {
  return [](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
    auto k = std::make_unique<K>();
    RETURN_IF_ERROR(k->Init(info));
    return std::unique_ptr<OpKernel>(std::move(k));
  };
}

}  // namespace inferd
