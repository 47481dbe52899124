#include "common/npy.h"

#include <bit>
#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <system_error>
#include <vector>

namespace inferd {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the .npy reader assumes a little-endian host");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
// magic, major, minor, then the header length (2 bytes in v1, 4 bytes in v2/v3).
constexpr size_t kPreambleV1 = kMagicLen + 2 + 2;
constexpr size_t kPreambleV2 = kMagicLen + 2 + 4;

struct TypeEntry {
  char kind;  // numpy kind character
  int size;
  DataType dtype;
};
constexpr TypeEntry kTypes[] = {
    {'b', 1, DataType::kBool},    {'i', 1, DataType::kInt8},     {'i', 2, DataType::kInt16},
    {'i', 4, DataType::kInt32},   {'i', 8, DataType::kInt64},    {'u', 1, DataType::kUInt8},
    {'u', 2, DataType::kUInt16},  {'u', 4, DataType::kUInt32},   {'u', 8, DataType::kUInt64},
    {'f', 2, DataType::kFloat16}, {'f', 4, DataType::kFloat32},  {'f', 8, DataType::kFloat64},
};

struct Header {
  DataType dtype = DataType::kUndefined;
  Shape shape;
};

// A minimal parser for the Python literal numpy writes as the header: a dict whose keys are
// strings and whose values are strings, True/False, or tuples of non-negative integers. Anything
// else (nested dicts, lists for structured dtypes) is rejected.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view source) : s_(text), source_(source) {}

  Status Parse(Header* out) {
    std::optional<std::string> descr;
    std::optional<bool> fortran;
    std::optional<Shape> shape;
    SkipSpace();
    if (!Consume('{')) return Error("header is not a dict");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      std::string key;
      RETURN_IF_ERROR(ParseString(&key));
      SkipSpace();
      if (!Consume(':')) return Error("expected ':' after key '" + key + "'");
      SkipSpace();
      if (key == "descr") {
        if (Peek() == '[') return Error("structured dtypes are not supported");
        std::string d;
        RETURN_IF_ERROR(ParseString(&d));
        descr = d;
      } else if (key == "fortran_order") {
        bool b = false;
        RETURN_IF_ERROR(ParseBool(&b));
        fortran = b;
      } else if (key == "shape") {
        Shape sh;
        RETURN_IF_ERROR(ParseTuple(&sh));
        shape = sh;
      } else {
        return Error("unexpected header key '" + key + "'");
      }
      SkipSpace();
      if (Consume(',')) continue;
      SkipSpace();
      if (Consume('}')) break;
      return Error("expected ',' or '}' in header");
    }
    if (!descr || !fortran || !shape) {
      return Error("header lacks one of 'descr', 'fortran_order', 'shape'");
    }
    if (*fortran) {
      return Error("fortran_order=True is not supported (save a C-contiguous array)");
    }
    RETURN_IF_ERROR(ParseDescr(*descr, &out->dtype));
    out->shape = std::move(*shape);
    return Status::Ok();
  }

 private:
  Status Error(const std::string& what) const {
    return InvalidArgument("{}: malformed .npy header: {}", source_, what);
  }
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool Consume(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  void SkipSpace() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  Status ParseString(std::string* out) {
    char q = Peek();
    if (q != '\'' && q != '"') return Error("expected a quoted string");
    ++pos_;
    size_t end = s_.find(q, pos_);
    if (end == std::string_view::npos) return Error("unterminated string");
    *out = std::string(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return Status::Ok();
  }
  Status ParseBool(bool* out) {
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      *out = true;
    } else if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      *out = false;
    } else {
      return Error("expected True or False for 'fortran_order'");
    }
    return Status::Ok();
  }
  Status ParseTuple(Shape* out) {
    if (!Consume('(')) return Error("'shape' is not a tuple");
    while (true) {
      SkipSpace();
      if (Consume(')')) return Status::Ok();
      if (!std::isdigit(static_cast<unsigned char>(Peek()))) {
        return Error("'shape' must hold non-negative integers");
      }
      int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(Peek()))) {
        int digit = s_[pos_++] - '0';
        if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) {
          return Error("shape dimension overflows int64");
        }
        v = v * 10 + digit;
      }
      if (Peek() == 'L') ++pos_;  // Python 2 long suffix
      out->push_back(v);
      SkipSpace();
      if (Consume(',')) continue;
      SkipSpace();
      if (Consume(')')) return Status::Ok();
      return Error("expected ',' or ')' in 'shape'");
    }
  }
  Status ParseDescr(const std::string& d, DataType* out) const {
    if (d.size() < 3) return Error("unknown dtype '" + d + "'");
    char order = d[0];
    char kind = d[1];
    int size = 0;
    for (size_t i = 2; i < d.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(d[i])) || size > 1000) {
        return Error("unknown dtype '" + d + "'");
      }
      size = size * 10 + (d[i] - '0');
    }
    if (order != '<' && order != '|' && order != '=' && order != '>') {
      return Error("unknown dtype '" + d + "'");
    }
    if (order == '>' && size > 1) {
      return InvalidArgument("{}: big-endian .npy data ('{}') is not supported; save with "
                             "little-endian byte order (arr.astype(arr.dtype.newbyteorder('<')))",
                             source_, d);
    }
    for (const TypeEntry& e : kTypes) {
      if (e.kind == kind && e.size == size) {
        *out = e.dtype;
        return Status::Ok();
      }
    }
    return InvalidArgument("{}: unsupported .npy dtype '{}' (supported: bool, int8-64, uint8-64, "
                           "float16, float32, float64)",
                           source_, d);
  }

  std::string_view s_;
  std::string_view source_;
  size_t pos_ = 0;
};

// Checks magic and version in the first bytes of a file and reads the header length; the header
// starts at *preamble_len.
Status ParsePreamble(std::string_view prefix, std::string_view source, size_t* header_len,
                     size_t* preamble_len) {
  if (prefix.size() < kMagicLen || std::memcmp(prefix.data(), kMagic, kMagicLen) != 0) {
    return InvalidArgument("{}: not a .npy file (bad magic)", source);
  }
  if (prefix.size() < kPreambleV1) return InvalidArgument("{}: truncated .npy header", source);
  auto major = static_cast<uint8_t>(prefix[6]);
  if (major == 1) {
    *preamble_len = kPreambleV1;
    *header_len = static_cast<uint8_t>(prefix[8]) | (static_cast<uint8_t>(prefix[9]) << 8);
  } else if (major == 2 || major == 3) {
    if (prefix.size() < kPreambleV2) return InvalidArgument("{}: truncated .npy header", source);
    *preamble_len = kPreambleV2;
    uint32_t len = 0;
    for (int i = 3; i >= 0; --i) len = (len << 8) | static_cast<uint8_t>(prefix[8 + i]);
    *header_len = len;
  } else {
    return InvalidArgument("{}: unsupported .npy format version {}.{}", source, major,
                           static_cast<uint8_t>(prefix[7]));
  }
  return Status::Ok();
}

// Checks the expected data size against what the file holds, without overflowing. The element
// count is multiplied in shape order as Tensor's NumElements does, so a shape whose partial
// product passes int64 is refused even when a later zero dimension would make it empty (the
// fuzzer's [2^40, 2^40, 0]: NumElements overflowed while allocating).
StatusOr<size_t> ExpectedDataBytes(const Header& h, size_t available, std::string_view source) {
  const size_t elem = SizeOf(h.dtype);
  int64_t count = 1;
  bool overflow = false;
  for (int64_t d : h.shape) {
    if (count != 0 && d > std::numeric_limits<int64_t>::max() / count) {
      overflow = true;
      break;
    }
    count *= d;
  }
  if (!overflow && static_cast<uint64_t>(count) > std::numeric_limits<size_t>::max() / elem) {
    overflow = true;
  }
  const size_t bytes = overflow ? 0 : static_cast<size_t>(count) * elem;
  if (overflow || bytes != available) {
    return InvalidArgument("{}: .npy data size mismatch: shape {} of {} needs {} bytes, file has {}",
                           source, ShapeToString(h.shape), DataTypeName(h.dtype),
                           overflow ? std::string("too many") : std::to_string(bytes), available);
  }
  return bytes;
}

std::string ShapeTuple(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

}  // namespace

std::string NpyDescr(DataType dtype) {
  for (const TypeEntry& e : kTypes) {
    if (e.dtype == dtype) {
      return std::string(e.size == 1 ? "|" : "<") + e.kind + std::to_string(e.size);
    }
  }
  return "";
}

Tensor ToNpyCompatible(const Tensor& tensor) {
  if (tensor.dtype() != DataType::kBFloat16) return tensor;
  Tensor out = Tensor::Allocate(DataType::kFloat32, tensor.shape());
  const BFloat16* src = tensor.data<BFloat16>();
  float* dst = out.data<float>();
  for (int64_t i = 0; i < tensor.NumElements(); ++i) dst[i] = static_cast<float>(src[i]);
  return out;
}

StatusOr<Tensor> ParseNpy(std::string_view bytes, std::string_view source) {
  size_t header_len = 0, preamble_len = 0;
  RETURN_IF_ERROR(ParsePreamble(bytes, source, &header_len, &preamble_len));
  if (bytes.size() - preamble_len < header_len) {
    return InvalidArgument("{}: truncated .npy header ({} bytes declared, {} present)", source,
                           header_len, bytes.size() - preamble_len);
  }
  Header h;
  RETURN_IF_ERROR(HeaderParser(bytes.substr(preamble_len, header_len), source).Parse(&h));
  size_t offset = preamble_len + header_len;
  ASSIGN_OR_RETURN(size_t data_bytes, ExpectedDataBytes(h, bytes.size() - offset, source));
  Tensor t = Tensor::Allocate(h.dtype, h.shape);
  if (data_bytes > 0) std::memcpy(t.raw_data(), bytes.data() + offset, data_bytes);
  return t;
}

StatusOr<Tensor> LoadNpy(const std::filesystem::path& path) {
  const std::string source = path.string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return NotFound("{}: no such file", source);
  }
  uintmax_t file_size = std::filesystem::file_size(path, ec);
  if (ec) return NotFound("{}: cannot stat: {}", source, ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("{}: cannot open", source);

  std::string prefix(kPreambleV2, '\0');
  in.read(prefix.data(), static_cast<std::streamsize>(prefix.size()));
  prefix.resize(static_cast<size_t>(in.gcount()));
  size_t header_len = 0, preamble_len = 0;
  RETURN_IF_ERROR(ParsePreamble(prefix, source, &header_len, &preamble_len));
  if (file_size < preamble_len + header_len) {
    return InvalidArgument("{}: truncated .npy header ({} bytes declared, {} present)", source,
                           header_len, file_size - preamble_len);
  }
  std::string header(header_len, '\0');
  in.seekg(static_cast<std::streamoff>(preamble_len));
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  if (static_cast<size_t>(in.gcount()) != header_len) {
    return InvalidArgument("{}: truncated .npy header", source);
  }
  Header h;
  RETURN_IF_ERROR(HeaderParser(header, source).Parse(&h));
  size_t offset = preamble_len + header_len;
  ASSIGN_OR_RETURN(size_t data_bytes,
                   ExpectedDataBytes(h, static_cast<size_t>(file_size - offset), source));
  Tensor t = Tensor::Allocate(h.dtype, h.shape);
  if (data_bytes > 0) {
    in.read(static_cast<char*>(t.raw_data()), static_cast<std::streamsize>(data_bytes));
    if (static_cast<size_t>(in.gcount()) != data_bytes) {
      return InvalidArgument("{}: read error in .npy data", source);
    }
  }
  return t;
}

StatusOr<std::string> SerializeNpy(const Tensor& tensor) {
  if (tensor.dtype() == DataType::kBFloat16) {
    return Unimplemented("numpy has no bfloat16; convert to float32 before saving as .npy");
  }
  std::string descr = NpyDescr(tensor.dtype());
  if (descr.empty()) {
    return Unimplemented("cannot save {} tensors as .npy", DataTypeName(tensor.dtype()));
  }
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " +
                     ShapeTuple(tensor.shape()) + ", }";
  // Pad with spaces and a final newline so the data starts at a multiple of 64 bytes.
  size_t preamble = kPreambleV1;
  size_t unpadded = preamble + dict.size() + 1;
  if (((unpadded + 63) / 64) * 64 - preamble > 65535) preamble = kPreambleV2;
  size_t total = ((preamble + dict.size() + 1 + 63) / 64) * 64;
  size_t header_len = total - preamble;
  dict.append(header_len - dict.size() - 1, ' ');
  dict.push_back('\n');

  std::string out(kMagic, kMagicLen);
  out.push_back(preamble == kPreambleV1 ? '\x01' : '\x02');
  out.push_back('\x00');
  int len_bytes = preamble == kPreambleV1 ? 2 : 4;
  for (int i = 0; i < len_bytes; ++i) {
    out.push_back(static_cast<char>((header_len >> (8 * i)) & 0xff));
  }
  out += dict;
  out.append(static_cast<const char*>(tensor.raw_data()), tensor.ByteSize());
  return out;
}

Status SaveNpy(const Tensor& tensor, const std::filesystem::path& path) {
  ASSIGN_OR_RETURN(std::string bytes, SerializeNpy(tensor));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return NotFound("{}: cannot open for writing", path.string());
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return Internal("{}: write failed", path.string());
  return Status::Ok();
}

}  // namespace inferd
