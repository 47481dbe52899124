#include "server/http_compression.h"

#include <zlib.h>

#include <random>
#include <string>

#include <gtest/gtest.h>

namespace inferd::server {
namespace {

std::string SampleBody() {
  std::string s;
  std::mt19937 rng(7);
  for (int i = 0; i < 50000; ++i) s += "{\"x\":" + std::to_string(rng() % 1000) + "},";
  return s;
}

TEST(HttpCompression, RoundTripsGzipAndDeflate) {
  const std::string body = SampleBody();
  for (HttpEncoding e : {HttpEncoding::kGzip, HttpEncoding::kDeflate}) {
    auto packed = Compress(e, body);
    ASSERT_TRUE(packed.ok()) << packed.status().message();
    EXPECT_LT(packed->size(), body.size() / 2);
    auto plain = Decompress(e, *packed, body.size());
    ASSERT_TRUE(plain.ok()) << plain.status().message();
    EXPECT_EQ(*plain, body);
  }
  // gzip magic, zlib header
  EXPECT_EQ(static_cast<unsigned char>((*Compress(HttpEncoding::kGzip, body))[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>((*Compress(HttpEncoding::kDeflate, body))[0]), 0x78);
}

TEST(HttpCompression, AcceptsRawDeflate) {
  const std::string body = "raw deflate from an old client, raw deflate from an old client";
  z_stream zs{};
  ASSERT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(256, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  zs.avail_in = static_cast<uInt>(body.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  ASSERT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  auto plain = Decompress(HttpEncoding::kDeflate, out, 1024);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(*plain, body);
}

TEST(HttpCompression, CorruptAndTruncatedStreamsAreInvalidArgument) {
  const std::string body = SampleBody();
  std::string packed = *Compress(HttpEncoding::kGzip, body);
  std::string flipped = packed;
  flipped[packed.size() / 2] = static_cast<char>(flipped[packed.size() / 2] ^ 0x5a);
  for (const std::string& bad : {std::string("not gzip at all"), flipped,
                                 packed.substr(0, packed.size() / 2), packed + "trailing"}) {
    auto plain = Decompress(HttpEncoding::kGzip, bad, body.size() * 2);
    ASSERT_FALSE(plain.ok());
    EXPECT_EQ(plain.status().code(), StatusCode::kInvalidArgument) << plain.status().message();
    EXPECT_NE(plain.status().message().find("corrupt compressed request body"), std::string::npos);
  }
  EXPECT_FALSE(Decompress(HttpEncoding::kDeflate, "\x78\x9c garbage", 100).ok());
  EXPECT_FALSE(Decompress(HttpEncoding::kGzip, "", 100).ok());
}

TEST(HttpCompression, BombOverTheLimitIsResourceExhausted) {
  const std::string zeros(size_t{16} << 20, '\0');  // 16 MiB of zeros: ~16 KiB compressed
  auto packed = Compress(HttpEncoding::kGzip, zeros);
  ASSERT_TRUE(packed.ok());
  ASSERT_LT(packed->size(), size_t{1} << 20);
  auto plain = Decompress(HttpEncoding::kGzip, *packed, size_t{1} << 20);
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(plain.status().message().find("1048576"), std::string::npos);
  // Exactly at the limit is fine.
  auto small = Compress(HttpEncoding::kDeflate, std::string(1000, 'a'));
  EXPECT_TRUE(Decompress(HttpEncoding::kDeflate, *small, 1000).ok());
  EXPECT_FALSE(Decompress(HttpEncoding::kDeflate, *small, 999).ok());
}

TEST(HttpCompression, ParsesContentEncoding) {
  EXPECT_EQ(*ParseContentEncoding(" GZIP "), HttpEncoding::kGzip);
  EXPECT_EQ(*ParseContentEncoding("x-gzip"), HttpEncoding::kGzip);
  EXPECT_EQ(*ParseContentEncoding("deflate"), HttpEncoding::kDeflate);
  EXPECT_EQ(*ParseContentEncoding("identity"), HttpEncoding::kIdentity);
  auto br = ParseContentEncoding("br");
  ASSERT_FALSE(br.ok());
  EXPECT_EQ(br.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(br.status().message().find("'br'"), std::string::npos);
}

TEST(HttpCompression, ChoosesResponseEncoding) {
  EXPECT_EQ(ChooseResponseEncoding(""), HttpEncoding::kIdentity);
  EXPECT_EQ(ChooseResponseEncoding("gzip"), HttpEncoding::kGzip);
  EXPECT_EQ(ChooseResponseEncoding("deflate"), HttpEncoding::kDeflate);
  EXPECT_EQ(ChooseResponseEncoding("gzip, deflate"), HttpEncoding::kGzip);
  EXPECT_EQ(ChooseResponseEncoding("gzip;q=0.5, deflate"), HttpEncoding::kDeflate);
  EXPECT_EQ(ChooseResponseEncoding("gzip;q=0, br"), HttpEncoding::kIdentity);
  EXPECT_EQ(ChooseResponseEncoding("identity"), HttpEncoding::kIdentity);
  EXPECT_EQ(ChooseResponseEncoding("*"), HttpEncoding::kGzip);
}

}  // namespace
}  // namespace inferd::server
