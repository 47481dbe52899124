// Text that goes into JSON replies: JSON is UTF-8 text, so every string the server writes is
// valid UTF-8 (invalid bytes from a model's BYTES output, a label file or an echoed name become
// U+FFFD), and error messages never show where the model repository lives on disk.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/utf8.h"

namespace inferd::server {

using ::inferd::IsValidUtf8;  // common/utf8.h
using ::inferd::ToValidUtf8;

// `message` with the repository's location taken out: "<root>/m/1/model.onnx" becomes
// "m/1/model.onnx" and "<root>" alone "<model repository>", for each spelling in `roots` (as
// given, absolute, canonical). Empty roots are ignored.
std::string RedactRepositoryPath(std::string_view message, const std::vector<std::string>& roots);

}  // namespace inferd::server
