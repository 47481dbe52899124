// `inferd serve`'s generative models: the repository folders whose config.pbtxt says
// `backend: "inferd_generate"` (serving/generative_config.h), each loaded into a
// GenerationEngine (genserve/engine_text_generator.h) and served on the generation API
// (server/openai_http.h) instead of by the ModelManager.
#pragma once

#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include "server/openai_http.h"

namespace inferd::tools {

struct ServedGenerativeModels {
  std::shared_ptr<server::GenerativeModels> models;  // never null
  std::set<std::string> folders;  // every generative folder, loaded or not (for external_models)
};

// Loads each generative folder of `repository`; a folder that fails is logged with the reason
// and skipped (as the ModelManager does with ONNX models). `threads`: the server's --threads.
ServedGenerativeModels LoadGenerativeModels(const std::filesystem::path& repository, int threads);

}  // namespace inferd::tools
