// Weight-only INT4/INT8 for decoders (`inferd quantize --precision int4|int8 DECODER_DIR -o OUT`).
//
// Every MatMul whose B is a constant float32 [K, N] becomes ai.inferd.MatMulNBits and every
// Gather along axis 0 of a constant float32 [V, D] table (token and position embeddings) becomes
// ai.inferd.GatherNBits; the LM head is a MatMul like the others. Every ai.inferd.MoE node with
// constant experts becomes ai.inferd.MoENBits (kernels/cpu/moe/moe_nbits.h): each expert's gate,
// up and down quantized like a MatMul's B, the router left float32. Weights are quantized per group
// of 32, 64 or 128 values along K (Gather: along D), symmetric or asymmetric, in the layout of
// kernels/cpu/quantization/nbits_gemm.h; activations stay float32. Nothing else in the graph
// changes (no optimizer pass runs first), so the Hugging Face decoder layout stays as the decoder
// loader's attention rewrite expects it: generation::CreateDecoderRunner loads the result like the
// FP32 folder (its sibling merge joins the Q/K/V and gate/up MatMulNBits, as it does MatMuls).
//
//   NBitsOptions o;  o.bits = 4;  o.group_size = 32;
//   QuantizeReport report;
//   RETURN_IF_ERROR(QuantizeDecoderFolder("build/models/gen/llama-110m", "/tmp/llama-110m-int4",
//                                         o, &report));
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"
#include "graph/graph.h"
#include "quantize/quantizer.h"

namespace inferd::quantize {

struct NBitsOptions {
  int bits = 4;              // 4 or 8
  int64_t group_size = 32;   // 32, 64 or 128
  bool asymmetric = false;   // per-group zero points
  bool embeddings = true;    // Gather tables too
  std::vector<std::string> exclude;  // node names left in float
};

// INVALID_ARGUMENT for bits other than 4/8 or a group size other than 32/64/128.
Status CheckNBitsOptions(const NBitsOptions& options);

// Rewrites `model` in place (see above). INVALID_ARGUMENT naming the tensor for non-finite weights,
// or the node for MoE experts whose shapes disagree (nothing is rewritten then), or when there is
// no MatMul with constant weights at all.
Status QuantizeWeightsNBits(Model& model, const NBitsOptions& options, QuantizeReport* report);

// in/model.onnx + in/config.json → out/model.onnx (quantized) and every other regular file of
// `in` copied (config.json gains "quantization_config": bits, group_size, symmetric), except
// weights.npz (the FP32 training weights). `out` is created; it must not be `in`. INVALID_ARGUMENT
// naming the file when `in` has no config.json (JSON object) or model.onnx.
Status QuantizeDecoderFolder(const std::filesystem::path& in, const std::filesystem::path& out,
                             const NBitsOptions& options, QuantizeReport* report);

}  // namespace inferd::quantize
