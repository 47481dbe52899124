#pragma once
// Eight floats in GCC/clang vector extensions, for the kernels written with them
// (attention/flash_attention.cc, fused/swiglu.cc, util/panel_gemm.cc): AVX2 + FMA code under
// -march=native on the hosts this runs on, still correct (two SSE halves) on any x86-64. One copy
// here, so a unity build (docs/hardening.md) that puts those sources in one translation unit sees
// one definition. Internal linkage, as when each source had its own copy: without AVX, GCC warns
// (-Wpsabi) that 32-byte vector arguments change the ABI of functions other objects could call.

#include <cstdint>

namespace inferd::cpu {
namespace {

typedef float V8 __attribute__((vector_size(32)));
typedef float V8u __attribute__((vector_size(32), aligned(4), may_alias));
typedef int32_t V8i __attribute__((vector_size(32)));

inline V8 Load(const float* p) { return *reinterpret_cast<const V8u*>(p); }
inline void Store(float* p, V8 v) { *reinterpret_cast<V8u*>(p) = v; }
inline V8 Splat(float x) { return V8{x, x, x, x, x, x, x, x}; }

}  // namespace
}  // namespace inferd::cpu
