// Fuzz target: the config.pbtxt parser and validation (serving/model_config.h): ParseModelConfig
// (strict and lenient), ValidateConfigStandalone / CheckImplemented, CompleteConfig against a
// fixed model signature (x: FP32 [batch, 4], y: FP32 [batch, 2]), and the JSON form (what the
// config endpoint returns must be valid JSON and parse back).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "graph/graph.h"
#include "serving/model_config.h"

namespace {

std::vector<inferd::ValueInfo> Signature(const char* name, int64_t width) {
  inferd::ValueInfo v;
  v.name = name;
  v.dtype = inferd::DataType::kFloat32;
  v.shape = std::vector<inferd::Dim>{inferd::Dim{-1, "batch"}, inferd::Dim{width, ""}};
  return {v};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace inferd::serving;
  if (size == 0) return 0;
  const bool strict = (data[0] & 1) != 0;
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::string> warnings;
  auto config = ParseModelConfig(text, strict, &warnings);
  if (!config.ok()) return 0;
  (void)IgnoredConfigFields(*config);
  (void)ValidateConfigStandalone(*config);
  auto completed = *config;
  (void)CompleteConfig("m", Signature("x", 4), Signature("y", 2), /*default_max_batch_size=*/8,
                       &completed);
  for (const auto* c : {&*config, &completed}) {
    auto json = ModelConfigToJson(*c);
    if (!json.ok()) continue;
    FUZZ_CHECK(inferd::fuzz::IsValidJson(*json), "ModelConfigToJson writes valid JSON");
    auto back = ModelConfigFromJson(*json);
    FUZZ_CHECK(back.ok(), "ModelConfigToJson's JSON parses back");
  }
  return 0;
}
