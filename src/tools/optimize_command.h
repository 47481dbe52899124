// `inferd optimize IN.onnx -o OUT.onnx [--level L] [--report]`: runs the graph optimizer and
// writes the result as standard ONNX that loads back (and passes the onnx checker).
#pragma once

#include <filesystem>
#include <ostream>
#include <string>

#include "common/status.h"

namespace inferd::tools {

struct OptimizeOptions {
  std::filesystem::path input;
  std::filesystem::path output;
  std::string level = "all";  // none | basic | extended | all
  bool report = false;          // print each pass and how many times it fired
};

// Loads, optimizes, saves, and re-imports the output to check it. A summary line (and the report
// when asked) goes to `out`.
Status OptimizeModelCommand(const OptimizeOptions& options, std::ostream& out);

}  // namespace inferd::tools
