// UTF-8 well-formedness: JSON out must be UTF-8 (server/json_text.h), and config strings that
// end up in JSON must be too (serving/model_config.h). Hand-written (25 lines) because the
// libraries at hand keep theirs internal (protobuf's IsStructurallyValidUTF8) or validate only
// while parsing JSON (RapidJSON).
#pragma once

#include <string>
#include <string_view>

namespace inferd {

// Whether `s` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, <= U+10FFFF).
bool IsValidUtf8(std::string_view s);

// `s` with each byte that does not start a well-formed sequence replaced by U+FFFD; `s` itself
// when it is valid (the common case costs one scan and one copy).
std::string ToValidUtf8(std::string_view s);

}  // namespace inferd
