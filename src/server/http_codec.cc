#include "server/http_codec.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include <rapidjson/document.h>
#include <rapidjson/encodedstream.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "server/bytes_codec.h"
#include "server/json_text.h"
#include "server/shared_memory_http.h"

namespace inferd::server {
namespace {

using serving::InferenceRequest;
using serving::InferenceResponse;

constexpr size_t kMaxRank = 32;

// Iterative parsing: deeply nested input cannot overflow the stack. JSON is UTF-8 text: invalid
// bytes in a string (an "id" that would be echoed, a name) are a parse error, never passed on.
// The NaN/Infinity literals are read (Python's json.dumps, hence tritonclient, writes them) but
// never written.
constexpr unsigned kParseFlags = rapidjson::kParseIterativeFlag |
                                 rapidjson::kParseValidateEncodingFlag |
                                 rapidjson::kParseNanAndInfFlag;

// Non-finite values are never written as numbers (JSON has none): see WriteData.
using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

// Writes `s` as a JSON string, valid UTF-8 whatever its bytes (json_text.h).
template <typename W>
void WriteString(W& w, std::string_view s) {
  if (IsValidUtf8(s)) {
    w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  } else {
    const std::string valid = ToValidUtf8(s);
    w.String(valid.data(), static_cast<rapidjson::SizeType>(valid.size()));
  }
}

// Non-finite floating-point values as protobuf's JSON mapping writes them (KServe v2's gRPC form
// is protobuf): the strings "NaN", "Infinity", "-Infinity". numpy reads them back
// (np.array(["NaN"], np.float32)), and requests may send them the same way.
const char* NonFiniteName(double v) {
  return std::isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity";
}

std::optional<double> ParseNonFinite(std::string_view s) {
  if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (s == "Infinity") return std::numeric_limits<double>::infinity();
  if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
  return std::nullopt;
}

const char* JsonTypeName(const rapidjson::Value& v) {
  switch (v.GetType()) {
    case rapidjson::kNullType: return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType: return "boolean";
    case rapidjson::kObjectType: return "object";
    case rapidjson::kArrayType: return "array";
    case rapidjson::kStringType: return "string";
    case rapidjson::kNumberType: return "number";
  }
  return "unknown";
}

const rapidjson::Value* Member(const rapidjson::Value& obj, const char* name) {
  auto it = obj.FindMember(name);
  return it == obj.MemberEnd() ? nullptr : &it->value;
}

StatusOr<std::string> GetString(const rapidjson::Value& obj, const char* name,
                                std::string_view where, bool required) {
  const rapidjson::Value* v = Member(obj, name);
  if (v == nullptr) {
    if (required) return InvalidArgument("{}: missing '{}'", where, name);
    return std::string();
  }
  if (!v->IsString()) {
    return InvalidArgument("{}: '{}' must be a string, got {}", where, name, JsonTypeName(*v));
  }
  return std::string(v->GetString(), v->GetStringLength());
}

// Reads a non-negative integer parameter (accepts JSON integers only).
StatusOr<uint64_t> GetUInt(const rapidjson::Value& v, std::string_view where) {
  if (!v.IsUint64()) {
    return InvalidArgument("{} must be a non-negative integer, got {}", where, JsonTypeName(v));
  }
  return v.GetUint64();
}

StatusOr<bool> GetBool(const rapidjson::Value& v, std::string_view where) {
  if (!v.IsBool()) return InvalidArgument("{} must be a boolean, got {}", where, JsonTypeName(v));
  return v.GetBool();
}

StatusOr<Shape> ParseShape(const rapidjson::Value& input, std::string_view where) {
  const rapidjson::Value* v = Member(input, "shape");
  if (v == nullptr) return InvalidArgument("{}: missing 'shape'", where);
  if (!v->IsArray()) return InvalidArgument("{}: 'shape' must be an array", where);
  if (v->Size() > kMaxRank) {
    return InvalidArgument("{}: rank {} exceeds the maximum of {}", where, v->Size(), kMaxRank);
  }
  Shape shape;
  // Each dim is bounded so the element count cannot overflow int64 before the size checks.
  constexpr int64_t kMaxElements = int64_t{1} << 48;
  int64_t count = 1;
  for (const auto& d : v->GetArray()) {
    if (!d.IsInt64() || d.GetInt64() < 0) {
      return InvalidArgument("{}: 'shape' must hold non-negative integers", where);
    }
    int64_t dim = d.GetInt64();
    if (dim > kMaxElements || (dim > 0 && count > kMaxElements / dim)) {
      return InvalidArgument("{}: shape is too large", where);
    }
    count *= dim;
    shape.push_back(dim);
  }
  return shape;
}

// Converts one JSON value to T; false if the value has the wrong kind or is out of range.
template <typename T>
bool ConvertElement(const rapidjson::Value& v, T* out) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.IsBool()) return false;
    *out = v.GetBool();
    return true;
  } else if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Float16> ||
                       std::is_same_v<T, BFloat16>) {
    double d = 0;
    if (v.IsNumber()) {
      d = v.GetDouble();
    } else if (auto special = v.IsString() ? ParseNonFinite(std::string_view(
                                                 v.GetString(), v.GetStringLength()))
                                           : std::nullopt) {
      d = *special;
    } else {
      return false;
    }
    if constexpr (std::is_same_v<T, double>) {
      *out = d;
    } else {
      *out = T(static_cast<float>(d));
      // A finite number the type cannot hold (3.5e38 as FP32, 70000 as FP16) is out of range,
      // as 300 is for INT8, rather than silently infinite.
      if (std::isfinite(d) && !std::isfinite(static_cast<float>(*out))) return false;
    }
    return true;
  } else if constexpr (std::is_signed_v<T>) {
    if (!v.IsInt64()) return false;
    int64_t x = v.GetInt64();
    if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) return false;
    *out = static_cast<T>(x);
    return true;
  } else {
    if (!v.IsUint64()) return false;
    uint64_t x = v.GetUint64();
    if (x > std::numeric_limits<T>::max()) return false;
    *out = static_cast<T>(x);
    return true;
  }
}

// Flattens (possibly nested) `data` into `out` (capacity `capacity` elements), row-major.
// Nesting deeper than `max_depth` is an error, which also bounds the recursion.
template <typename T>
Status FlattenData(const rapidjson::Value& v, size_t max_depth, T* out, size_t capacity,
                   size_t* count, std::string_view where, DataType dtype) {
  if (v.IsArray()) {
    if (max_depth == 0) return InvalidArgument("{}: 'data' is nested deeper than the shape", where);
    for (const auto& e : v.GetArray()) {
      RETURN_IF_ERROR(FlattenData(e, max_depth - 1, out, capacity, count, where, dtype));
    }
    return Status::Ok();
  }
  if (*count >= capacity) {
    return InvalidArgument("{}: 'data' holds more elements than the shape's {}", where, capacity);
  }
  if (!ConvertElement(v, &out[*count])) {
    return InvalidArgument("{}: element {} ({}) is not a valid {} value", where, *count,
                           JsonTypeName(v), serving::KServeName(dtype));
  }
  ++*count;
  return Status::Ok();
}

// BYTES `data`: (possibly nested) JSON strings, row-major; any other JSON value is an error.
Status FlattenStrings(const rapidjson::Value& v, size_t max_depth, std::string* out,
                      size_t capacity, size_t* count, std::string_view where) {
  if (v.IsArray()) {
    if (max_depth == 0) return InvalidArgument("{}: 'data' is nested deeper than the shape", where);
    for (const auto& e : v.GetArray()) {
      RETURN_IF_ERROR(FlattenStrings(e, max_depth - 1, out, capacity, count, where));
    }
    return Status::Ok();
  }
  if (*count >= capacity) {
    return InvalidArgument("{}: 'data' holds more elements than the shape's {}", where, capacity);
  }
  if (!v.IsString()) {
    return InvalidArgument("{}: element {} ({}) is not a valid BYTES value: expected a string",
                           where, *count, JsonTypeName(v));
  }
  out[*count].assign(v.GetString(), v.GetStringLength());  // may hold \u0000
  ++*count;
  return Status::Ok();
}

// ---- Bounded parsing of `data` ----
//
// A DOM value costs 16 bytes however short its text ("1," is 2 bytes), so a 60 MB body of numbers
// made a ~500 MB DOM before any check ran. The request is read with a SAX filter instead: the
// DOM gets everything but the arrays at inputs[i].data, which are only scanned (their position,
// leaf count and nesting depth recorded) and later parsed straight into the tensor, once the
// input's datatype and shape are known and the counts match. Memory: the body, the tensor, and a
// DOM of at most kMaxDomValues small values.

constexpr size_t kMaxDomValues = size_t{1} << 20;

struct DataSpan {
  size_t begin = 0, end = 0;  // the array's text, '[' to ']'
  size_t leaves = 0;          // elements that are not arrays
  size_t depth = 0;           // array nesting, the outer array being 1
};

using JsonStream = rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream>;

class RequestFilter {
 public:
  RequestFilter(rapidjson::Document& doc, const JsonStream& is, std::map<size_t, DataSpan>* spans)
      : doc_(doc), is_(is), spans_(spans) {}
  bool too_many_values() const { return too_many_; }

  bool Null() { return skip_ ? Leaf() : Value() && doc_.Null(); }
  bool Bool(bool b) { return skip_ ? Leaf() : Value() && doc_.Bool(b); }
  bool Int(int i) { return skip_ ? Leaf() : Value() && doc_.Int(i); }
  bool Uint(unsigned u) { return skip_ ? Leaf() : Value() && doc_.Uint(u); }
  bool Int64(int64_t i) { return skip_ ? Leaf() : Value() && doc_.Int64(i); }
  bool Uint64(uint64_t u) { return skip_ ? Leaf() : Value() && doc_.Uint64(u); }
  bool Double(double d) { return skip_ ? Leaf() : Value() && doc_.Double(d); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool copy) {
    return skip_ ? Leaf() : Value() && doc_.RawNumber(s, n, copy);
  }
  bool String(const char* s, rapidjson::SizeType n, bool copy) {
    return skip_ ? Leaf() : Value() && doc_.String(s, n, copy);
  }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) {
    if (skip_) return true;
    frames_.back().key.assign(s, std::min<size_t>(n, 8));  // only "inputs"/"data" matter
    return Value() && doc_.Key(s, n, copy);
  }
  bool StartObject() {
    if (skip_) {
      if (objects_ == 0) ++span_.leaves;
      ++objects_;
      ++nesting_;
      return true;
    }
    if (!Value()) return false;
    frames_.push_back({true, {}, 0});
    return doc_.StartObject();
  }
  bool EndObject(rapidjson::SizeType n) {
    if (skip_) {
      --objects_;
      --nesting_;
      return true;
    }
    frames_.pop_back();
    return doc_.EndObject(n);
  }
  bool StartArray() {
    if (skip_) {
      ++nesting_;
      if (objects_ == 0) span_.depth = std::max(span_.depth, ++array_depth_);
      return true;
    }
    if (AtInputData()) {
      skip_ = true;
      // The iterative parser calls the handler before it takes the token: Tell() is at '['.
      span_ = DataSpan{is_.Tell(), 0, 0, 1};
      input_ = frames_[1].count - 1;
      nesting_ = array_depth_ = 1;
      objects_ = 0;
      return true;
    }
    if (!Value()) return false;
    frames_.push_back({false, {}, 0});
    return doc_.StartArray();
  }
  bool EndArray(rapidjson::SizeType n) {
    if (skip_) {
      --nesting_;
      if (objects_ == 0) --array_depth_;
      if (nesting_ > 0) return true;
      skip_ = false;
      span_.end = is_.Tell() + 1;  // past the ']' not yet taken
      (*spans_)[input_] = span_;
      // An empty array stands in the DOM for the skipped one.
      return Value() && doc_.StartArray() && doc_.EndArray(0);
    }
    frames_.pop_back();
    return doc_.EndArray(n);
  }

 private:
  struct Frame {
    bool object;
    std::string key;  // objects: the current member's key (first 8 bytes)
    size_t count;     // arrays: elements so far
  };

  bool Leaf() {
    if (objects_ == 0) ++span_.leaves;
    return true;
  }
  // Counts a value (or key) going into the DOM; an array element advances its index.
  bool Value() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().count;
    if (++values_ > kMaxDomValues) {
      too_many_ = true;
      return false;
    }
    return true;
  }
  // Whether an array starting now is inputs[i].data.
  bool AtInputData() const {
    return frames_.size() == 3 && frames_[0].object && frames_[0].key == "inputs" &&
           !frames_[1].object && frames_[2].object && frames_[2].key == "data";
  }

  rapidjson::Document& doc_;
  const JsonStream& is_;
  std::map<size_t, DataSpan>* spans_;
  std::vector<Frame> frames_;
  size_t values_ = 0;
  bool too_many_ = false;
  bool skip_ = false;  // inside a data array
  DataSpan span_;
  size_t input_ = 0;
  size_t nesting_ = 0, array_depth_ = 0, objects_ = 0;
};

// The second pass over one data array: every leaf goes to `sink(value, index)`, which converts it
// into the tensor (false: stop, the sink has set the error).
template <typename Sink>
class LeafReader {
 public:
  explicit LeafReader(Sink& sink) : sink_(sink) {}
  bool Null() { return Leaf(rapidjson::Value()); }
  bool Bool(bool b) { return Leaf(rapidjson::Value(b)); }
  bool Int(int i) { return Leaf(rapidjson::Value(i)); }
  bool Uint(unsigned u) { return Leaf(rapidjson::Value(u)); }
  bool Int64(int64_t i) { return Leaf(rapidjson::Value(i)); }
  bool Uint64(uint64_t u) { return Leaf(rapidjson::Value(u)); }
  bool Double(double d) { return Leaf(rapidjson::Value(d)); }
  bool RawNumber(const char*, rapidjson::SizeType, bool) { return false; }  // not asked for
  bool String(const char* s, rapidjson::SizeType n, bool) {
    return Leaf(rapidjson::Value(rapidjson::StringRef(s, n)));
  }
  bool Key(const char*, rapidjson::SizeType, bool) { return true; }
  bool StartObject() { return Leaf(rapidjson::Value(rapidjson::kObjectType)); }
  bool EndObject(rapidjson::SizeType) { return true; }
  bool StartArray() { return true; }  // depth was checked by the first pass
  bool EndArray(rapidjson::SizeType) { return true; }

 private:
  bool Leaf(const rapidjson::Value& v) { return sink_(v, count_++); }
  Sink& sink_;
  size_t count_ = 0;
};

StatusOr<Tensor> DecodeDataSpan(const DataSpan& span, const std::string& body, DataType dtype,
                                const Shape& shape, std::string_view where) {
  const size_t n = static_cast<size_t>(NumElements(shape));
  if (span.depth > std::max<size_t>(shape.size(), 1)) {
    return InvalidArgument("{}: 'data' is nested deeper than the shape", where);
  }
  if (span.leaves > n) {
    return InvalidArgument("{}: 'data' holds more elements than the shape's {}", where, n);
  }
  if (span.leaves < n) {
    return InvalidArgument("{}: 'data' holds {} elements but shape {} needs {}", where,
                           span.leaves, ShapeToString(shape), n);
  }
  Tensor t = Tensor::Allocate(dtype, shape);  // the counts match: the body backs this size
  Status error;
  auto parse = [&](auto& sink) {
    LeafReader<std::remove_reference_t<decltype(sink)>> handler(sink);
    rapidjson::MemoryStream ms(body.data() + span.begin, span.end - span.begin);
    JsonStream is(ms);
    rapidjson::Reader reader;
    if (reader.Parse<kParseFlags>(is, handler).IsError() && error.ok()) {
      error = Internal("{}: cannot re-read 'data'", where);  // the first pass accepted it
    }
  };
  auto bad = [&](const rapidjson::Value& v, size_t i, const char* expected) {
    error = InvalidArgument("{}: element {} ({}) is not a valid {} value{}", where, i,
                            JsonTypeName(v), serving::KServeName(dtype), expected);
    return false;
  };
  if (dtype == DataType::kString) {
    std::string* out = t.data<std::string>();
    auto sink = [&](const rapidjson::Value& v, size_t i) {
      if (i >= n) return false;
      if (!v.IsString()) return bad(v, i, ": expected a string");
      out[i].assign(v.GetString(), v.GetStringLength());  // may hold \u0000
      return true;
    };
    parse(sink);
  } else {
    Status st = DispatchAll(
        dtype,
        [&](auto tag) -> Status {
          using T = decltype(tag);
          T* out = t.data<T>();
          auto sink = [&](const rapidjson::Value& v, size_t i) {
            if (i >= n) return false;
            return ConvertElement(v, &out[i]) || bad(v, i, "");
          };
          parse(sink);
          return Status::Ok();
        },
        [&]() -> Status { return InvalidArgument("{}: unsupported datatype", where); });
    RETURN_IF_ERROR(st);
  }
  RETURN_IF_ERROR(error);
  return t;
}

StatusOr<Tensor> DecodeJsonData(const rapidjson::Value& data, DataType dtype, const Shape& shape,
                                size_t body_size, std::string_view where) {
  const int64_t n = NumElements(shape);
  // Every JSON element takes at least one byte of the body: a larger shape cannot match `data`,
  // and checking first keeps a hostile shape from triggering a huge allocation.
  if (static_cast<uint64_t>(n) > body_size) {
    return InvalidArgument("{}: shape {} needs {} elements but the body is only {} bytes", where,
                           ShapeToString(shape), n, body_size);
  }
  Tensor t = Tensor::Allocate(dtype, shape);
  size_t count = 0;
  const size_t max_depth = std::max<size_t>(shape.size(), 1);
  Status st = dtype == DataType::kString
      ? FlattenStrings(data, max_depth, t.data<std::string>(), static_cast<size_t>(n), &count,
                       where)
      : DispatchAll(
      dtype,
      [&](auto tag) -> Status {
        using T = decltype(tag);
        return FlattenData<T>(data, max_depth, t.data<T>(), static_cast<size_t>(n), &count, where,
                              dtype);
      },
      [&]() -> Status { return InvalidArgument("{}: unsupported datatype", where); });
  RETURN_IF_ERROR(st);
  if (count != static_cast<size_t>(n)) {
    return InvalidArgument("{}: 'data' holds {} elements but shape {} needs {}", where, count,
                           ShapeToString(shape), n);
  }
  return t;
}

Status ParseRequestParameters(const rapidjson::Value& params, InferenceRequest* req,
                              HttpOutputOptions* out) {
  if (!params.IsObject()) return InvalidArgument("request 'parameters' must be an object");
  for (const auto& m : params.GetObject()) {
    std::string_view key(m.name.GetString(), m.name.GetStringLength());
    if (key == "priority") {
      ASSIGN_OR_RETURN(uint64_t p, GetUInt(m.value, "parameter 'priority'"));
      if (p > std::numeric_limits<uint32_t>::max()) {
        return InvalidArgument("parameter 'priority' is out of range");
      }
      req->priority = static_cast<uint32_t>(p);
    } else if (key == "timeout") {
      ASSIGN_OR_RETURN(uint64_t us, GetUInt(m.value, "parameter 'timeout'"));
      if (us > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / 1000)) {
        return InvalidArgument("parameter 'timeout' is out of range");
      }
      req->timeout = std::chrono::microseconds(static_cast<int64_t>(us));
    } else if (key == "binary_data_output") {
      ASSIGN_OR_RETURN(out->binary_by_default, GetBool(m.value, "parameter 'binary_data_output'"));
    } else if (key == "sequence_id") {
      // Triton's sequence extension: an unsigned integer or a string correlation ID.
      if (m.value.IsString()) {
        req->sequence_id_string.assign(m.value.GetString(), m.value.GetStringLength());
      } else {
        ASSIGN_OR_RETURN(req->sequence_id, GetUInt(m.value, "parameter 'sequence_id'"));
      }
    } else if (key == "sequence_start") {
      ASSIGN_OR_RETURN(req->sequence_start, GetBool(m.value, "parameter 'sequence_start'"));
    } else if (key == "sequence_end") {
      ASSIGN_OR_RETURN(req->sequence_end, GetBool(m.value, "parameter 'sequence_end'"));
    }
    // Other parameters (classification, ...) are ignored, as Triton does for parameters a model
    // does not use.
  }
  return Status::Ok();
}

}  // namespace

StatusOr<int64_t> ParseModelVersion(std::string_view text) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || v <= 0) {
    return InvalidArgument("invalid model version '{}': expected a positive integer",
                           text.substr(0, 64));
  }
  return v;
}

StatusOr<DecodedHttpRequest> DecodeHttpInferRequest(std::string model_name, int64_t model_version,
                                                    std::shared_ptr<std::string> body,
                                                    std::optional<size_t> header_length) {
  if (body == nullptr) return InvalidArgument("empty request body");
  const size_t json_length = header_length.value_or(body->size());
  if (json_length > body->size()) {
    return InvalidArgument("Inference-Header-Content-Length {} exceeds the body size {}",
                           json_length, body->size());
  }
  if (json_length == 0) return InvalidArgument("empty request body: expected a JSON object");

  // The document allocates from a per-thread buffer first: by default each parse takes a 64 KiB
  // chunk from malloc, and freeing it made glibc consolidate its fast bins on every request
  // (malloc_consolidate was a visible share of the server's CPU under load). Larger documents
  // spill into malloc'ed chunks as before. Nothing allocated here outlives this call.
  thread_local char parse_buffer[16 * 1024];
  rapidjson::MemoryPoolAllocator<> pool(parse_buffer, sizeof(parse_buffer));
  rapidjson::Document doc(&pool);
  std::map<size_t, DataSpan> spans;  // input index -> its data array, not in the DOM
  rapidjson::MemoryStream ms(body->data(), json_length);
  JsonStream is(ms);
  RequestFilter filter(doc, is, &spans);
  rapidjson::ParseResult parsed;
  auto generate = [&](rapidjson::Document&) {
    rapidjson::Reader reader;
    parsed = reader.Parse<kParseFlags>(is, filter);
    return !parsed.IsError();
  };
  doc.Populate(generate);
  if (filter.too_many_values()) {
    return InvalidArgument("request JSON has more than {} values outside input 'data'",
                           kMaxDomValues);
  }
  if (parsed.IsError()) {
    return InvalidArgument("malformed JSON at offset {}: {}", parsed.Offset(),
                           rapidjson::GetParseError_En(parsed.Code()));
  }
  if (!doc.IsObject()) return InvalidArgument("request body must be a JSON object");

  DecodedHttpRequest out;
  out.request = std::make_unique<InferenceRequest>();
  InferenceRequest& req = *out.request;
  req.model_name = std::move(model_name);
  req.model_version = model_version;
  req.body = body;
  ASSIGN_OR_RETURN(req.id, GetString(doc, "id", "request", /*required=*/false));
  if (const rapidjson::Value* params = Member(doc, "parameters")) {
    RETURN_IF_ERROR(ParseRequestParameters(*params, &req, &out.output_options));
  }

  const rapidjson::Value* inputs = Member(doc, "inputs");
  if (inputs == nullptr) return InvalidArgument("request: missing 'inputs'");
  if (!inputs->IsArray()) return InvalidArgument("request: 'inputs' must be an array");
  if (inputs->Empty()) return InvalidArgument("request: 'inputs' is empty");

  size_t binary_offset = json_length;
  for (rapidjson::SizeType i = 0; i < inputs->Size(); ++i) {
    const rapidjson::Value& in = (*inputs)[i];
    std::string where = fmt::format("input {}", i);
    if (!in.IsObject()) return InvalidArgument("{}: must be an object", where);
    ASSIGN_OR_RETURN(std::string name, GetString(in, "name", where, /*required=*/true));
    where = fmt::format("input '{}'", name.substr(0, 128));
    for (const auto& prev : req.inputs) {
      if (prev.name == name) return InvalidArgument("{}: given more than once", where);
    }
    ASSIGN_OR_RETURN(std::string dt_name, GetString(in, "datatype", where, /*required=*/true));
    auto dtype = serving::DataTypeFromKServe(dt_name);
    if (!dtype.ok()) return dtype.status().WithContext(where);
    ASSIGN_OR_RETURN(Shape shape, ParseShape(in, where));

    std::optional<uint64_t> binary_size;
    std::optional<SharedMemoryParams> shm;
    if (const rapidjson::Value* p = Member(in, "parameters")) {
      if (!p->IsObject()) return InvalidArgument("{}: 'parameters' must be an object", where);
      ASSIGN_OR_RETURN(shm, ParseJsonSharedMemoryParams(*p, where));
      if (const rapidjson::Value* b = Member(*p, "binary_data_size")) {
        ASSIGN_OR_RETURN(binary_size, GetUInt(*b, where + ": 'binary_data_size'"));
      }
    }
    const rapidjson::Value* data = Member(in, "data");
    Tensor tensor;
    if (shm.has_value()) {
      if (data != nullptr || binary_size.has_value()) {
        return InvalidArgument("{}: has both shared memory and 'data'/'binary_data_size'", where);
      }
      ASSIGN_OR_RETURN(tensor, SharedMemoryRegistry::Default().InputTensor(*shm, *dtype, shape,
                                                                           where));
    } else if (binary_size.has_value()) {
      if (data != nullptr) {
        return InvalidArgument("{}: has both 'data' and 'binary_data_size'", where);
      }
      const bool truncated = *binary_size > body->size() - binary_offset;
      if (truncated && *dtype == DataType::kString) {
        return InvalidArgument(
            "{}: binary data is truncated: needs {} bytes at offset {}, the body has {}", where,
            *binary_size, binary_offset, body->size());
      }
      if (*dtype == DataType::kString) {  // length-prefixed elements, copied out of the body
        ASSIGN_OR_RETURN(tensor, DecodeLengthPrefixed(
                                     std::string_view(body->data() + binary_offset, *binary_size),
                                     shape, where));
        binary_offset += *binary_size;
        req.inputs.push_back({std::move(name), std::move(tensor)});
        continue;
      }
      const uint64_t expected = static_cast<uint64_t>(NumElements(shape)) * SizeOf(*dtype);
      if (*binary_size != expected) {
        return InvalidArgument("{}: binary_data_size is {} bytes but {} {} needs {}", where,
                               *binary_size, dt_name, ShapeToString(shape), expected);
      }
      if (truncated) {
        return InvalidArgument(
            "{}: binary data is truncated: needs {} bytes at offset {}, the body has {}", where,
            *binary_size, binary_offset, body->size());
      }
      char* ptr = body->data() + binary_offset;
      if (reinterpret_cast<uintptr_t>(ptr) % SizeOf(*dtype) == 0) {
        tensor = Tensor::Wrap(*dtype, shape, ptr, body);
      } else {  // misaligned for the element type: copy rather than hand kernels a bad pointer
        tensor = Tensor::Allocate(*dtype, shape);
        if (*binary_size > 0) std::memcpy(tensor.raw_data(), ptr, *binary_size);
      }
      binary_offset += *binary_size;
    } else {
      if (data == nullptr) {
        return InvalidArgument("{}: needs 'data' or a 'binary_data_size' parameter", where);
      }
      if (auto span = spans.find(i); span != spans.end()) {
        if (static_cast<uint64_t>(NumElements(shape)) > body->size()) {
          return InvalidArgument("{}: shape {} needs {} elements but the body is only {} bytes",
                                 where, ShapeToString(shape), NumElements(shape), body->size());
        }
        ASSIGN_OR_RETURN(tensor, DecodeDataSpan(span->second, *body, *dtype, shape, where));
      } else {
        ASSIGN_OR_RETURN(tensor, DecodeJsonData(*data, *dtype, shape, body->size(), where));
      }
    }
    req.inputs.push_back({std::move(name), std::move(tensor)});
  }
  if (binary_offset != body->size()) {
    return InvalidArgument("body has {} bytes of binary data but the inputs use {}",
                           body->size() - json_length, binary_offset - json_length);
  }

  if (const rapidjson::Value* outputs = Member(doc, "outputs")) {
    if (!outputs->IsArray()) return InvalidArgument("request: 'outputs' must be an array");
    for (rapidjson::SizeType i = 0; i < outputs->Size(); ++i) {
      const rapidjson::Value& o = (*outputs)[i];
      std::string where = fmt::format("output {}", i);
      if (!o.IsObject()) return InvalidArgument("{}: must be an object", where);
      ASSIGN_OR_RETURN(std::string name, GetString(o, "name", where, /*required=*/true));
      where = fmt::format("output '{}'", name.substr(0, 128));
      if (const rapidjson::Value* p = Member(o, "parameters")) {
        if (!p->IsObject()) return InvalidArgument("{}: 'parameters' must be an object", where);
        if (const rapidjson::Value* b = Member(*p, "binary_data")) {
          ASSIGN_OR_RETURN(bool binary, GetBool(*b, where + ": 'binary_data'"));
          out.output_options.binary[name] = binary;
        }
        if (const rapidjson::Value* c = Member(*p, "classification")) {  // classification ext.
          if (!c->IsInt64() || c->GetInt64() < 1) {
            return InvalidArgument("{}: 'classification' must be a positive integer", where);
          }
          req.classification[name] = c->GetInt64();
        }
        ASSIGN_OR_RETURN(auto shm, ParseJsonSharedMemoryParams(*p, where));
        if (shm.has_value()) out.output_options.shared_memory[name] = std::move(*shm);
      }
      for (const auto& prev : req.requested_outputs) {
        if (prev == name) return InvalidArgument("{}: requested more than once", where);
      }
      req.requested_outputs.push_back(std::move(name));
    }
  }
  return out;
}

namespace {

template <typename T>
void WriteData(JsonWriter& w, const Tensor& t) {
  const T* p = t.data<T>();
  const int64_t n = t.NumElements();
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      w.Bool(p[i]);
    } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Float16> ||
                         std::is_same_v<T, BFloat16>) {
      // Shortest text that reads back as the same float (not the double's).
      float f = static_cast<float>(p[i]);
      if (std::isfinite(f)) {
        char buf[32];
        auto r = std::to_chars(buf, buf + sizeof(buf), f);
        w.RawValue(buf, static_cast<size_t>(r.ptr - buf), rapidjson::kNumberType);
      } else {
        w.String(NonFiniteName(f));
      }
    } else if constexpr (std::is_same_v<T, double>) {
      if (std::isfinite(p[i])) {
        w.Double(p[i]);
      } else {
        w.String(NonFiniteName(p[i]));
      }
    } else if constexpr (std::is_signed_v<T>) {
      w.Int64(p[i]);
    } else {
      w.Uint64(p[i]);
    }
  }
}

}  // namespace

StatusOr<EncodedHttpResponse> EncodeHttpInferResponse(const InferenceResponse& response,
                                                      const HttpOutputOptions& options) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("model_name");
  WriteString(w, response.model_name);
  w.Key("model_version");
  std::string version = response.model_version >= 0 ? std::to_string(response.model_version) : "";
  w.String(version.data(), static_cast<rapidjson::SizeType>(version.size()));
  if (!response.id.empty()) {
    w.Key("id");
    WriteString(w, response.id);
  }
  w.Key("outputs");
  w.StartArray();
  std::vector<const Tensor*> binary;
  for (const auto& [name, tensor] : response.outputs) {
    const char* dt = serving::KServeName(tensor.dtype());
    if (dt == nullptr || *dt == '\0') {
      return Internal("output '{}' has type {}, which KServe cannot represent", name,
                      DataTypeName(tensor.dtype()));
    }
    w.StartObject();
    w.Key("name");
    WriteString(w, name);
    w.Key("datatype");
    w.String(dt);
    w.Key("shape");
    w.StartArray();
    for (int64_t d : tensor.shape()) w.Int64(d);
    w.EndArray();
    if (options.shared_memory.count(name) != 0) {
      // Written into the client's shared memory region: no data here.
    } else if (options.IsBinary(name)) {
      w.Key("parameters");
      w.StartObject();
      w.Key("binary_data_size");
      w.Uint64(tensor.is_string() ? LengthPrefixedSize(tensor) : tensor.ByteSize());
      w.EndObject();
      binary.push_back(&tensor);
    } else {
      w.Key("data");
      w.StartArray();
      if (tensor.is_string()) {  // JSON strings: valid UTF-8 as is, else with U+FFFD
        for (const std::string& v : tensor.values<std::string>()) WriteString(w, v);
      }
      DispatchAll(
          tensor.dtype(), [&w, &t = tensor](auto tag) { WriteData<decltype(tag)>(w, t); }, [] {});
      w.EndArray();
    }
    w.EndObject();
  }
  // Classification results: BYTES, JSON strings or the binary extension's length-prefixed
  // elements, after the tensors.
  std::vector<std::string> classified_binary;
  for (const serving::ClassifiedOutput& c : response.classified) {
    w.StartObject();
    w.Key("name");
    WriteString(w, c.name);
    w.Key("datatype");
    w.String("BYTES");
    w.Key("shape");
    w.StartArray();
    for (int64_t d : c.shape) w.Int64(d);
    w.EndArray();
    if (options.IsBinary(c.name)) {
      classified_binary.push_back(serving::SerializeBytesElements(c.values));
      w.Key("parameters");
      w.StartObject();
      w.Key("binary_data_size");
      w.Uint64(classified_binary.back().size());
      w.EndObject();
    } else {
      w.Key("data");
      w.StartArray();
      for (const auto& v : c.values) WriteString(w, v);
      w.EndArray();
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();

  EncodedHttpResponse out;
  out.json_length = sb.GetSize();
  size_t total = out.json_length;
  for (const Tensor* t : binary) total += t->is_string() ? LengthPrefixedSize(*t) : t->ByteSize();
  for (const auto& b : classified_binary) total += b.size();
  out.body.reserve(total);
  out.body.append(sb.GetString(), sb.GetSize());
  for (const Tensor* t : binary) {
    if (t->is_string()) {
      AppendLengthPrefixed(*t, &out.body);
    } else {
      out.body.append(static_cast<const char*>(t->raw_data()), t->ByteSize());
    }
  }
  for (const auto& b : classified_binary) out.body.append(b);
  return out;
}

std::string JsonError(std::string_view message) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("error");
  WriteString(w, message);
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

int HttpStatusFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kUnimplemented: return 400;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kAlreadyExists: return 409;
    case StatusCode::kUnavailable:
    case StatusCode::kResourceExhausted:
    case StatusCode::kDeadlineExceeded: return 503;
    default: return 500;
  }
}

}  // namespace inferd::server
