#include "tools/optimize_command.h"

#include "graph/onnx_io.h"
#include "kernels/cpu/cpu_provider.h"
#include "optimizer/pipeline.h"

namespace inferd::tools {

Status OptimizeModelCommand(const OptimizeOptions& options, std::ostream& out) {
  ASSIGN_OR_RETURN(OptimizationLevel level, ParseOptimizationLevel(options.level));
  if (options.output.empty()) return InvalidArgument("no output path given (-o OUT.onnx)");
  ASSIGN_OR_RETURN(Model model, LoadOnnxModel(options.input));
  OptimizationReport report;
  RETURN_IF_ERROR(Optimize(model, level, CpuProvider(), &report));
  RETURN_IF_ERROR(SaveOnnxModel(model, options.output));
  // What we write must load back: run the importer's checker and shape inference on it.
  StatusOr<Model> reloaded = LoadOnnxModel(options.output);
  if (!reloaded.ok()) {
    return Internal("the optimized model {} does not load back: {}", options.output.string(),
                    reloaded.status().message());
  }
  if (options.report) out << report.ToString();
  out << "wrote " << options.output.string() << " (level " << OptimizationLevelName(level)
      << ", nodes " << report.nodes_before << " -> " << report.nodes_after << ")\n";
  return Status::Ok();
}

}  // namespace inferd::tools
