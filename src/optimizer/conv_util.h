// Helpers shared by the rules that fold constants into a Conv's weights (conv_bn_fusion.cc,
// conv_mul_add_fusion.cc).
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"
#include "optimizer/graph_edit.h"

namespace inferd {

// A standard-domain Conv whose weight (and bias, if any) are float32 constants, the weight of
// rank >= 3. Returns the number of output channels M, or 0 when the Conv does not qualify.
int64_t FoldableConvChannels(const GraphEditor& ed, const Node& conv);

// Replaces the Conv's weight and bias by new initializers: W'[m, ...] = W[m, ...] · scale[m],
// B'[m] = B[m] · scale[m] + shift[m] (B = 0 when absent). `tag` names them:
// "<conv>/W_<tag>", "<conv>/B_<tag>".
void RescaleConv(GraphEditor& ed, Node* conv, const std::vector<float>& scale,
                 const std::vector<float>& shift, const std::string& tag);

}  // namespace inferd
