// ModelRunner on the generation test models (test-llama: GQA + rotary, test-gpt2: learned
// positions, tied head) against the original ONNX graph run by Session with explicit
// past_key_values, and against PyTorch (reference.json): prefill, chunked prefill, decode, and a
// mixed step of several sequences on non-contiguous blocks. Tolerance 1e-4 (absolute + relative).
//
// The models come from scripts/generation/build_models.py (`make gen-models`) in
// $INFERD_GEN_MODELS_DIR, default <build>/models/gen. Without them these tests skip, unless
// INFERD_GEN_MODELS_REQUIRED is set (the ctest `generation_runner_models`, label models, which
// builds them first): then they fail.
#include "generation/model_runner.h"
#include "generation/test_util.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "graph/onnx_io.h"
#include "optimizer/paged_attention_rewrite.h"
#include "session/session.h"

namespace inferd::gen {
namespace model_runner_test {
namespace {

namespace fs = std::filesystem;

void ExpectNear(const float* got, const float* want, int64_t n, const std::string& what) {
  int bad = 0;
  for (int64_t i = 0; i < n && bad < 5; ++i) {
    if (!(std::fabs(got[i] - want[i]) <= 1e-4f + 1e-4f * std::fabs(want[i]))) {
      ADD_FAILURE() << what << ": logit " << i << " is " << got[i] << ", want " << want[i];
      ++bad;
    }
  }
}

Tensor Zeros(Shape s) { return Tensor::Allocate(DataType::kFloat32, std::move(s)); }
Tensor Ints(const std::vector<int64_t>& v) {
  return Tensor::FromVector<int64_t>(v, {1, static_cast<int64_t>(v.size())});
}

// The original graph, cache in and out explicitly (B = 1).
class Reference {
 public:
  void Open(const fs::path& dir, const DecoderConfig& c) {
    config_ = c;
    auto s = Session::Create(dir / "model.onnx");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    session_ = std::move(*s);
    Reset();
  }
  void Reset() {
    past_.assign(2 * config_.num_layers, Zeros({1, config_.num_kv_heads, 0, config_.head_dim}));
    length_ = 0;
  }
  // Runs `tokens` after what is cached; returns logits [n, vocab] and extends the cache.
  std::vector<float> Run(const std::vector<int32_t>& tokens) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    std::vector<int64_t> ids(tokens.begin(), tokens.end()), pos(n);
    for (int64_t j = 0; j < n; ++j) pos[j] = length_ + j;
    std::vector<std::pair<std::string, Tensor>> in = {
        {"input_ids", Ints(ids)},
        {"attention_mask", Ints(std::vector<int64_t>(length_ + n, 1))},
        {"position_ids", Ints(pos)}};
    for (int l = 0; l < config_.num_layers; ++l) {
      in.emplace_back(fmt::format("past_key_values.{}.key", l), past_[2 * l]);
      in.emplace_back(fmt::format("past_key_values.{}.value", l), past_[2 * l + 1]);
    }
    std::vector<Tensor> out;
    Status st = session_->Run(in, &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) return {};
    for (size_t i = 0; i < session_->outputs().size(); ++i) {
      const std::string& name = session_->outputs()[i].name;
      for (int l = 0; l < config_.num_layers; ++l) {
        if (name == fmt::format("present.{}.key", l)) past_[2 * l] = out[i].Clone();
        if (name == fmt::format("present.{}.value", l)) past_[2 * l + 1] = out[i].Clone();
      }
      if (name == "logits") logits_ = out[i].Clone();
    }
    length_ += n;
    return std::vector<float>(logits_.data<float>(), logits_.data<float>() + logits_.NumElements());
  }

 private:
  DecoderConfig config_;
  std::unique_ptr<Session> session_;
  std::vector<Tensor> past_;
  Tensor logits_;
  int64_t length_ = 0;
};

// The random-weight test models attend almost uniformly (scores ~0.05), which would hide most
// attention bugs; this copy multiplies each layer's 1/sqrt(head_dim) score scale by 32, so the
// softmax is peaked and the logits depend on which keys each query sees. Both the runner and the
// reference read the copy. Written once per model and process into the test's temp dir.
fs::path SharpenedModel(const std::string& name, int head_dim) {
  static std::set<std::string> written;  // this process's copies (a stale one may be on disk)
  const fs::path dir = fs::path(::testing::TempDir()) / ("sharp_" + name);
  if (written.count(name)) return dir;
  written.insert(name);
  const fs::path src = GenModelsDir() / name;
  auto model = LoadOnnxModel(src / "model.onnx");
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return src;
  const float scale = 1.f / std::sqrt(static_cast<float>(head_dim));
  int sharpened = 0;
  for (auto& n : model->graph.nodes) {
    const Tensor* t = n->GetTensor("value");
    if (n->op_type != "Constant" || t == nullptr || t->dtype() != DataType::kFloat32 ||
        t->NumElements() != 1) {
      continue;
    }
    const float c = *t->data<float>();
    const bool mul = std::fabs(c - scale) < 1e-6f, div = std::fabs(c - 1 / scale) < 1e-4f;
    if (!mul && !div) continue;  // not Mul(scores, 1/sqrt(D)) nor Div(scores, sqrt(D))
    Tensor v = t->Clone();
    *v.data<float>() = mul ? c * 32 : c / 32;
    n->attributes["value"].t = v;
    ++sharpened;
  }
  EXPECT_GT(sharpened, 0) << name << ": no attention scale constant to sharpen";
  fs::create_directories(dir);
  Status st = SaveOnnxModel(*model, dir / "model.onnx");
  EXPECT_TRUE(st.ok()) << st.ToString();
  fs::copy_file(src / "config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  return dir;
}

rapidjson::Document ReadJson(const fs::path& path) {
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  rapidjson::Document doc;
  doc.Parse(text.str().c_str());
  return doc;
}

std::vector<int32_t> RandomTokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

class DecoderModel : public ::testing::TestWithParam<const char*> {
 protected:
  // The runner and the reference on the model (sharpened: see SharpenedModel).
  void Open(int block_size = 4, bool sharpened = true) {
    RunnerOptions o;
    o.block_size = block_size;
    o.kv_cache_bytes = 2 << 20;
    o.num_threads = 1;
    auto config = LoadDecoderConfig(GenModelsDir() / GetParam() / "config.json");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    const fs::path dir =
        sharpened ? SharpenedModel(GetParam(), config->head_dim) : GenModelsDir() / GetParam();
    auto r = CreateDecoderRunner(dir, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    runner_ = std::move(*r);
    vocab_ = runner_->config().vocab_size;
    ASSERT_NO_FATAL_FAILURE(ref_.Open(dir, runner_->config()));
  }
  // One sequence's chunk of a step.
  Tensor StepOne(const std::vector<int32_t>& tokens, int64_t start,
                 const std::vector<int32_t>& table) {
    SequenceChunk c{1, tokens, start, table, true};
    Tensor logits;
    Status st = runner_->Step({&c, 1}, &logits);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return logits;
  }
  const float* Row(const std::vector<float>& all, int64_t row) { return all.data() + row * vocab_; }

  std::unique_ptr<ModelRunner> runner_;
  Reference ref_;
  int64_t vocab_ = 0;
};

TEST_P(DecoderModel, PrefillMatchesPyTorchReference) {
  REQUIRE_GEN_MODEL(GetParam());
  ASSERT_NO_FATAL_FAILURE(Open(16, /*sharpened=*/false));
  rapidjson::Document doc = ReadJson(GenModelsDir() / GetParam() / "reference.json");
  ASSERT_TRUE(doc.IsObject() && doc.HasMember("prompts") && doc.HasMember("logits_first"));
  const auto& prompts = doc["prompts"];
  ASSERT_GT(prompts.Size(), 0u);
  const std::vector<int32_t> table = {5, 2, 7, 0, 1, 3};  // any blocks, out of order
  for (rapidjson::SizeType p = 0; p < prompts.Size(); ++p) {
    std::vector<int32_t> tokens;
    for (const auto& t : prompts[p].GetArray()) tokens.push_back(t.GetInt());
    std::vector<float> want;
    for (const auto& v : doc["logits_first"][p].GetArray()) want.push_back(v.GetFloat());
    ASSERT_EQ(static_cast<int64_t>(want.size()), vocab_);
    Tensor got = StepOne(tokens, 0, table);
    ASSERT_EQ(got.shape(), (Shape{1, vocab_}));
    ExpectNear(got.data<float>(), want.data(), vocab_, fmt::format("prompt {}", p));
  }
}

// All reference prompts at once: one prefill step, then every step decodes all of them together
// (continuous batching's decode), greedy; the tokens must be PyTorch's.
TEST_P(DecoderModel, BatchedGreedyDecodingMatchesPyTorch) {
  REQUIRE_GEN_MODEL(GetParam());
  ASSERT_NO_FATAL_FAILURE(Open(16, /*sharpened=*/false));
  rapidjson::Document doc = ReadJson(GenModelsDir() / GetParam() / "reference.json");
  ASSERT_TRUE(doc.IsObject() && doc.HasMember("greedy") && doc["greedy"].IsArray());
  const auto& prompts = doc["prompts"];
  const rapidjson::SizeType n = prompts.Size();
  ASSERT_GT(n, 0u);
  ASSERT_EQ(doc["greedy"].Size(), n);
  std::vector<std::vector<int32_t>> seqs(n), tables(n), next(n);
  for (rapidjson::SizeType p = 0; p < n; ++p) {
    for (const auto& t : prompts[p].GetArray()) seqs[p].push_back(t.GetInt());
    for (int b = 0; b < 8; ++b) tables[p].push_back(static_cast<int32_t>(b * n + p));  // strided
  }
  const int steps = static_cast<int>(doc["greedy"][0].Size());
  std::vector<int64_t> start(n, 0);
  for (int step = 0; step < steps; ++step) {
    std::vector<SequenceChunk> chunks;
    for (rapidjson::SizeType p = 0; p < n; ++p) {
      const std::vector<int32_t>& tokens = step == 0 ? seqs[p] : next[p];
      chunks.push_back({p, tokens, start[p], tables[p], true});
    }
    Tensor logits;
    Status st = runner_->Step(chunks, &logits);
    ASSERT_TRUE(st.ok()) << st.ToString();
    for (rapidjson::SizeType p = 0; p < n; ++p) {
      start[p] += static_cast<int64_t>(chunks[p].tokens.size());
      const float* l = logits.data<float>() + p * vocab_;
      next[p] = {static_cast<int32_t>(std::max_element(l, l + vocab_) - l)};
    }
    for (rapidjson::SizeType p = 0; p < n; ++p) {
      ASSERT_EQ(next[p][0], doc["greedy"][p][step].GetInt())
          << "prompt " << p << ", generated token " << step;
    }
  }
}

TEST_P(DecoderModel, PrefillInOneAndTwoChunksMatchesTheOriginalGraph) {
  REQUIRE_GEN_MODEL(GetParam());
  ASSERT_NO_FATAL_FAILURE(Open());
  const std::vector<int32_t> tokens = RandomTokens(11, vocab_, 1);
  std::vector<float> want = ref_.Run(tokens);
  const std::vector<int32_t> table = {6, 1, 4};  // 11 tokens over blocks of 4
  ExpectNear(StepOne(tokens, 0, table).data<float>(), Row(want, 10), vocab_, "one chunk");
  const std::vector<int32_t> first(tokens.begin(), tokens.begin() + 5),
      second(tokens.begin() + 5, tokens.end());
  const std::vector<int32_t> other = {2, 9, 3};
  ExpectNear(StepOne(first, 0, other).data<float>(), Row(want, 4), vocab_, "chunk 1");
  ExpectNear(StepOne(second, 5, other).data<float>(), Row(want, 10), vocab_, "chunk 2");
}

TEST_P(DecoderModel, DecodeStepsMatchTheGraphWithExplicitPast) {
  REQUIRE_GEN_MODEL(GetParam());
  ASSERT_NO_FATAL_FAILURE(Open());
  const std::vector<int32_t> prompt = RandomTokens(6, vocab_, 2);
  const std::vector<int32_t> table = {10, 3, 8};  // positions 0..11
  std::vector<float> want = ref_.Run(prompt);
  Tensor got = StepOne(prompt, 0, table);
  ExpectNear(got.data<float>(), Row(want, 5), vocab_, "prefill");
  int64_t pos = 6;
  for (int step = 0; step < 5; ++step, ++pos) {
    const float* l = got.data<float>();
    const int32_t next = static_cast<int32_t>(std::max_element(l, l + vocab_) - l);
    want = ref_.Run({next});
    got = StepOne({next}, pos, table);
    ExpectNear(got.data<float>(), want.data(), vocab_, fmt::format("decode {}", step));
  }
}

// Four sequences in one step: a fresh prefill, a decode, a prefill chunk after a cached prefix,
// and a chunk whose logits are not asked for; blocks of 4, scattered over the pool.
TEST_P(DecoderModel, MixedStepOfSeveralSequences) {
  REQUIRE_GEN_MODEL(GetParam());
  ASSERT_NO_FATAL_FAILURE(Open());
  const std::vector<int32_t> a = RandomTokens(9, vocab_, 3), b = RandomTokens(7, vocab_, 4),
                             c = RandomTokens(9, vocab_, 5), d = RandomTokens(3, vocab_, 6);
  const std::vector<int32_t> ta = {7, 2, 11}, tb = {3, 0}, tc = {5, 9, 1}, td = {12};
  std::map<char, std::vector<float>> want;
  for (auto [name, tokens] : {std::pair{'a', a}, {'b', b}, {'c', c}}) {
    ref_.Reset();
    want[name] = ref_.Run(tokens);
  }
  // Step 1: b's first 6 tokens and c's first 4.
  const std::vector<int32_t> b6(b.begin(), b.begin() + 6), c4(c.begin(), c.begin() + 4);
  std::vector<SequenceChunk> step1 = {{2, b6, 0, tb, true}, {3, c4, 0, tc, false}};
  Tensor logits;
  ASSERT_TRUE(runner_->Step(step1, &logits).ok());
  ASSERT_EQ(logits.shape(), (Shape{1, vocab_}));
  ExpectNear(logits.data<float>(), Row(want['b'], 5), vocab_, "b prefix");
  // Step 2: all four.
  const std::vector<int32_t> b_last = {b[6]}, c_rest(c.begin() + 4, c.end());
  std::vector<SequenceChunk> step2 = {{1, a, 0, ta, true},
                                      {2, b_last, 6, tb, true},
                                      {4, d, 0, td, false},
                                      {3, c_rest, 4, tc, true}};
  ASSERT_TRUE(runner_->Step(step2, &logits).ok());
  ASSERT_EQ(logits.shape(), (Shape{3, vocab_}));
  ExpectNear(logits.data<float>(), Row(want['a'], 8), vocab_, "a");
  ExpectNear(logits.data<float>() + vocab_, Row(want['b'], 6), vocab_, "b decode");
  ExpectNear(logits.data<float>() + 2 * vocab_, Row(want['c'], 8), vocab_, "c rest");
}

TEST_P(DecoderModel, RejectsBadChunks) {
  REQUIRE_GEN_MODEL(GetParam());
  ASSERT_NO_FATAL_FAILURE(Open());
  Tensor logits;
  const std::vector<int32_t> ok = {1, 2}, table = {0}, none;
  auto fails = [&](SequenceChunk c, const std::string& reason) {
    Status st = runner_->Step({&c, 1}, &logits);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << reason;
    EXPECT_NE(st.message().find(reason), std::string::npos) << st.ToString();
  };
  EXPECT_FALSE(runner_->Step({}, &logits).ok());
  fails({1, none, 0, table, true}, "no tokens");
  const std::vector<int32_t> big = {static_cast<int32_t>(vocab_)};
  fails({1, big, 0, table, true}, "outside the vocabulary");
  fails({1, ok, 3, table, true}, "does not cover");
  const std::vector<int32_t> far = {runner_->num_blocks()};
  fails({1, ok, 0, far, true}, "outside the pool");
  fails({1, ok, runner_->config().max_context - 1, table, true}, "outside the context");
  fails({1, ok, -1, table, true}, "outside the context");
}

TEST_P(DecoderModel, Int8WeightsStayCloseToFloat) {
  REQUIRE_GEN_MODEL(GetParam());
  ASSERT_NO_FATAL_FAILURE(Open(4, /*sharpened=*/false));
  RunnerOptions o;
  o.kv_cache_bytes = 1 << 20;
  o.block_size = 4;
  o.int8_weights = true;
  o.num_threads = 1;
  auto q = CreateDecoderRunner(GenModelsDir() / GetParam(), o);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  const std::vector<int32_t> tokens = RandomTokens(7, vocab_, 7), table = {1, 0};
  Tensor f32 = StepOne(tokens, 0, table), i8;
  SequenceChunk c{1, tokens, 0, table, true};
  ASSERT_TRUE((*q)->Step({&c, 1}, &i8).ok());
  double err = 0, norm = 0;
  for (int64_t i = 0; i < vocab_; ++i) {
    err += std::pow(f32.data<float>()[i] - i8.data<float>()[i], 2);
    norm += std::pow(f32.data<float>()[i], 2);
  }
  EXPECT_GT(err, 0) << "int8 weights changed nothing";
  EXPECT_GT(10 * std::log10(norm / std::max(err, 1e-30)), 20.0) << "int8 logits SQNR (dB)";
}

// The exported graph after the rewrite: one PagedAttention per layer, no Softmax, no cache
// interface, the LM head on gathered rows.
TEST_P(DecoderModel, RewriteReplacesEveryLayersAttention) {
  REQUIRE_GEN_MODEL(GetParam());
  const fs::path dir = GenModelsDir() / GetParam();
  auto config = LoadDecoderConfig(dir / "config.json");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto model = LoadOnnxModel(dir / "model.onnx");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  PagedAttentionRewriteOptions o;
  o.num_layers = config->num_layers;
  o.num_heads = config->num_heads;
  o.num_kv_heads = config->num_kv_heads;
  o.head_dim = config->head_dim;
  auto fired = PagedAttentionRewrite(o).Run(model->graph);
  ASSERT_TRUE(fired.ok()) << fired.status().ToString();
  std::map<std::string, int> ops;
  for (const auto& n : model->graph.nodes) ++ops[n->op_type];
  EXPECT_EQ(ops["PagedAttention"], config->num_layers);
  EXPECT_EQ(ops["Softmax"], 0);
  for (const auto& n : model->graph.nodes) {
    for (const auto& out : n->outputs) EXPECT_NE(out.rfind("present.", 0), 0u) << out;
  }
  std::set<std::string> inputs;
  for (const auto& v : model->graph.inputs) inputs.insert(v.name);
  EXPECT_TRUE(inputs.count("inferd.logits_rows"));
  EXPECT_FALSE(inputs.count("attention_mask"));
  EXPECT_FALSE(inputs.count("past_key_values.0.key"));
  ASSERT_EQ(model->graph.outputs.size(), 1u);
  EXPECT_EQ(model->graph.outputs[0].name, "logits");
}

// A config that disagrees with the graph fails the load with the rewrite's reason.
TEST_P(DecoderModel, UnsupportedGraphFailsTheLoadWithTheReason) {
  REQUIRE_GEN_MODEL(GetParam());
  const fs::path src = GenModelsDir() / GetParam();
  const fs::path dir = fs::path(::testing::TempDir()) / (std::string("bad_") + GetParam());
  fs::create_directories(dir);
  fs::copy_file(src / "model.onnx", dir / "model.onnx", fs::copy_options::overwrite_existing);
  std::ifstream in(src / "config.json");
  std::stringstream text;
  text << in.rdbuf();
  std::string config = text.str();
  const std::string key = "\"num_hidden_layers\": 2";
  ASSERT_NE(config.find(key), std::string::npos);
  config.replace(config.find(key), key.size(), "\"num_hidden_layers\": 3");
  std::ofstream(dir / "config.json") << config;
  auto r = CreateDecoderRunner(dir, RunnerOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cannot run as a paged decoder"), std::string::npos);
  EXPECT_NE(r.status().message().find("past_key_values.2.key"), std::string::npos)
      << r.status().ToString();
}

INSTANTIATE_TEST_SUITE_P(Generation, DecoderModel,
                         ::testing::Values("test-llama", "test-gpt2", "test-moe"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// --- config.json and options, no model needed ---

fs::path WriteConfig(const std::string& name, const std::string& json) {
  const fs::path dir = fs::path(::testing::TempDir()) / name;
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << json;
  return dir;
}

constexpr char kConfig[] =
    R"({"model_type": "llama", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
        "bos_token_id": 1, "eos_token_id": [2, 3]})";

TEST(DecoderConfig, ParsesWithDefaults) {
  auto c = LoadDecoderConfig(WriteConfig("cfg_ok", kConfig) / "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model_type, "llama");
  EXPECT_EQ(c->num_layers, 2);
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->head_dim, 16);  // hidden / heads
  EXPECT_EQ(c->max_context, 128);
  EXPECT_EQ(c->eos_token_id, 2);  // the first of a list
}

TEST(DecoderConfig, RejectsBadFilesWithTheReason) {
  auto fails = [](const std::string& name, const std::string& json, const std::string& reason) {
    auto c = LoadDecoderConfig(WriteConfig(name, json) / "config.json");
    ASSERT_FALSE(c.ok()) << name;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find(reason), std::string::npos) << c.status().ToString();
  };
  fails("cfg_json", "{\"vocab_size\": ", "not a JSON object");
  fails("cfg_missing", R"({"vocab_size": 10})", "missing field 'hidden_size'");
  fails("cfg_type", R"({"vocab_size": "ten"})", "'vocab_size' is not an integer");
  std::string gqa = kConfig;
  gqa.replace(gqa.find("\"num_key_value_heads\": 2"), 24, "\"num_key_value_heads\": 3");
  fails("cfg_gqa", gqa, "does not divide");
  auto missing = LoadDecoderConfig(fs::path(::testing::TempDir()) / "nowhere" / "config.json");
  EXPECT_FALSE(missing.ok());
}

TEST(CreateDecoderRunner, RejectsABudgetBelowOneBlockAndMissingModels) {
  const fs::path dir = WriteConfig("runner_budget", kConfig);
  RunnerOptions o;
  o.kv_cache_bytes = 100;
  auto r = CreateDecoderRunner(dir, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("holds 0 blocks"), std::string::npos)
      << r.status().ToString();
  o = RunnerOptions{};
  o.block_size = 0;
  EXPECT_FALSE(CreateDecoderRunner(dir, o).ok());
  o = RunnerOptions{};
  o.num_threads = -1;
  EXPECT_FALSE(CreateDecoderRunner(dir, o).ok());
  r = CreateDecoderRunner(dir, RunnerOptions{});  // config fine, no model.onnx
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("model.onnx"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace model_runner_test
}  // namespace inferd::gen
