#include "tools/serve_generation.h"

#include <spdlog/spdlog.h>

#include "serving/generative_config.h"
#include "serving/model_config.h"
#include "serving/repository.h"

// src/genserve builds only once src/generation (issue 12's engine) is in the tree; CMake defines
// INFERD_HAVE_GENERATION then. Without it, generative folders are reported and skipped.
#if INFERD_HAVE_GENERATION
#include "genserve/engine_text_generator.h"
#endif

namespace inferd::tools {

namespace {

StatusOr<server::GenerativeModel> LoadOne(const std::filesystem::path& repository,
                                          const std::string& name, int threads) {
  std::string text;
  if (!serving::ReadRepositoryFile(repository / name / "config.pbtxt", &text)) {
    return Unavailable("cannot read {}", (repository / name / "config.pbtxt").string());
  }
  ASSIGN_OR_RETURN(auto config, serving::ParseModelConfig(text, /*strict=*/false, nullptr));
  ASSIGN_OR_RETURN(serving::GenerativeConfig gc,
                   serving::ReadGenerativeConfig(config, repository / name));
#if INFERD_HAVE_GENERATION
  genserve::GenerativeLoadOptions options;
  options.default_threads = threads;
  return genserve::LoadGenerativeModel(name, gc, options);
#else
  (void)threads;
  return Unimplemented("this inferd build has no generation engine (src/generation)");
#endif
}

}  // namespace

ServedGenerativeModels LoadGenerativeModels(const std::filesystem::path& repository, int threads) {
  ServedGenerativeModels out;
  out.models = std::make_shared<server::GenerativeModels>();
  for (const std::string& name : serving::ListGenerativeModels(repository)) {
    out.folders.insert(name);
    auto model = LoadOne(repository, name, threads);
    if (!model.ok()) {
      spdlog::warn("generative model '{}' is UNAVAILABLE: {}", name, model.status().message());
      out.models->unavailable[name] = model.status().message();
      continue;
    }
    spdlog::info("generative model '{}' is READY (context {} tokens)", name,
                 model->generator->max_context());
    out.models->ready.push_back(std::move(*model));
  }
  return out;
}

}  // namespace inferd::tools
