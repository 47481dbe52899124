#include "server/http_compression.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <vector>

namespace inferd::server {
namespace {

constexpr size_t kChunk = 64 * 1024;
// zlib windowBits: 15 = zlib header, 15 + 16 = gzip header, -15 = raw deflate.
constexpr int kZlibBits = 15;
constexpr int kGzipBits = 15 + 16;
constexpr int kRawBits = -15;

std::string Lower(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A zlib-format stream starts with a CMF/FLG pair whose 16-bit value is a multiple of 31 and
// whose method is deflate (8); anything else is taken as raw deflate.
bool LooksLikeZlib(std::string_view data) {
  if (data.size() < 2) return false;
  const auto cmf = static_cast<unsigned char>(data[0]);
  const auto flg = static_cast<unsigned char>(data[1]);
  return (cmf & 0x0f) == 8 && (cmf >> 4) <= 7 && ((cmf << 8) | flg) % 31 == 0;
}

Status Inflate(int window_bits, std::string_view data, size_t max_bytes, std::string* out) {
  z_stream zs{};
  if (inflateInit2(&zs, window_bits) != Z_OK) return Internal("zlib: inflateInit2 failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (out->size() > max_bytes) break;
    const size_t old = out->size();
    out->resize(old + kChunk);
    zs.next_out = reinterpret_cast<Bytef*>(out->data() + old);
    zs.avail_out = static_cast<uInt>(kChunk);
    rc = inflate(&zs, Z_NO_FLUSH);
    out->resize(old + (kChunk - zs.avail_out));
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) break;  // input ended before the stream did
    if (rc != Z_OK && rc != Z_STREAM_END) break;
  }
  const bool trailing = zs.avail_in != 0;
  const char* msg = zs.msg;
  inflateEnd(&zs);
  if (out->size() > max_bytes) {
    return ResourceExhausted("decompressed request body exceeds the limit of {} bytes", max_bytes);
  }
  if (rc != Z_STREAM_END) {
    return InvalidArgument("corrupt compressed request body: {}",
                           msg != nullptr ? msg : "truncated stream");
  }
  if (trailing) return InvalidArgument("corrupt compressed request body: data after the stream");
  return Status::Ok();
}

}  // namespace

const char* HttpEncodingName(HttpEncoding e) {
  switch (e) {
    case HttpEncoding::kGzip: return "gzip";
    case HttpEncoding::kDeflate: return "deflate";
    default: return "identity";
  }
}

StatusOr<HttpEncoding> ParseContentEncoding(std::string_view value) {
  const std::string v = Lower(value);
  if (v.empty() || v == "identity") return HttpEncoding::kIdentity;
  if (v == "gzip" || v == "x-gzip") return HttpEncoding::kGzip;
  if (v == "deflate") return HttpEncoding::kDeflate;
  return Unimplemented("unsupported Content-Encoding '{}' (supported: gzip, deflate)",
                       v.substr(0, 64));
}

HttpEncoding ChooseResponseEncoding(std::string_view accept_encoding) {
  double gzip_q = 0, deflate_q = 0;
  size_t i = 0;
  while (i <= accept_encoding.size()) {
    size_t j = std::min(accept_encoding.find(',', i), accept_encoding.size());
    std::string_view item = accept_encoding.substr(i, j - i);
    i = j + 1;
    double q = 1;
    const size_t semi = item.find(';');
    if (semi != std::string_view::npos) {
      std::string params = Lower(item.substr(semi + 1));
      if (params.rfind("q=", 0) == 0) q = std::strtod(params.c_str() + 2, nullptr);
      item = item.substr(0, semi);
    }
    const std::string name = Lower(item);
    if (name == "gzip" || name == "x-gzip" || name == "*") gzip_q = std::max(gzip_q, q);
    if (name == "deflate") deflate_q = std::max(deflate_q, q);
  }
  if (gzip_q > 0 && gzip_q >= deflate_q) return HttpEncoding::kGzip;
  if (deflate_q > 0) return HttpEncoding::kDeflate;
  return HttpEncoding::kIdentity;
}

StatusOr<std::string> Decompress(HttpEncoding encoding, std::string_view data, size_t max_bytes) {
  if (encoding == HttpEncoding::kIdentity) return std::string(data);
  int bits = kGzipBits;
  if (encoding == HttpEncoding::kDeflate) bits = LooksLikeZlib(data) ? kZlibBits : kRawBits;
  std::string out;
  RETURN_IF_ERROR(Inflate(bits, data, max_bytes, &out));
  return out;
}

StatusOr<std::string> Compress(HttpEncoding encoding, std::string_view data) {
  if (encoding == HttpEncoding::kIdentity) return std::string(data);
  z_stream zs{};
  const int bits = encoding == HttpEncoding::kGzip ? kGzipBits : kZlibBits;
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return Internal("zlib: deflateInit2 failed");
  }
  std::string out(deflateBound(&zs, static_cast<uLong>(data.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) return Internal("zlib: deflate failed ({})", rc);
  return out;
}

}  // namespace inferd::server
