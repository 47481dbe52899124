// The pure side of `inferd bench --generate` (vLLM benchmark_serving's metrics and workloads):
// the OpenAI completions request body, server-sent-event parsing of its streamed answer, prompt
// and output lengths, and the per-request and per-run statistics. No I/O, so all of it is
// unit-tested; gen_bench.h does the sending.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace inferd::loadgen {

// ---- Workload ----

// One request of a run: either token ids (random workloads: exact lengths, sent as OpenAI's
// token-array `prompt`) or text (datasets).
struct GenPrompt {
  std::vector<int32_t> ids;
  std::string text;
  int prompt_tokens = 0;  // ids.size(), or the dataset's count when it gives one (else 0)
  int max_tokens = 16;    // output tokens asked for (ignore_eos makes it exact)
};

// "A:B" (uniform integers in [A, B]) or "A" (always A); 1 <= A <= B <= 1,000,000.
struct LengthRange {
  int lo = 1, hi = 1;
};
StatusOr<LengthRange> ParseLengthRange(std::string_view text, std::string_view flag);

// `n` prompts of random token ids in [3, vocab_size) (0..2 are usually unk/bos/eos) with lengths
// uniform in `input`, each asking for a length uniform in `output`. Deterministic for a seed.
std::vector<GenPrompt> RandomPrompts(int n, LengthRange input, LengthRange output, int vocab_size,
                                     uint64_t seed);

// A JSONL dataset: one JSON object per line with "prompt" (a string, or an array of token ids)
// and optionally "max_tokens" (else drawn from `output`) and "prompt_tokens". Blank lines are
// skipped. The first `n` prompts are used, cycling when the file has fewer. A malformed line is
// INVALID_ARGUMENT naming its line number.
StatusOr<std::vector<GenPrompt>> ParseJsonlPrompts(std::string_view jsonl, int n,
                                                   LengthRange output, uint64_t seed);

// The /v1/completions body: {"model", "prompt", "max_tokens", "stream": true, "temperature": 0,
// "ignore_eos": true, "stream_options": {"include_usage": true}}.
std::string CompletionBody(const std::string& model, const GenPrompt& prompt, bool ignore_eos);

// ---- Server-sent events ----

// Incremental SSE decoder (the WHATWG event-stream format as OpenAI servers use it): feed it the
// response body in arbitrary pieces; it returns the `data` of every complete event (multi-line
// data joined with '\n'; comments, `event:`/`id:`/`retry:` fields ignored; CRLF, CR or LF line
// ends).
class SseParser {
 public:
  std::vector<std::string> Feed(std::string_view bytes);

 private:
  void Line(std::string_view line, std::vector<std::string>* events);
  std::string pending_;  // an incomplete line
  std::string data_;     // the current event's data
  bool has_data_ = false;
  bool last_cr_ = false;  // the previous piece ended in '\r' (a CRLF may straddle pieces)
};

// One decoded `data:` payload of a streamed completion.
struct CompletionChunk {
  bool done = false;          // the "[DONE]" sentinel
  std::string text;           // choices[0].text (or delta.content for chat chunks)
  bool has_choice = false;    // the chunk carried a choice (a usage-only chunk does not)
  std::string finish_reason;  // "" while generating
  int completion_tokens = -1, prompt_tokens = -1;  // from "usage" when present
  std::string error;                               // an OpenAI error object's message
};
StatusOr<CompletionChunk> ParseCompletionChunk(std::string_view data);

// ---- Statistics ----

// What one request saw, in seconds from its send.
struct GenRequestRecord {
  bool ok = false;
  std::string error;        // a short kind ("http_400", "connect", "io", "server: ...")
  double ttft = 0;          // first chunk with text
  double e2e = 0;           // last byte
  std::vector<double> itl;  // gaps between consecutive text chunks
  int output_tokens = 0;    // usage.completion_tokens, else the number of text chunks
  int prompt_tokens = 0;    // usage.prompt_tokens, else the prompt's own count
  int asked_tokens = 0;
  // TPOT = (e2e - ttft) / (output_tokens - 1), vLLM's definition; 0 for a single token.
  double Tpot() const;
};

// mean, median, P90, P99 in milliseconds (common/stats.h's Percentile).
struct MsSummary {
  double mean = 0, median = 0, p90 = 0, p99 = 0;
  int64_t count = 0;
};
MsSummary SummarizeSeconds(std::vector<double> seconds);

struct GenSloOptions {
  double ttft_ms = 0;  // 0 = no bound
  double tpot_ms = 0;
};

struct GenRunResult {
  double level = 0;  // request rate (req/s; 0 = all at once) or concurrency
  bool concurrency_mode = false;
  double duration_s = 0;  // first send to last completion
  int64_t completed = 0, failed = 0;
  int64_t input_tokens = 0, output_tokens = 0;
  double request_throughput = 0;  // completed / duration
  double output_throughput = 0;   // output tokens / duration
  double total_token_throughput = 0;
  double goodput = 0;  // requests within every SLO per second
  MsSummary ttft, tpot, itl, e2e;
  std::vector<std::pair<std::string, int64_t>> errors;  // kind -> count, sorted by kind
};

// Aggregates the records of one run over `duration_s`.
GenRunResult SummarizeRun(const std::vector<GenRequestRecord>& records, double duration_s,
                          const GenSloOptions& slo);

// A JSON list of runs (each with its metrics in ms and per second, vLLM's key names where they
// exist: request_throughput, output_throughput, mean_ttft_ms, p99_tpot_ms, ...).
std::string GenRunsToJson(const std::vector<GenRunResult>& runs, const GenSloOptions& slo);
// Chart: P50 and P99 TTFT (ms) against output tokens/s, one point per run (report.h's chart).
std::string GenRunsSvg(const std::vector<GenRunResult>& runs, const std::string& title);

}  // namespace inferd::loadgen
