// KServe v2 REST routes on top of ModelManager, as HttpHandlers for HttpServer.
//
//   GET  /v2/health/live | /v2/health/ready            200, or 503 when not live/ready
//   GET  /v2                                           server metadata
//   GET  /v2/models/M[/versions/V]                     model metadata
//   GET  /v2/models/M[/versions/V]/ready               200 ready, 503 not ready, 404 unknown
//   GET  /v2/models/M[/versions/V]/config              effective config (Triton JSON)
//   GET  /v2/models[/M[/versions/V]]/stats             Triton statistics JSON
//   POST /v2/models/M[/versions/V]/infer               inference (JSON and binary extension)
//   POST /v2/repository/index                          repository index (Triton extension)
//   POST /v2/repository/models/M/load | unload         load (with `config`, `file:` parameters:
//                                                      repository_codec.h) or unload
//   GET|POST /v2/logging                               logging extension (server_extensions.h)
//   GET|POST /v2/trace/setting, /v2/models/M/trace/setting   trace extension
//   /v2/systemsharedmemory/..., /v2/cudasharedmemory/...  shared memory (shared_memory_http.h)
// Errors are {"error": "..."} with HttpStatusFor's codes; unknown paths 404, wrong method 405.
#pragma once

#include <string>

#include "server/http_server.h"
#include "server/server_extensions.h"
#include "serving/model_manager.h"

namespace inferd::server {

inline constexpr const char* kServerVersion = "0.1.0";

// `manager` and `extensions` must outlive every request the handler receives (stop the server
// first). `extensions` nullptr: defaults (server name "inferd"), shared by such handlers.
// Path segments are percent-decoded ("m%C3%B6del"); every JSON string out is valid UTF-8.
HttpHandler MakeKServeHttpHandler(serving::ModelManager* manager,
                                  ServerExtensions* extensions = nullptr);

// Wraps `inner` so that replies never show where the model repository lives: its absolute
// spellings (as given, absolute, canonical) in a reply body become relative paths
// ("<repo>/m/1/model.onnx" -> "m/1/model.onnx"; json_text.h). Streams and replies rendered
// later (inference results) are left alone. `repository`: the path the manager was given.
HttpHandler MakeRepositoryRedactingHandler(HttpHandler inner, const std::string& repository);

// GET /metrics: Prometheus text (metrics.h); anything else 404.
HttpHandler MakeMetricsHttpHandler(serving::ModelManager* manager);

}  // namespace inferd::server
