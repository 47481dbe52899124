#include "tools/bench_cli.h"

#include <algorithm>
#include <iterator>
#include <string_view>

namespace inferd::tools {

namespace {

void AddEngineFlags(CLI::App& g, BenchOptions* o) {
  g.add_option("--seq-len", o->seq_len, "Second dim of 2-D integer inputs (token ids, masks)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  g.add_option("--input-shape", o->input_shapes, "NAME=DxDx... for one input (repeatable)");
  g.add_option("--threads,-t", o->threads, "Intra-op threads (0 = all cores)")
      ->check(CLI::Range(0, 4096));
  g.add_option("--iterations,-n", o->iterations, "Timed runs")->check(CLI::Range(1, 1000000));
  g.add_option("--warmup,-w", o->warmup, "Untimed runs first")->check(CLI::Range(0, 1000000));
  g.add_option("--level,-l", o->level, "Optimization level: none, basic, extended, all");
  g.add_flag("--profile", o->profile,
             "Time every node; per op type and slowest node, GFLOP/s or GB/s against the "
             "machine's measured FP32/INT8/memory peaks");
}

void AddServerFlags(CLI::App& g, loadgen::ServerBenchOptions* o) {
  g.add_option("--url", o->url, "Server to load: http://HOST:PORT or grpc://HOST:PORT");
  g.add_option("--version", o->version, "Model version (default: the server's choice)");
  g.add_option("--concurrency-range", o->concurrency_range,
               "Closed loop: outstanding requests A:B:STEP (default 1)");
  g.add_option("--request-rate-range", o->request_rate_range,
               "Open loop: requests per second A:B:STEP; latency from intended send times");
  g.add_option("--distribution", o->distribution, "Open-loop arrivals: poisson or constant");
  g.add_option("--input,-i", o->inputs, "NAME=FILE.npy for an input (repeatable)");
  g.add_option("--shape", o->shapes, "NAME=D1,D2,... for an input's variable dims (repeatable)");
  g.add_flag("--random", o->random, "Random data for inputs without --input (the default)");
  g.add_option("--warmup-ms", o->warmup_ms, "Load before each level's first window, not counted");
  g.add_option("--measurement-interval-ms", o->measurement_interval_ms, "Window length");
  g.add_option("--stability-percentage", o->stability_percentage,
               "Accept a level when its last three windows agree within this percentage");
  g.add_option("--max-trials", o->max_trials, "Most windows per level");
  g.add_option("--csv", o->csv_path, "Write the points as CSV");
  g.add_option("--plot", o->plot_path, "Write an SVG latency-throughput chart");
  g.add_option("--duration", o->duration,
               "Soak mode: run the first level this long (30m, 2h, 45s), a line per window");
  g.add_option("--metrics-url", o->metrics_url,
               "Server's Prometheus page (http://HOST:8002/metrics) for its CPU use and RSS");
  g.add_option("--max-connections", o->max_connections, "Most HTTP connections at once");
  g.add_option("--grpc-channels", o->grpc_channels,
               "gRPC connections the requests are spread over (default 2)");
  g.add_flag("--streaming", o->streaming,
             "gRPC: send over ModelStreamInfer, one stream per --grpc-channels connection");
  g.add_option("--timeout-ms", o->timeout_ms, "Per-request timeout");
  g.add_flag("--quiet,-q", o->quiet, "No progress lines on stderr");
}

void AddGenerationFlags(CLI::App& g, loadgen::GenBenchOptions* o) {
  g.add_option("--num-prompts", o->num_prompts, "Requests per level (default 100)");
  g.add_option("--input-len", o->input_len, "Random prompt lengths in tokens, MIN:MAX or N");
  g.add_option("--output-len", o->output_len, "Output tokens asked per request, MIN:MAX or N");
  g.add_option("--vocab-size", o->vocab_size, "Random prompt ids are drawn from [3, N)");
  g.add_option("--dataset", o->dataset,
               "JSONL prompts: {\"prompt\": TEXT or [ids] [, \"max_tokens\": N]} per line");
  g.add_option("--burstiness", o->burstiness,
               "Gamma shape of Poisson arrivals (1 = Poisson, < 1 burstier)");
  g.add_option("--warmup-requests", o->warmup_requests, "Sent one at a time first, not counted");
  g.add_option("--slo-ttft-ms", o->slo_ttft_ms, "Goodput: time-to-first-token bound (0 = none)");
  g.add_option("--slo-tpot-ms", o->slo_tpot_ms, "Goodput: time-per-output-token bound (0 = none)");
  g.add_option("--endpoint", o->endpoint, "Completions path (default /v1/completions)");
  g.add_flag("!--no-ignore-eos", o->ignore_eos, "Let EOS end a request early");
}

// The first flag of `group` given on the command line, or "".
std::string FirstGiven(const CLI::App& group) {
  for (const CLI::Option* opt : group.get_options()) {
    if (opt->count() > 0) return opt->get_name();
  }
  return "";
}

// Generation mode: only the server-mode flags it shares may be given.
void ResolveGeneration(BenchCliOptions* o, const CLI::App& engine, const CLI::App& server) {
  if (o->server.url.empty()) throw CLI::ValidationError("--generate needs --url http://HOST:PORT");
  if (std::string flag = FirstGiven(engine); !flag.empty()) {
    throw CLI::ValidationError(flag + " is an engine-mode flag, not for --generate");
  }
  static const char* const kShared[] = {"--url", "--concurrency-range", "--request-rate-range",
                                        "--distribution", "--plot", "--timeout-ms", "--quiet"};
  for (const CLI::Option* opt : server.get_options()) {
    if (opt->count() == 0) continue;
    if (std::find(std::begin(kShared), std::end(kShared), opt->get_name()) == std::end(kShared)) {
      throw CLI::ValidationError(opt->get_name() + " is a KServe server-mode flag, not for --generate");
    }
  }
  if (o->engine.model.empty()) throw CLI::ValidationError("--generate needs --model NAME");
  loadgen::GenBenchOptions& g = o->gen;
  g.url = o->server.url;
  g.model = o->engine.model;
  g.concurrency_range = o->server.concurrency_range;
  g.request_rate_range = o->server.request_rate_range;
  g.distribution = o->server.distribution;
  g.plot_path = o->server.plot_path;
  g.json_path = o->server.json_path;
  g.quiet = o->server.quiet;
  g.seed = o->engine.seed;
  if (server.get_option("--timeout-ms")->count() > 0) g.timeout_ms = o->server.timeout_ms;
}

// Checks the mode after parsing and copies the shared flags into it; throws CLI::ValidationError
// (exit code 2 in main.cc) on a mixed or incomplete command line.
void ResolveMode(BenchCliOptions* o, const CLI::App& engine, const CLI::App& server,
                 const CLI::App& gen, const CLI::Option& json) {
  std::string& model = o->engine.model;
  o->server_mode = !o->server.url.empty();
  if (o->generate) {
    if (json.count() > 0 && o->server.json_path.empty()) {
      throw CLI::ValidationError("--json needs a FILE with --generate");
    }
    return ResolveGeneration(o, engine, server);
  }
  if (std::string flag = FirstGiven(gen); !flag.empty()) {
    throw CLI::ValidationError(flag + " is a generation-mode flag: it needs --generate");
  }
  if (!o->server_mode) {
    // `inferd bench --json MODEL.onnx`: --json (a flag here) took the positional model file.
    if (model.empty() && !o->server.json_path.empty()) model = std::move(o->server.json_path);
    if (model.empty()) {
      throw CLI::ValidationError(
          "give --model MODEL.onnx (engine mode) or --url URL --model NAME (server mode)");
    }
    if (std::string flag = FirstGiven(server); !flag.empty()) {
      throw CLI::ValidationError(flag + " is a server-mode flag: it needs --url");
    }
    if (!o->server.json_path.empty()) {
      throw CLI::ValidationError("--json takes no value in engine mode (it prints JSON)");
    }
    o->engine.json = json.count() > 0;
    return;
  }
  if (model.empty()) throw CLI::ValidationError("--url needs --model NAME (a model on the server)");
  if (std::string_view(model).ends_with(".onnx")) {
    throw CLI::ValidationError("--url takes the name of a model on the server, not the file '" +
                               model + "' (engine mode runs a file, without --url)");
  }
  if (std::string flag = FirstGiven(engine); !flag.empty()) {
    throw CLI::ValidationError(flag + " is an engine-mode flag (--model FILE.onnx without --url)");
  }
  if (json.count() > 0 && o->server.json_path.empty()) {
    throw CLI::ValidationError("--json needs a FILE with --url");
  }
  o->server.model = model;
  o->server.batch = static_cast<int>(o->engine.batch);
  o->server.seed = o->engine.seed;
}

}  // namespace

CLI::App* AddBenchSubcommand(CLI::App& app, BenchCliOptions* o) {
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Measure latency and throughput: a model in-process (--model FILE.onnx), or a KServe v2 "
      "server under load (--url URL --model NAME)");
  cmd->add_option("--model,-m,model", o->engine.model,
                  "Engine mode: the model file (.onnx); server mode: the model's name");
  cmd->add_option("--batch,-b", o->engine.batch,
                  "Engine mode: batch size for symbolic first dims; server mode: rows per request")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--seed", o->engine.seed, "Seed for random inputs (and Poisson arrivals)");
  CLI::Option* json = cmd->add_option("--json", o->server.json_path,
                                      "Engine mode: print one JSON object instead of the summary; "
                                      "server mode: --json FILE writes the points as a JSON list")
                          ->expected(0, 1);
  CLI::App* engine = cmd->add_option_group(
      "Engine mode", "inferd bench --model MODEL.onnx: one Session in this process");
  AddEngineFlags(*engine, &o->engine);
  CLI::App* server = cmd->add_option_group(
      "Server mode", "inferd bench --url http://HOST:PORT|grpc://HOST:PORT --model NAME");
  AddServerFlags(*server, &o->server);
  cmd->add_flag("--generate", o->generate,
                "Generation mode: load an OpenAI-compatible /v1/completions server (with --url)");
  CLI::App* gen = cmd->add_option_group(
      "Generation mode",
      "inferd bench --generate --url http://HOST:PORT --model NAME: streamed completions, "
      "vLLM's serving benchmark");
  AddGenerationFlags(*gen, &o->gen);
  cmd->callback(
      [o, engine, server, gen, json] { ResolveMode(o, *engine, *server, *gen, *json); });
  return cmd;
}

Status RunBench(const BenchCliOptions& options, std::ostream& out, std::ostream& err) {
  if (options.generate) return loadgen::RunGenBench(options.gen, out, err);
  if (options.server_mode) return loadgen::RunServerBench(options.server, out, err);
  return BenchCommand(options.engine, out);
}

}  // namespace inferd::tools
