// Test helpers for src/generation (tests only): a fake ModelRunner that checks the block tables it
// is given, its deterministic logits, and a small sentencepiece model trained on the fly.
//
// FakeRunner keeps its own "KV cache": for every slot (block * block_size + offset) the token and
// position written there. A chunk's earlier tokens are read back through its block table, so its
// logits are a function of what really sits where the table points; tests compare outputs with
// ReferenceGreedy(), computed from the true tokens, and any wrong table, offset, overwritten
// shared block or stale preempted block shows up as a different token. Step() also fails with
// INTERNAL on anything inconsistent (a position missing from its slot, a table too short or out
// of range, two chunks of one sequence, a write into a slot another chunk of the step reads).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/tensor.h"
#include "generation/engine.h"
#include "generation/model_runner.h"

namespace inferd::gen {

// Where scripts/generation/build_models.py wrote the decoder models for the model tests:
// $INFERD_GEN_MODELS_DIR, or CMake's default build/models/gen.
inline std::filesystem::path GenModelsDir() {
  if (const char* env = std::getenv("INFERD_GEN_MODELS_DIR")) return env;
  return std::filesystem::path(INFERD_BINARY_DIR) / "models" / "gen";
}

}  // namespace inferd::gen

// Skips (or, when the models are required — INFERD_GEN_MODELS_REQUIRED, ctest label models —
// fails) the test if model `name` has not been built.
#define REQUIRE_GEN_MODEL(name)                                                                    \
  do {                                                                                             \
    if (!std::filesystem::exists(::inferd::gen::GenModelsDir() / (name) / "model.onnx")) {         \
      if (std::getenv("INFERD_GEN_MODELS_REQUIRED")) FAIL() << "missing model " << (name);         \
      GTEST_SKIP() << (name) << " not built (make gen-models) in " << ::inferd::gen::GenModelsDir(); \
    }                                                                                              \
  } while (0)

namespace inferd::gen::testing {

inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Logits in [-4, 4) after the tokens `context` (every token so far, the last one included).
// With disagree > 0, about one context in `disagree` gets other logits (a fake draft model that
// agrees with the salt-free one most of the time). With window > 0 only the last `window`
// tokens count (repeated text then repeats its continuation: prompt-lookup tests).
inline std::vector<float> FakeLogits(std::span<const int32_t> context, int vocab,
                                     int disagree = 0, int window = 0) {
  if (window > 0 && context.size() > static_cast<size_t>(window)) {
    context = context.last(static_cast<size_t>(window));
  }
  uint64_t h = 0x1234567;
  for (int32_t t : context) h = Mix64(h ^ static_cast<uint64_t>(t));
  if (window == 0) h = Mix64(h ^ context.size());
  if (disagree > 0 && Mix64(h ^ 0xd1a) % static_cast<uint64_t>(disagree) == 0) h = Mix64(h + 77);
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (int v = 0; v < vocab; ++v) {
    logits[v] = static_cast<float>(Mix64(h + static_cast<uint64_t>(v)) >> 40) / 16777216.0f * 8 - 4;
  }
  return logits;
}

inline int32_t ArgmaxOf(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// `n` greedy tokens after `prompt`, without any EOS stop.
inline std::vector<int32_t> ReferenceGreedy(std::vector<int32_t> prompt, int n, int vocab,
                                            int window = 0) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(ArgmaxOf(FakeLogits(prompt, vocab, 0, window)));
    prompt.push_back(out.back());
  }
  return out;
}

// A prompt of `n` pseudo-random token ids below `vocab`, fixed by `seed`.
inline std::vector<int32_t> RandomPrompt(int n, int32_t seed, int vocab) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) {
    p.push_back(static_cast<int32_t>(Mix64(seed * 7919 + i) % static_cast<uint64_t>(vocab)));
  }
  return p;
}

// Greedy decoding of exactly `max_tokens` tokens (EOS ignored).
inline SamplingParams GreedyParams(int max_tokens) {
  SamplingParams p;
  p.max_tokens = max_tokens;
  p.temperature = 0;
  p.ignore_eos = true;
  return p;
}

// Collects one request's events (the callback runs on the engine thread); Wait() and the
// accessors block until the final event.
class Collector {
 public:
  std::function<void(const GenerationEvent&)> Callback() {
    return [this](const GenerationEvent& e) { OnEvent(e); };
  }
  void OnEvent(const GenerationEvent& e) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    events_.push_back(e);
    if (e.finished) done_.NotifyAll();
  }
  std::vector<GenerationEvent> Wait() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    while (events_.empty() || !events_.back().finished) done_.Wait(&mu_);
    return events_;
  }
  std::vector<int32_t> Tokens() {
    std::vector<int32_t> t;
    for (const GenerationEvent& e : Wait()) t.insert(t.end(), e.tokens.begin(), e.tokens.end());
    return t;
  }
  std::string Text() {
    std::string t;
    for (const GenerationEvent& e : Wait()) t += e.text;
    return t;
  }
  GenerationEvent Final() { return Wait().back(); }

 private:
  Mutex mu_;
  CondVar done_;
  std::vector<GenerationEvent> events_ GUARDED_BY(mu_);
};

inline DecoderConfig FakeConfig(int vocab, int max_context, int eos = -1) {
  DecoderConfig c{};
  c.model_type = "fake";
  c.vocab_size = vocab;
  c.hidden_size = 8;
  c.num_layers = 1;
  c.num_heads = 1;
  c.num_kv_heads = 1;
  c.head_dim = 8;
  c.max_context = max_context;
  c.bos_token_id = 1;
  c.eos_token_id = eos;
  return c;
}

struct StepRecord {
  struct Chunk {
    int64_t seq_id, start;
    int num_tokens;
    bool need_logits;
    bool all_logits;
  };
  std::vector<Chunk> chunks;
};

class FakeRunner : public ModelRunner {
 public:
  FakeRunner(DecoderConfig config, int block_size, int num_blocks, int disagree = 0)
      : config_(std::move(config)),
        block_size_(block_size),
        num_blocks_(num_blocks),
        disagree_(disagree),
        slots_(static_cast<size_t>(num_blocks) * block_size) {}

  const DecoderConfig& config() const override { return config_; }
  int block_size() const override { return block_size_; }
  int num_blocks() const override { return num_blocks_; }

  // Called at the start of every Step with the number of earlier calls (e.g. to advance a
  // FakeClock, or to inject a failure: an error is returned as the step's).
  std::function<Status(int call)> on_step;
  int calls = 0;
  // Every step's chunks, in order (read after the engine is done, or from on_step).
  std::vector<StepRecord> steps;
  // The first inconsistency found (also returned by that Step).
  std::string error;
  // FakeLogits' window: set before the first Step.
  int window = 0;

  Status Step(std::span<const SequenceChunk> chunks, Tensor* logits) override {
    const int call = calls++;
    if (on_step) RETURN_IF_ERROR(on_step(call));
    StepRecord record;
    for (const SequenceChunk& c : chunks) {
      record.chunks.push_back(
          {c.seq_id, c.start_position, static_cast<int>(c.tokens.size()), c.need_logits,
           c.all_logits});
    }
    steps.push_back(record);
    Status s = Check(chunks);
    if (!s.ok()) {
      if (error.empty()) error = s.message();
      return s;
    }
    std::vector<std::vector<int32_t>> contexts;
    for (const SequenceChunk& c : chunks) {
      std::vector<int32_t> context;
      for (int64_t p = 0; p < c.start_position; ++p) context.push_back(SlotOf(c, p).token);
      context.insert(context.end(), c.tokens.begin(), c.tokens.end());
      contexts.push_back(std::move(context));
    }
    for (const SequenceChunk& c : chunks) {  // writes after all reads: like the real kernel
      for (size_t i = 0; i < c.tokens.size(); ++i) {
        SlotOf(c, c.start_position + static_cast<int64_t>(i)) = {c.tokens[i],
                                                                 c.start_position + (int64_t)i};
      }
    }
    int64_t rows = 0;
    for (const SequenceChunk& c : chunks) {
      rows += c.all_logits ? static_cast<int64_t>(c.tokens.size()) : c.need_logits;
    }
    *logits = Tensor::Allocate(DataType::kFloat32, {rows, config_.vocab_size});
    float* out = logits->data<float>();
    for (size_t i = 0; i < chunks.size(); ++i) {
      const size_t n = chunks[i].tokens.size();
      // all_logits: one row per token, each after the context up to and including it.
      for (size_t r = chunks[i].all_logits ? 0 : n - 1; r < n; ++r) {
        if (!chunks[i].all_logits && !chunks[i].need_logits) break;
        std::span<const int32_t> context(contexts[i]);
        std::vector<float> l =
            FakeLogits(context.first(context.size() - (n - 1 - r)), config_.vocab_size, disagree_,
                       window);
        out = std::copy(l.begin(), l.end(), out);
      }
    }
    return Status::Ok();
  }

 private:
  struct Slot {
    int32_t token = -1;
    int64_t position = -1;
  };
  Slot& SlotOf(const SequenceChunk& c, int64_t p) {
    return slots_[static_cast<size_t>(c.block_table[p / block_size_]) * block_size_ +
                  p % block_size_];
  }
  int64_t SlotIndex(const SequenceChunk& c, int64_t p) const {
    return static_cast<int64_t>(c.block_table[p / block_size_]) * block_size_ + p % block_size_;
  }

  Status Check(std::span<const SequenceChunk> chunks) {
    std::set<int64_t> ids;
    std::unordered_set<int64_t> read;  // slots holding earlier tokens of a chunk of this step
    for (const SequenceChunk& c : chunks) {
      if (!ids.insert(c.seq_id).second) return Internal("seq {} twice in a step", c.seq_id);
      if (c.tokens.empty()) return Internal("seq {}: empty chunk", c.seq_id);
      const int64_t end = c.start_position + static_cast<int64_t>(c.tokens.size());
      if (end > config_.max_context) return Internal("seq {}: beyond the context", c.seq_id);
      const int64_t needed = (end + block_size_ - 1) / block_size_;
      if (static_cast<int64_t>(c.block_table.size()) < needed) {
        return Internal("seq {}: block table of {} for {} tokens", c.seq_id, c.block_table.size(),
                        end);
      }
      for (int64_t i = 0; i < needed; ++i) {
        if (c.block_table[i] < 0 || c.block_table[i] >= num_blocks_) {
          return Internal("seq {}: block {} out of range", c.seq_id, c.block_table[i]);
        }
      }
      for (int64_t p = 0; p < c.start_position; ++p) {
        if (SlotOf(c, p).position != p) {
          return Internal("seq {}: position {} not found in block {} offset {}", c.seq_id, p,
                          c.block_table[p / block_size_], p % block_size_);
        }
        read.insert(SlotIndex(c, p));
      }
    }
    std::unordered_set<int64_t> written;
    for (const SequenceChunk& c : chunks) {
      for (size_t i = 0; i < c.tokens.size(); ++i) {
        const int64_t slot = SlotIndex(c, c.start_position + static_cast<int64_t>(i));
        if (read.contains(slot) || !written.insert(slot).second) {
          return Internal("seq {}: writes slot {}, which another chunk uses", c.seq_id, slot);
        }
      }
    }
    return Status::Ok();
  }

  DecoderConfig config_;
  int block_size_, num_blocks_;
  int disagree_;
  std::vector<Slot> slots_;
};

// Sentences for the test tokenizer: plain English plus a few accented letters; characters beyond
// them (CJK, emoji) are left to byte fallback.
inline std::string TokenizerTrainingText() {
  const char* words[] = {
      "the",       "quick", "brown",       "fox",       "jumps", "over", "lazy",  "dog",   "and",
      "a",         "house", "of",          "cards",     "is",    "not",  "café",  "naïve", "pride",
      "prejudice", "sense", "sensibility", "Elizabeth", "Darcy", "said", "she",   "he",    "was",
      "to",        "be",    "in",          "end",       "stop",  "here", "there", "!",     ".",
      ",",         "?",     "0",           "1",         "2",     "3"};
  std::string text;
  uint64_t r = 7;
  for (int line = 0; line < 400; ++line) {
    for (int w = 0; w < 12; ++w) {
      r = Mix64(r);
      text += words[r % (sizeof(words) / sizeof(words[0]))];
      text += ' ';
    }
    text += '\n';
  }
  return text;
}

// Runs a shell command; its output goes to `out` (a file path) or nowhere. Throws on failure.
inline void RunCommand(const std::string& command, const std::string& out = "/dev/null") {
  const std::string line = command + " > '" + out + "' 2>/dev/null";
  if (std::system(line.c_str()) != 0) throw std::runtime_error("command failed: " + line);
}

// Per-process scratch folder for tokenizer files, removed at exit (each ctest case is its own
// process).
inline const std::filesystem::path& ScratchDir() {
  struct TempDir {
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("inferd_gen_tok_" + std::to_string(::getpid()));
    TempDir() { std::filesystem::create_directories(dir); }
    ~TempDir() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  };
  static TempDir temp;
  return temp.dir;
}

// Trains a sentencepiece model (vocab 400 at most, byte fallback) on TokenizerTrainingText() with
// Debian's spm_train (the `sentencepiece` package: the tests link no libsentencepiece, which
// cannot share a process with libprotobuf; see sentencepiece_model.h), once per `options` (extra
// trainer flags); returns the .model path.
inline std::filesystem::path TrainTestTokenizer(const std::string& options) {
  static std::map<std::string, std::filesystem::path> trained;
  auto it = trained.find(options);
  if (it != trained.end()) return it->second;
  const std::filesystem::path& dir = ScratchDir();
  const std::string name = "tok" + std::to_string(trained.size());
  if (!std::filesystem::exists(dir / "text.txt")) {
    std::ofstream(dir / "text.txt") << TokenizerTrainingText();
  }
  RunCommand("spm_train --input='" + (dir / "text.txt").string() + "' --model_prefix='" +
             (dir / name).string() +
             "' --vocab_size=400 --byte_fallback=true --hard_vocab_limit=false "
             "--character_coverage=1.0 --minloglevel=2 --num_threads=1 " +
             options);
  return trained[options] = dir / (name + ".model");
}

// The generation models' kind of tokenizer (scripts/generation/tokenizer.py): BPE, identity
// normalization, whitespace kept as is.
inline std::filesystem::path TestTokenizerPath() {
  return TrainTestTokenizer(
      "--model_type=bpe --normalization_rule_name=identity --remove_extra_whitespaces=false");
}

}  // namespace inferd::gen::testing
