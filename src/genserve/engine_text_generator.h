// The generation API's view (server::TextGenerator) of a gen::GenerationEngine, and the loading
// of a generative model folder of the repository into one.
//
//   ASSIGN_OR_RETURN(serving::GenerativeConfig config,
//                    serving::ReadGenerativeConfig(parsed_config_pbtxt, repository / name));
//   ASSIGN_OR_RETURN(server::GenerativeModel model, LoadGenerativeModel(name, config, {}));
//   models->ready.push_back(std::move(model));   // then server::MakeGenerationHttpHandler(models,
//   ...)
//
// The adapter copies the request and event structs field by field (server/text_generator.h
// mirrors GEN.md's) so the HTTP layer never includes src/generation and is tested with a fake.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "generation/engine.h"
#include "server/openai_http.h"
#include "server/text_generator.h"
#include "serving/generative_config.h"

namespace inferd::genserve {

class EngineTextGenerator : public server::TextGenerator {
 public:
  // `max_context`: the context the API enforces (<= the model's).
  EngineTextGenerator(std::unique_ptr<gen::GenerationEngine> engine, int max_context);

  int max_context() const override { return max_context_; }
  // The tokenizer's ids with BOS first when the model has one (sentencepiece adds none).
  std::vector<int32_t> Encode(std::string_view text) const override;
  std::string TokenText(int32_t token) const override;
  Status Submit(const std::string& id, std::vector<int32_t> prompt, const server::GenParams& params,
                std::function<void(const server::GenEvent&)> on_event) override;
  void Cancel(const std::string& id) override;
  server::GenerationMetrics Metrics() const override;

 private:
  std::unique_ptr<gen::GenerationEngine> engine_;
  const int max_context_;
  std::shared_ptr<std::atomic<int64_t>> finished_ = std::make_shared<std::atomic<int64_t>>(0);
};

struct GenerativeLoadOptions {
  int default_threads = 0;  // num_threads when the config leaves it 0 (0 = all cores)
  Clock* clock = nullptr;   // nullptr = RealClock; must outlive the model
};

// Builds runner, tokenizer and engine from `config` (the files in config.model_dir, plus
// chat_template.json there or in its parent folder; the default template without one). Fails
// with the reason (corrupt tokenizer, graph the rewrite cannot handle, bad chat template,
// max_context above the model's) prefixed with the model name.
StatusOr<server::GenerativeModel> LoadGenerativeModel(const std::string& name,
                                                      const serving::GenerativeConfig& config,
                                                      const GenerativeLoadOptions& options);

}  // namespace inferd::genserve
