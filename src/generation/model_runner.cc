#include "generation/model_runner.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "graph/onnx_io.h"
#include "optimizer/paged_attention_rewrite.h"
#include "optimizer/sibling_matmul_merge.h"
#include "optimizer/swiglu_fusion.h"
#include "quantize/dynamic_int8.h"
#include "session/session.h"

namespace inferd::gen {
namespace {

// An int field of config.json; `def` (when given) for an absent one. A list takes its first
// element (HF writes eos_token_id as a list for some models).
StatusOr<int> IntField(const rapidjson::Document& doc, const std::string& file, const char* name,
                       std::optional<int> def = std::nullopt) {
  auto it = doc.FindMember(name);
  if (it == doc.MemberEnd() || it->value.IsNull()) {
    if (def) return *def;
    return InvalidArgument("{}: missing field '{}'", file, name);
  }
  const rapidjson::Value* v = &it->value;
  if (v->IsArray() && !v->Empty()) v = &(*v)[0];
  if (!v->IsInt()) return InvalidArgument("{}: field '{}' is not an integer", file, name);
  return v->GetInt();
}

Status CheckConfig(const DecoderConfig& c, const std::string& file) {
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 ||
      c.num_kv_heads <= 0 || c.head_dim <= 0 || c.max_context <= 0) {
    return InvalidArgument(
        "{}: sizes must be positive (vocab {}, hidden {}, layers {}, heads {}, "
        "kv heads {}, head_dim {}, max_position_embeddings {})",
        file, c.vocab_size, c.hidden_size, c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim,
        c.max_context);
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return InvalidArgument("{}: num_key_value_heads {} does not divide num_attention_heads {}",
                           file, c.num_kv_heads, c.num_heads);
  }
  if (c.num_experts < 0 ||
      (c.num_experts > 0 && (c.experts_per_token < 1 || c.experts_per_token > c.num_experts))) {
    return InvalidArgument("{}: num_experts_per_tok {} outside 1..num_local_experts ({})", file,
                           c.experts_per_token, c.num_experts);
  }
  return Status::Ok();
}

// The router load of a mixture-of-experts graph: each ai.inferd.MoE (or MoENBits) node's
// expert_counts output (kernels/cpu/moe/moe.h, moe_nbits.h), named inferd.moe_expert_counts.N when
// the export left it unnamed, becomes a graph output. Returns the layers in graph order with their
// number of experts (the router initializer's second dim; 0 when it is not an initializer, which
// the kernel refuses).
struct MoeLayer {
  std::string counts;
  int64_t experts = 0;
};
std::vector<MoeLayer> ExposeExpertCounts(Graph& g) {
  std::vector<MoeLayer> layers;
  for (auto& n : g.nodes) {
    if (n->domain != "ai.inferd" || (n->op_type != "MoE" && n->op_type != "MoENBits")) continue;
    if (n->outputs.size() < 2) n->outputs.resize(2);
    if (n->outputs[1].empty()) {
      n->outputs[1] = fmt::format("inferd.moe_expert_counts.{}", layers.size());
    }
    if (!g.IsGraphOutput(n->outputs[1])) {
      ValueInfo vi;
      vi.name = n->outputs[1];
      vi.dtype = DataType::kInt64;
      g.outputs.push_back(vi);
    }
    MoeLayer layer{n->outputs[1], 0};
    auto router = n->inputs.size() > 1 ? g.initializers.find(n->inputs[1]) : g.initializers.end();
    if (router != g.initializers.end() && router->second.rank() == 2) {
      layer.experts = router->second.dim(1);
    }
    layers.push_back(std::move(layer));
  }
  return layers;
}

class PagedModelRunner final : public ModelRunner {
 public:
  PagedModelRunner(DecoderConfig config, int block_size, int num_blocks, KvCacheDtype kv_dtype,
                   std::unique_ptr<Session> session);
  const DecoderConfig& config() const override { return config_; }
  int block_size() const override { return block_size_; }
  int num_blocks() const override { return num_blocks_; }
  size_t kv_block_bytes() const override { return KvBlockBytes(config_, block_size_, kv_dtype_); }
  Status Step(std::span<const SequenceChunk> chunks, Tensor* logits) override;
  const Session* session() const override { return session_.get(); }
  std::vector<std::vector<int64_t>> ExpertTokens() const override;
  // Fails when the session needs an input the runner does not feed or has no logits output, or
  // lacks one of the MoE layers' expert count outputs (ExposeExpertCounts).
  Status CheckInterface(const std::vector<MoeLayer>& moe_layers);

 private:
  Status CheckChunk(const SequenceChunk& c) const;
  // The graph inputs of one step (all but the caches).
  std::vector<std::pair<std::string, Tensor>> StepInputs(std::span<const SequenceChunk> chunks,
                                                         std::vector<int64_t>* rows) const;
  Status GatherLogits(const Tensor& out, const std::vector<int64_t>& rows, size_t wanted,
                      Tensor* logits) const;
  // Adds one step's expert counts (the MoE layers' outputs) to expert_tokens_.
  Status AddExpertCounts(const std::vector<Tensor>& outputs);

  const DecoderConfig config_;
  const int block_size_, num_blocks_;
  const KvCacheDtype kv_dtype_;
  std::unique_ptr<Session> session_;
  std::vector<Tensor> key_cache_, value_cache_;    // per layer, owned
  std::vector<Tensor> key_scales_, value_scales_;  // per layer, INT8 caches only
  bool gathers_rows_ = false;                      // the graph has inferd.logits_rows
  size_t logits_index_ = 0;                        // of "logits" in the session's outputs
  // Mixture of experts, per MoE layer: its counts' index in the session's outputs, its experts;
  // the running totals, [layer][expert] flattened, written by Step, read by ExpertTokens.
  std::vector<size_t> moe_index_;
  std::vector<int64_t> moe_experts_;
  std::unique_ptr<std::atomic<int64_t>[]> expert_tokens_;
};

PagedModelRunner::PagedModelRunner(DecoderConfig config, int block_size, int num_blocks,
                                   KvCacheDtype kv_dtype, std::unique_ptr<Session> session)
    : config_(std::move(config)),
      block_size_(block_size),
      num_blocks_(num_blocks),
      kv_dtype_(kv_dtype),
      session_(std::move(session)) {
  const Shape shape = {num_blocks, config_.num_kv_heads, block_size, config_.head_dim};
  const Shape scales = {num_blocks, config_.num_kv_heads, block_size};
  const bool int8 = kv_dtype_ == KvCacheDtype::kInt8;
  const DataType type = int8 ? DataType::kInt8 : DataType::kFloat32;
  for (int l = 0; l < config_.num_layers; ++l) {
    key_cache_.push_back(Tensor::Allocate(type, shape));
    value_cache_.push_back(Tensor::Allocate(type, shape));
    if (int8) {
      key_scales_.push_back(Tensor::Allocate(DataType::kFloat32, scales));
      value_scales_.push_back(Tensor::Allocate(DataType::kFloat32, scales));
    }
  }
}

Status PagedModelRunner::CheckInterface(const std::vector<MoeLayer>& moe_layers) {
  std::set<std::string> fed = {"input_ids",      "position_ids",    kSlotMappingInput,
                               kQueryStartInput, kContextLensInput, kBlockTablesInput,
                               kLogitsRowsInput};
  for (int l = 0; l < config_.num_layers; ++l) {
    fed.insert(KeyCacheInput(l));
    fed.insert(ValueCacheInput(l));
    if (kv_dtype_ == KvCacheDtype::kInt8) {
      fed.insert(KeyScalesInput(l));
      fed.insert(ValueScalesInput(l));
    }
  }
  for (const ValueInfo& in : session_->inputs()) {
    if (!fed.count(in.name)) {
      return FailedPrecondition("the rewritten decoder needs input '{}', not fed by the runner",
                                in.name);
    }
    if (in.name == kLogitsRowsInput) gathers_rows_ = true;
  }
  const auto& outs = session_->outputs();
  int64_t total = 0;
  for (const MoeLayer& layer : moe_layers) {
    auto it = std::find_if(outs.begin(), outs.end(),
                           [&](const ValueInfo& v) { return v.name == layer.counts; });
    if (it == outs.end()) return FailedPrecondition("the decoder lost MoE output '{}'", layer.counts);
    if (layer.experts != config_.num_experts) {
      return InvalidArgument("MoE layer {} has {} experts, config.json's num_local_experts is {}",
                             moe_index_.size(), layer.experts, config_.num_experts);
    }
    moe_index_.push_back(static_cast<size_t>(it - outs.begin()));
    moe_experts_.push_back(layer.experts);
    total += layer.experts;
  }
  expert_tokens_ = std::make_unique<std::atomic<int64_t>[]>(total);
  for (int64_t i = 0; i < total; ++i) expert_tokens_[i].store(0, std::memory_order_relaxed);
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].name == "logits") {
      logits_index_ = i;
      return Status::Ok();
    }
  }
  return FailedPrecondition("the decoder has no output 'logits'");
}

Status PagedModelRunner::AddExpertCounts(const std::vector<Tensor>& outputs) {
  int64_t base = 0;
  for (size_t l = 0; l < moe_index_.size(); ++l) {
    const Tensor& c = outputs[moe_index_[l]];
    if (c.dtype() != DataType::kInt64 || c.NumElements() != moe_experts_[l]) {
      return Internal("MoE layer {}: expert counts came back as {}, expected int64 [{}]", l,
                      c.DebugString(), moe_experts_[l]);
    }
    for (int64_t e = 0; e < moe_experts_[l]; ++e) {
      expert_tokens_[base + e].fetch_add(c.data<int64_t>()[e], std::memory_order_relaxed);
    }
    base += moe_experts_[l];
  }
  return Status::Ok();
}

std::vector<std::vector<int64_t>> PagedModelRunner::ExpertTokens() const {
  std::vector<std::vector<int64_t>> load(moe_index_.size());
  int64_t base = 0;
  for (size_t l = 0; l < moe_index_.size(); ++l) {
    for (int64_t e = 0; e < moe_experts_[l]; ++e) {
      load[l].push_back(expert_tokens_[base + e].load(std::memory_order_relaxed));
    }
    base += moe_experts_[l];
  }
  return load;
}

Status PagedModelRunner::CheckChunk(const SequenceChunk& c) const {
  if (c.tokens.empty()) return InvalidArgument("sequence {}: no tokens in the chunk", c.seq_id);
  const int64_t end = c.start_position + static_cast<int64_t>(c.tokens.size());
  if (c.start_position < 0 || end > config_.max_context) {
    return InvalidArgument("sequence {}: positions {}..{} outside the context of {}", c.seq_id,
                           c.start_position, end - 1, config_.max_context);
  }
  for (int32_t t : c.tokens) {
    if (t < 0 || t >= config_.vocab_size) {
      return InvalidArgument("sequence {}: token {} outside the vocabulary of {}", c.seq_id, t,
                             config_.vocab_size);
    }
  }
  const int64_t blocks = (end + block_size_ - 1) / block_size_;
  if (static_cast<int64_t>(c.block_table.size()) < blocks) {
    return InvalidArgument("sequence {}: block table of {} blocks does not cover {} tokens",
                           c.seq_id, c.block_table.size(), end);
  }
  for (int64_t i = 0; i < blocks; ++i) {
    if (c.block_table[i] < 0 || c.block_table[i] >= num_blocks_) {
      return InvalidArgument("sequence {}: block {} outside the pool of {} blocks", c.seq_id,
                             c.block_table[i], num_blocks_);
    }
  }
  return Status::Ok();
}

std::vector<std::pair<std::string, Tensor>> PagedModelRunner::StepInputs(
    std::span<const SequenceChunk> chunks, std::vector<int64_t>* rows) const {
  int64_t total = 0;
  for (const SequenceChunk& c : chunks) total += static_cast<int64_t>(c.tokens.size());
  // Block tables as wide as the context allows, not as the step needs: decode steps of the same
  // batch then keep one input-shape signature, so they reuse one memory plan.
  const int64_t max_blocks = (config_.max_context + block_size_ - 1) / block_size_;
  const int64_t num_seqs = static_cast<int64_t>(chunks.size());
  Tensor ids = Tensor::Allocate(DataType::kInt64, {1, total});
  Tensor pos = Tensor::Allocate(DataType::kInt64, {1, total});
  Tensor slots = Tensor::Allocate(DataType::kInt64, {total});
  Tensor starts = Tensor::Allocate(DataType::kInt64, {num_seqs + 1});
  Tensor lens = Tensor::Allocate(DataType::kInt64, {num_seqs});
  Tensor tables = Tensor::Allocate(DataType::kInt64, {num_seqs, max_blocks});
  std::fill_n(tables.data<int64_t>(), tables.NumElements(), int64_t{-1});
  int64_t t = 0;
  for (int64_t s = 0; s < num_seqs; ++s) {
    const SequenceChunk& c = chunks[s];
    starts.data<int64_t>()[s] = t;
    for (size_t j = 0; j < c.tokens.size(); ++j, ++t) {
      const int64_t p = c.start_position + static_cast<int64_t>(j);
      ids.data<int64_t>()[t] = c.tokens[j];
      pos.data<int64_t>()[t] = p;
      slots.data<int64_t>()[t] =
          int64_t{c.block_table[p / block_size_]} * block_size_ + p % block_size_;
    }
    const int64_t ctx = c.start_position + static_cast<int64_t>(c.tokens.size());
    lens.data<int64_t>()[s] = ctx;
    for (int64_t b = 0; b < (ctx + block_size_ - 1) / block_size_; ++b) {
      tables.data<int64_t>()[s * max_blocks + b] = c.block_table[b];
    }
    if (c.all_logits) {
      for (int64_t r = t - static_cast<int64_t>(c.tokens.size()); r < t; ++r) rows->push_back(r);
    } else if (c.need_logits) {
      rows->push_back(t - 1);
    }
  }
  starts.data<int64_t>()[num_seqs] = t;
  std::vector<std::pair<std::string, Tensor>> in = {
      {"input_ids", ids},         {"position_ids", pos},     {kSlotMappingInput, slots},
      {kQueryStartInput, starts}, {kContextLensInput, lens}, {kBlockTablesInput, tables}};
  if (gathers_rows_) {
    // At least one row: the head over zero rows is a degenerate shape not worth a kernel case.
    std::vector<int64_t> r = rows->empty() ? std::vector<int64_t>{total - 1} : *rows;
    in.emplace_back(kLogitsRowsInput,
                    Tensor::FromVector<int64_t>(r, {static_cast<int64_t>(r.size())}));
  }
  return in;
}

Status PagedModelRunner::GatherLogits(const Tensor& out, const std::vector<int64_t>& rows,
                                      size_t wanted, Tensor* logits) const {
  const int64_t vocab = config_.vocab_size;
  if (out.dtype() != DataType::kFloat32 || out.rank() != 3 || out.dim(2) != vocab) {
    return Internal("logits came back as {}, expected float32 [1, rows, {}]", out.DebugString(),
                    vocab);
  }
  Tensor result = Tensor::Allocate(DataType::kFloat32, {static_cast<int64_t>(wanted), vocab});
  for (size_t i = 0; i < wanted; ++i) {
    const int64_t row = gathers_rows_ ? static_cast<int64_t>(i) : rows[i];
    if (row >= out.dim(1)) return Internal("logits row {} missing in {}", row, out.DebugString());
    std::memcpy(result.data<float>() + i * vocab, out.data<float>() + row * vocab,
                vocab * sizeof(float));
  }
  *logits = std::move(result);
  return Status::Ok();
}

Status PagedModelRunner::Step(std::span<const SequenceChunk> chunks, Tensor* logits) {
  if (chunks.empty()) return InvalidArgument("a step needs at least one sequence chunk");
  for (const SequenceChunk& c : chunks) RETURN_IF_ERROR(CheckChunk(c));
  std::vector<int64_t> rows;
  std::vector<std::pair<std::string, Tensor>> in = StepInputs(chunks, &rows);
  // Views: the kernel writes the step's K/V (and, INT8, their scales) into the pool in place.
  auto view = [](Tensor& t) { return Tensor::View(t.dtype(), t.shape(), t.raw_data()); };
  for (int l = 0; l < config_.num_layers; ++l) {
    in.emplace_back(KeyCacheInput(l), view(key_cache_[l]));
    in.emplace_back(ValueCacheInput(l), view(value_cache_[l]));
    if (!key_scales_.empty()) {
      in.emplace_back(KeyScalesInput(l), view(key_scales_[l]));
      in.emplace_back(ValueScalesInput(l), view(value_scales_[l]));
    }
  }
  std::vector<Tensor> outputs;
  RETURN_IF_ERROR(session_->Run(in, &outputs));
  RETURN_IF_ERROR(AddExpertCounts(outputs));
  return GatherLogits(outputs[logits_index_], rows, rows.size(), logits);
}

}  // namespace

StatusOr<KvCacheDtype> ParseKvCacheDtype(std::string_view name) {
  if (name == "float32") return KvCacheDtype::kFloat32;
  if (name == "int8") return KvCacheDtype::kInt8;
  return InvalidArgument("unknown kv_cache_dtype '{}' (known: float32, int8)", name);
}

const char* KvCacheDtypeName(KvCacheDtype dtype) {
  return dtype == KvCacheDtype::kInt8 ? "int8" : "float32";
}

size_t KvBlockBytes(const DecoderConfig& c, int block_size, KvCacheDtype dtype) {
  const size_t row = dtype == KvCacheDtype::kInt8 ? c.head_dim + sizeof(float)  // codes + scale
                                                  : c.head_dim * sizeof(float);
  return size_t{2} * c.num_layers * c.num_kv_heads * block_size * row;
}

StatusOr<DecoderConfig> LoadDecoderConfig(const std::filesystem::path& config_json) {
  const std::string file = config_json.string();
  std::ifstream f(config_json);
  if (!f) return InvalidArgument("{}: cannot read the decoder config", file);
  std::stringstream text;
  text << f.rdbuf();
  rapidjson::Document doc;
  doc.Parse(text.str().c_str());
  if (doc.HasParseError() || !doc.IsObject()) {
    return InvalidArgument("{}: not a JSON object ({} at offset {})", file,
                           rapidjson::GetParseError_En(doc.GetParseError()), doc.GetErrorOffset());
  }
  DecoderConfig c;
  auto type = doc.FindMember("model_type");
  if (type != doc.MemberEnd() && type->value.IsString()) c.model_type = type->value.GetString();
  ASSIGN_OR_RETURN(c.vocab_size, IntField(doc, file, "vocab_size"));
  ASSIGN_OR_RETURN(c.hidden_size, IntField(doc, file, "hidden_size"));
  ASSIGN_OR_RETURN(c.num_layers, IntField(doc, file, "num_hidden_layers"));
  ASSIGN_OR_RETURN(c.num_heads, IntField(doc, file, "num_attention_heads"));
  ASSIGN_OR_RETURN(c.num_kv_heads, IntField(doc, file, "num_key_value_heads", c.num_heads));
  if (c.num_heads <= 0) return InvalidArgument("{}: num_attention_heads must be positive", file);
  ASSIGN_OR_RETURN(c.head_dim, IntField(doc, file, "head_dim", c.hidden_size / c.num_heads));
  ASSIGN_OR_RETURN(int n_positions, IntField(doc, file, "n_positions", 0));
  ASSIGN_OR_RETURN(c.max_context,
                   IntField(doc, file, "max_position_embeddings",
                            n_positions > 0 ? std::optional<int>(n_positions) : std::nullopt));
  ASSIGN_OR_RETURN(c.bos_token_id, IntField(doc, file, "bos_token_id", -1));
  ASSIGN_OR_RETURN(c.eos_token_id, IntField(doc, file, "eos_token_id", -1));
  ASSIGN_OR_RETURN(c.num_experts, IntField(doc, file, "num_local_experts", 0));
  ASSIGN_OR_RETURN(c.experts_per_token, IntField(doc, file, "num_experts_per_tok", 2));
  if (c.num_experts == 0) c.experts_per_token = 0;
  RETURN_IF_ERROR(CheckConfig(c, file));
  return c;
}

StatusOr<std::unique_ptr<ModelRunner>> CreateDecoderRunner(const std::filesystem::path& dir,
                                                           const RunnerOptions& options) {
  ASSIGN_OR_RETURN(DecoderConfig config, LoadDecoderConfig(dir / "config.json"));
  if (options.block_size < 1 || options.block_size > 1024) {
    return InvalidArgument("block size {} outside 1..1024", options.block_size);
  }
  if (options.num_threads < 0) {
    return InvalidArgument("num_threads {} is negative (0 means all cores)", options.num_threads);
  }
  if (options.kv_cache_dtype != KvCacheDtype::kFloat32 &&
      options.kv_cache_dtype != KvCacheDtype::kInt8) {
    return InvalidArgument("kv_cache_dtype {} is not one of float32, int8",
                           static_cast<int>(options.kv_cache_dtype));
  }
  const size_t block_bytes = KvBlockBytes(config, options.block_size, options.kv_cache_dtype);
  const size_t num_blocks = options.kv_cache_bytes / block_bytes;
  if (num_blocks < 1 || num_blocks > size_t{1} << 30) {
    return InvalidArgument("a KV cache budget of {} bytes holds {} blocks of {} bytes",
                           options.kv_cache_bytes, num_blocks, block_bytes);
  }
  const std::string model_path = (dir / "model.onnx").string();
  ASSIGN_OR_RETURN(Model model, LoadOnnxModel(model_path));
  PagedAttentionRewriteOptions ro;
  ro.num_layers = config.num_layers;
  ro.num_heads = config.num_heads;
  ro.num_kv_heads = config.num_kv_heads;
  ro.head_dim = config.head_dim;
  ro.block_size = options.block_size;
  ro.int8_cache = options.kv_cache_dtype == KvCacheDtype::kInt8;
  StatusOr<int> rewritten = PagedAttentionRewrite(ro).Run(model.graph);
  if (!rewritten.ok()) {
    return rewritten.status().WithContext(model_path + ": cannot run as a paged decoder");
  }
  // Q/K/V and gate/up become one MatMul each: a decode step makes a third of the kernel calls
  // (and OpenMP barriers) for the same weights read (sibling_matmul_merge.h).
  // Then SiLU(gate) x up reads the merged output once (swiglu_fusion.h).
  if (options.merge_projections) {
    RETURN_IF_ERROR(SiblingMatMulMerge().Run(model.graph).status().WithContext(model_path));
    RETURN_IF_ERROR(SwiGluFusion().Run(model.graph).status().WithContext(model_path));
  }
  if (options.int8_weights) {
    quantize::QuantizeOptions q;
    q.precision = quantize::Precision::kInt8;
    q.dynamic = true;
    quantize::QuantizeReport report;
    RETURN_IF_ERROR(quantize::QuantizeDynamicInt8(model, q, &report)
                        .WithContext(model_path + ": int8 weights"));
  }
  const std::vector<MoeLayer> moe_layers = ExposeExpertCounts(model.graph);
  if (!moe_layers.empty() && config.num_experts == 0) {
    return InvalidArgument(
        "{}: the graph has {} ai.inferd.MoE layers but config.json has no num_local_experts",
        model_path, moe_layers.size());
  }
  SessionOptions so;
  so.num_threads = options.num_threads;
  so.batch_invariant_matmul = true;  // decode and prefill rows alike, alone or batched
  ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(std::move(model), so));
  auto runner = std::make_unique<PagedModelRunner>(std::move(config), options.block_size,
                                                   static_cast<int>(num_blocks),
                                                   options.kv_cache_dtype, std::move(session));
  RETURN_IF_ERROR(runner->CheckInterface(moe_layers).WithContext(model_path));
  return std::unique_ptr<ModelRunner>(std::move(runner));
}

}  // namespace inferd::gen
