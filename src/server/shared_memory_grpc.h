// Triton's shared-memory extension over gRPC, on SharedMemoryRegistry (shared_memory.h): the
// SystemSharedMemory{Status,Register,Unregister} RPCs (an empty name unregisters every region;
// status of an unknown name is INVALID_ARGUMENT), the CUDA ones (register: UNIMPLEMENTED
// "CUDA shared memory is not supported by inferd (CPU only)"; status lists nothing and unregister
// is a no-op, so clients that clean up both kinds keep working), and the inference side: input
// and output `parameters` shared_memory_region (string_param), shared_memory_offset and
// shared_memory_byte_size (int64_param).
#pragma once

#include <optional>
#include <string_view>

#include <google/protobuf/map.h>

#include "common/status.h"
#include "grpc_service.pb.h"
#include "server/shared_memory.h"
#include "serving/inference.h"

namespace inferd::server {

Status SystemSharedMemoryStatus(const SharedMemoryRegistry& registry,
                                const inference::SystemSharedMemoryStatusRequest& req,
                                inference::SystemSharedMemoryStatusResponse* res);
Status SystemSharedMemoryRegister(SharedMemoryRegistry& registry,
                                  const inference::SystemSharedMemoryRegisterRequest& req);
Status SystemSharedMemoryUnregister(SharedMemoryRegistry& registry,
                                    const inference::SystemSharedMemoryUnregisterRequest& req);
// CUDA: status of a named region is INVALID_ARGUMENT (none exist), of all regions empty.
Status CudaSharedMemoryStatus(const inference::CudaSharedMemoryStatusRequest& req);

// The shared-memory parameters of one input or output: nullopt without shared_memory_region;
// INVALID_ARGUMENT (prefixed by `where`) for wrongly typed or negative values.
StatusOr<std::optional<SharedMemoryParams>> GrpcSharedMemoryParams(
    const google::protobuf::Map<std::string, inference::InferParameter>& params,
    std::string_view where);

// The requested outputs that name a region, resolved (writable, in bounds).
StatusOr<SharedMemoryOutputs> ResolveGrpcSharedMemoryOutputs(
    const SharedMemoryRegistry& registry, const inference::ModelInferRequest& req);

// After EncodeGrpcInferResponse: writes the shared-memory outputs into their regions and empties
// their raw_output_contents entries (kept, empty, so indices still match `outputs`).
Status FinishGrpcSharedMemoryOutputs(const SharedMemoryOutputs& outputs,
                                     const serving::InferenceResponse& response,
                                     inference::ModelInferResponse* res);

}  // namespace inferd::server
