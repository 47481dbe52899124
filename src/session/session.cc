#include "session/session.h"

#include <omp.h>

#include <thread>

#include <fmt/format.h>

#include "kernels/cpu/cpu_provider.h"
#include "optimizer/pipeline.h"

namespace inferd {

StatusOr<std::unique_ptr<Session>> Session::Create(const std::filesystem::path& model_path,
                                                   const SessionOptions& options) {
  ASSIGN_OR_RETURN(Model model, LoadOnnxModel(model_path, options.import));
  return Create(std::move(model), options);
}

StatusOr<std::unique_ptr<Session>> Session::Create(Model model, const SessionOptions& options) {
  if (options.num_threads < 0) {
    return InvalidArgument("num_threads must be >= 0 (0 = all cores), got {}", options.num_threads);
  }
  std::unique_ptr<Session> s(new Session());
  s->model_ = std::make_unique<Model>(std::move(model));
  // The one place that picks a provider: its kernels fold constants and run the model.
  std::shared_ptr<ExecutionProvider> provider = CpuProvider();
  RETURN_IF_ERROR(Optimize(*s->model_, options.optimization_level, provider));
  s->num_threads_ = options.num_threads > 0
                        ? options.num_threads
                        : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  ExecutorOptions ex_opts;
  ex_opts.num_threads = s->num_threads_;
  for (const ValueInfo& vi : s->model_->graph.inputs) {
    if (!s->model_->graph.IsInitializer(vi.name)) s->required_inputs_.push_back(vi);
  }
  ex_opts.release_constants = !options.keep_initializers;
  ex_opts.poison_arena = options.poison_arena;
  ex_opts.batch_invariant_matmul = options.batch_invariant_matmul;
  if (options.max_cached_plans > 0) ex_opts.max_cached_plans = options.max_cached_plans;
  if (!options.serial_small_steps) ex_opts.min_parallel_flops = ex_opts.min_parallel_bytes = 0;
  ASSIGN_OR_RETURN(s->executor_,
                   GraphExecutor::Create(s->model_->graph, *s->model_, provider, ex_opts));
  // Weights the kernels hold packed copies of leave the graph: their buffers are freed once
  // packed (at the first run of each kernel), so they are resident once, not twice.
  for (const std::string& name : s->executor_->ReleasableInitializers()) {
    s->model_->graph.initializers.erase(name);
  }
  return s;
}

Status Session::ValidateInput(const ValueInfo& vi, const Tensor& t) {
  if (!t.defined()) return InvalidArgument("input '{}' is missing", vi.name);
  if (vi.dtype != DataType::kUndefined && t.dtype() != vi.dtype) {
    return InvalidArgument("input '{}' must be {}, got {}", vi.name, DataTypeName(vi.dtype),
                           DataTypeName(t.dtype()));
  }
  if (!vi.shape) return Status::Ok();
  if (static_cast<size_t>(t.rank()) != vi.shape->size()) {
    return InvalidArgument("input '{}' must have shape {} (rank {}), got {}", vi.name,
                           vi.ShapeString(), vi.shape->size(), ShapeToString(t.shape()));
  }
  for (size_t d = 0; d < vi.shape->size(); ++d) {
    const Dim& dim = (*vi.shape)[d];
    if (dim.known() && dim.value != t.dim(static_cast<int64_t>(d))) {
      return InvalidArgument("input '{}' must have shape {}, got {} (dimension {} differs)",
                             vi.name, vi.ShapeString(), ShapeToString(t.shape()), d);
    }
  }
  return Status::Ok();
}

Status Session::ValidateInputs(std::span<const Tensor> inputs) const {
  if (inputs.size() != required_inputs_.size()) {
    return InvalidArgument("model expects {} inputs, got {}", required_inputs_.size(),
                           inputs.size());
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    RETURN_IF_ERROR(ValidateInput(required_inputs_[i], inputs[i]));
  }
  return Status::Ok();
}

Status Session::Run(std::span<const Tensor> inputs, std::vector<Tensor>* outputs) const {
  RETURN_IF_ERROR(ValidateInputs(inputs));
  std::vector<std::pair<std::string, Tensor>> named;
  named.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) named.emplace_back(required_inputs_[i].name, inputs[i]);
  return Run(named, outputs);
}

Status Session::Run(const std::vector<std::pair<std::string, Tensor>>& named_inputs,
                    std::vector<Tensor>* outputs) const {
  const Graph& g = model_->graph;
  std::vector<Tensor> ordered(g.inputs.size());
  for (const auto& [name, tensor] : named_inputs) {
    size_t i = 0;
    while (i < g.inputs.size() && g.inputs[i].name != name) ++i;
    if (i == g.inputs.size()) {
      std::string known;
      for (const auto& vi : required_inputs_) known += (known.empty() ? "" : ", ") + vi.name;
      return InvalidArgument("unknown input '{}' (model inputs: {})", name, known);
    }
    if (ordered[i].defined()) return InvalidArgument("input '{}' given twice", name);
    RETURN_IF_ERROR(ValidateInput(g.inputs[i], tensor));
    ordered[i] = tensor;
  }
  for (size_t i = 0; i < ordered.size(); ++i) {
    if (ordered[i].defined()) continue;
    auto init = g.initializers.find(g.inputs[i].name);
    if (init == g.initializers.end()) {
      return InvalidArgument("input '{}' is missing", g.inputs[i].name);
    }
    ordered[i] = init->second;  // the initializer is the default of a shadowing input
  }
  // OpenMP's thread count is per calling thread, so set it on every call.
  omp_set_num_threads(num_threads_);
  return executor_->Run(ordered, outputs);
}

}  // namespace inferd
