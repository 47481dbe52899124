#include "runtime/session.h"

#include <omp.h>

#include <thread>

#include <fmt/format.h>

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
  s->num_threads_ = options.num_threads > 0
                        ? options.num_threads
                        : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  ExecutorOptions ex_opts;
  ex_opts.num_threads = s->num_threads_;
  ASSIGN_OR_RETURN(s->executor_,
                   GraphExecutor::Create(s->model_->graph, *s->model_, CpuProvider(), ex_opts));
  return s;
}

Status Session::ValidateInputs(std::span<const Tensor> inputs) const {
  const auto& decl = model_->graph.inputs;
  if (inputs.size() != decl.size()) {
    return InvalidArgument("model expects {} inputs, got {}", decl.size(), inputs.size());
  }
  for (size_t i = 0; i < decl.size(); ++i) {
    const ValueInfo& vi = decl[i];
    const Tensor& t = inputs[i];
    if (!t.defined()) return InvalidArgument("input '{}' is missing", vi.name);
    if (vi.dtype != DataType::kUndefined && t.dtype() != vi.dtype) {
      return InvalidArgument("input '{}' must be {}, got {}", vi.name, DataTypeName(vi.dtype),
                             DataTypeName(t.dtype()));
    }
    if (!vi.shape) continue;
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
  }
  return Status::Ok();
}

Status Session::Run(std::span<const Tensor> inputs, std::vector<Tensor>* outputs) const {
  RETURN_IF_ERROR(ValidateInputs(inputs));
  // OpenMP's thread count is per calling thread, so set it on every call.
  omp_set_num_threads(num_threads_);
  return executor_->Run(inputs, outputs);
}

Status Session::Run(const std::vector<std::pair<std::string, Tensor>>& named_inputs,
                    std::vector<Tensor>* outputs) const {
  const auto& decl = model_->graph.inputs;
  std::vector<Tensor> ordered(decl.size());
  for (const auto& [name, tensor] : named_inputs) {
    size_t i = 0;
    while (i < decl.size() && decl[i].name != name) ++i;
    if (i == decl.size()) {
      std::string known;
      for (const auto& vi : decl) known += (known.empty() ? "" : ", ") + vi.name;
      return InvalidArgument("unknown input '{}' (model inputs: {})", name, known);
    }
    if (ordered[i].defined()) return InvalidArgument("input '{}' given twice", name);
    ordered[i] = tensor;
  }
  return Run(ordered, outputs);
}

}  // namespace inferd
