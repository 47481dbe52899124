#include "common/tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace inferd {
namespace {

TEST(StatusTest, OkAndErrors) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = InvalidArgument("bad {} at {}", "shape", 3);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.ToString(), "INVALID_ARGUMENT: bad shape at 3");
  EXPECT_EQ(s.WithContext("node 'x'").message(), "node 'x': bad shape at 3");
}

StatusOr<int> Half(int v) {
  if (v % 2) return InvalidArgument("{} is odd", v);
  return v / 2;
}

Status UseHalf(int v, int* out) {
  ASSIGN_OR_RETURN(*out, Half(v));
  return Status::Ok();
}

TEST(StatusTest, StatusOrAndMacros) {
  int out = 0;
  EXPECT_TRUE(UseHalf(8, &out).ok());
  EXPECT_EQ(out, 4);
  Status s = UseHalf(3, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "3 is odd");
}

TEST(DataTypeTest, SizesAndNames) {
  EXPECT_EQ(SizeOf(DataType::kFloat32), 4u);
  EXPECT_EQ(SizeOf(DataType::kBFloat16), 2u);
  EXPECT_EQ(SizeOf(DataType::kBool), 1u);
  EXPECT_EQ(SizeOf(DataType::kInt64), 8u);
  EXPECT_STREQ(DataTypeName(DataType::kFloat16), "float16");
  DataType t;
  ASSERT_TRUE(ParseDataType("FLOAT", &t));
  EXPECT_EQ(t, DataType::kFloat32);
  ASSERT_TRUE(ParseDataType("uint16", &t));
  EXPECT_EQ(t, DataType::kUInt16);
  EXPECT_FALSE(ParseDataType("float128", &t));
  EXPECT_FALSE(IsSupportedDataType(DataType::kString));
}

TEST(Float16Test, RoundTripsAndRounds) {
  for (float v : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.333251953f}) {
    EXPECT_EQ(static_cast<float>(Float16(v)), v) << v;
  }
  EXPECT_TRUE(std::isinf(static_cast<float>(Float16(1e6f))));
  EXPECT_TRUE(std::isnan(static_cast<float>(Float16(std::numeric_limits<float>::quiet_NaN()))));
  // 1 + 2^-11 is halfway between 1 and the next half (1 + 2^-10): ties to even → 1.
  EXPECT_EQ(static_cast<float>(Float16(1.0f + 0.00048828125f)), 1.0f);
  EXPECT_EQ(Float16(1.0f).bits, 0x3c00);
  // Every finite half converts to float and back unchanged.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    if (((b >> 10) & 0x1f) == 0x1f) continue;
    Float16 h = Float16::FromBits(static_cast<uint16_t>(b));
    ASSERT_EQ(Float16(static_cast<float>(h)).bits, b);
  }
}

TEST(BFloat16Test, RoundsToNearestEven) {
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(static_cast<float>(BFloat16(3.140625f)), 3.140625f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7 → rounds to even (1).
  EXPECT_EQ(static_cast<float>(BFloat16(1.00390625f)), 1.0f);
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(TensorTest, AllocateViewReshapeClone) {
  Tensor t = Tensor::Allocate(DataType::kFloat32, {2, 3});
  EXPECT_EQ(t.NumElements(), 6);
  EXPECT_EQ(t.ByteSize(), 24u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % Tensor::kAlignment, 0u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t.data<float>()[i], 0.0f);
  t.data<float>()[4] = 7.0f;

  StatusOr<Tensor> r = t.Reshaped({3, 2});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->raw_data(), t.raw_data());  // shares the buffer
  EXPECT_FALSE(t.Reshaped({4, 2}).ok());

  Tensor c = t.Clone();
  EXPECT_NE(c.raw_data(), t.raw_data());
  EXPECT_EQ(c.data<float>()[4], 7.0f);

  float external[2] = {1, 2};
  Tensor v = Tensor::View(DataType::kFloat32, {2}, external);
  EXPECT_FALSE(v.owns_data());
  EXPECT_EQ(v.GetAsDouble(1), 2.0);
  EXPECT_EQ(t.DebugString(), "float32[2, 3]");
}

TEST(TensorTest, ScalarsAndIntVectors) {
  Tensor s = Tensor::Scalar<int64_t>(5);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.NumElements(), 1);
  Tensor v = Tensor::FromVector<int32_t>({3, -1, 4});
  auto ints = v.ToInt64Vector();
  ASSERT_TRUE(ints.ok());
  EXPECT_EQ(*ints, (std::vector<int64_t>{3, -1, 4}));
  EXPECT_FALSE(Tensor::FromVector<float>({1.f, 2.f}).ToInt64Vector().ok());
  EXPECT_EQ(StridesOf({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(NumElements({}), 1);
  EXPECT_EQ(NumElements({3, 0}), 0);
}

}  // namespace
}  // namespace inferd

namespace inferd {
namespace {

TEST(StringTensorTest, AllocateConstructsEmptyStrings) {
  Tensor t = Tensor::Allocate(DataType::kString, {2, 3});
  EXPECT_TRUE(t.is_string());
  EXPECT_EQ(t.NumElements(), 6);
  EXPECT_EQ(t.ByteSize(), 0u);  // strings stay out of byte-wise paths
  EXPECT_TRUE(t.owns_data());
  for (const std::string& s : t.values<std::string>()) EXPECT_TRUE(s.empty());
  EXPECT_EQ(t.DebugString(), "string[2, 3]");
}

TEST(StringTensorTest, CloneIsDeepAndKeepsNulsAndUtf8) {
  std::vector<std::string> v = {"", std::string("a\0b", 3), "h\xc3\xa9llo",
                                std::string(100, 'x')};
  StatusOr<Tensor> t = Tensor::FromStrings(v, {2, 2});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  Tensor c = t->Clone();
  t->data<std::string>()[3] = "changed";
  EXPECT_EQ(c.data<std::string>()[0], "");
  EXPECT_EQ(c.data<std::string>()[1].size(), 3u);
  EXPECT_EQ(c.data<std::string>()[2], "h\xc3\xa9llo");
  EXPECT_EQ(c.data<std::string>()[3], std::string(100, 'x'));
  EXPECT_EQ(c.StringBytes(), 0u + 3 + 6 + 100);
}

TEST(StringTensorTest, FromStringsChecksCountAndSharesOnCopy) {
  EXPECT_FALSE(Tensor::FromStrings({"a", "b"}, {3}).ok());
  StatusOr<Tensor> t = Tensor::FromStrings({"a", "b"}, {});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->shape(), Shape({2}));
  Tensor shared = *t;  // copies share the buffer, like numeric tensors
  shared.data<std::string>()[0] = "z";
  EXPECT_EQ(t->data<std::string>()[0], "z");
  StatusOr<Tensor> r = t->Reshaped({2, 1});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->data<std::string>()[1], "b");
  Tensor s = Tensor::Scalar<std::string>("one");
  EXPECT_EQ(s.dtype(), DataType::kString);
  EXPECT_EQ(*s.data<std::string>(), "one");
  EXPECT_FALSE(IsSupportedDataType(DataType::kString));
  EXPECT_EQ(SizeOf(DataType::kString), 0u);
}

}  // namespace
}  // namespace inferd
