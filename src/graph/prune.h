// PruneUnusedInitializers: drops the constant tensors nothing reads any more, the clean-up every
// graph rewrite that replaces weights ends with (dead-node elimination in the optimizer; the
// quantizers, which swap float32 weights for int8/int4/16-bit ones).
//
//   Graph& g = model.graph;
//   ... rewrite nodes to read "W_quantized" instead of "W" ...
//   PruneUnusedInitializers(g);   // "W" goes, unless something still reads it
//
// An initializer is read when a node lists it as an input, a node's subgraph (If/Loop/Scan body,
// at any depth) captures it from this graph, or it is a graph output. An initializer that a graph
// input shadows (ONNX "inputs that shadow initializers": the caller may feed it) always stays.
// Only `graph`'s own initializers are pruned, not those of its subgraphs.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace inferd {

// Removes every initializer of `graph` that nothing reads (see above). Returns how many it removed.
size_t PruneUnusedInitializers(Graph& graph);

// The same, limited to the initializers named in `candidates` (names that are not initializers
// are ignored): for a rewrite that must leave unrelated unread initializers as they were.
size_t PruneUnusedInitializers(Graph& graph, const std::vector<std::string>& candidates);

}  // namespace inferd
