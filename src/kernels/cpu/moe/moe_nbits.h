// ai.inferd.MoENBits: ai.inferd.MoE (moe.h) with 4- or 8-bit expert weights, what
// `inferd quantize --precision int4|int8` writes for each MoE node of a decoder folder
// (quantize/nbits_weights.h):
//
//   MoENBits(X float32 [..., H], router float32 [H, E],
//            gate [E, I, NBitsRowBytes(bits, H)], gate_scales float32 [E, I, G(H)],
//            up   [E, I, NBitsRowBytes(bits, H)], up_scales   float32 [E, I, G(H)],
//            down [E, H, NBitsRowBytes(bits, I)], down_scales float32 [E, H, G(I)],
//            gate_zero_points [E, I, G(H)], up_zero_points [E, I, G(H)],
//            down_zero_points [E, H, G(I)])          (zero points: all three, or none: symmetric)
//     -> Y [..., H], expert_counts int64 [E] (optional)
//   attributes: bits (4 | 8), block_size (32 | 64 | 128), top_k and normalize (as MoE)
//   G(K) = ceil(K / block_size); codes and zero points uint8 for 4 bits, int8 for 8 bits.
//
// Expert e's gate[e] is MatMulNBits' B for MoE's gate[e] [H, I]: the transpose, one row per output
// column, in kernels/cpu/quantization/nbits_gemm.h's layout (32-value sub-blocks, Q4_0 nibble
// order, float scales per group); up and down alike. The router stays float32: H x E values, and
// the top-k choice is what quantizing it would move.
//
// Routing, grouping by expert and the final weighted sum are MoE's (moe_routing.h). At load every
// expert matrix is repacked into NBitsDecodeWeights (8-row tiles, 2 MB pages) and the node's
// initializers are released: one copy of the weights, a quarter (8 bits) or an eighth (4 bits)
// of MoE's plus the scales. Per call the step's tokens are quantized to int8 per 32 values once
// (as MatMulNBits' decode path does), each expert's rows run the decode micro-kernels
// (NBitsDecodeTiles: AVX2 maddubs/madd on the raw codes) over runs of gate and up tiles with
// SiLU(gate) · up fused, those products are quantized again for down. Unlike MatMulNBits, which
// dequantizes into float panels above 8 rows, every row count takes this integer path, prefill
// included (it reads each expert's codes once per call either way): so a token's output is
// bit-identical alone or in any batch, as with MoE, and differs from MoE on the dequantized
// weights only by the activations' rounding (|Δ| <= Σ |w| · step / 2 per product, step =
// max|a| / 127 per 32 values against 4-bit weights, / 63 against 8-bit ones).
//
// Bad input fails the session's creation naming the node: bits or block_size outside the sets
// above, top_k outside 1..E, a weight of the wrong type or shape (the message says the expected
// one), zero points for only some matrices, weights that are not initializers.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/quantization/nbits_gemm.h"
#include "kernels/cpu/util/panel_gemm.h"
#include "runtime/kernel_registry.h"

namespace inferd::cpu {

// The repacked weights of one MoENBits node.
struct MoeNBitsWeights {
  int64_t hidden = 0, inter = 0, experts = 0;
  PanelWeights router;                       // [H, E]
  std::vector<NBitsDecodeWeights> gate, up;  // per expert: I rows of H values
  std::vector<NBitsDecodeWeights> down;      // per expert: H rows of I values
};

// One expert's three matrices in the file layout (gate, up: n = I, k = H; down: n = H, k = I;
// all with the same bits and group, zero points all null or none).
struct MoeNBitsExpert {
  NBitsWeights gate, up, down;
};

// Packs router [h, e] (row-major float32) and the experts (e of them, h, i >= 1).
void PackMoeNBitsWeights(const float* router, int64_t h, const std::vector<MoeNBitsExpert>& experts,
                         MoeNBitsWeights* w);

// y [t, H] = the MoE block over x [t, H] with the quantized experts (t >= 0; y must not alias x);
// counts (may be null): [E] tokens routed to each expert. 1 <= top_k <= E.
void MoeNBitsForward(const float* x, int64_t t, const MoeNBitsWeights& w, int top_k, bool normalize,
                     float* y, int64_t* counts);

// Registers ai.inferd.MoENBits (called by RegisterMoeKernels).
void RegisterMoeNBitsKernel(KernelRegistry& r);

}  // namespace inferd::cpu
