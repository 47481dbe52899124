// Server-wide state the KServe frontends (HTTP and gRPC) share: the server's identity (`--id`,
// the name in server metadata), and the settings of Triton's logging and trace extensions.
//
// Logging (/v2/logging, gRPC LogSettings): log_info, log_warning, log_error (bool),
// log_verbose_level (uint), log_format ("default" or "ISO8601"), log_file (read-only here: inferd
// logs to stderr; setting it is an error naming it). Updates set spdlog's level at once.
//
// Trace (/v2/trace/setting, /v2/models/M/trace/setting, gRPC TraceSetting): every value is a list
// of strings, as Triton's: trace_level ["OFF"] or ["TIMESTAMPS"], trace_rate (trace every N-th
// request), trace_count (traces left, -1 unlimited), log_frequency (accepted; traces are written as
// they complete), trace_file, trace_mode ("triton"). A model's settings override the global ones
// field by field; an empty value list clears a model's field back to the global one. A traced
// request appends one JSON line to trace_file:
//   {"id":1,"model_name":"m","model_version":1,"timestamps":[{"name":"REQUEST_START","ns":..},
//    {"name":"REQUEST_END","ns":..}]}
// (ns on the steady clock). Errors are INVALID_ARGUMENT naming the setting.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"

namespace inferd::server {

using LogValue = std::variant<bool, uint32_t, std::string>;
using LogSettings = std::map<std::string, LogValue>;
using TraceSettings = std::map<std::string, std::vector<std::string>>;

// A sampled request: pass it back to FinishTrace when the response is ready.
struct TraceHandle {
  uint64_t id = 0;
  std::string model;
  int64_t start_ns = 0;
  std::string file;
};

class ServerExtensions {
 public:
  explicit ServerExtensions(std::string id = "inferd");

  const std::string& id() const { return id_; }
  // The extensions listed in server metadata.
  static const std::vector<const char*>& Names();

  LogSettings GetLog() const EXCLUDES(mu_);
  // Applies the named settings only; on error nothing changes.
  Status UpdateLog(const LogSettings& update) EXCLUDES(mu_);

  // `model` "" = the global settings; a model's are the global ones with its overrides.
  TraceSettings GetTrace(const std::string& model) const EXCLUDES(mu_);
  Status UpdateTrace(const std::string& model, const TraceSettings& update) EXCLUDES(mu_);

  // Whether this request of `model` is traced (trace level, rate and count); counts it.
  std::optional<TraceHandle> StartTrace(const std::string& model) EXCLUDES(mu_);
  // Writes the trace line (errors are logged, never returned to the request).
  void FinishTrace(const TraceHandle& trace, int64_t model_version) EXCLUDES(file_mu_);

 private:
  TraceSettings EffectiveLocked(const std::string& model) const REQUIRES(mu_);
  void ApplyLogLevelLocked() const REQUIRES(mu_);

  const std::string id_;
  mutable Mutex mu_;
  LogSettings log_ GUARDED_BY(mu_);
  TraceSettings trace_ GUARDED_BY(mu_);
  std::map<std::string, TraceSettings> model_trace_ GUARDED_BY(mu_);
  uint64_t requests_seen_ GUARDED_BY(mu_) = 0;
  uint64_t next_trace_id_ GUARDED_BY(mu_) = 1;
  Mutex file_mu_;  // serializes appends to trace files
};

}  // namespace inferd::server
