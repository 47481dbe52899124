#include "tools/serve_generation.h"

#include <spdlog/spdlog.h>

#include "serving/generative_config.h"
#include "serving/model_config.h"
#include "serving/repository.h"

#include "genserve/engine_text_generator.h"

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
  genserve::GenerativeLoadOptions options;
  options.default_threads = threads;
  return genserve::LoadGenerativeModel(name, gc, options);
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
