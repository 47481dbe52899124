// The arithmetic and memory traffic of one node run, from its op type, attributes and the shapes
// of the tensors it read and wrote: what the profiler (GraphExecutor::Profile, `inferd bench
// --profile`) divides by the node's time to put it next to the machine's peaks (a roofline).
//
// Counted ops (FLOPs at 2 per multiply-add, the usual convention; epilogues such as bias or
// activation are not counted):
//   MatMul, MatMulInteger, ai.inferd.MatMul/FusedMatMul, MatMulNBits  2·numel(Y)·K (K = A's last dim)
//   QLinearMatMul                                                     same, A = input 0
//   Gemm, ai.inferd.Gemm                                              2·M·N·K (K by transA)
//   Conv, ConvInteger, ai.inferd.Conv/BlockedConv, QLinearConv        2·N·Cout·prod(Yspatial)·
//                                                                     (Cin/group)·prod(kernel)
//     (W [Cout, Cin/group, k...] gives every factor but N and the output spatial dims, so group
//     needs no attribute; BlockedConv's padded channel count is ignored: Cout is W's; a fused
//     depthwise step, inputs 4/5, adds its own 2·N·M·prod(Yspatial)·prod(kdw))
//   ConvTranspose                                                     2·numel(X)·(Cout/group)·prod(kernel)
//   ai.inferd.Attention (Q [B,Sq,H·D], K [B,Skv,H·D], V [B,Skv,H·Dv])  2·B·Sq·Skv·(H·D + H·Dv)
//     (QKᵀ and P·V; = 4·B·H·S²·D for self-attention with Dv = D; softmax not counted)
// Every other op is treated as memory-bound: its figure is the bytes it read and wrote. Control
// flow (If, Loop, Scan) and ops with no tensor traffic have no figure (kNone).
// Bytes are always the sum of the input and output tensors' sizes (weights included; string
// tensors count 0), i.e. the least traffic the node could have had — except that a Gather* op's
// data input counts no more than its output (it reads only the rows it copies).
#pragma once

#include <span>

#include "common/data_type.h"
#include "common/tensor.h"
#include "graph/graph.h"

namespace inferd {

// A tensor as the cost model sees it. Omitted optional inputs are entries with `present` false.
struct TensorDims {
  DataType dtype = DataType::kFloat32;
  Shape shape;
  bool present = true;
};

enum class CostBound {
  kNone,     // no meaningful figure (control flow, nothing read or written)
  kCompute,  // compare flops/time with the machine's arithmetic peak
  kMemory,   // compare bytes/time with the machine's memory bandwidth
};

struct NodeCost {
  double flops = 0;  // multiply-adds count 2 (integer ops too)
  double bytes = 0;  // input + output tensor bytes
  CostBound bound = CostBound::kNone;
  bool int8 = false;  // a compute op on 8-bit integer operands (compare with the INT8 peak)
};

// The cost of `node` having read `inputs` and written `outputs` (in the node's input/output order).
// Shapes that do not fit the op's schema (a rank too small) fall back to the memory-bound figure;
// never fails.
NodeCost EstimateNodeCost(const Node& node, std::span<const TensorDims> inputs,
                          std::span<const TensorDims> outputs);

const char* CostBoundName(CostBound bound);  // "none", "compute", "memory"

}  // namespace inferd
