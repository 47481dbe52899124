#include "kernels/cpu/elementwise_util.h"

namespace inferd::cpu {

std::vector<DataType> TypesOf(TypeClass c) {
  switch (c) {
    case TypeClass::kFloat:
      return FloatTypes();
    case TypeClass::kSignedNumeric: {
      std::vector<DataType> t = FloatTypes();
      for (DataType d : {DataType::kInt8, DataType::kInt16, DataType::kInt32, DataType::kInt64}) {
        t.push_back(d);
      }
      return t;
    }
    case TypeClass::kNumeric:
      return NumericTypes();
    case TypeClass::kInteger:
      return IntegerTypes();
    case TypeClass::kUnsigned:
      return {DataType::kUInt8, DataType::kUInt16, DataType::kUInt32, DataType::kUInt64};
    case TypeClass::kBool:
      return {DataType::kBool};
    case TypeClass::kAll:
      return AllTypes();
  }
  return {};
}

BroadcastPlan PlanBroadcast(const Shape& out, const std::vector<Shape>& inputs) {
  const size_t n = inputs.size();
  std::vector<std::vector<int64_t>> full(n);
  for (size_t k = 0; k < n; ++k) full[k] = BroadcastStrides(inputs[k], out);

  BroadcastPlan plan;
  plan.total = NumElements(out);
  plan.strides.assign(n, {});
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;  // contributes nothing to any offset
    bool merge = !plan.dims.empty();
    for (size_t k = 0; merge && k < n; ++k) {
      // Merging outer dim (last kept) with d requires outer stride == stride[d] * out[d].
      merge = plan.strides[k].back() == full[k][d] * out[d];
    }
    if (merge) {
      plan.dims.back() *= out[d];
      for (size_t k = 0; k < n; ++k) plan.strides[k].back() = full[k][d];
    } else {
      plan.dims.push_back(out[d]);
      for (size_t k = 0; k < n; ++k) plan.strides[k].push_back(full[k][d]);
    }
  }
  if (plan.dims.empty()) {  // scalar output or all dims 1
    plan.dims.push_back(1);
    for (size_t k = 0; k < n; ++k) plan.strides[k].push_back(0);
  }
  return plan;
}

StatusOr<Shape> BroadcastOutputShape(const char* op, const std::vector<const Tensor*>& inputs) {
  std::vector<Shape> shapes;
  shapes.reserve(inputs.size());
  for (const Tensor* t : inputs) shapes.push_back(t->shape());
  StatusOr<Shape> out = BroadcastShapes(shapes);
  if (!out.ok()) return out.status().WithContext(op);
  return out;
}

}  // namespace inferd::cpu
