// `inferd bench --generate`: a serving benchmark for OpenAI-compatible text-generation servers,
// following vLLM's benchmarks/benchmark_serving.py (its metrics, their definitions and JSON keys).
//
//   inferd bench --generate --url http://127.0.0.1:8000 --model tiny-llama
//       --request-rate-range 1:8:1 --num-prompts 200 --input-len 64:512 --output-len 32:256
//       --slo-ttft-ms 1000 --slo-tpot-ms 100 --json runs.json --plot ttft.svg
//   inferd bench --generate --url ... --model M --concurrency-range 16 --dataset prompts.jsonl
//
// Each level (a request rate, or a fixed concurrency) sends the same --num-prompts requests:
// random token-id prompts with lengths uniform in --input-len and outputs uniform in
// --output-len (or the prompts of a JSONL --dataset), streamed ("stream": true), greedy, with
// "ignore_eos" so every request generates what it asked for. Open-loop arrivals are Poisson, or
// gamma-distributed with --burstiness B (shape B, mean gap 1/rate: B < 1 is burstier, B = 1 is
// Poisson); --distribution constant spaces them evenly. --warmup-requests are sent one at a time
// first and not counted.
//
// Reported per level (vLLM's definitions): request and output-token throughput over the run
// (first send to last completion); TTFT (send to first text chunk), TPOT ((E2E - TTFT) / (output
// tokens - 1), per request), ITL (gaps between text chunks, pooled), E2E latency — mean, median,
// P90, P99 in ms; goodput: completed requests per second whose TTFT and TPOT are within
// --slo-ttft-ms / --slo-tpot-ms. Output tokens are the server's usage.completion_tokens
// (stream_options.include_usage), else the number of text chunks.
#pragma once

#include <iosfwd>
#include <string>

#include "common/status.h"

namespace inferd::loadgen {

struct GenBenchOptions {
  std::string url;    // http://HOST:PORT
  std::string model;  // the "model" field of each request
  std::string endpoint = "/v1/completions";
  std::string concurrency_range;         // "A:B:STEP": fixed concurrency levels
  std::string request_rate_range;        // "A:B:STEP" req/s; "inf" sends everything at once
  std::string distribution = "poisson";  // poisson | constant (gamma via burstiness != 1)
  double burstiness = 1.0;               // gamma shape; 1 = Poisson
  int num_prompts = 100;                 // requests per level
  std::string input_len = "64:512";      // MIN:MAX or N (random prompts)
  std::string output_len = "32:256";     // MIN:MAX or N
  int vocab_size = 1000;                 // random prompt ids are in [3, vocab_size)
  std::string dataset;                   // JSONL of {"prompt": ... [, "max_tokens": N]}
  bool ignore_eos = true;
  int warmup_requests = 1;
  double slo_ttft_ms = 0, slo_tpot_ms = 0;  // 0 = no bound
  std::string json_path, plot_path;
  int timeout_ms = 600000;  // per request
  uint64_t seed = 1;
  bool quiet = false;
};

// Runs every level, prints a table to `out` and progress to `err`, writes the files asked for.
// Fails on bad options, an unreachable server, a failed warmup, or a level where every request
// failed (with the most common error).
Status RunGenBench(const GenBenchOptions& options, std::ostream& out, std::ostream& err);

}  // namespace inferd::loadgen
