#include "server/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "server/bytes_codec.h"

namespace inferd::server {

class SharedMemoryMapping {
 public:
  SharedMemoryMapping(SharedMemoryRegionStatus status, void* base, size_t length, char* data,
                      bool read_only)
      : status_(std::move(status)), base_(base), length_(length), data_(data),
        read_only_(read_only) {}
  ~SharedMemoryMapping() { munmap(base_, length_); }
  SharedMemoryMapping(const SharedMemoryMapping&) = delete;
  SharedMemoryMapping& operator=(const SharedMemoryMapping&) = delete;

  const SharedMemoryRegionStatus& status() const { return status_; }
  char* data() const { return data_; }  // the registered offset applied
  bool read_only() const { return read_only_; }

 private:
  SharedMemoryRegionStatus status_;
  void* base_;     // what mmap returned (page-aligned)
  size_t length_;  // mapped length
  char* data_;
  bool read_only_;
};

namespace {

// Opens and maps [offset, offset + byte_size) of `key`; read-write when allowed, else read-only.
StatusOr<std::shared_ptr<SharedMemoryMapping>> MapRegion(const SharedMemoryRegionStatus& s) {
  bool read_only = false;
  int fd = shm_open(s.key.c_str(), O_RDWR, 0);
  if (fd < 0 && (errno == EACCES || errno == EPERM)) {
    read_only = true;
    fd = shm_open(s.key.c_str(), O_RDONLY, 0);
  }
  if (fd < 0) {
    return InvalidArgument("shared memory region '{}': cannot open key '{}': {}", s.name, s.key,
                           std::strerror(errno));
  }
  struct stat st{};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return InvalidArgument("shared memory region '{}': cannot stat key '{}': {}", s.name, s.key,
                           std::strerror(err));
  }
  const auto object_size = static_cast<uint64_t>(st.st_size);
  if (s.offset > object_size || s.byte_size > object_size - s.offset) {
    close(fd);
    return InvalidArgument(
        "shared memory region '{}': offset {} + byte_size {} exceeds the {} bytes of key '{}'",
        s.name, s.offset, s.byte_size, object_size, s.key);
  }
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t map_offset = s.offset / page * page;
  const size_t length = static_cast<size_t>(s.byte_size + (s.offset - map_offset));
  void* base = mmap(nullptr, length, read_only ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED,
                    fd, static_cast<off_t>(map_offset));
  const int err = errno;
  close(fd);  // the mapping stays valid without the descriptor
  if (base == MAP_FAILED) {
    return InvalidArgument("shared memory region '{}': cannot map key '{}': {}", s.name, s.key,
                           std::strerror(err));
  }
  char* data = static_cast<char*>(base) + (s.offset - map_offset);
  return std::make_shared<SharedMemoryMapping>(s, base, length, data, read_only);
}

}  // namespace

SharedMemoryRegistry& SharedMemoryRegistry::Default() {
  static SharedMemoryRegistry* registry = new SharedMemoryRegistry();  // never destroyed
  return *registry;
}

Status SharedMemoryRegistry::Register(const std::string& name, const std::string& key,
                                      uint64_t offset, uint64_t byte_size) {
  if (name.empty()) return InvalidArgument("shared memory region name is empty");
  if (key.empty()) return InvalidArgument("shared memory region '{}': key is empty", name);
  if (byte_size == 0) return InvalidArgument("shared memory region '{}': byte_size is 0", name);
  {
    MutexLock lock(&mu_);
    if (regions_.count(name) != 0) {
      return AlreadyExists("shared memory region '{}' is already registered", name);
    }
  }
  // Mapped outside the lock (a system call); a racing register of the same name is settled below.
  ASSIGN_OR_RETURN(auto mapping, MapRegion({name, key, offset, byte_size}));
  MutexLock lock(&mu_);
  if (!regions_.emplace(name, std::move(mapping)).second) {
    return AlreadyExists("shared memory region '{}' is already registered", name);
  }
  return Status::Ok();
}

void SharedMemoryRegistry::Unregister(const std::string& name) {
  std::shared_ptr<SharedMemoryMapping> dropped;  // unmapped (if last) after the lock is released
  MutexLock lock(&mu_);
  auto it = regions_.find(name);
  if (it == regions_.end()) return;
  dropped = std::move(it->second);
  regions_.erase(it);
}

void SharedMemoryRegistry::UnregisterAll() {
  std::map<std::string, std::shared_ptr<SharedMemoryMapping>> dropped;
  MutexLock lock(&mu_);
  dropped.swap(regions_);
}

StatusOr<std::vector<SharedMemoryRegionStatus>> SharedMemoryRegistry::GetStatus(
    const std::string& name) const {
  MutexLock lock(&mu_);
  std::vector<SharedMemoryRegionStatus> out;
  if (!name.empty()) {
    auto it = regions_.find(name);
    if (it == regions_.end()) {
      return InvalidArgument("Unable to find system shared memory region: '{}'", name);
    }
    out.push_back(it->second->status());
    return out;
  }
  for (const auto& [n, m] : regions_) out.push_back(m->status());
  return out;
}

StatusOr<SharedMemoryView> SharedMemoryRegistry::Lookup(const SharedMemoryParams& params,
                                                        std::string_view where) const {
  std::shared_ptr<SharedMemoryMapping> mapping;
  {
    MutexLock lock(&mu_);
    auto it = regions_.find(params.region);
    if (it != regions_.end()) mapping = it->second;
  }
  if (mapping == nullptr) {
    return InvalidArgument("{}: unknown shared memory region '{}'", where, params.region);
  }
  const uint64_t size = mapping->status().byte_size;
  if (params.offset > size || params.byte_size > size - params.offset) {
    return InvalidArgument(
        "{}: shared memory offset {} + byte_size {} exceeds the {} bytes of region '{}'", where,
        params.offset, params.byte_size, size, params.region);
  }
  char* data = mapping->data() + params.offset;
  return SharedMemoryView{std::move(mapping), data, params.byte_size};
}

StatusOr<Tensor> SharedMemoryRegistry::InputTensor(const SharedMemoryParams& params,
                                                   DataType dtype, const Shape& shape,
                                                   std::string_view where) const {
  if (dtype == DataType::kString) {
    // BYTES in a region use the binary extension's form (4-byte length + bytes per element),
    // decoded (one copy) into an owned string tensor.
    ASSIGN_OR_RETURN(SharedMemoryView view, Lookup(params, where));
    return DecodeLengthPrefixed(std::string_view(view.data, view.size), shape, where);
  }
  const uint64_t expected = static_cast<uint64_t>(NumElements(shape)) * SizeOf(dtype);
  if (params.byte_size != expected) {
    return InvalidArgument("{}: shared_memory_byte_size is {} bytes but {} {} needs {}", where,
                           params.byte_size, DataTypeName(dtype), ShapeToString(shape), expected);
  }
  ASSIGN_OR_RETURN(SharedMemoryView view, Lookup(params, where));
  if (reinterpret_cast<uintptr_t>(view.data) % SizeOf(dtype) == 0) {
    // A const view: kernels never write inputs. The tensor holds the mapping alive.
    return Tensor::Wrap(dtype, shape, view.data, std::shared_ptr<void>(view.mapping));
  }
  Tensor copy = Tensor::Allocate(dtype, shape);  // misaligned for the element type
  if (expected > 0) std::memcpy(copy.raw_data(), view.data, expected);
  return copy;
}

StatusOr<SharedMemoryView> SharedMemoryRegistry::OutputView(const SharedMemoryParams& params,
                                                            std::string_view where) const {
  ASSIGN_OR_RETURN(SharedMemoryView view, Lookup(params, where));
  if (view.mapping->read_only()) {
    return InvalidArgument("{}: shared memory region '{}' is read-only (key '{}' opened without "
                           "write permission)",
                           where, params.region, view.mapping->status().key);
  }
  return view;
}

Status WriteSharedMemoryOutput(const SharedMemoryView& view, const Tensor& tensor,
                               std::string_view name) {
  if (tensor.is_string()) {
    std::string encoded;
    AppendLengthPrefixed(tensor, &encoded);
    if (encoded.size() > view.size) {
      return InvalidArgument(
          "output '{}': shared_memory_byte_size {} is too small for the result ({} bytes)", name,
          view.size, encoded.size());
    }
    std::memcpy(view.data, encoded.data(), encoded.size());
    return Status::Ok();
  }
  const uint64_t size = tensor.ByteSize();
  if (size > view.size) {
    return InvalidArgument(
        "output '{}': shared_memory_byte_size {} is too small for the result ({} bytes)", name,
        view.size, size);
  }
  if (size > 0) std::memcpy(view.data, tensor.raw_data(), size);
  return Status::Ok();
}

}  // namespace inferd::server

namespace inferd::server {

StatusOr<SharedMemoryOutputs> ResolveSharedMemoryOutputs(
    const SharedMemoryRegistry& registry, const std::map<std::string, SharedMemoryParams>& params) {
  SharedMemoryOutputs out;
  for (const auto& [name, p] : params) {
    ASSIGN_OR_RETURN(out[name], registry.OutputView(p, fmt::format("output '{}'", name)));
  }
  return out;
}

Status WriteSharedMemoryOutputs(const SharedMemoryOutputs& outputs,
                                const std::vector<std::pair<std::string, Tensor>>& response) {
  for (const auto& [name, tensor] : response) {
    auto it = outputs.find(name);
    if (it != outputs.end()) RETURN_IF_ERROR(WriteSharedMemoryOutput(it->second, tensor, name));
  }
  return Status::Ok();
}

}  // namespace inferd::server
