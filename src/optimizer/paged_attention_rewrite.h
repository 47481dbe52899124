// PagedAttentionRewrite: turns a decoder exported in Hugging Face's ONNX layout (explicit
// past_key_values inputs, present outputs) into one whose attention reads and writes a paged KV
// cache the runtime owns: per layer one ai.inferd.PagedAttention node (the op's contract and
// kernel: src/kernels/cpu/attention/; the runner feeding it: src/generation/model_runner.h).
//
// What it matches, per layer N (the layout of scripts/generation/models.py and HF exports):
//   K = Concat(past_key_values.N.key, k_new, axis=2)     V = Concat(past_key_values.N.value, v_new)
//   Kr = K through layout-only ops (Transpose, Reshape, Unsqueeze, Expand, Tile: GQA's repeat)
//        and scalar Mul/Div                               Vr = V likewise
//   P = Softmax(MatMul(Q, Kr) (·c | /c)* [+ mask | Where(mask, ., fill)], axis=-1) [Cast]
//   y = MatMul(P, Vr)
// y becomes PagedAttention(Q, k_new, v_new, inferd.key_cache.N, inferd.value_cache.N,
// inferd.slot_mapping, inferd.query_start, inferd.context_lens, inferd.block_tables) with the
// product of the scalar factors as `scale`. The past_key_values.* inputs, present.* outputs and
// attention_mask go, and the dead mask construction with them; input_ids and position_ids stay
// (fed as [1, T]: all tokens of a step flattened into one row).
//
// With gather_logits_rows, when `logits` is produced by a MatMul (the LM head), a Gather of the
// hidden rows named by a new input `inferd.logits_rows` (int64 [R], token indices) goes before it,
// so the head runs for R rows only and `logits` becomes [1, R, vocab].
//
// Run once, explicitly, before the normal pipeline (the decoder runner does; the default pipeline
// never runs it). A graph it cannot handle fails with FAILED_PRECONDITION naming the layer and the
// reason (no past input, a Concat on another axis, attention read elsewhere, attention_mask still
// used ...). On error the graph may be partly rewritten; discard it.
#pragma once

#include "optimizer/graph_pass.h"

namespace inferd {

struct PagedAttentionRewriteOptions {
  int num_layers = 0;    // layers expected (config.json num_hidden_layers); all must match
  int num_heads = 0;     // query heads
  int num_kv_heads = 0;  // key/value heads (GQA: fewer, dividing num_heads)
  int head_dim = 0;
  int block_size = 16;  // tokens per cache block: the cache inputs' declared dim 2
  bool gather_logits_rows = true;
  // INT8 caches: inferd.key_cache.N / inferd.value_cache.N are declared int8 and each
  // PagedAttention also reads inferd.key_scales.N / inferd.value_scales.N (float32 [num_blocks,
  // kv_heads, block_size]; kernels/cpu/attention/paged_attention.h).
  bool int8_cache = false;
};

class PagedAttentionRewrite final : public GraphPass {
 public:
  explicit PagedAttentionRewrite(const PagedAttentionRewriteOptions& options) : options_(options) {}
  std::string_view Name() const override { return "PagedAttentionRewrite"; }
  // Returns the number of layers rewritten (== num_layers) or an error (see above).
  StatusOr<int> Run(Graph& graph) const override;

 private:
  PagedAttentionRewriteOptions options_;
};

// Names of the inputs the rewrite adds (GEN.md §2).
inline constexpr char kSlotMappingInput[] = "inferd.slot_mapping";
inline constexpr char kQueryStartInput[] = "inferd.query_start";
inline constexpr char kContextLensInput[] = "inferd.context_lens";
inline constexpr char kBlockTablesInput[] = "inferd.block_tables";
inline constexpr char kLogitsRowsInput[] = "inferd.logits_rows";
// "inferd.key_cache.N" / "inferd.value_cache.N".
std::string KeyCacheInput(int layer);
std::string ValueCacheInput(int layer);
// "inferd.key_scales.N" / "inferd.value_scales.N" (int8_cache only).
std::string KeyScalesInput(int layer);
std::string ValueScalesInput(int layer);

}  // namespace inferd
