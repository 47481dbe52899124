#include "server/bytes_codec.h"

#include <cstdint>

namespace inferd::server {

StatusOr<Tensor> DecodeLengthPrefixed(std::string_view bytes, const Shape& shape,
                                      std::string_view where) {
  const int64_t n = NumElements(shape);
  // Each element takes at least its 4-byte prefix: checked before allocating anything.
  if (static_cast<uint64_t>(n) > bytes.size() / 4) {
    return InvalidArgument("{}: BYTES data is truncated: {} bytes cannot hold the 4-byte length "
                           "prefixes of the {} elements of shape {}",
                           where, bytes.size(), n, ShapeToString(shape));
  }
  Tensor t = Tensor::Allocate(DataType::kString, shape);
  std::string* out = t.data<std::string>();
  size_t pos = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (bytes.size() - pos < 4) {
      return InvalidArgument("{}: BYTES element {} has a truncated 4-byte length prefix", where, i);
    }
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + pos);
    const uint32_t len = uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 |
                         uint32_t{p[3]} << 24;
    pos += 4;
    if (len > bytes.size() - pos) {
      return InvalidArgument("{}: BYTES element {} claims {} bytes but only {} remain", where, i,
                             len, bytes.size() - pos);
    }
    out[i].assign(bytes.data() + pos, len);
    pos += len;
  }
  if (pos != bytes.size()) {
    return InvalidArgument("{}: BYTES data has {} bytes after its {} elements", where,
                           bytes.size() - pos, n);
  }
  return t;
}

size_t LengthPrefixedSize(const Tensor& strings) {
  return 4 * static_cast<size_t>(strings.NumElements()) + strings.StringBytes();
}

void AppendLengthPrefixed(const Tensor& strings, std::string* out) {
  out->reserve(out->size() + LengthPrefixedSize(strings));
  for (const std::string& s : strings.values<std::string>()) {
    const auto len = static_cast<uint32_t>(s.size());
    const char prefix[4] = {static_cast<char>(len & 0xFF), static_cast<char>((len >> 8) & 0xFF),
                            static_cast<char>((len >> 16) & 0xFF),
                            static_cast<char>((len >> 24) & 0xFF)};
    out->append(prefix, 4);
    out->append(s);
  }
}

}  // namespace inferd::server
