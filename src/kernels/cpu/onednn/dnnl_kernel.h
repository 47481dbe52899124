// The base of the kernels that run oneDNN primitives, and how they take over a constant weight.
#pragma once

#include <cstddef>

#include "common/status.h"
#include "common/tensor.h"
#include "kernels/cpu/onednn/dnnl_util.h"
#include "kernels/cpu/onednn/packed_weights.h"
#include "runtime/op_kernel.h"

namespace inferd::cpu {

// A kernel implements Run(); Compute() runs it inside DnnlTry, so a dnnl::error (or the
// std::bad_alloc of ScratchMemory) becomes an Internal status naming the node instead of an
// exception crossing the executor. Run has Compute's contract: const, thread safe.
class DnnlKernel : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) const final {
    return DnnlTry(ctx.node(), [&] { return Run(ctx); });
  }

 protected:
  virtual Status Run(KernelContext& ctx) const = 0;
};

// Makes `packed` the owner of the constant input `index` (`w`, from info.ConstantInput(index))
// and releases the initializer: from then on the kernel reads only the input's shape, and its
// per-shape plans use the packed copies.
inline void PackConstantInput(const KernelInfo& info, size_t index, const Tensor& w,
                              PackedWeights* packed) {
  packed->Reset(w);
  info.ReleaseConstantInput(index);
}

}  // namespace inferd::cpu
