#include "common/npy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace inferd {
namespace {

// Builds a v1 .npy file from a header dict and raw data, padded as numpy pads.
std::string MakeNpy(const std::string& dict, const std::string& data, char major = 1) {
  size_t preamble = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((preamble + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  std::string out("\x93NUMPY", 6);
  out.push_back(major);
  out.push_back(0);
  size_t n = header.size();
  for (size_t i = 0; i < preamble - 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + header + data;
}

std::string Bytes(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

TEST(NpyTest, ParsesFloat32Matrix) {
  float v[6] = {1, 2, 3, 4, 5, 6};
  auto t = ParseNpy(MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                            Bytes(v, sizeof v)));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->dtype(), DataType::kFloat32);
  EXPECT_EQ(t->shape(), (Shape{2, 3}));
  EXPECT_EQ(t->data<float>()[5], 6.f);
}

TEST(NpyTest, ParsesScalarBoolAndEmpty) {
  double d = 2.5;
  auto s = ParseNpy(MakeNpy("{'descr': '<f8', 'fortran_order': False, 'shape': (), }",
                            Bytes(&d, 8)));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->shape(), Shape{});
  EXPECT_EQ(s->data<double>()[0], 2.5);

  bool b[3] = {true, false, true};
  auto tb = ParseNpy(MakeNpy("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
                             Bytes(b, 3)));
  ASSERT_TRUE(tb.ok()) << tb.status().ToString();
  EXPECT_EQ(tb->dtype(), DataType::kBool);
  EXPECT_TRUE(tb->data<bool>()[2]);

  auto e = ParseNpy(MakeNpy("{'descr': '<i8', 'fortran_order': False, 'shape': (0, 4), }", ""));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->shape(), (Shape{0, 4}));
}

TEST(NpyTest, ParsesVersion2AndDoubleQuotes) {
  int16_t v[2] = {-3, 7};
  auto t = ParseNpy(MakeNpy("{\"descr\": \"<i2\", \"fortran_order\": False, \"shape\": (2,)}",
                            Bytes(v, 4), 2));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->dtype(), DataType::kInt16);
  EXPECT_EQ(t->data<int16_t>()[0], -3);
}

TEST(NpyTest, RoundTripsEveryNumpyType) {
  for (DataType dt : {DataType::kBool, DataType::kInt8, DataType::kInt16, DataType::kInt32,
                      DataType::kInt64, DataType::kUInt8, DataType::kUInt16, DataType::kUInt32,
                      DataType::kUInt64, DataType::kFloat16, DataType::kFloat32,
                      DataType::kFloat64}) {
    for (Shape shape : {Shape{}, Shape{5}, Shape{2, 3, 4}, Shape{3, 0}}) {
      Tensor t = Tensor::Allocate(dt, shape);
      auto* bytes = static_cast<uint8_t*>(t.raw_data());
      for (size_t i = 0; i < t.ByteSize(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 1);
      if (dt == DataType::kBool) {
        for (size_t i = 0; i < t.ByteSize(); ++i) bytes[i] &= 1;
      }
      auto s = SerializeNpy(t);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      // numpy aligns the data to 64 bytes.
      EXPECT_EQ((s->size() - t.ByteSize()) % 64, 0u);
      auto back = ParseNpy(*s);
      ASSERT_TRUE(back.ok()) << DataTypeName(dt) << ": " << back.status().ToString();
      EXPECT_EQ(back->dtype(), dt);
      EXPECT_EQ(back->shape(), shape);
      EXPECT_EQ(Bytes(back->raw_data(), back->ByteSize()), Bytes(t.raw_data(), t.ByteSize()));
    }
  }
}

TEST(NpyTest, WritesNumpyHeaderText) {
  auto s = SerializeNpy(Tensor::FromVector<float>({1, 2, 3}));
  ASSERT_TRUE(s.ok());
  EXPECT_NE(s->find("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"),
            std::string::npos);
  EXPECT_EQ((*s)[6], '\x01');
}

TEST(NpyTest, BFloat16IsRejectedForWritingAndConvertible) {
  Tensor t = Tensor::Allocate(DataType::kBFloat16, {2});
  t.data<BFloat16>()[0] = BFloat16(1.5f);
  auto s = SerializeNpy(t);
  EXPECT_EQ(s.status().code(), StatusCode::kUnimplemented);
  Tensor f = ToNpyCompatible(t);
  EXPECT_EQ(f.dtype(), DataType::kFloat32);
  EXPECT_EQ(f.data<float>()[0], 1.5f);
}

void ExpectInvalid(const std::string& bytes, const std::string& needle) {
  auto t = ParseNpy(bytes, "bad.npy");
  ASSERT_FALSE(t.ok()) << "expected failure containing '" << needle << "'";
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << t.status().ToString();
  EXPECT_NE(t.status().message().find("bad.npy"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find(needle), std::string::npos) << t.status().message();
}

TEST(NpyTest, RejectsMalformedFiles) {
  float v[2] = {1, 2};
  std::string good_data = Bytes(v, 8);
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  ExpectInvalid("", "bad magic");
  ExpectInvalid("PK\x03\x04 not numpy at all", "bad magic");
  ExpectInvalid(std::string("\x93NUMPY\x01", 7), "truncated");
  ExpectInvalid(MakeNpy(dict, good_data).substr(0, 30), "truncated");
  ExpectInvalid(MakeNpy(dict, good_data, 9), "version");
  ExpectInvalid(MakeNpy(dict, good_data.substr(0, 6)), "size mismatch");
  ExpectInvalid(MakeNpy(dict, good_data + "xx"), "size mismatch");
  ExpectInvalid(MakeNpy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", good_data),
                "big-endian");
  ExpectInvalid(MakeNpy("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", good_data),
                "fortran_order");
  ExpectInvalid(MakeNpy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", good_data),
                "unsupported .npy dtype");
  ExpectInvalid(MakeNpy("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", good_data),
                "dtype");
  ExpectInvalid(MakeNpy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",
                        good_data),
                "structured");
  ExpectInvalid(MakeNpy("{'descr': '<f4', 'shape': (2,), }", good_data), "lacks");
  ExpectInvalid(MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", good_data),
                "non-negative");
  ExpectInvalid(MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, ", good_data),
                "header");
  ExpectInvalid(MakeNpy("not a dict", good_data), "not a dict");
  // Huge shapes must fail on the size check, not by trying to allocate.
  ExpectInvalid(MakeNpy("{'descr': '<f8', 'fortran_order': False, "
                        "'shape': (4611686018427387904, 4611686018427387904), }",
                        good_data),
                "size mismatch");
  ExpectInvalid(MakeNpy("{'descr': '<f8', 'fortran_order': False, "
                        "'shape': (99999999999999999999999,), }",
                        good_data),
                "overflow");
  // Empty by its last dimension, but its first two overflow int64 on the way (fuzz/corpus/npy/
  // crash_shape_product_overflow): refused before Tensor::Allocate counts the elements.
  ExpectInvalid(MakeNpy("{'descr': '<f4', 'fortran_order': False, "
                        "'shape': (1099511627776, 1099511627776, 0), }",
                        ""),
                "size mismatch");
}

TEST(NpyTest, FileRoundTripAndErrors) {
  auto dir = std::filesystem::temp_directory_path() / ("inferd_npy_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  Tensor t = Tensor::FromVector<int32_t>({1, -2, 3, -4}, {2, 2});
  ASSERT_TRUE(SaveNpy(t, dir / "x.npy").ok());
  auto back = LoadNpy(dir / "x.npy");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->shape(), (Shape{2, 2}));
  EXPECT_EQ(back->data<int32_t>()[3], -4);

  auto missing = LoadNpy(dir / "missing.npy");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);

  // A truncated file fails with the file name in the message.
  {
    std::ofstream out(dir / "trunc.npy", std::ios::binary);
    std::string bytes = *SerializeNpy(t);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 3));
  }
  auto trunc = LoadNpy(dir / "trunc.npy");
  ASSERT_FALSE(trunc.ok());
  EXPECT_EQ(trunc.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(trunc.status().message().find("trunc.npy"), std::string::npos);
  {
    std::ofstream out(dir / "short.npy", std::ios::binary);
    out.write("\x93NUMPY\x01\x00\xff\x00{", 11);
  }
  EXPECT_EQ(LoadNpy(dir / "short.npy").status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(SaveNpy(t, dir / "no_such_dir" / "x.npy").ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace inferd
