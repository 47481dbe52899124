// Speculative decoding (issue 16.1): the pieces of it that know no engine.
//
// A decode step of a small model is bound by reading its weights and by per-step overhead, not
// by arithmetic, so running the target over k+1 tokens costs about as much as over one. A cheap
// drafter proposes k tokens d_1..d_k after a sequence's last token t; the target runs once over
// [t, d_1..d_k] (a verification chunk, logits for every row) and keeps the longest prefix of the
// drafts it agrees with plus one token of its own, so a step yields 1..k+1 tokens. Exactness:
//   - greedy: d_i is kept iff it is the target's argmax at its position, so the output is the
//     non-speculative output token for token;
//   - sampling: RejectionSample() below (Leviathan et al. 2023, Chen et al. 2023): d ~ q is kept
//     with probability min(1, p(d)/q(d)), else a token is drawn from norm(max(0, p - q)); the
//     kept token is then distributed exactly as p, the target's (penalised, tempered, top-k/p
//     filtered) distribution.
// Drafters: a small draft model trained on the same corpus and tokenizer (DraftMethod::kModel,
// scripts/generation/train.py's tiny-llama-draft), or prompt lookup (kNgram): the continuation
// of the latest earlier occurrence of the sequence's last n tokens, for inputs that repeat
// themselves (summaries, code edits) — no second model.
//
// Declared in the target's config.json (LoadSpeculativeDecoding):
//   "draft": {"path": "../tiny-llama-draft", "num_speculative_tokens": 4}
//   "draft": {"method": "ngram", "num_speculative_tokens": 4, "ngram_max": 3, "ngram_min": 1}
// optional fields: "adaptive" (bool), "max_batch" (int), "prompt_lookup" (bool, with "path": n-gram
// drafts first, the model where they find nothing), "num_threads" (the draft runner's
// intra-op threads, default 1: a draft step of a 0.3M-parameter model takes ~60 us, where
// waiting for a second thread at every kernel's barrier costs more than it saves, the more so
// on a loaded machine). The engine side (which sequences
// speculate, rollback of rejected tokens' KV) is in engine.cc / scheduler.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"
#include "generation/model_runner.h"

namespace inferd::gen {

enum class DraftMethod { kNone, kModel, kNgram };

inline constexpr int kMaxSpeculativeTokens = 16;

struct SpeculativeOptions {
  DraftMethod method = DraftMethod::kNone;
  // k: the most draft tokens a sequence gets per step, 1..kMaxSpeculativeTokens.
  int num_speculative_tokens = 4;
  // Per sequence, k follows the recent acceptance (AdaptSpeculativeLength); off: always k.
  bool adaptive = true;
  // Speculation runs only while the engine holds at most this many sequences (running or
  // waiting) and the step has at most this many decodes (>= 0; 0 = never):
  // a batch of many sequences already fills the step with useful tokens, and verifying k extra
  // per sequence would cost more than the accepted ones save. Also bounded by the step's token
  // budget: draft tokens take only what the scheduled chunks left of max_num_batched_tokens.
  int max_batch = 4;
  int ngram_max = 3, ngram_min = 1;  // kNgram: match lengths tried, longest first (1..16)
  int draft_threads = 1;             // kModel: the draft runner's intra-op threads (>= 1)
  // kModel: try prompt lookup first and run the draft model only for sequences it has nothing
  // for (free drafts where text repeats itself, as a small model's greedy output often does).
  bool prompt_lookup = false;
};

// INVALID_ARGUMENT naming the field for anything out of range.
Status ValidateSpeculativeOptions(const SpeculativeOptions& options);

// The decision on one draft token. u_accept, u_resample: independent uniforms in [0, 1).
// p: the target's distribution at the draft's position; q: the distribution the draft was drawn
// from (empty: one-hot at `draft`, as for greedy or n-gram drafts). Accepts with probability
// min(1, p[draft] / q[draft]); on rejection the token is drawn from norm(max(0, p - q)) (p itself
// should that be all zero, which only rounding allows).
struct Verdict {
  bool accepted;
  int32_t token;  // the draft when accepted, else the resampled token
};
Verdict RejectionSample(std::span<const float> p, std::span<const float> q, int32_t draft,
                        double u_accept, double u_resample);

// The index drawn from (unnormalised, non-negative) `weights` with uniform u in [0, 1); the
// last positive one if rounding runs past the end.
int32_t DrawFrom(std::span<const float> weights, double u);

// Prompt lookup: for n = ngram_max down to ngram_min, the latest earlier occurrence of the last
// n tokens of `tokens`; returns up to k tokens that followed it (empty when nothing matches).
std::vector<int32_t> PromptLookup(std::span<const int32_t> tokens, int k, int ngram_max,
                                  int ngram_min);

// The next k of a sequence after a step that proposed `proposed` tokens and had `accepted` of
// them kept (Hugging Face's assisted-generation heuristic): +2 when all were kept, else -1;
// within 1..max_k.
int AdaptSpeculativeLength(int current, int proposed, int accepted, int max_k);

// What config.json's "draft" declares, loaded: the options, and for kModel the draft's runner
// (its KV pool has as many blocks of the same size as `target`'s, so a sequence's block table
// addresses both pools alike).
struct SpeculativeDecoding {
  SpeculativeOptions options;           // method kNone when config.json has no "draft"
  std::unique_ptr<ModelRunner> draft;   // kModel only
};

// Reads <model_dir>/config.json's optional "draft" object (see the header comment; "path" is
// relative to model_dir, or absolute) and loads the draft model with `runner_options`' weights
// settings and options.draft_threads threads. Load errors (INVALID_ARGUMENT, naming the file and field): "draft" not
// an object, both or neither of "path"/"method", an unknown method or field, an option out of
// range (num_speculative_tokens outside 1..16 ...), a draft whose tokenizer.model differs from
// the target's, whose vocab_size, bos or eos differ, whose context is shorter, or that fails
// to load itself. `check_draft_file` (optional) is called with "path" joined with each draft
// file read (model.onnx, config.json, tokenizer.model), relative to model_dir, before anything
// is read: the server confines those to the model's folder (serving's ResolveModelFile) and its
// error fails the load.
StatusOr<SpeculativeDecoding> LoadSpeculativeDecoding(
    const std::filesystem::path& model_dir, const ModelRunner& target,
    const RunnerOptions& runner_options,
    const std::function<Status(const std::filesystem::path& relative)>& check_draft_file = {});

}  // namespace inferd::gen
