// Fuzz target: the .npy reader (common/npy.h ParseNpy), with a serialize/re-parse round trip of
// what it accepts (the same dtype, shape and bytes must come back).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "common/npy.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto tensor = inferd::ParseNpy(bytes, "fuzz");
  if (!tensor.ok()) return 0;
  auto serialized = inferd::SerializeNpy(*tensor);
  if (!serialized.ok()) return 0;  // e.g. a type .npy cannot hold: an error, not a crash
  auto again = inferd::ParseNpy(*serialized, "fuzz-roundtrip");
  FUZZ_CHECK(again.ok(), "a serialized tensor parses again");
  FUZZ_CHECK(again->dtype() == tensor->dtype(), "round trip keeps the dtype");
  FUZZ_CHECK(again->shape() == tensor->shape(), "round trip keeps the shape");
  return 0;
}
