#include "server/repository_codec.h"

#include <rapidjson/document.h>

#include <array>

namespace inferd::server {
namespace {

constexpr std::string_view kFilePrefix = "file:";

bool IsFileParameter(std::string_view name) {
  return name.substr(0, kFilePrefix.size()) == kFilePrefix;
}

}  // namespace

StatusOr<std::string> DecodeBase64(std::string_view text) {
  static const std::array<int8_t, 256> kValue = [] {
    std::array<int8_t, 256> v;
    v.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) v[static_cast<uint8_t>(alphabet[i])] = static_cast<int8_t>(i);
    return v;
  }();
  if (text.size() % 4 != 0) {
    return InvalidArgument("base64 length {} is not a multiple of 4", text.size());
  }
  size_t pad = 0;
  while (pad < 2 && pad < text.size() && text[text.size() - 1 - pad] == '=') ++pad;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  uint32_t acc = 0;
  for (size_t i = 0; i < text.size() - pad; ++i) {
    const int8_t v = kValue[static_cast<uint8_t>(text[i])];
    if (v < 0) return InvalidArgument("invalid base64 character at offset {}", i);
    acc = (acc << 6) | static_cast<uint32_t>(v);
    if (i % 4 == 3) {
      out.push_back(static_cast<char>(acc >> 16));
      out.push_back(static_cast<char>(acc >> 8));
      out.push_back(static_cast<char>(acc));
      acc = 0;
    }
  }
  if (pad == 1) {  // 3 symbols left: 18 bits, 2 bytes
    out.push_back(static_cast<char>(acc >> 10));
    out.push_back(static_cast<char>(acc >> 2));
  } else if (pad == 2) {  // 2 symbols left: 12 bits, 1 byte
    out.push_back(static_cast<char>(acc >> 4));
  }
  return out;
}

StatusOr<serving::LoadParameters> DecodeHttpLoadRequest(std::string_view body) {
  serving::LoadParameters params;
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return params;
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return InvalidArgument("load request: the body must be a JSON object");
  }
  auto p = doc.FindMember("parameters");
  if (p == doc.MemberEnd()) return params;
  if (!p->value.IsObject()) return InvalidArgument("load request: 'parameters' must be an object");
  for (const auto& m : p->value.GetObject()) {
    const std::string_view name(m.name.GetString(), m.name.GetStringLength());
    if (name == "config") {
      if (!m.value.IsString()) {
        return InvalidArgument("Config parameter 'config' must have string type for its value");
      }
      params.config = std::string(m.value.GetString(), m.value.GetStringLength());
    } else if (IsFileParameter(name)) {
      if (!m.value.IsString()) {
        return InvalidArgument("File parameter '{}' must be a base64 string", name);
      }
      auto bytes = DecodeBase64({m.value.GetString(), m.value.GetStringLength()});
      if (!bytes.ok()) {
        return InvalidArgument("File parameter '{}': {}", name, bytes.status().message());
      }
      params.files[std::string(name.substr(kFilePrefix.size()))] = std::move(bytes).value();
    }
  }
  return params;
}

StatusOr<serving::LoadParameters> DecodeGrpcLoadRequest(
    const inference::RepositoryModelLoadRequest& request) {
  serving::LoadParameters params;
  for (const auto& [name, value] : request.parameters()) {
    if (name == "config") {
      if (!value.has_string_param()) {
        return InvalidArgument("Config parameter 'config' must have string type for its value");
      }
      params.config = value.string_param();
    } else if (IsFileParameter(name)) {
      if (!value.has_bytes_param()) {
        return InvalidArgument("File parameter '{}' must have bytes type for its value", name);
      }
      params.files[name.substr(kFilePrefix.size())] = value.bytes_param();
    }
  }
  return params;
}

}  // namespace inferd::server
