// ai.inferd.MoE: a Mixtral-style sparse mixture-of-experts block (the MLP of a decoder layer),
// written by scripts/generation/models.py's export as one node per layer:
//
//   MoE(X float32 [..., H], router [H, E], gate [E, H, I], up [E, H, I], down [E, I, H])
//     -> Y [..., H], expert_counts int64 [E] (optional: tokens routed to each expert by this call)
//   attributes: top_k (1..E, default 2), normalize (0 | 1, default 1)
//
// Per token x: p = softmax(x · router) over the E experts; the top_k largest p (ties: the lower
// expert index), divided by their sum when normalize (Mixtral's renormalized weights), give
// weights w_j for experts e_j; Y = Σ_j w_j · (SiLU(x · gate[e_j]) ⊙ (x · up[e_j])) · down[e_j].
// (ONNX Runtime's com.microsoft.MoE is the same block with the router product outside the op.)
//
// The kernel groups the step's tokens by expert, so each expert's weights are read once per call
// for all the tokens routed to it: router product, top-k per token, the rows of each expert
// gathered, then gate/up panels with SiLU · up fused, down panels, and the weighted sum of each
// token's top_k expert rows. The weights are packed once at load into PanelGemm's panels
// (kernels/cpu/util/panel_gemm.h) and every product sums in PanelGemm's order, so a token's
// output is bit-identical alone or in a batch.
// The router and expert weights must be initializers (constant); a shape or type mismatch, or
// top_k outside 1..E, fails the session's creation naming the node. Registered by
// RegisterMoeKernels (kernels/cpu/register.h).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/util/panel_gemm.h"

namespace inferd::cpu {

// The packed weights of one MoE node.
struct MoeWeights {
  int64_t hidden = 0, inter = 0, experts = 0;
  PanelWeights router;                    // [H, E]
  std::vector<PanelWeights> gate, up;     // per expert [H, I]
  std::vector<PanelWeights> down;         // per expert [I, H]
};

// Packs row-major router [h, e], gate/up [e, h, i], down [e, i, h]; h, i, e >= 1.
void PackMoeWeights(const float* router, const float* gate, const float* up, const float* down,
                    int64_t h, int64_t i, int64_t e, MoeWeights* w);

// y [t, H] = the MoE block over x [t, H] (t >= 0; y must not alias x); counts (may be null):
// [E], set to the number of tokens routed to each expert. 1 <= top_k <= E.
void MoeForward(const float* x, int64_t t, const MoeWeights& w, int top_k, bool normalize,
                float* y, int64_t* counts);

}  // namespace inferd::cpu
