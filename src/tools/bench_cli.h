// `inferd bench`: one subcommand with two modes, chosen by --url.
//
//   engine mode  inferd bench --model MODEL.onnx [--batch N] [--threads T] [--json] ...
//                (or `inferd bench MODEL.onnx ...`): the model in-process (bench_command.h).
//   server mode  inferd bench --url http://HOST:PORT|grpc://HOST:PORT --model NAME ...
//                a load generator against a KServe v2 server (loadgen/server_bench.h).
//   generation   inferd bench --generate --url http://HOST:PORT --model NAME ...
//                streamed OpenAI completions, vLLM's serving benchmark (loadgen/gen_bench.h);
//                it shares --url, --model, --seed, --json FILE, --concurrency-range,
//                --request-rate-range, --distribution, --plot, --timeout-ms and --quiet with
//                server mode and rejects the KServe-only flags.
//
// Shared by both: --model (a file in engine mode, a model name in server mode), --batch, --seed,
// and --json (engine mode: a flag, print one JSON object; server mode: --json FILE). Every other
// flag belongs to one mode and is listed under that mode's heading in `inferd bench --help`.
// Usage errors (no --model; --url with a file for --model, --url with an engine-mode flag or an
// engine-mode run with a server-mode flag) fail the parse: one line, exit code 2.
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>

#include "common/status.h"
#include "loadgen/gen_bench.h"
#include "loadgen/server_bench.h"
#include "tools/bench_command.h"

namespace inferd::tools {

struct BenchCliOptions {
  bool server_mode = false;  // --url was given
  bool generate = false;     // --generate (with --url): the generation benchmark
  BenchOptions engine;
  loadgen::ServerBenchOptions server;
  loadgen::GenBenchOptions gen;
};

// Registers `bench` on `app`. Once it is parsed, `options` holds the mode and that mode's flags.
CLI::App* AddBenchSubcommand(CLI::App& app, BenchCliOptions* options);

// Runs the parsed mode: the engine report on `out`, or the server sweep (table on `out`, progress
// on `err`).
Status RunBench(const BenchCliOptions& options, std::ostream& out, std::ostream& err);

}  // namespace inferd::tools
