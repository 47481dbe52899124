#include "constrained/json_schema.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <set>
#include <utility>
#include <vector>

#include "constrained/regex.h"

namespace inferd::constrained {
namespace {

using rapidjson::Value;

// A JSON string's content: any character but '"', '\' and controls, or an escape.
constexpr std::string_view kChar = R"((?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4}))";
constexpr std::string_view kInteger = "-?(?:0|[1-9][0-9]{0,15})";
constexpr std::string_view kFraction = R"((?:\.[0-9]{1,15})?(?:[eE][+-]?[0-9]{1,3})?)";
constexpr int kMaxItems = 100;  // minItems/maxItems above this would blow up the automaton

std::string StringRegex() { return fmt::format("\"{}*\"", kChar); }
std::string NumberRegex() { return fmt::format("{}{}", kInteger, kFraction); }
std::string ScalarRegex() {
  return fmt::format("(?:{}|{}|true|false|null)", StringRegex(), NumberRegex());
}

std::string AnyValue(int depth);

std::string AnyObject(int depth) {
  const std::string member = fmt::format("{}:{}", StringRegex(), AnyValue(depth - 1));
  return fmt::format("\\{{(?:{0}(?:,{0})*)?\\}}", member);
}

std::string AnyValue(int depth) {
  if (depth <= 0) return ScalarRegex();
  const std::string inner = AnyValue(depth - 1);
  return fmt::format("(?:{0}|{1}|\\[(?:{2}(?:,{2})*)?\\])", ScalarRegex(), AnyObject(depth), inner);
}

std::string CompactJson(const Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return std::string(sb.GetString(), sb.GetSize());
}

const std::set<std::string_view>& Annotations() {
  static const auto* k =
      new std::set<std::string_view>{"title", "description", "default",    "examples", "$schema",
                                     "$id",   "$comment",    "deprecated", "readOnly", "writeOnly"};
  return *k;
}

const std::set<std::string_view>& Supported() {
  static const auto* k =
      new std::set<std::string_view>{"type",      "properties", "required", "additionalProperties",
                                     "items",     "minItems",   "maxItems", "minLength",
                                     "maxLength", "pattern",    "enum",     "const",
                                     "anyOf"};
  return *k;
}

class Converter {
 public:
  explicit Converter(const JsonRegexOptions& o) : options_(o) {}

  StatusOr<std::string> Convert(const Value& s, const std::string& path, int depth) {
    if (depth > options_.max_schema_depth) {
      return InvalidArgument("JSON schema nests deeper than {} levels at '{}'",
                             options_.max_schema_depth, path);
    }
    if (s.IsBool()) {
      if (s.GetBool()) return AnyValue(options_.max_depth);
      return InvalidArgument("JSON schema at '{}' is false: no value matches it", Where(path));
    }
    if (!s.IsObject()) {
      return InvalidArgument("JSON schema at '{}' must be an object or a boolean", Where(path));
    }
    for (const auto& m : s.GetObject()) {
      const std::string_view key(m.name.GetString(), m.name.GetStringLength());
      if (Supported().contains(key) || Annotations().contains(key) || key.starts_with("x-")) {
        continue;
      }
      return InvalidArgument(
          "unsupported JSON schema keyword '{}' at '{}' (supported: type, properties, required, "
          "additionalProperties, items, minItems, maxItems, minLength, maxLength, pattern, enum, "
          "const, anyOf)",
          key, Where(path));
    }
    if (const Value* c = Get(s, "const")) return RegexEscape(CompactJson(*c));
    if (const Value* e = Get(s, "enum")) return Enum(*e, path);
    if (const Value* any = Get(s, "anyOf")) return AnyOf(*any, path, depth);
    auto types = Types(s, path);
    if (!types.ok()) return types.status();
    std::vector<std::string> alternatives;
    for (const std::string& type : *types) {
      auto r = ForType(type, s, path, depth);
      if (!r.ok()) return r.status();
      alternatives.push_back(std::move(*r));
    }
    if (alternatives.size() == 1) return alternatives[0];
    return fmt::format("(?:{})", fmt::join(alternatives, "|"));
  }

 private:
  static const Value* Get(const Value& s, const char* key) {
    auto it = s.FindMember(key);
    return it == s.MemberEnd() ? nullptr : &it->value;
  }
  static std::string Where(const std::string& path) { return path.empty() ? "/" : path; }

  StatusOr<std::string> Enum(const Value& e, const std::string& path) {
    if (!e.IsArray() || e.Empty()) {
      return InvalidArgument("'enum' at '{}' must be a non-empty array", Where(path));
    }
    std::vector<std::string> alternatives;
    for (const Value& v : e.GetArray()) alternatives.push_back(RegexEscape(CompactJson(v)));
    return fmt::format("(?:{})", fmt::join(alternatives, "|"));
  }

  StatusOr<std::string> AnyOf(const Value& any, const std::string& path, int depth) {
    if (!any.IsArray() || any.Empty()) {
      return InvalidArgument("'anyOf' at '{}' must be a non-empty array of schemas", Where(path));
    }
    std::vector<std::string> alternatives;
    for (rapidjson::SizeType i = 0; i < any.Size(); ++i) {
      auto r = Convert(any[i], fmt::format("{}/anyOf/{}", path, i), depth + 1);
      if (!r.ok()) return r.status();
      alternatives.push_back(std::move(*r));
    }
    return fmt::format("(?:{})", fmt::join(alternatives, "|"));
  }

  // The schema's types: "type" (a string or array), else inferred from its keywords; "any"
  // when nothing constrains the value.
  StatusOr<std::vector<std::string>> Types(const Value& s, const std::string& path) {
    static const std::set<std::string_view> kKnown = {"object", "array",   "string", "integer",
                                                      "number", "boolean", "null"};
    std::vector<std::string> types;
    if (const Value* t = Get(s, "type")) {
      std::vector<const Value*> names;
      if (t->IsArray()) {
        for (const Value& v : t->GetArray()) names.push_back(&v);
      } else {
        names.push_back(t);
      }
      for (const Value* v : names) {
        if (!v->IsString() || !kKnown.contains(v->GetString())) {
          return InvalidArgument(
              "'type' at '{}' must be one of object, array, string, integer, number, boolean, "
              "null (or an array of them), got {}",
              Where(path), CompactJson(*t));
        }
        types.emplace_back(v->GetString());
      }
      if (types.empty()) return InvalidArgument("'type' at '{}' is an empty array", Where(path));
      return types;
    }
    const bool object =
        Get(s, "properties") || Get(s, "required") || Get(s, "additionalProperties");
    const bool array = Get(s, "items") || Get(s, "minItems") || Get(s, "maxItems");
    const bool string = Get(s, "minLength") || Get(s, "maxLength") || Get(s, "pattern");
    if (object + array + string > 1) {
      return InvalidArgument("JSON schema at '{}' has keywords of several types but no 'type'",
                             Where(path));
    }
    types.emplace_back(object ? "object" : array ? "array" : string ? "string" : "any");
    return types;
  }

  StatusOr<std::string> ForType(const std::string& type, const Value& s, const std::string& path,
                                int depth) {
    if (type == "object") return Object(s, path, depth);
    if (type == "array") return Array(s, path, depth);
    if (type == "string") return String(s, path);
    if (type == "integer") return std::string(kInteger);
    if (type == "number") return NumberRegex();
    if (type == "boolean") return std::string("(?:true|false)");
    if (type == "null") return std::string("null");
    return AnyValue(options_.max_depth);
  }

  // A non-negative integer keyword, `fallback` when absent.
  StatusOr<int64_t> Count(const Value& s, const char* key, const std::string& path,
                          int64_t fallback, int64_t limit) {
    const Value* v = Get(s, key);
    if (v == nullptr) return fallback;
    if (!v->IsUint64() || v->GetUint64() > static_cast<uint64_t>(limit)) {
      return InvalidArgument("'{}' at '{}' must be an integer in [0, {}]", key, Where(path), limit);
    }
    return static_cast<int64_t>(v->GetUint64());
  }

  StatusOr<std::string> String(const Value& s, const std::string& path) {
    auto min = Count(s, "minLength", path, 0, 1000);
    if (!min.ok()) return min.status();
    auto max = Count(s, "maxLength", path, -1, 1000);
    if (!max.ok()) return max.status();
    if (*max >= 0 && *max < *min) {
      return InvalidArgument("'maxLength' at '{}' is below 'minLength'", Where(path));
    }
    if (const Value* p = Get(s, "pattern")) {
      if (Get(s, "minLength") || Get(s, "maxLength")) {
        return InvalidArgument(
            "'pattern' together with 'minLength'/'maxLength' at '{}' is not supported",
            Where(path));
      }
      return Pattern(*p, path);
    }
    if (*max < 0) return fmt::format("\"{}{{{},}}\"", kChar, *min);
    return fmt::format("\"{}{{{},{}}}\"", kChar, *min, *max);
  }

  StatusOr<std::string> Pattern(const Value& p, const std::string& path) {
    if (!p.IsString()) return InvalidArgument("'pattern' at '{}' must be a string", Where(path));
    std::string_view pattern(p.GetString(), p.GetStringLength());
    if (pattern.starts_with('^')) pattern.remove_prefix(1);
    if (pattern.ends_with('$')) {
      size_t backslashes = 0;
      while (backslashes + 1 < pattern.size() &&
             pattern[pattern.size() - 2 - backslashes] == '\\') {
        ++backslashes;
      }
      if (backslashes % 2 == 0) pattern.remove_suffix(1);
    }
    auto dfa = Dfa::FromRegex(pattern);
    if (!dfa.ok()) {
      return InvalidArgument("'pattern' at '{}': {}", Where(path), dfa.status().message());
    }
    std::vector<uint8_t> forbidden = {'"', '\\'};
    for (uint8_t b = 0; b < 0x20; ++b) forbidden.push_back(b);
    for (int32_t st = 0; st < dfa->num_states(); ++st) {
      for (uint8_t b : forbidden) {
        if (dfa->Next(st, b) != Dfa::kDead) {
          return InvalidArgument(
              "'pattern' at '{}' can match a quote, a backslash or a control character, which a "
              "JSON string must escape (not supported)",
              Where(path));
        }
      }
    }
    return fmt::format("\"(?:{})\"", pattern);
  }

  StatusOr<std::string> Array(const Value& s, const std::string& path, int depth) {
    std::string item;
    if (const Value* items = Get(s, "items")) {
      if (items->IsArray()) {
        return InvalidArgument("tuple 'items' (an array) at '{}' is not supported", Where(path));
      }
      auto r = Convert(*items, path + "/items", depth + 1);
      if (!r.ok()) return r.status();
      item = std::move(*r);
    } else {
      item = AnyValue(options_.max_depth - 1);
    }
    auto min = Count(s, "minItems", path, 0, kMaxItems);
    if (!min.ok()) return min.status();
    auto max = Count(s, "maxItems", path, -1, kMaxItems);
    if (!max.ok()) return max.status();
    if (*max >= 0 && *max < *min) {
      return InvalidArgument("'maxItems' at '{}' is below 'minItems'", Where(path));
    }
    if (*max == 0) return std::string("\\[\\]");
    const std::string rest =
        *max < 0 ? "*" : fmt::format("{{{},{}}}", std::max<int64_t>(*min - 1, 0), *max - 1);
    const std::string list = fmt::format("(?:{0})(?:,(?:{0})){1}", item, rest);
    if (*min == 0) return fmt::format("\\[(?:{})?\\]", list);
    return fmt::format("\\[{}\\]", list);
  }

  StatusOr<std::string> Object(const Value& s, const std::string& path, int depth) {
    const Value* props = Get(s, "properties");
    const Value* required = Get(s, "required");
    const Value* additional = Get(s, "additionalProperties");
    if (props != nullptr && !props->IsObject()) {
      return InvalidArgument("'properties' at '{}' must be an object", Where(path));
    }
    std::set<std::string> required_names;
    if (required != nullptr) {
      if (!required->IsArray()) {
        return InvalidArgument("'required' at '{}' must be an array of strings", Where(path));
      }
      for (const Value& r : required->GetArray()) {
        if (!r.IsString()) {
          return InvalidArgument("'required' at '{}' must be an array of strings", Where(path));
        }
        required_names.emplace(r.GetString(), r.GetStringLength());
      }
    }
    if ((props == nullptr || props->ObjectEmpty()) && required_names.empty()) {
      if (additional != nullptr && additional->IsBool() && !additional->GetBool()) {
        return std::string("\\{\\}");
      }
      return AnyObject(options_.max_depth);
    }
    struct Member {
      std::string regex;
      bool required;
    };
    std::vector<Member> members;
    std::set<std::string> seen;
    auto add = [&](const std::string& name, StatusOr<std::string> value) -> Status {
      if (!value.ok()) return value.status();
      Value key(name.c_str(), static_cast<rapidjson::SizeType>(name.size()));
      members.push_back(
          {RegexEscape(CompactJson(key)) + ":" + *value, required_names.contains(name)});
      seen.insert(name);
      return Status::Ok();
    };
    if (props != nullptr) {
      for (const auto& m : props->GetObject()) {
        const std::string name(m.name.GetString(), m.name.GetStringLength());
        RETURN_IF_ERROR(add(name, Convert(m.value, path + "/properties/" + name, depth + 1)));
      }
    }
    for (const std::string& name : required_names) {  // required without a schema: any value
      if (!seen.contains(name)) RETURN_IF_ERROR(add(name, AnyValue(options_.max_depth - 1)));
    }
    return fmt::format("\\{{{}\\}}", Members(members));
  }

  // The members in order, optional ones may be left out, commas only between those present:
  // after[i] = the rest from i once something was written (each needs a leading comma);
  // first[i] = the rest from i when nothing was written yet.
  template <typename M>
  static std::string Members(const std::vector<M>& members) {
    const size_t n = members.size();
    std::vector<std::string> after(n + 1), first(n + 1);
    for (size_t i = n; i-- > 0;) {
      const std::string& p = members[i].regex;
      after[i] = members[i].required ? fmt::format(",{}{}", p, after[i + 1])
                                     : fmt::format("(?:,{})?{}", p, after[i + 1]);
      first[i] = members[i].required ? fmt::format("{}{}", p, after[i + 1])
                                     : fmt::format("(?:{}{}|{})", p, after[i + 1], first[i + 1]);
    }
    return first[0];
  }

  const JsonRegexOptions& options_;
};

}  // namespace

StatusOr<std::string> JsonSchemaToRegex(const rapidjson::Value& schema,
                                        const JsonRegexOptions& options) {
  Converter converter(options);
  return converter.Convert(schema, "", 0);
}

StatusOr<std::string> JsonSchemaTextToRegex(std::string_view schema_json,
                                            const JsonRegexOptions& options) {
  rapidjson::Document doc;
  doc.Parse(schema_json.data(), schema_json.size());
  if (doc.HasParseError()) {
    return InvalidArgument("JSON schema is not valid JSON: {} (at offset {})",
                           rapidjson::GetParseError_En(doc.GetParseError()), doc.GetErrorOffset());
  }
  return JsonSchemaToRegex(static_cast<const rapidjson::Value&>(doc), options);
}

std::string JsonObjectRegex(const JsonRegexOptions& options) {
  return AnyObject(std::max(1, options.max_depth));
}

}  // namespace inferd::constrained
