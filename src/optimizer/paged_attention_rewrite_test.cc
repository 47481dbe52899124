// PagedAttentionRewrite on a hand-built one-layer decoder attention in the Hugging Face layout:
// what it produces, and the clear refusals for graphs it cannot handle. The numerics (rewritten
// test-llama/test-gpt2 against the original graph) are in src/generation/model_runner_test.cc.
#include "optimizer/paged_attention_rewrite.h"

#include <gtest/gtest.h>

#include <cmath>

#include "optimizer/test_graphs.h"

namespace inferd::testing {
namespace {

constexpr int64_t kHeads = 4, kKvHeads = 2, kDim = 8;

PagedAttentionRewriteOptions Options(int layers = 1) {
  PagedAttentionRewriteOptions o;
  o.num_layers = layers;
  o.num_heads = kHeads;
  o.num_kv_heads = kKvHeads;
  o.head_dim = kDim;
  o.block_size = 4;
  return o;
}

// One layer: q [1,4,S,8] (a graph input, standing in for the projections), k/v [1,2,S,8];
// K/V = Concat(past, new); GQA repeat by Tile; scores / sqrt(8) + mask(attention_mask); Softmax;
// MatMul with V; lm head MatMul on "attn" flattened. `concat_axis` and `scores_output` break it.
ModelBuilder Decoder(int64_t concat_axis = 2, bool scores_output = false) {
  ModelBuilder b;
  b.Input("input_ids", {1, 3}, DataType::kInt64).Input("position_ids", {1, 3}, DataType::kInt64);
  b.Input("attention_mask", {1, 5}, DataType::kInt64);
  b.Input("past_key_values.0.key", {1, kKvHeads, 2, kDim});
  b.Input("past_key_values.0.value", {1, kKvHeads, 2, kDim});
  b.Input("q", {1, kHeads, 3, kDim}).Input("k", {1, kKvHeads, 3, kDim});
  b.Input("v", {1, kKvHeads, 3, kDim});
  b.Init("sqrt_d", Tensor::Scalar<float>(std::sqrt(float(kDim))));
  b.Init("repeat", Tensor::FromVector<int64_t>({1, 2, 1, 1}));
  b.Init("neg", Tensor::Scalar<float>(-1e9f));
  b.Init("mask_axes", Tensor::FromVector<int64_t>({1, 2}));
  b.Init("head_w", RandomFloat({kDim, 16}));
  b.Add("Concat", {"past_key_values.0.key", "k"}, {"present.0.key"},
        {{"axis", AttrInt(concat_axis)}});
  b.Add("Concat", {"past_key_values.0.value", "v"}, {"present.0.value"}, {{"axis", AttrInt(2)}});
  b.Add("Tile", {"present.0.key", "repeat"}, {"k_rep"});
  b.Add("Tile", {"present.0.value", "repeat"}, {"v_rep"});
  b.Add("Transpose", {"k_rep"}, {"k_t"}, {{"perm", AttrInts({0, 1, 3, 2})}});
  b.Add("MatMul", {"q", "k_t"}, {"scores"});
  b.Add("Div", {"scores", "sqrt_d"}, {"scaled"});
  b.Add("Cast", {"attention_mask"}, {"mask_f"}, {{"to", AttrInt(1)}});
  b.Add("Unsqueeze", {"mask_f", "mask_axes"}, {"mask_4d"});
  b.Add("Mul", {"mask_4d", "neg"}, {"mask_add"});
  b.Add("Add", {"scaled", "mask_add"}, {"masked"});
  b.Add("Softmax", {"masked"}, {"probs"}, {{"axis", AttrInt(-1)}});
  b.Add("MatMul", {"probs", "v_rep"}, {"attn"}, {}, "layer0/attn_v");
  b.Add("MatMul", {"attn", "head_w"}, {"logits"});
  b.Output("logits").Output("present.0.key").Output("present.0.value");
  if (scores_output) b.Output("scores");
  return b;
}

TEST(PagedAttentionRewrite, ReplacesTheAttentionCoreAndTheCacheInterface) {
  Model m = Decoder().Build();
  StatusOr<int> fired = PagedAttentionRewrite(Options()).Run(m.graph);
  ASSERT_TRUE(fired.ok()) << fired.status().ToString();
  EXPECT_EQ(*fired, 1);
  const Node* pa = nullptr;
  for (const auto& n : m.graph.nodes) {
    if (n->op_type == "PagedAttention") pa = n.get();
  }
  ASSERT_NE(pa, nullptr);
  EXPECT_EQ(pa->domain, "ai.inferd");
  EXPECT_EQ(pa->outputs[0], "attn");  // the replaced MatMul's output keeps its name
  EXPECT_EQ(pa->inputs,
            (std::vector<std::string>{"q", "k", "v", "inferd.key_cache.0", "inferd.value_cache.0",
                                      "inferd.slot_mapping", "inferd.query_start",
                                      "inferd.context_lens", "inferd.block_tables"}));
  EXPECT_NEAR(pa->GetFloat("scale", 0), 1.0 / std::sqrt(double(kDim)), 1e-6);
  EXPECT_EQ(pa->GetInt("num_heads", 0), kHeads);
  EXPECT_EQ(pa->GetInt("num_kv_heads", 0), kKvHeads);
  for (const char* gone : {"Softmax", "Concat", "Tile", "Cast", "Unsqueeze", "Div"}) {
    EXPECT_EQ(CountOps(m.graph, gone), 0) << gone;
  }
  std::vector<std::string> inputs, outputs;
  for (const auto& v : m.graph.inputs) inputs.push_back(v.name);
  for (const auto& v : m.graph.outputs) outputs.push_back(v.name);
  EXPECT_EQ(inputs, (std::vector<std::string>{
                        "input_ids", "position_ids", "q", "k", "v", "inferd.slot_mapping",
                        "inferd.query_start", "inferd.context_lens", "inferd.block_tables",
                        "inferd.key_cache.0", "inferd.value_cache.0", "inferd.logits_rows"}));
  EXPECT_EQ(outputs, std::vector<std::string>{"logits"});
  // The head reads the gathered rows.
  EXPECT_EQ(CountOps(m.graph, "Gather"), 1);
  const ValueInfo* cache = m.graph.FindValueInfo("inferd.key_cache.0");
  ASSERT_NE(cache, nullptr);
  ASSERT_TRUE(cache->shape.has_value());
  EXPECT_EQ((*cache->shape)[2].value, 4);  // block size
}

TEST(PagedAttentionRewrite, WithoutLogitsGatherKeepsTheHead) {
  Model m = Decoder().Build();
  PagedAttentionRewriteOptions o = Options();
  o.gather_logits_rows = false;
  ASSERT_TRUE(PagedAttentionRewrite(o).Run(m.graph).ok());
  EXPECT_EQ(CountOps(m.graph, "Gather"), 0);
  EXPECT_FALSE(m.graph.IsGraphInput("inferd.logits_rows"));
}

void ExpectFails(Model m, const PagedAttentionRewriteOptions& o, const std::string& reason) {
  StatusOr<int> r = PagedAttentionRewrite(o).Run(m.graph);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(reason), std::string::npos) << r.status().ToString();
}

TEST(PagedAttentionRewrite, RefusesWithTheReason) {
  ExpectFails(Decoder(1).Build(), Options(), "not Concat(past, new, axis=2)");
  ExpectFails(Decoder(2, true).Build(), Options(), "scores 'scores' are read outside attention");
  ExpectFails(Decoder().Build(), Options(2), "no input 'past_key_values.1.key'");
  PagedAttentionRewriteOptions bad = Options();
  bad.num_kv_heads = 3;
  ExpectFails(Decoder().Build(), bad, "kv heads (dividing heads)");
  bad = Options();
  bad.head_dim = 16;
  ExpectFails(Decoder().Build(), bad, "head_dim where config.json says 16");
}

TEST(PagedAttentionRewrite, RefusesAMaskUsedOutsideAttention) {
  ModelBuilder b = Decoder();
  b.Add("Identity", {"attention_mask"}, {"mask_copy"});
  b.Output("mask_copy", {}, false, DataType::kInt64);
  ExpectFails(b.Build(), Options(), "'attention_mask' is still read by Identity");
}

TEST(PagedAttentionRewrite, RefusesAGraphWithoutTheCacheLayout) {
  ModelBuilder b;
  b.Input("input_ids", {1, 3}, DataType::kInt64).Input("position_ids", {1, 3}, DataType::kInt64);
  b.Add("Identity", {"input_ids"}, {"logits"});
  b.Output("logits");
  ExpectFails(b.Build(), Options(), "no input 'past_key_values.0.key'");
}

}  // namespace
}  // namespace inferd::testing
