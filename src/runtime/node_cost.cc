#include "runtime/node_cost.h"

#include <algorithm>
#include <string_view>

namespace inferd {
namespace {

double Product(const Shape& s, size_t from, size_t to) {
  double p = 1;
  for (size_t i = from; i < to && i < s.size(); ++i) p *= static_cast<double>(s[i]);
  return p;
}

double Numel(const TensorDims& t) { return Product(t.shape, 0, t.shape.size()); }

const TensorDims* At(std::span<const TensorDims> v, size_t i) {
  return i < v.size() && v[i].present ? &v[i] : nullptr;
}

bool IsInt8(DataType t) { return t == DataType::kInt8 || t == DataType::kUInt8; }

// Y = A·B with K = A's last dim (any batch dims in Y): 2·numel(Y)·K.
double MatMulFlops(const TensorDims* a, const TensorDims* y) {
  if (!a || !y || a->shape.empty()) return -1;
  return 2.0 * Numel(*y) * static_cast<double>(a->shape.back());
}

// Convolution Y [N, Cout, spatial...] with W [Cout, Cin/group, kernel...].
// y_channels_last: Y is [N, spatial..., C] (the int8 chains' NHWC QLinearConv), else [N, C, ...].
double ConvFlops(const TensorDims* w, const TensorDims* y, bool y_channels_last = false) {
  if (!w || !y || w->shape.size() < 2 || y->shape.size() != w->shape.size()) return -1;
  const double n = static_cast<double>(y->shape[0]);
  const double cout = static_cast<double>(w->shape[0]);
  const size_t rank = y->shape.size();
  const double spatial =
      y_channels_last ? Product(y->shape, 1, rank - 1) : Product(y->shape, 2, rank);
  return 2.0 * n * cout * spatial * Product(w->shape, 1, w->shape.size());
}

// BlockedConv, optionally with a fused depthwise step (inputs 4, 5): the 1x1 stride-1 convolution
// keeps X's spatial dims, the depthwise one produces Y's.
double BlockedConvFlops(std::span<const TensorDims> in, const TensorDims* y) {
  const TensorDims* x = At(in, 0);
  const TensorDims* w = At(in, 1);
  const TensorDims* wdw = At(in, 4);
  if (!wdw) return ConvFlops(w, y);
  if (!x || !w || !y || x->shape.size() < 3 || w->shape.size() < 2 || wdw->shape.size() < 2 ||
      y->shape.size() != x->shape.size()) {
    return -1;
  }
  const double n = static_cast<double>(x->shape[0]);
  const double first = 2.0 * n * static_cast<double>(w->shape[0]) *
                       Product(x->shape, 2, x->shape.size()) *
                       Product(w->shape, 1, w->shape.size());
  const double dw = 2.0 * n * static_cast<double>(wdw->shape[0]) *
                    Product(y->shape, 2, y->shape.size()) *
                    Product(wdw->shape, 1, wdw->shape.size());
  return first + dw;
}

double GemmFlops(const Node& node, const TensorDims* a, const TensorDims* y) {
  if (!a || !y || a->shape.size() != 2) return -1;
  const int64_t k = node.GetInt("transA", 0) != 0 ? a->shape[0] : a->shape[1];
  return 2.0 * Numel(*y) * static_cast<double>(k);
}

double ConvTransposeFlops(const TensorDims* x, const TensorDims* w) {
  if (!x || !w || w->shape.size() < 2 || w->shape[0] == 0) return -1;
  return 2.0 * Numel(*x) * Product(w->shape, 1, w->shape.size());
}

double AttentionFlops(std::span<const TensorDims> in) {
  const TensorDims* q = At(in, 0);
  const TensorDims* k = At(in, 1);
  const TensorDims* v = At(in, 2);
  if (!q || !k || !v || q->shape.size() != 3 || k->shape.size() != 3 || v->shape.size() != 3) {
    return -1;
  }
  const double b = static_cast<double>(q->shape[0]), sq = static_cast<double>(q->shape[1]);
  const double skv = static_cast<double>(k->shape[1]);
  return 2.0 * b * sq * skv * static_cast<double>(q->shape[2] + v->shape[2]);
}

// FLOPs of a counted op; -1 when the op is not counted or the shapes do not fit it. Sets *int8
// when the operands are 8-bit integers.
double ComputeFlops(const Node& node, std::span<const TensorDims> in,
                    std::span<const TensorDims> out, bool* int8) {
  const std::string_view op = node.op_type;
  const TensorDims* y = At(out, 0);
  const TensorDims* x = At(in, 0);
  *int8 = x && IsInt8(x->dtype);
  if (op == "MatMul" || op == "FusedMatMul" || op == "MatMulNBits" || op == "MatMulInt4") {
    return MatMulFlops(x, y);
  }
  if (op == "MatMulInteger" || op == "QLinearMatMul") {
    *int8 = true;
    return MatMulFlops(x, y);
  }
  if (op == "Gemm") return GemmFlops(node, x, y);
  if (op == "Conv") return ConvFlops(At(in, 1), y);
  if (op == "ConvInteger") {
    *int8 = true;
    return ConvFlops(At(in, 1), y);
  }
  if (op == "QLinearConv") {
    *int8 = true;
    return ConvFlops(At(in, 3), y, node.GetInt("y_channels_last", 0) != 0);
  }
  if (op == "BlockedConv") return BlockedConvFlops(in, y);
  if (op == "ConvTranspose") return ConvTransposeFlops(x, At(in, 1));
  if (op == "Attention" && node.domain == "ai.inferd") return AttentionFlops(in);
  return -1;
}

}  // namespace

NodeCost EstimateNodeCost(const Node& node, std::span<const TensorDims> inputs,
                          std::span<const TensorDims> outputs) {
  NodeCost cost;
  auto bytes = [](const TensorDims& t) {
    return t.present ? Numel(t) * static_cast<double>(SizeOf(t.dtype)) : 0.0;
  };
  for (const TensorDims& t : inputs) cost.bytes += bytes(t);
  for (const TensorDims& t : outputs) cost.bytes += bytes(t);
  const std::string_view op = node.op_type;
  // A gather reads only the rows it copies, not its whole table (an embedding's 94 MB).
  if (op.starts_with("Gather") && !inputs.empty() && !outputs.empty()) {
    cost.bytes += std::min(0.0, bytes(outputs[0]) - bytes(inputs[0]));
  }
  if (op == "If" || op == "Loop" || op == "Scan") return cost;
  bool int8 = false;
  const double flops = ComputeFlops(node, inputs, outputs, &int8);
  if (flops >= 0) {
    cost.flops = flops;
    cost.bound = CostBound::kCompute;
    cost.int8 = int8;
  } else if (cost.bytes > 0) {
    cost.bound = CostBound::kMemory;
  }
  return cost;
}

const char* CostBoundName(CostBound bound) {
  switch (bound) {
    case CostBound::kCompute:
      return "compute";
    case CostBound::kMemory:
      return "memory";
    case CostBound::kNone:
      break;
  }
  return "none";
}

}  // namespace inferd
