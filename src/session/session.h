// Session: load → (optimize) → plan → run one ONNX model. The only library that sees the
// optimizer, the runtime and a concrete execution provider (the CPU one) together.
//
//   SessionOptions opts;
//   opts.num_threads = 2;
//   ASSIGN_OR_RETURN(auto session, Session::Create("resnet50.onnx", opts));
//   std::vector<Tensor> outputs;
//   RETURN_IF_ERROR(session->Run({input}, &outputs));
//
// Thread-safety: Run() may be called concurrently; weights are shared read-only and each call has
// its own intermediate values.
#pragma once

#include <filesystem>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/onnx_io.h"
#include "optimizer/optimization_level.h"
#include "runtime/graph_executor.h"

namespace inferd {

struct SessionOptions {
  // Intra-op threads; 0 means all cores of the machine.
  int num_threads = 0;
  ImportOptions import;
  // Graph optimizations applied before the model is planned (see src/optimizer/pipeline.h).
  OptimizationLevel optimization_level = OptimizationLevel::kAll;
  // Keep every initializer in model(). By default weights that kernels hold packed copies of are
  // erased from the graph (freed after their first packing), so model() is no longer complete:
  // set this to serialize model() after creating the session.
  bool keep_initializers = false;
  // Debugging (ExecutorOptions::poison_arena): NaN-fill the activation arena before every run.
  bool poison_arena = false;
  // ExecutorOptions::batch_invariant_matmul: each row of a constant-weight float32 matmul is
  // computed the same whatever the row count (PanelGemm for every M on CPUs where it is used;
  // kernels/cpu/onednn/gemm_weights.h). The decoder runner sets it (a sequence's tokens must not
  // depend on what shares its step); off, encoder-sized products take oneDNN's gemm.
  bool batch_invariant_matmul = false;
  // ExecutorOptions::max_cached_plans: input-shape signatures whose memory plans a run keeps;
  // 0 keeps the executor's default (8). The server raises it to the model's max_batch_size
  // for batching models (serving/model_version.cc), so no batch size is ever re-planned.
  size_t max_cached_plans = 0;
  // ExecutorOptions::min_parallel_flops / min_parallel_bytes: steps below both run on one thread.
  // Off: every step on num_threads.
  bool serial_small_steps = true;
};

class Session {
 public:
  static StatusOr<std::unique_ptr<Session>> Create(const std::filesystem::path& model_path,
                                                   const SessionOptions& options = {});
  static StatusOr<std::unique_ptr<Session>> Create(Model model, const SessionOptions& options = {});

  // The optimized model; without keep_initializers, minus the weights the kernels took over.
  const Model& model() const { return *model_; }
  // Graph inputs that must be fed (in order) and the outputs Run produces (in order). Graph inputs
  // that shadow an initializer are optional: the initializer is their default, and they can be
  // overridden by name through the named Run().
  const std::vector<ValueInfo>& inputs() const { return required_inputs_; }
  const std::vector<ValueInfo>& outputs() const { return model_->graph.outputs; }
  int num_threads() const { return num_threads_; }
  // The main graph's executor: memory-plan statistics and per-node profiling (graph_executor.h).
  const GraphExecutor& executor() const { return *executor_; }

  // Validates count, dtype, rank and fixed dims of `inputs` against the model (INVALID_ARGUMENT
  // naming the input on mismatch), then runs.
  Status Run(std::span<const Tensor> inputs, std::vector<Tensor>* outputs) const;
  Status Run(std::initializer_list<Tensor> inputs, std::vector<Tensor>* outputs) const {
    return Run(std::span<const Tensor>(inputs.begin(), inputs.size()), outputs);
  }
  // Inputs by name (any order); every graph input must be present. Unknown names fail.
  Status Run(const std::vector<std::pair<std::string, Tensor>>& named_inputs,
             std::vector<Tensor>* outputs) const;

 private:
  Session() = default;
  Status ValidateInputs(std::span<const Tensor> inputs) const;
  static Status ValidateInput(const ValueInfo& decl, const Tensor& t);

  std::vector<ValueInfo> required_inputs_;

  std::unique_ptr<Model> model_;
  std::shared_ptr<GraphExecutor> executor_;
  int num_threads_ = 1;
};

}  // namespace inferd
