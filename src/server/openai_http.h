// The generation API on the HTTP port: OpenAI-compatible routes and Triton's generate extension
// over TextGenerators (text_generator.h), in front of the KServe routes.
//
//   POST /v1/completions              prompt → text (OpenAI legacy completions)
//   POST /v1/chat/completions         messages → the model's chat template → text
//   GET  /v1/models[/M]               the generative models
//   POST /v2/models/M/generate        {"text_input", "parameters": {...}} → {"text_output"}
//   POST /v2/models/M/generate_stream the same as server-sent events, one per new piece of text
// With "stream": true the /v1 routes answer `text/event-stream`: "data: {chunk}\n\n" per new
// text, the usage chunk when stream_options.include_usage, then "data: [DONE]\n\n". A client that
// disconnects mid-stream has its sequence cancelled (TextGenerator::Cancel) at once.
//
// Errors on /v1 are OpenAI's JSON ({"error": {"message", "type", "param", "code"}}): 400 for
// malformed JSON, bad fields (max_tokens <= 0, negative temperature, top_p outside (0, 1], n > 1),
// a prompt longer than the context or max_tokens above it, a KServe (non-generative) model; 404
// for an unknown model. On /v2 they are KServe's {"error": "..."}.
//
// The KServe routes that must know generative models are answered here too: /v2/models/M[/ready]
// for a generative M, /v2/models/M/infer on one (400: use generate), POST /v2/repository/index
// (the manager's rows plus one row per generative model). Everything else goes to
// `fallback` (MakeKServeHttpHandler).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "server/chat_template.h"
#include "server/http_server.h"
#include "server/text_generator.h"
#include "serving/model_manager.h"

namespace inferd::server {

struct GenerativeModel {
  std::string name;
  std::shared_ptr<TextGenerator> generator;  // never null
  ChatTemplate chat_template = ChatTemplate::Default();
};

// The generative models, fixed when the server starts (they are not polled or reloaded).
struct GenerativeModels {
  std::vector<GenerativeModel> ready;
  // Generative folders that failed to load, with the reason: UNAVAILABLE in the repository
  // index, 503 with the reason on the generation routes.
  std::map<std::string, std::string> unavailable;
};

// `manager` may be null (no KServe models: index rows and the non-generative check are skipped);
// when set it must outlive the handler, as must the generators.
HttpHandler MakeGenerationHttpHandler(std::shared_ptr<const GenerativeModels> models,
                                      serving::ModelManager* manager, HttpHandler fallback);

// GET /metrics: the manager's families (metrics.h) followed by the generation families.
HttpHandler MakeGenerationMetricsHttpHandler(std::shared_ptr<const GenerativeModels> models,
                                             serving::ModelManager* manager);

}  // namespace inferd::server
