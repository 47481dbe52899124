// Helpers shared by the fusion rules (rewrite_rule.h): op tests, constants, and the common edits.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "optimizer/graph_edit.h"

namespace inferd {

inline constexpr char kInferdDomain[] = "ai.inferd";

// An int attribute holding `v` (the flags and counts the passes set on the nodes they rewrite).
Attribute IntAttr(int64_t v);

// A node of `op_type` in the standard ONNX domain.
bool IsStandardOp(const Node* node, const char* op_type);
// A node of `op_type` in the ai.inferd domain.
bool IsInferdOp(const Node* node, const char* op_type);

// The value of a float32 constant with exactly one element (scalar or [1]); nullopt otherwise.
std::optional<float> ScalarConstant(const GraphEditor& ed, const std::string& value);
// Whether `value` is a one-element float32 constant equal to `want` (relative tolerance `rtol`).
bool IsScalarNear(const GraphEditor& ed, const std::string& value, float want,
                  float rtol = 1e-3f);

// For a two-input node reading `one`, its other input (empty when neither input is `one`, or
// both are).
std::string OtherInput(const Node& node, const std::string& one);

// Whether the declared shapes of `a` and `b` are the same: same rank, and each dim equal as a
// known size or as the same symbolic name. False when either shape is unknown.
bool SameDeclaredShape(const Graph& graph, const std::string& a, const std::string& b);

// The producer of `value` if it is a standard `op_type` node whose output `value` is read only
// by `reader` (once) and is not a graph output; null otherwise.
Node* SoleProducer(const GraphEditor& ed, const std::string& value, const char* op_type);

// Makes `producer` produce `consumer`'s first output in place of its own and removes `consumer`,
// whose only non-constant input must be the producer's output (a fused Add, BN or activation).
void AbsorbConsumer(GraphEditor& ed, Node* producer, Node* consumer);

// The nodes to remove with `seeds`: the seeds plus every node whose outputs, transitively, feed
// only those (the shape arithmetic that computed a removed Reshape's target, say). Values in
// `keep` are the fused node's inputs (their producers stay) and outputs (it re-produces them).
// nullopt when a doomed node's output (other than `keep`) is still read by a surviving node or is
// a graph output. Nothing is removed: the caller edits one seed into the fused node, removes the
// rest.
std::optional<std::vector<Node*>> DeadCone(const GraphEditor& ed, const std::vector<Node*>& seeds,
                                           const std::vector<std::string>& keep);

}  // namespace inferd
