// Fuzz target: the ONNX loader (graph/onnx_io.h ParseOnnxModel: protobuf parse, the onnx checker,
// shape inference, TensorProto conversion, topological sort), without the optimizer. External
// data resolves under a folder that does not exist, so no input can make it read a real file.
// What loads is serialized again (SerializeOnnxModel), which must not fail on a model we accepted.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_util.h"
#include "graph/onnx_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  auto model = inferd::ParseOnnxModel(bytes, "/nonexistent/inferd-fuzz-model-dir");
  if (!model.ok()) return 0;
  auto serialized = inferd::SerializeOnnxModel(*model);
  FUZZ_CHECK(serialized.ok(), "an imported model serializes again");
  return 0;
}
