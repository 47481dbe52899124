// The `inferd` command line. Each subcommand lives in its own file (run_command.cc,
// inspect_command.cc); this file only parses arguments and maps Status to exit codes:
// 0 success, 1 error (one line on stderr), 2 bad command-line usage.
#include <exception>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "common/status.h"
#include "tools/batch_command.h"
#include "tools/bench_cli.h"
#include "tools/fleet_command.h"
#include "tools/inspect_command.h"
#include "tools/optimize_command.h"
#include "tools/quantize_command.h"
#include "tools/run_command.h"
#include "tools/serve_command.h"
#include "tools/memory_policy.h"
#include "tools/thread_policy.h"
#include "tools/worker_command.h"

namespace {

constexpr const char* kVersion = "0.1.0";

// Errors are one line: multi-line library messages (the onnx checker's) are joined.
int Fail(const std::string& message) {
  std::string line = message;
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::cerr << "inferd: error: " << line << std::endl;
  return 1;
}

int Report(const inferd::Status& status) { return status.ok() ? 0 : Fail(status.message()); }

int Main(int argc, char** argv) {
  CLI::App app{"inferd: an ONNX inference engine (run, inspect; serving comes later)", "inferd"};
  app.set_version_flag("--version", std::string("inferd ") + kVersion);
  app.require_subcommand(1, 1);
  app.fallthrough(false);

  inferd::tools::RunOptions run;
  std::string run_model;
  std::string run_output_dir;
  CLI::App* run_cmd = app.add_subcommand("run", "Run a model once on .npy or random inputs");
  run_cmd->add_option("model", run_model, "Model file (.onnx)")->required();
  run_cmd->add_option("--input,-i", run.inputs,
                      "NAME=FILE.npy for an input (repeatable); inputs not given get random data "
                      "of the declared shape at batch 1");
  run_cmd->add_option("--output-dir,-o", run_output_dir,
                      "Write each output as DIR/<output name>.npy");
  run_cmd->add_option("--threads,-t", run.threads, "Intra-op threads (0 = all cores)")
      ->check(CLI::Range(0, 4096));
  run_cmd->add_option("--seed", run.seed, "Seed for random inputs");
  run_cmd->add_option("--runs", run.runs,
                      "Run N times (planned memory from run 2); outputs must match run 1")
      ->check(CLI::Range(1, 1000000));
  run_cmd->add_flag("--poison-arena", run.poison_arena,
                    "Debugging: NaN-fill the activation arena before every run");

  std::string inspect_model;
  CLI::App* inspect_cmd = app.add_subcommand(
      "inspect", "Show inputs, outputs, opsets, op histogram, parameters, a FLOPs estimate and "
                 "unsupported ops");
  inspect_cmd->add_option("model", inspect_model, "Model file (.onnx)")->required();

  inferd::tools::OptimizeOptions optimize;
  std::string optimize_in, optimize_out;
  CLI::App* optimize_cmd = app.add_subcommand(
      "optimize", "Optimize a model's graph and write it as ONNX");
  optimize_cmd->add_option("model", optimize_in, "Model file (.onnx)")->required();
  optimize_cmd->add_option("--output,-o", optimize_out, "Where to write the optimized model")
      ->required();
  optimize_cmd->add_option("--level,-l", optimize.level,
                           "Optimization level: none, basic, extended or all (default all)");
  optimize_cmd->add_flag("--report", optimize.report,
                         "Print each pass and how many times it fired");

  inferd::tools::ServeOptions serve;
  CLI::App* serve_cmd = inferd::tools::AddServeSubcommand(app, &serve);

  inferd::tools::QuantizeCommandOptions quantize;
  CLI::App* quantize_cmd = inferd::tools::AddQuantizeSubcommand(app, &quantize);

  inferd::tools::BenchCliOptions bench;  // engine mode (--model FILE) or server mode (--url)
  CLI::App* bench_cmd = inferd::tools::AddBenchSubcommand(app, &bench);

  inferd::tools::BatchCommandOptions batch;
  CLI::App* batch_cmd = inferd::tools::AddBatchSubcommand(app, &batch);
  inferd::tools::WorkerCommandOptions worker;
  CLI::App* worker_cmd = inferd::tools::AddWorkerSubcommand(app, &worker);

  inferd::tools::FleetCommandOptions fleet;
  inferd::tools::FleetBalanceOptions fleet_balance;
  CLI::App* fleet_balance_cmd = nullptr;
  CLI::App* haproxy_config_cmd =
      inferd::tools::AddFleetSubcommand(app, &fleet, &fleet_balance, &fleet_balance_cmd);

  // Registered so `inferd --help` shows the planned interface; each exits with an error for now.
  const char* planned[][2] = {
  };
  for (const auto& p : planned) {
    CLI::App* cmd = app.add_subcommand(p[0], p[1]);
    cmd->allow_extras();
  }

  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) known = known || sub->check_name(argv[1]);
    if (!known) {
      Fail(std::string("unknown subcommand '") + argv[1] + "' (see inferd --help)");
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::string where = app.get_subcommands().empty()
                            ? std::string("inferd --help")
                            : "inferd " + app.get_subcommands()[0]->get_name() + " --help";
    Fail(std::string(e.what()) + " (see " + where + ")");
    return 2;
  }

  if (run_cmd->parsed()) {
    run.model = run_model;
    run.output_dir = run_output_dir;
    return Report(inferd::tools::RunModelCommand(run, std::cout, std::cerr));
  }
  if (optimize_cmd->parsed()) {
    optimize.input = optimize_in;
    optimize.output = optimize_out;
    return Report(inferd::tools::OptimizeModelCommand(optimize, std::cout));
  }
  if (quantize_cmd->parsed()) {
    return Report(inferd::tools::QuantizeModelCommand(quantize, std::cout));
  }
  if (serve_cmd->parsed()) return Report(inferd::tools::ServeCommand(serve));
  if (haproxy_config_cmd->parsed()) {
    return Report(inferd::tools::FleetHaproxyConfigCommand(fleet, std::cout));
  }
  if (fleet_balance_cmd->parsed()) {
    return Report(inferd::tools::FleetBalanceCommand(fleet_balance));
  }
  if (batch_cmd->parsed()) return Report(inferd::tools::BatchCommand(batch, std::cerr));
  if (worker_cmd->parsed()) return Report(inferd::tools::WorkerCommand(worker, std::cerr));
  if (bench_cmd->parsed()) return Report(inferd::tools::RunBench(bench, std::cout, std::cerr));
  if (inspect_cmd->parsed()) {
    return Report(inferd::tools::InspectModelCommand(inspect_model, std::cout));
  }
  return Fail("'" + app.get_subcommands()[0]->get_name() + "' is not implemented yet");
}

}  // namespace

int main(int argc, char** argv) {
  inferd::tools::EnsureBoundedOpenMpSpin(argv);  // see thread_policy.h: no spinning by default
  inferd::tools::UseFixedMmapThreshold();        // see memory_policy.h: peak RSS
  // No exception may escape (CLI11 and the standard library throw); report it as one line.
  try {
    return Main(argc, argv);
  } catch (const std::bad_alloc&) {
    return Fail("out of memory");
  } catch (const std::exception& e) {
    return Fail(std::string("internal error: ") + e.what());
  }
}
