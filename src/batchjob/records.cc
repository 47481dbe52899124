#include "batchjob/records.h"

#include <cmath>

#include <fmt/format.h>
#include <rapidjson/document.h>

namespace inferd::batchjob {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is not one.
size_t Utf8Length(std::string_view s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return 0;
  }
  return n;
}

template <typename T>
void AppendNumber(std::string* out, T v) {
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(v)) {
      out->append("null");
      return;
    }
    fmt::format_to(std::back_inserter(*out), "{}", v);
  } else if constexpr (std::is_same_v<T, bool>) {
    out->append(v ? "true" : "false");
  } else if constexpr (std::is_integral_v<T>) {
    fmt::format_to(std::back_inserter(*out), "{}", v);
  } else {  // Float16, BFloat16
    AppendNumber(out, static_cast<float>(v));
  }
}

void AppendTensorData(std::string* out, const Tensor& t) {
  out->push_back('[');
  int64_t n = t.NumElements();
  if (t.is_string()) {
    const std::string* s = t.data<std::string>();
    for (int64_t i = 0; i < n; ++i) {
      if (i) out->push_back(',');
      out->append(JsonQuote(s[i]));
    }
  } else {
    DispatchAll(
        t.dtype(),
        [&](auto tag) {
          using T = decltype(tag);
          const T* d = t.data<T>();
          for (int64_t i = 0; i < n; ++i) {
            if (i) out->push_back(',');
            AppendNumber(out, d[i]);
          }
        },
        [] {});
  }
  out->push_back(']');
}

void AppendShape(std::string* out, const Shape& shape) {
  out->push_back('[');
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out->push_back(',');
    fmt::format_to(std::back_inserter(*out), "{}", shape[i]);
  }
  out->push_back(']');
}

void AppendHead(std::string* out, std::string_view id_json, std::string_view source) {
  out->append("{\"id\":");
  out->append(id_json);
  out->append(",\"source\":");
  out->append(JsonQuote(source));
}

}  // namespace

std::string JsonQuote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out.append("\\n");
    } else if (c == '\t') {
      out.append("\\t");
    } else if (c == '\r') {
      out.append("\\r");
    } else if (c < 0x20) {
      fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
    } else if (c >= 0x80) {
      size_t n = Utf8Length(text, i);
      if (n == 0) {
        fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
        ++i;
        continue;
      }
      out.append(text.substr(i, n));
      i += n;
      continue;
    } else {
      out.push_back(static_cast<char>(c));
    }
    ++i;
  }
  out.push_back('"');
  return out;
}

std::string FormatRecord(std::string_view id_json, std::string_view source,
                         const serving::InferenceResponse& response) {
  std::string out;
  AppendHead(&out, id_json, source);
  out.append(",\"outputs\":{");
  bool first = true;
  for (const auto& [name, tensor] : response.outputs) {
    if (!first) out.push_back(',');
    first = false;
    out.append(JsonQuote(name));
    out.append(":{\"datatype\":");
    out.append(JsonQuote(serving::KServeName(tensor.dtype())));
    out.append(",\"shape\":");
    AppendShape(&out, tensor.shape());
    out.append(",\"data\":");
    AppendTensorData(&out, tensor);
    out.push_back('}');
  }
  for (const serving::ClassifiedOutput& c : response.classified) {
    if (!first) out.push_back(',');
    first = false;
    out.append(JsonQuote(c.name));
    out.append(":{\"datatype\":\"BYTES\",\"shape\":");
    AppendShape(&out, c.shape);
    out.append(",\"data\":[");
    for (size_t i = 0; i < c.values.size(); ++i) {
      if (i) out.push_back(',');
      out.append(JsonQuote(c.values[i]));
    }
    out.append("]}");
  }
  out.append("}}\n");
  return out;
}

std::string FormatErrorRecord(std::string_view id_json, std::string_view source,
                              std::string_view reason) {
  std::string out;
  AppendHead(&out, id_json, source);
  out.append(",\"error\":");
  out.append(JsonQuote(reason));
  out.append("}\n");
  return out;
}

std::string SourceKey(std::string_view source) {
  std::string out;
  for (size_t i = 0; i < source.size();) {
    unsigned char c = static_cast<unsigned char>(source[i]);
    size_t n = c < 0x80 ? 1 : Utf8Length(source, i);
    if (n == 0) {  // U+0080..U+00FF in UTF-8
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
      ++i;
      continue;
    }
    out.append(source.substr(i, n));
    i += n;
  }
  return out;
}

StatusOr<RecordKey> ParseRecordKey(std::string_view line) {
  rapidjson::Document doc;
  doc.Parse(line.data(), line.size());
  if (doc.HasParseError() || !doc.IsObject()) return InvalidArgument("not a JSON object");
  auto it = doc.FindMember("source");
  if (it == doc.MemberEnd() || !it->value.IsString()) {
    return InvalidArgument("no \"source\" string (not a record of inferd batch)");
  }
  RecordKey key;
  key.source.assign(it->value.GetString(), it->value.GetStringLength());
  key.is_error = doc.HasMember("error");
  return key;
}

}  // namespace inferd::batchjob
