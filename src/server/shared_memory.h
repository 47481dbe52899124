// System shared memory (Triton's extension): named POSIX shared-memory regions a client
// registers, then names in inference requests instead of sending tensor bytes.
//
//   registry.Register("in", "/input_simple", /*offset=*/0, /*byte_size=*/128);
//   // request input with parameters shared_memory_region "in", offset 64, byte_size 64:
//   ASSIGN_OR_RETURN(Tensor t, registry.InputTensor({"in", 64, 64}, DataType::kInt32, {1, 16}, w));
//
// Register shm_opens the key (read-write, or read-only when the client only granted read) and
// mmaps [offset, offset + byte_size) of it, checked against the object's size. Inputs become
// views into the mapping (copied at most once: into the batch, or not at all when misaligned
// needs the one copy here); outputs are written into it by WriteOutput. Every view holds the
// mapping by reference count, so unregistering a region while requests use it is safe: the
// mapping goes away when the last of them finishes. Errors are INVALID_ARGUMENT (HTTP 400) with
// the region named: unknown region, range beyond the region, byte size not matching the tensor,
// an output into a read-only region; re-registering a name is ALREADY_EXISTS.
//
// Thread-safe. The HTTP and gRPC frontends share the process-wide Default() registry, as Triton's
// protocols share one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/data_type.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/tensor.h"
#include "common/thread_annotations.h"

namespace inferd::server {

// The shared_memory_region / shared_memory_offset / shared_memory_byte_size parameters of one
// request input or output.
struct SharedMemoryParams {
  std::string region;
  uint64_t offset = 0;  // within the registered range
  uint64_t byte_size = 0;
};

struct SharedMemoryRegionStatus {
  std::string name;
  std::string key;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

class SharedMemoryMapping;  // one registered region's mmap (shared_memory.cc)

// A writable range inside a registered region, holding the mapping alive.
struct SharedMemoryView {
  std::shared_ptr<SharedMemoryMapping> mapping;
  char* data = nullptr;
  uint64_t size = 0;
};

// The CUDA shared memory endpoints' error text.
inline constexpr const char* kCudaSharedMemoryUnsupported =
    "CUDA shared memory is not supported by inferd (CPU only)";

class SharedMemoryRegistry {
 public:
  static SharedMemoryRegistry& Default();

  // Maps `key` [offset, offset + byte_size). ALREADY_EXISTS for a registered name;
  // INVALID_ARGUMENT for an empty name/key, byte_size 0, an unknown key (shm_open fails) or a
  // range beyond the object.
  Status Register(const std::string& name, const std::string& key, uint64_t offset,
                  uint64_t byte_size) EXCLUDES(mu_);
  // Forgets `name` (no-op when unknown, as Triton); in-flight views keep their mapping.
  void Unregister(const std::string& name) EXCLUDES(mu_);
  void UnregisterAll() EXCLUDES(mu_);
  // All regions by name ("" = every region); INVALID_ARGUMENT naming an unknown one.
  StatusOr<std::vector<SharedMemoryRegionStatus>> GetStatus(const std::string& name) const
      EXCLUDES(mu_);

  // The input tensor `params` names: a view (a copy when misaligned for `dtype`). byte_size must
  // equal the tensor's size. `where` ("input 'x'") prefixes errors.
  StatusOr<Tensor> InputTensor(const SharedMemoryParams& params, DataType dtype,
                               const Shape& shape, std::string_view where) const EXCLUDES(mu_);
  // The range an output will be written to; the region must be writable.
  StatusOr<SharedMemoryView> OutputView(const SharedMemoryParams& params,
                                        std::string_view where) const EXCLUDES(mu_);

 private:
  StatusOr<SharedMemoryView> Lookup(const SharedMemoryParams& params, std::string_view where) const
      EXCLUDES(mu_);

  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<SharedMemoryMapping>> regions_ GUARDED_BY(mu_);
};

// Copies `tensor` into `view`; INVALID_ARGUMENT when it does not fit (the region is too small).
Status WriteSharedMemoryOutput(const SharedMemoryView& view, const Tensor& tensor,
                               std::string_view name);

}  // namespace inferd::server

namespace inferd::server {

// The output ranges of one request, by output name (resolved when the request is decoded, so a
// region unregistered while the request runs still receives its outputs).
using SharedMemoryOutputs = std::map<std::string, SharedMemoryView>;

// Resolves every output's params in `registry` (writable, in bounds).
StatusOr<SharedMemoryOutputs> ResolveSharedMemoryOutputs(
    const SharedMemoryRegistry& registry, const std::map<std::string, SharedMemoryParams>& params);

// Writes each response output named in `outputs` into its range.
Status WriteSharedMemoryOutputs(const SharedMemoryOutputs& outputs,
                                const std::vector<std::pair<std::string, Tensor>>& response);

}  // namespace inferd::server
