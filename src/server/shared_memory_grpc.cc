#include "server/shared_memory_grpc.h"

#include <string>

namespace inferd::server {
namespace {

using inference::InferParameter;

StatusOr<uint64_t> NonNegative(const InferParameter& p, std::string_view where,
                               std::string_view name) {
  if (p.parameter_choice_case() != InferParameter::kInt64Param || p.int64_param() < 0) {
    return InvalidArgument("{}: parameter '{}' must be a non-negative int64_param", where, name);
  }
  return static_cast<uint64_t>(p.int64_param());
}

}  // namespace

Status SystemSharedMemoryStatus(const SharedMemoryRegistry& registry,
                                const inference::SystemSharedMemoryStatusRequest& req,
                                inference::SystemSharedMemoryStatusResponse* res) {
  ASSIGN_OR_RETURN(auto regions, registry.GetStatus(req.name()));
  for (const auto& r : regions) {
    auto& out = (*res->mutable_regions())[r.name];
    out.set_name(r.name);
    out.set_key(r.key);
    out.set_offset(r.offset);
    out.set_byte_size(r.byte_size);
  }
  return Status::Ok();
}

Status SystemSharedMemoryRegister(SharedMemoryRegistry& registry,
                                  const inference::SystemSharedMemoryRegisterRequest& req) {
  return registry.Register(req.name(), req.key(), req.offset(), req.byte_size());
}

Status SystemSharedMemoryUnregister(SharedMemoryRegistry& registry,
                                    const inference::SystemSharedMemoryUnregisterRequest& req) {
  if (req.name().empty()) {
    registry.UnregisterAll();
  } else {
    registry.Unregister(req.name());
  }
  return Status::Ok();
}

Status CudaSharedMemoryStatus(const inference::CudaSharedMemoryStatusRequest& req) {
  if (req.name().empty()) return Status::Ok();
  return InvalidArgument("Unable to find cuda shared memory region: '{}'", req.name());
}

StatusOr<std::optional<SharedMemoryParams>> GrpcSharedMemoryParams(
    const google::protobuf::Map<std::string, InferParameter>& params, std::string_view where) {
  auto region = params.find("shared_memory_region");
  if (region == params.end()) return std::optional<SharedMemoryParams>();
  if (region->second.parameter_choice_case() != InferParameter::kStringParam) {
    return InvalidArgument("{}: parameter 'shared_memory_region' must be a string_param", where);
  }
  SharedMemoryParams p;
  p.region = region->second.string_param();
  auto size = params.find("shared_memory_byte_size");
  if (size == params.end()) {
    return InvalidArgument("{}: parameter 'shared_memory_byte_size' is missing", where);
  }
  ASSIGN_OR_RETURN(p.byte_size, NonNegative(size->second, where, "shared_memory_byte_size"));
  if (auto offset = params.find("shared_memory_offset"); offset != params.end()) {
    ASSIGN_OR_RETURN(p.offset, NonNegative(offset->second, where, "shared_memory_offset"));
  }
  return std::optional<SharedMemoryParams>(std::move(p));
}

StatusOr<SharedMemoryOutputs> ResolveGrpcSharedMemoryOutputs(
    const SharedMemoryRegistry& registry, const inference::ModelInferRequest& req) {
  std::map<std::string, SharedMemoryParams> params;
  for (const auto& out : req.outputs()) {
    const std::string where = "output '" + out.name().substr(0, 128) + "'";
    ASSIGN_OR_RETURN(auto p, GrpcSharedMemoryParams(out.parameters(), where));
    if (p.has_value()) params[out.name()] = std::move(*p);
  }
  if (params.empty()) return SharedMemoryOutputs();
  return ResolveSharedMemoryOutputs(registry, params);
}

Status FinishGrpcSharedMemoryOutputs(const SharedMemoryOutputs& outputs,
                                     const serving::InferenceResponse& response,
                                     inference::ModelInferResponse* res) {
  if (outputs.empty()) return Status::Ok();
  RETURN_IF_ERROR(WriteSharedMemoryOutputs(outputs, response.outputs));
  for (int i = 0; i < res->outputs_size() && i < res->raw_output_contents_size(); ++i) {
    if (outputs.count(res->outputs(i).name()) != 0) res->mutable_raw_output_contents(i)->clear();
  }
  return Status::Ok();
}

}  // namespace inferd::server
