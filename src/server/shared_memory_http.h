// Triton's shared-memory extension over HTTP, on SharedMemoryRegistry (shared_memory.h):
//
//   GET  /v2/systemsharedmemory[/region/R]/status     [{"name","key","offset","byte_size"}, ...]
//   POST /v2/systemsharedmemory/region/R/register     body {"key": K, "offset": O, "byte_size": N}
//   POST /v2/systemsharedmemory[/region/R]/unregister one region, or all of them
//   /v2/cudasharedmemory/...                          register: 400 "CUDA shared memory is not
//                                                     supported by inferd (CPU only)"; status
//                                                     lists no region; unregister is a no-op
//                                                     (nothing can be registered), so clients
//                                                     that clean up both kinds keep working.
// Errors are {"error": "..."} with 400 (409 for a name already registered).
//
// Inference requests name regions in their input/output `parameters` (shared_memory_region,
// shared_memory_offset, shared_memory_byte_size); ParseJsonSharedMemoryParams reads those.
#pragma once

#include <optional>
#include <string_view>

#include <rapidjson/document.h>

#include "common/status.h"
#include "server/http_server.h"
#include "server/shared_memory.h"

namespace inferd::server {

// Answers `req` and returns true when its path is under /v2/systemsharedmemory or
// /v2/cudasharedmemory; false (reply untouched) otherwise.
bool HandleSharedMemoryHttp(SharedMemoryRegistry& registry, const HttpRequest& req,
                            const HttpResponder& reply);

// The shared-memory parameters in a `parameters` object: nullopt without shared_memory_region;
// INVALID_ARGUMENT (prefixed by `where`) for a non-string region, a non-integer offset/byte_size
// or a missing byte_size.
StatusOr<std::optional<SharedMemoryParams>> ParseJsonSharedMemoryParams(
    const rapidjson::Value& params, std::string_view where);

}  // namespace inferd::server
