#include "tools/bench_cli.h"

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
  g.add_flag("--profile", o->profile, "Time every node and list the top op types");
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

// The first flag of `group` given on the command line, or "".
std::string FirstGiven(const CLI::App& group) {
  for (const CLI::Option* opt : group.get_options()) {
    if (opt->count() > 0) return opt->get_name();
  }
  return "";
}

// Checks the mode after parsing and copies the shared flags into it; throws CLI::ValidationError
// (exit code 2 in main.cc) on a mixed or incomplete command line.
void ResolveMode(BenchCliOptions* o, const CLI::App& engine, const CLI::App& server,
                 const CLI::Option& json) {
  std::string& model = o->engine.model;
  o->server_mode = !o->server.url.empty();
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
  cmd->callback([o, engine, server, json] { ResolveMode(o, *engine, *server, *json); });
  return cmd;
}

Status RunBench(const BenchCliOptions& options, std::ostream& out, std::ostream& err) {
  if (options.server_mode) return loadgen::RunServerBench(options.server, out, err);
  return BenchCommand(options.engine, out);
}

}  // namespace inferd::tools
