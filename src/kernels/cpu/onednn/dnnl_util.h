// oneDNN basics every oneDNN-backed kernel uses: the process-wide CPU engine, conversions from our
// types, plain memory descriptors, user-managed scratchpads, and the error wrapping (DnnlTry).
// The other oneDNN plumbing sits beside this file: scratch.h (per-thread layout scratch),
// packed_weights.h (constant weights packed once), post_ops.h (fused activations) and
// dnnl_kernel.h (the kernel base).
#pragma once

#include <dnnl.hpp>

#include <exception>
#include <unordered_map>
#include <vector>

#include "common/data_type.h"
#include "common/status.h"
#include "common/tensor.h"
#include "graph/graph.h"

namespace inferd::cpu {

// The CPU engine shared by all kernels (oneDNN engines are thread-safe).
dnnl::engine& DnnlEngine();
// Maps a DataType to oneDNN's; data_type::undef when oneDNN has no equivalent.
dnnl::memory::data_type ToDnnl(DataType t);
dnnl::memory::dims ToDims(const Shape& shape);

// oneDNN dilation convention is ONNX dilation - 1.
dnnl::memory::dims DnnlDilations(const std::vector<int64_t>& d);

// Row-major strides of `dims` (for plain memory descriptors in any rank).
dnnl::memory::dims PlainStrides(const dnnl::memory::dims& dims);
dnnl::memory::desc PlainDesc(const dnnl::memory::dims& dims,
                             dnnl::memory::data_type dt = dnnl::memory::data_type::f32);

// CPU features of the kernels oneDNN picks, as oneDNN sees them (ONEDNN_MAX_CPU_ISA applies).
// AVX-512 (avx512_core and up): oneDNN's f32 convolutions block channels by 16 (nChw16c); below
// it by 8 (nChw8c, its AVX2 kernels).
bool DnnlHasAvx512();
// Native bf16 arithmetic (avx512_core_bf16 and up); without it oneDNN emulates bf16 (avx512_core)
// or has no bf16 convolution / matmul at all (AVX2).
bool DnnlHasNativeBf16();
// Whether a primitive descriptor created with allow_empty has a real kernel: not empty and not
// oneDNN's reference implementation ("ref:...", scalar loops), which a caller with another way to
// run the same work (its usual layouts, an unfused pair) should not take.
bool DnnlHasKernel(const dnnl::primitive_desc_base& pd);

// Whether float32 MatMul / FusedMatMul with a constant 2-D B may run util/panel_gemm.h instead of
// oneDNN (at small row counts, and in decoders: onednn/gemm_weights.h): on CPUs below AVX-512
// (where oneDNN 2.6 takes its plain-layout AVX2 gemm) and when this build compiles the panel
// kernel to AVX2 + FMA (-march=native on such a host); elsewhere oneDNN's kernels are the faster
// ones.
bool PreferPanelGemm();

// Whether oneDNN's int8 convolution / matmul computes exactly for `activations` (uint8/int8)
// against the int8 `weights`. With avx512_core_vnni int8 dot products accumulate in int32
// (vpdpbusd): always. Otherwise oneDNN multiplies u8 x s8 with vpmaddubsw, whose int16 sum of two
// adjacent products saturates (oneDNN "Nuances of int8 computations"): exact only when every
// weight fits 7 bits ([-64, 63]: 2 * 255 * 64 <= 32767, what quantizers with reduce_range write
// for such CPUs); and s8 activations are shifted to u8 with the weights halved (rounded) in the
// weights reorder (oneDNN 2.6 does that below avx512_core_vnni, avx2_vnni included), so they are
// never exact there. Callers use their int32 reference when this is false.
bool DnnlInt8IsExact(DataType activations, const Tensor& weights);

// The OpenMP threads a oneDNN primitive created now will run on: most fix their thread count at
// creation (brgemm and jit matmul / convolution take dnnl_get_max_threads() then; a primitive
// created on 2 threads forks 2 even when the caller's count is 1 by the time it runs), so kernels
// key their cached primitives by it as well as by shape. The executor runs small steps on one
// thread (ExecutorOptions::min_parallel_flops), so one node may need both.
int PrimitiveThreads();

// Thread-safety of cached primitives. Debian's oneDNN 2.6 is built with
// DNNL_ENABLE_CONCURRENT_EXEC=OFF: in the default (library) scratchpad mode all primitives of a
// thread share one scratchpad, so a primitive must not run from two threads at once nor move
// between threads — yet our kernels cache primitives per shape and Session::Run is concurrent
// (and server instances run one session from several worker threads). So every primitive a kernel
// caches is created with a user-managed scratchpad (UserScratchpad) and executed through
// ExecutePrimitive, which passes a buffer owned by the calling thread.
dnnl::primitive_attr UserScratchpad(dnnl::primitive_attr attr = dnnl::primitive_attr());
void ExecutePrimitive(const dnnl::primitive& prim, dnnl::stream& s,
                      std::unordered_map<int, dnnl::memory> args);

// Runs fn and converts a dnnl::error (or std::exception) into an Internal status naming `node`.
template <typename Fn>
Status DnnlTry(const Node& node, Fn&& fn) {
  try {
    return fn();
  } catch (const dnnl::error& e) {
    return Status(StatusCode::kInternal, node.Describe() + ": oneDNN error: " + e.what());
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal, node.Describe() + ": " + e.what());
  }
}

}  // namespace inferd::cpu
