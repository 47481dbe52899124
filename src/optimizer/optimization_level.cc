#include "optimizer/optimization_level.h"

#include <cctype>

namespace inferd {

const char* OptimizationLevelName(OptimizationLevel level) {
  switch (level) {
    case OptimizationLevel::kNone:
      return "none";
    case OptimizationLevel::kBasic:
      return "basic";
    case OptimizationLevel::kExtended:
      return "extended";
    case OptimizationLevel::kAll:
      return "all";
  }
  return "unknown";
}

StatusOr<OptimizationLevel> ParseOptimizationLevel(std::string_view text) {
  std::string lower;
  for (char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "none" || lower == "0") return OptimizationLevel::kNone;
  if (lower == "basic" || lower == "1") return OptimizationLevel::kBasic;
  if (lower == "extended" || lower == "2") return OptimizationLevel::kExtended;
  if (lower == "all" || lower == "3") return OptimizationLevel::kAll;
  return InvalidArgument("unknown optimization level '{}' (expected none, basic, extended or all)",
                         text);
}

}  // namespace inferd
