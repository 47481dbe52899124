// `inferd worker`: a queue worker on a Redis stream (docs/fleet.md, "Work queue on Redis
// Streams"). Loads models from a repository on first use and runs the stream's job entries
// through serving::ModelManager in process, as `inferd batch` does; the loop is
// workqueue/worker.h. SIGTERM/SIGINT: finish the batch in flight, store and ack it, exit 0.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/status.h"

namespace inferd::tools {

struct WorkerCommandOptions {
  std::string redis;       // redis://HOST:PORT[/DB]
  std::string stream;      // the job stream
  std::string group;       // the consumer group
  std::string consumer;    // "" = HOSTNAME-PID
  std::string repository;  // the model repository
  std::vector<std::string> models;  // loaded at start (others on first use)
  int batch = 256;                  // items per read (XREADGROUP COUNT = batch / items per entry)
  int batch_size = 8;               // preferred batch of a model without dynamic_batching
  int64_t claim_idle_ms = 30000;
  int64_t claim_interval_ms = 0;    // 0 = claim_idle_ms / 2
  int max_deliveries = 3;
  int64_t result_ttl_s = 86400;
  int64_t timeout_ms = 2000;
  int threads = 0;  // inference cores; 0 = all
  std::string log_level = "warn";
};

CLI::App* AddWorkerSubcommand(CLI::App& app, WorkerCommandOptions* options);

// Runs until a signal. UNAVAILABLE when Redis cannot be reached (a clear one-line error);
// INVALID_ARGUMENT for bad flags or a model that fails to load at start.
Status WorkerCommand(const WorkerCommandOptions& options, std::ostream& log);

}  // namespace inferd::tools
