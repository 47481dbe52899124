#include "server/chat_template.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

namespace inferd::server {
namespace {

constexpr std::string_view kDefaultTemplate = R"({
  "roles": {
    "system": {"prefix": "", "suffix": "\n\n"},
    "user": {"prefix": "User: ", "suffix": "\n"},
    "assistant": {"prefix": "Assistant: ", "suffix": "\n"}
  },
  "generation_prompt": "Assistant:",
  "stop": ["\nUser:"]
})";

Status ReadString(const rapidjson::Value& obj, const char* name, std::string* out) {
  auto it = obj.FindMember(name);
  if (it == obj.MemberEnd()) return Status::Ok();
  if (!it->value.IsString()) return InvalidArgument("chat template: '{}' must be a string", name);
  out->assign(it->value.GetString(), it->value.GetStringLength());
  return Status::Ok();
}

}  // namespace

ChatTemplate ChatTemplate::Default() {
  auto t = Parse(kDefaultTemplate);
  return std::move(*t);  // a constant that the tests parse
}

StatusOr<ChatTemplate> ChatTemplate::Parse(std::string_view json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError()) {
    return InvalidArgument("chat template: malformed JSON: {} (at offset {})",
                           rapidjson::GetParseError_En(doc.GetParseError()), doc.GetErrorOffset());
  }
  if (!doc.IsObject()) return InvalidArgument("chat template: must be a JSON object");
  ChatTemplate t;
  auto roles = doc.FindMember("roles");
  if (roles == doc.MemberEnd() || !roles->value.IsObject() || roles->value.ObjectEmpty()) {
    return InvalidArgument("chat template: 'roles' must be a non-empty object");
  }
  for (const auto& r : roles->value.GetObject()) {
    if (!r.value.IsObject()) {
      return InvalidArgument("chat template: role '{}' must be an object", r.name.GetString());
    }
    Role role;
    RETURN_IF_ERROR(ReadString(r.value, "prefix", &role.prefix));
    RETURN_IF_ERROR(ReadString(r.value, "suffix", &role.suffix));
    t.roles_[r.name.GetString()] = std::move(role);
  }
  RETURN_IF_ERROR(ReadString(doc, "generation_prompt", &t.generation_prompt_));
  if (auto stop = doc.FindMember("stop"); stop != doc.MemberEnd()) {
    if (!stop->value.IsArray()) return InvalidArgument("chat template: 'stop' must be an array");
    for (const auto& s : stop->value.GetArray()) {
      if (!s.IsString() || s.GetStringLength() == 0) {
        return InvalidArgument("chat template: 'stop' entries must be non-empty strings");
      }
      t.stop_.emplace_back(s.GetString(), s.GetStringLength());
    }
  }
  return t;
}

StatusOr<std::string> ChatTemplate::Render(const std::vector<ChatMessage>& messages) const {
  std::string out;
  for (const auto& m : messages) {
    auto it = roles_.find(m.role);
    if (it == roles_.end()) {
      std::string known;
      for (const auto& [name, role] : roles_) known += (known.empty() ? "" : ", ") + name;
      return InvalidArgument("unknown message role '{}' (this model's chat template knows: {})",
                             m.role.substr(0, 64), known);
    }
    out.append(it->second.prefix).append(m.content).append(it->second.suffix);
  }
  out.append(generation_prompt_);
  return out;
}

}  // namespace inferd::server
