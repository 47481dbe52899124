#include "tools/run_command.h"

#include <cstring>

#include <chrono>
#include <random>
#include <system_error>

#include <fmt/format.h>

#include "common/npy.h"
#include "session/session.h"
#include "tools/tensor_util.h"

namespace inferd::tools {
namespace {

using Clock = std::chrono::steady_clock;

double MillisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Finds the declared input an argument names. Names may themselves contain '=', so every '=' in
// the argument is tried as the separator before reporting the first split as unknown.
Status ResolveInputArg(const std::string& arg, const std::vector<ValueInfo>& decl, size_t* index,
                       std::string* path) {
  for (size_t eq = arg.find('='); eq != std::string::npos; eq = arg.find('=', eq + 1)) {
    std::string name = arg.substr(0, eq);
    for (size_t i = 0; i < decl.size(); ++i) {
      if (decl[i].name == name && eq + 1 < arg.size()) {
        *index = i;
        *path = arg.substr(eq + 1);
        return Status::Ok();
      }
    }
  }
  std::string name;
  RETURN_IF_ERROR(ParseNamedPath(arg, &name, path));
  std::string known;
  for (const ValueInfo& vi : decl) known += (known.empty() ? "" : ", ") + vi.name;
  return InvalidArgument("unknown input '{}' (model inputs: {})", name,
                         known.empty() ? "none" : known);
}

}  // namespace

Status WithPath(const Status& status, const std::filesystem::path& path) {
  if (status.ok() || status.message().find(path.string()) != std::string::npos) return status;
  return status.WithContext(path.string());
}

Status RunModelCommand(const RunOptions& options, std::ostream& out, std::ostream& log) {
  if (options.threads < 0) return InvalidArgument("--threads must be >= 0, got {}", options.threads);
  if (options.runs < 1) return InvalidArgument("--runs must be >= 1, got {}", options.runs);
  SessionOptions session_options;
  session_options.num_threads = options.threads;
  session_options.poison_arena = options.poison_arena;
  // Fail on an unusable output folder before spending time on the model.
  if (!options.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.output_dir, ec);
    if (ec || !std::filesystem::is_directory(options.output_dir)) {
      return InvalidArgument("cannot create output folder {}: {}", options.output_dir.string(),
                             ec ? ec.message() : "a file is in the way");
    }
  }
  auto load_start = Clock::now();
  auto created = Session::Create(options.model, session_options);
  if (!created.ok()) return WithPath(created.status(), options.model);
  std::unique_ptr<Session> session = std::move(created).value();
  double load_ms = MillisSince(load_start);

  const std::vector<ValueInfo>& decl = session->inputs();
  std::vector<Tensor> feeds(decl.size());
  for (const std::string& arg : options.inputs) {
    size_t index = 0;
    std::string path;
    RETURN_IF_ERROR(ResolveInputArg(arg, decl, &index, &path));
    if (feeds[index].defined()) return InvalidArgument("input '{}' given twice", decl[index].name);
    auto loaded = LoadNpy(path);
    if (!loaded.ok()) return loaded.status().WithContext("input '" + decl[index].name + "'");
    feeds[index] = std::move(loaded).value();
  }
  std::mt19937_64 rng(options.seed);
  for (size_t i = 0; i < decl.size(); ++i) {
    if (feeds[i].defined()) continue;
    int64_t limit = IntegerInputLimit(session->model().graph, decl[i].name);
    ASSIGN_OR_RETURN(feeds[i], RandomInput(decl[i], rng, limit));
    log << fmt::format("note: input '{}' not given; using random {}\n", decl[i].name,
                       feeds[i].DebugString());
  }

  std::vector<Tensor> outputs, first;
  double run_ms = 0;
  for (int r = 0; r < options.runs; ++r) {
    auto run_start = Clock::now();
    RETURN_IF_ERROR(session->Run(feeds, &outputs));
    run_ms = MillisSince(run_start);
    if (r == 0) {
      first = outputs;
      continue;
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i].shape() != first[i].shape() ||
          std::memcmp(outputs[i].raw_data(), first[i].raw_data(), first[i].ByteSize()) != 0) {
        return Internal("run {} gave a different output '{}' than run 1 (a kernel reads memory it "
                        "did not write, or is not deterministic)",
                        r + 1, session->outputs()[i].name);
      }
    }
  }

  const std::vector<ValueInfo>& out_decl = session->outputs();
  std::vector<std::string> names;
  for (const ValueInfo& vi : out_decl) names.push_back(vi.name);
  std::vector<std::string> files = UniqueFileNames(names);
  for (size_t i = 0; i < outputs.size() && i < names.size(); ++i) {
    out << SummaryLine(names[i], outputs[i]) << "\n";
    if (options.output_dir.empty()) continue;
    Tensor saved = ToNpyCompatible(outputs[i]);
    if (saved.dtype() != outputs[i].dtype()) {
      log << fmt::format("note: output '{}' is {}; saved as {} (numpy has no {})\n", names[i],
                         DataTypeName(outputs[i].dtype()), DataTypeName(saved.dtype()),
                         DataTypeName(outputs[i].dtype()));
    }
    auto path = options.output_dir / (files[i] + ".npy");
    RETURN_IF_ERROR(SaveNpy(saved, path).WithContext("output '" + names[i] + "'"));
  }
  out << fmt::format("load {:.1f} ms, run {:.2f} ms ({} threads)\n", load_ms, run_ms,
                     session->num_threads());
  if (!options.output_dir.empty()) {
    out << fmt::format("wrote {} outputs to {}\n", outputs.size(), options.output_dir.string());
  }
  return Status::Ok();
}

}  // namespace inferd::tools
