// The CPU execution provider: every kernel of src/kernels/cpu in one registry, behind the
// runtime's ExecutionProvider interface. The runtime knows no concrete provider; whoever builds
// executors (src/session, constant folding through the optimizer's caller, inferd inspect) asks
// for this one and hands it down.
#pragma once

#include <memory>

#include "runtime/execution_provider.h"

namespace inferd {

// The process-wide CPU provider (kernels registered once, on first use; thread-safe).
std::shared_ptr<ExecutionProvider> CpuProvider();

// Whether this CPU's fast int8 kernels need int8 weights within [-64, 63] to compute exactly: true
// without AVX-512 VNNI, where oneDNN multiplies uint8 x int8 with vpmaddubsw and saturates the
// int16 sum of two products (onednn/dnnl_util.h's DnnlInt8IsExact). Weights outside that range
// then run the int32 reference kernels, several times slower than FP32; the quantizer writes 7-bit
// weights on such CPUs by default (quantize::QuantizeOptions::weight_bits), as ONNX Runtime's
// reduce_range does.
bool CpuInt8NeedsSevenBitWeights();

}  // namespace inferd
