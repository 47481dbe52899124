// Optimization levels: how much of the pass pipeline (pipeline.cc) a Session or `inferd optimize`
// runs. Each level includes the ones below it.
//
//   none      no rewrites; the graph runs as imported.
//   basic     semantics-preserving cleanups and standard-op fusions: constant folding (including
//             shape subgraphs), dead-node elimination, no-op elimination, common-subexpression
//             elimination, Conv+BatchNormalization, Conv+Mul/Add, MatMul+Add → Gemm.
//   extended  basic + fusions into inferd's own ops (domain ai.inferd): Conv/Gemm/MatMul +
//             activation and + residual Add (oneDNN post-ops), MatMul + bias, GELU, LayerNorm,
//             multi-head attention, Transpose/Reshape chain folding.
//   all       extended + layout propagation (Conv chains stay in oneDNN's nChw16c layout).
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace inferd {

enum class OptimizationLevel { kNone = 0, kBasic = 1, kExtended = 2, kAll = 3 };

// "none", "basic", "extended", "all".
const char* OptimizationLevelName(OptimizationLevel level);
// Accepts the names above (case-insensitive) and the digits 0-3; INVALID_ARGUMENT otherwise.
StatusOr<OptimizationLevel> ParseOptimizationLevel(std::string_view text);

}  // namespace inferd
