#include "runtime/op_kernel.h"

#include "runtime/graph_executor.h"

namespace inferd {

DataType KernelInfo::InputType(size_t i) const {
  if (!node_.HasInput(i)) return DataType::kUndefined;
  return graph_.ValueType(node_.inputs[i]);
}

DataType KernelInfo::OutputType(size_t i) const {
  if (i >= node_.outputs.size() || node_.outputs[i].empty()) return DataType::kUndefined;
  return graph_.ValueType(node_.outputs[i]);
}

const Tensor* KernelInfo::ConstantInput(size_t i) const {
  if (!node_.HasInput(i)) return nullptr;
  const std::string& name = node_.inputs[i];
  if (graph_.IsGraphInput(name)) return nullptr;  // shadowed: may be fed at run time
  auto it = graph_.initializers.find(name);
  return it == graph_.initializers.end() ? nullptr : &it->second;
}

Tensor* KernelContext::AllocateOutput(size_t i, DataType dtype, Shape shape) {
  // The frame hands out arena memory when the run is planned (graph_executor.h), else the heap.
  outputs_[i] = frame_ ? frame_->AllocateOutput(i, dtype, std::move(shape), /*zero=*/true)
                       : Tensor::Allocate(dtype, std::move(shape));
  return &outputs_[i];
}

Tensor* KernelContext::AllocateOutputUninitialized(size_t i, DataType dtype, Shape shape) {
  outputs_[i] = frame_ ? frame_->AllocateOutput(i, dtype, std::move(shape), /*zero=*/false)
                       : Tensor::Allocate(dtype, std::move(shape));
  return &outputs_[i];
}

Status KernelContext::RunSubgraph(const GraphExecutor& subgraph, std::span<const Tensor> inputs,
                                  std::vector<Tensor>* outputs) const {
  return subgraph.Run(inputs, outputs, frame_);
}

}  // namespace inferd
