// Tests for the shape and data-movement kernels: hand-checked small cases, comparisons against
// plain reference implementations, and bad input (which must fail with a status, never crash).
#include <algorithm>
#include <numeric>

#include "session/test_util.h"

namespace inferd {
namespace {

using testing::AttrFloat;
using testing::AttrInt;
using testing::AttrInts;
using testing::AttrString;
using testing::AttrTensor;
using testing::ExpectTensorNear;
using testing::RandomFloat;
using testing::RunNode;

Tensor F(std::vector<float> v, Shape s) { return Tensor::FromVector<float>(v, std::move(s)); }
Tensor I64(std::vector<int64_t> v) { return Tensor::FromVector<int64_t>(v, {(int64_t)v.size()}); }
Tensor I64(std::vector<int64_t> v, Shape s) { return Tensor::FromVector<int64_t>(v, std::move(s)); }
Tensor Iota(Shape s) {
  Tensor t = Tensor::Allocate(DataType::kFloat32, std::move(s));
  for (int64_t i = 0; i < t.NumElements(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

Tensor Run1(const std::string& op, std::map<std::string, Attribute> attrs,
            const std::vector<Tensor>& inputs, int64_t opset = 17) {
  auto r = RunNode(op, std::move(attrs), inputs, 1, opset);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? (*r)[0] : Tensor();
}

void ExpectFails(const std::string& op, std::map<std::string, Attribute> attrs,
                 const std::vector<Tensor>& inputs, int64_t opset = 17, size_t outputs = 1) {
  auto r = RunNode(op, std::move(attrs), inputs, outputs, opset);
  EXPECT_FALSE(r.ok()) << op << " should have failed";
}

// Reference transpose: out[i] = in[permuted multi-index].
Tensor RefTranspose(const Tensor& in, const std::vector<int64_t>& perm) {
  Shape os(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) os[i] = in.dim(perm[i]);
  Tensor out = Tensor::Allocate(in.dtype(), os);
  std::vector<int64_t> is = StridesOf(in.shape());
  std::vector<int64_t> idx(os.size(), 0);
  for (int64_t e = 0; e < out.NumElements(); ++e) {
    int64_t rem = e, off = 0;
    for (int64_t d = (int64_t)os.size() - 1; d >= 0; --d) {
      idx[d] = rem % os[d];
      rem /= os[d];
      off += idx[d] * is[perm[d]];
    }
    out.data<float>()[e] = in.data<float>()[off];
  }
  return out;
}

TEST(TensorOps, ReshapeZeroAndInfer) {
  Tensor x = Iota({2, 3, 4});
  Tensor y = Run1("Reshape", {}, {x, I64({0, -1})});
  EXPECT_EQ(y.shape(), (Shape{2, 12}));
  y = Run1("Reshape", {{"allowzero", AttrInt(1)}}, {Iota({0, 3}), I64({3, 0})}, 14);
  EXPECT_EQ(y.shape(), (Shape{3, 0}));
  ExpectFails("Reshape", {}, {x, I64({5, -1})});
  ExpectFails("Reshape", {}, {x, I64({-1, -1})});
  ExpectFails("Reshape", {}, {x, I64({7})});
}

TEST(TensorOps, SqueezeUnsqueezeFlatten) {
  Tensor x = Iota({1, 3, 1, 2});
  EXPECT_EQ(Run1("Squeeze", {}, {x}).shape(), (Shape{3, 2}));
  EXPECT_EQ(Run1("Squeeze", {}, {x, I64({-2})}).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(Run1("Squeeze", {{"axes", AttrInts({0})}}, {x}, 11).shape(), (Shape{3, 1, 2}));
  ExpectFails("Squeeze", {}, {x, I64({1})});
  EXPECT_EQ(Run1("Unsqueeze", {}, {Iota({3, 2}), I64({0, -1})}).shape(), (Shape{1, 3, 2, 1}));
  EXPECT_EQ(Run1("Unsqueeze", {{"axes", AttrInts({1})}}, {Iota({3, 2})}, 12).shape(),
            (Shape{3, 1, 2}));
  ExpectFails("Unsqueeze", {}, {Iota({3}), I64({0, 0})});
  EXPECT_EQ(Run1("Flatten", {{"axis", AttrInt(2)}}, {Iota({2, 3, 4})}).shape(), (Shape{6, 4}));
  EXPECT_EQ(Run1("Flatten", {{"axis", AttrInt(0)}}, {Iota({2, 3})}).shape(), (Shape{1, 6}));
  ExpectFails("Flatten", {{"axis", AttrInt(4)}}, {Iota({2, 3})});
}

TEST(TensorOps, TransposeMatchesReference) {
  Tensor x = RandomFloat({3, 5, 17, 33});
  std::vector<int64_t> perm = {0, 1, 2, 3};
  do {
    Tensor y = Run1("Transpose", {{"perm", AttrInts(perm)}}, {x});
    ExpectTensorNear(y, RefTranspose(x, perm), 0, 0);
  } while (std::next_permutation(perm.begin(), perm.end()));
  Tensor big = RandomFloat({2, 64, 9, 70});  // NCHW -> NHWC and back, several tiles
  ExpectTensorNear(Run1("Transpose", {{"perm", AttrInts({0, 2, 3, 1})}}, {big}),
                   RefTranspose(big, {0, 2, 3, 1}), 0, 0);
  ExpectTensorNear(Run1("Transpose", {}, {big}), RefTranspose(big, {3, 2, 1, 0}), 0, 0);
  Tensor ones = RandomFloat({1, 4, 1, 6});
  ExpectTensorNear(Run1("Transpose", {{"perm", AttrInts({2, 3, 0, 1})}}, {ones}),
                   RefTranspose(ones, {2, 3, 0, 1}), 0, 0);
  ExpectFails("Transpose", {{"perm", AttrInts({0, 0, 1, 2})}}, {x});
  ExpectFails("Transpose", {{"perm", AttrInts({0, 1})}}, {x});
}

TEST(TensorOps, TransposeInt8) {
  Tensor x = Tensor::Allocate(DataType::kInt8, {3, 7});
  for (int i = 0; i < 21; ++i) x.data<int8_t>()[i] = static_cast<int8_t>(i);
  Tensor y = Run1("Transpose", {}, {x});
  ASSERT_EQ(y.shape(), (Shape{7, 3}));
  EXPECT_EQ(y.data<int8_t>()[1], 7);
  EXPECT_EQ(y.data<int8_t>()[3], 1);
}

TEST(TensorOps, ConcatAndSplit) {
  Tensor a = Iota({2, 2}), b = F({10, 11, 12, 13, 14, 15}, {2, 3});
  Tensor y = Run1("Concat", {{"axis", AttrInt(-1)}}, {a, b});
  ExpectTensorNear(y, F({0, 1, 10, 11, 12, 2, 3, 13, 14, 15}, {2, 5}));
  ExpectFails("Concat", {{"axis", AttrInt(0)}}, {a, b});

  auto parts = RunNode("Split", {{"axis", AttrInt(1)}}, {y, I64({2, 3})}, 2, 13);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  ExpectTensorNear((*parts)[0], a);
  ExpectTensorNear((*parts)[1], b);
  parts = RunNode("Split", {{"axis", AttrInt(1)}, {"split", AttrInts({2, 3})}}, {y}, 2, 11);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  ExpectTensorNear((*parts)[1], b);
  parts = RunNode("Split", {}, {Iota({6})}, 3);
  ASSERT_TRUE(parts.ok());
  ExpectTensorNear((*parts)[2], F({4, 5}, {2}));
  ExpectFails("Split", {}, {Iota({5})}, 17, 2);
  ExpectFails("Split", {}, {Iota({6}), I64({2, 3})}, 17, 2);
}

TEST(TensorOps, Slice) {
  Tensor x = Iota({3, 4});
  // Rows 1.., columns reversed with step -2.
  Tensor y =
      Run1("Slice", {}, {x, I64({1, -1}), I64({INT64_MAX, INT64_MIN}), I64({0, 1}), I64({1, -2})});
  ExpectTensorNear(y, F({7, 5, 11, 9}, {2, 2}));
  y = Run1("Slice", {{"starts", AttrInts({0})}, {"ends", AttrInts({2})}, {"axes", AttrInts({1})}},
           {x}, 9);
  ExpectTensorNear(y, F({0, 1, 4, 5, 8, 9}, {3, 2}));
  y = Run1("Slice", {}, {x, I64({5}), I64({10}), I64({0})});
  EXPECT_EQ(y.shape(), (Shape{0, 4}));
  ExpectFails("Slice", {}, {x, I64({0}), I64({1}), I64({0}), I64({0})});
  ExpectFails("Slice", {}, {x, I64({0}), I64({1}), I64({2})});
  y = Run1("Slice", {}, {x, I64({-1}), I64({INT64_MIN}), I64({1}), I64({INT64_MIN})});
  ExpectTensorNear(y, F({3, 7, 11}, {3, 1}));
}

TEST(TensorOps, PadModes) {
  Tensor x = F({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = Run1("Pad", {}, {x, I64({0, 1, 1, 0}), Tensor::Scalar<float>(9.f)});
  ExpectTensorNear(y, F({9, 1, 2, 3, 9, 4, 5, 6, 9, 9, 9, 9}, {3, 4}));
  y = Run1("Pad", {{"mode", AttrString("reflect")}}, {x, I64({0, 2, 0, 1})});
  ExpectTensorNear(y, F({3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5}, {2, 6}));
  y = Run1("Pad", {{"mode", AttrString("edge")}}, {x, I64({1, 0, 0, 1})});
  ExpectTensorNear(y, F({1, 2, 3, 3, 1, 2, 3, 3, 4, 5, 6, 6}, {3, 4}));
  y = Run1("Pad", {{"pads", AttrInts({0, -1, 0, 0})}, {"value", AttrFloat(0)}}, {x}, 10);
  ExpectTensorNear(y, F({2, 3, 5, 6}, {2, 2}));
  ExpectFails("Pad", {}, {x, I64({0, -4, 0, 0})});
  ExpectFails("Pad", {}, {x, I64({1, 1})});
}

TEST(TensorOps, ExpandTile) {
  Tensor x = F({1, 2, 3}, {3, 1});
  ExpectTensorNear(Run1("Expand", {}, {x, I64({2, 1, 2})}),
                   F({1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}, {2, 3, 2}));
  ExpectFails("Expand", {}, {x, I64({2, 2})});
  ExpectFails("Expand", {}, {x, I64({-1, 1})});
  ExpectTensorNear(Run1("Tile", {}, {F({1, 2, 3, 4}, {2, 2}), I64({1, 2})}),
                   F({1, 2, 1, 2, 3, 4, 3, 4}, {2, 4}));
  ExpectFails("Tile", {}, {x, I64({2})});
}

TEST(TensorOps, GatherFamily) {
  Tensor x = Iota({3, 4});
  Tensor idx = I64({2, -3}, {2});
  ExpectTensorNear(Run1("Gather", {}, {x, idx}), F({8, 9, 10, 11, 0, 1, 2, 3}, {2, 4}));
  ExpectTensorNear(Run1("Gather", {{"axis", AttrInt(1)}}, {x, Tensor::FromVector<int32_t>({3})}),
                   F({3, 7, 11}, {3}));
  ExpectFails("Gather", {}, {x, I64({3})});
  ExpectFails("Gather", {}, {x, I64({-4})});

  ExpectTensorNear(Run1("GatherElements", {{"axis", AttrInt(1)}}, {x, I64({0, 3, 1, 1}, {2, 2})}),
                   F({0, 3, 5, 5}, {2, 2}));
  ExpectFails("GatherElements", {}, {x, I64({5}, {1, 1})});

  ExpectTensorNear(Run1("GatherND", {}, {x, I64({1, 2, 2, 0}, {2, 2})}), F({6, 8}, {2}));
  ExpectTensorNear(Run1("GatherND", {}, {x, I64({2}, {1, 1})}), F({8, 9, 10, 11}, {1, 4}));
  Tensor b = Iota({2, 2, 2});
  ExpectTensorNear(Run1("GatherND", {{"batch_dims", AttrInt(1)}}, {b, I64({1, 0}, {2, 1})}),
                   F({2, 3, 4, 5}, {2, 2}));
  ExpectFails("GatherND", {}, {x, I64({3, 0}, {1, 2})});
}

TEST(TensorOps, ScatterFamily) {
  Tensor data = Tensor::Allocate(DataType::kFloat32, {3, 3});
  Tensor idx = I64({1, 0, 2, 0, 2, 1}, {2, 3});
  Tensor upd = F({1.0f, 1.1f, 1.2f, 2.0f, 2.1f, 2.2f}, {2, 3});
  ExpectTensorNear(Run1("ScatterElements", {}, {data, idx, upd}),
                   F({2.0f, 1.1f, 0, 1.0f, 0, 2.2f, 0, 2.1f, 1.2f}, {3, 3}));
  ExpectTensorNear(Run1("Scatter", {}, {data, idx, upd}, 9),
                   F({2.0f, 1.1f, 0, 1.0f, 0, 2.2f, 0, 2.1f, 1.2f}, {3, 3}));
  Tensor ones = F({1, 1, 1, 1, 1}, {1, 5});
  ExpectTensorNear(Run1("ScatterElements", {{"axis", AttrInt(1)}, {"reduction", AttrString("add")}},
                        {ones, I64({1, 1}, {1, 2}), F({1.1f, 2.1f}, {1, 2})}),
                   F({1, 4.2f, 1, 1, 1}, {1, 5}));
  ExpectFails("ScatterElements", {}, {data, I64({3}, {1, 1}), F({1}, {1, 1})});

  Tensor d = Iota({4});
  ExpectTensorNear(Run1("ScatterND", {}, {d, I64({1, 3}, {2, 1}), F({9, 10}, {2})}),
                   F({0, 9, 2, 10}, {4}));
  ExpectTensorNear(Run1("ScatterND", {{"reduction", AttrString("mul")}},
                        {d, I64({1, 1}, {2, 1}), F({2, 3}, {2})}),
                   F({0, 6, 2, 3}, {4}));
  ExpectFails("ScatterND", {}, {d, I64({4}, {1, 1}), F({1}, {1})});
}

TEST(TensorOps, ShapeSizeConstants) {
  Tensor x = Iota({2, 3, 4});
  Tensor s = Run1("Shape", {{"start", AttrInt(-2)}}, {x});
  EXPECT_EQ(s.ToInt64Vector().value(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(Run1("Size", {}, {x}).GetAsInt64(0), 24);
  Tensor c = Run1("ConstantOfShape", {{"value", AttrTensor(Tensor::FromVector<int32_t>({7}))}},
                  {I64({2, 2})});
  EXPECT_EQ(c.dtype(), DataType::kInt32);
  EXPECT_EQ(c.ToInt64Vector().value(), (std::vector<int64_t>{7, 7, 7, 7}));
  Tensor k = Run1("Constant", {{"value_ints", AttrInts({1, 2})}}, {});
  EXPECT_EQ(k.ToInt64Vector().value(), (std::vector<int64_t>{1, 2}));
  ExpectTensorNear(
      Run1("Range", {},
           {Tensor::Scalar<float>(1), Tensor::Scalar<float>(2), Tensor::Scalar<float>(0.3f)}),
      F({1, 1.3f, 1.6f, 1.9f}, {4}));
  ExpectFails("Range", {},
              {Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(5), Tensor::Scalar<int64_t>(0)});
  ExpectTensorNear(Run1("EyeLike", {{"k", AttrInt(1)}}, {Iota({2, 3})}),
                   F({0, 1, 0, 0, 0, 1}, {2, 3}));
}

TEST(TensorOps, DropoutIdentity) {
  Tensor x = Iota({2, 2});
  auto r = RunNode("Dropout", {}, {x}, 2, 13);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], x);
  EXPECT_EQ((*r)[1].dtype(), DataType::kBool);
  EXPECT_TRUE((*r)[1].data<bool>()[3]);
  ExpectTensorNear(Run1("Identity", {}, {x}), x);
}

TEST(TensorOps, DepthSpace) {
  Tensor x = Iota({1, 8, 2, 3});
  Tensor y = Run1("DepthToSpace", {{"blocksize", AttrInt(2)}}, {x});
  ASSERT_EQ(y.shape(), (Shape{1, 2, 4, 6}));
  // DCR: out[0, c, h*2+i, w*2+j] = in[0, (i*2+j)*2 + c, h, w].
  for (int c = 0; c < 2; ++c)
    for (int h = 0; h < 4; ++h)
      for (int w = 0; w < 6; ++w) {
        int src = (((h % 2) * 2 + (w % 2)) * 2 + c) * 6 + (h / 2) * 3 + w / 2;
        ASSERT_EQ(y.data<float>()[(c * 4 + h) * 6 + w], src);
      }
  Tensor crd = Run1("DepthToSpace", {{"blocksize", AttrInt(2)}, {"mode", AttrString("CRD")}}, {x});
  Tensor back = Run1("SpaceToDepth", {{"blocksize", AttrInt(2)}}, {y});
  ExpectTensorNear(back, x);
  EXPECT_EQ(crd.data<float>()[1], 6);  // out[0,0,0,1] = in[0, c*4 + 0*2 + 1, 0, 0]
  ExpectFails("SpaceToDepth", {{"blocksize", AttrInt(4)}}, {x});
}

TEST(TensorOps, TriluCumSumReverseSequence) {
  Tensor x = Iota({3, 3});
  ExpectTensorNear(Run1("Trilu", {}, {x}), F({0, 1, 2, 0, 4, 5, 0, 0, 8}, {3, 3}));
  ExpectTensorNear(Run1("Trilu", {{"upper", AttrInt(0)}}, {x, Tensor::Scalar<int64_t>(-1)}),
                   F({0, 0, 0, 3, 0, 0, 6, 7, 0}, {3, 3}));
  Tensor v = F({1, 2, 3, 4}, {4});
  ExpectTensorNear(Run1("CumSum", {}, {v, Tensor::Scalar<int32_t>(0)}), F({1, 3, 6, 10}, {4}));
  ExpectTensorNear(Run1("CumSum", {{"exclusive", AttrInt(1)}, {"reverse", AttrInt(1)}},
                        {v, Tensor::Scalar<int64_t>(0)}),
                   F({9, 7, 4, 0}, {4}));
  ExpectFails("CumSum", {}, {v, Tensor::Scalar<int64_t>(1)});
  // time_axis 0, batch_axis 1: [time=3, batch=2].
  ExpectTensorNear(Run1("ReverseSequence", {}, {Iota({3, 2}), I64({2, 3})}),
                   F({2, 5, 0, 3, 4, 1}, {3, 2}));
  ExpectFails("ReverseSequence", {}, {Iota({3, 2}), I64({4, 1})});
}

TEST(TensorOps, OneHotNonZeroCompress) {
  Tensor y = Run1("OneHot", {}, {I64({0, -1, 5}), Tensor::Scalar<int64_t>(3), F({0, 1}, {2})});
  ExpectTensorNear(y, F({1, 0, 0, 0, 0, 1, 0, 0, 0}, {3, 3}));
  Tensor nz = Run1("NonZero", {}, {F({0, 1, 2, 0}, {2, 2})});
  EXPECT_EQ(nz.shape(), (Shape{2, 2}));
  EXPECT_EQ(nz.ToInt64Vector().value(), (std::vector<int64_t>{0, 1, 1, 0}));
  Tensor cond = Tensor::FromVector<bool>({false, true, true});
  ExpectTensorNear(Run1("Compress", {{"axis", AttrInt(0)}}, {Iota({3, 2}), cond}),
                   F({2, 3, 4, 5}, {2, 2}));
  ExpectTensorNear(Run1("Compress", {}, {Iota({3, 2}), cond}), F({1, 2}, {2}));
}

TEST(TensorOps, Unique) {
  Tensor x = F({2, 1, 1, 3, 4, 3}, {6});
  auto r = RunNode("Unique", {}, {x}, 4);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], F({1, 2, 3, 4}, {4}));
  EXPECT_EQ((*r)[1].ToInt64Vector().value(), (std::vector<int64_t>{1, 0, 3, 4}));
  EXPECT_EQ((*r)[2].ToInt64Vector().value(), (std::vector<int64_t>{1, 0, 0, 2, 3, 2}));
  EXPECT_EQ((*r)[3].ToInt64Vector().value(), (std::vector<int64_t>{2, 1, 2, 1}));
  r = RunNode("Unique", {{"sorted", AttrInt(0)}}, {x}, 4);
  ASSERT_TRUE(r.ok());
  ExpectTensorNear((*r)[0], F({2, 1, 3, 4}, {4}));
  EXPECT_EQ((*r)[2].ToInt64Vector().value(), (std::vector<int64_t>{0, 1, 1, 2, 3, 2}));
  // Unique rows.
  Tensor m = F({1, 0, 0, 1, 0, 0, 2, 3, 4}, {3, 3});
  ExpectTensorNear(Run1("Unique", {{"axis", AttrInt(0)}}, {m}), F({1, 0, 0, 2, 3, 4}, {2, 3}));
}

TEST(TensorOps, ResizeNearestAndLinear) {
  Tensor x = F({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor none;
  Tensor scales = F({1, 1, 2, 2}, {4});
  Tensor y = Run1("Resize", {{"mode", AttrString("nearest")}}, {x, none, scales});
  ExpectTensorNear(y, F({1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}, {1, 1, 4, 4}));
  // half_pixel bilinear of a 2x2 upsampled to 4x4 (values from onnx's reference).
  y = Run1("Resize", {{"mode", AttrString("linear")}}, {x, none, scales});
  ExpectTensorNear(y, F({1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f, 3.5f, 3,
                         3.25f, 3.75f, 4},
                        {1, 1, 4, 4}));
  y = Run1("Resize",
           {{"mode", AttrString("linear")},
            {"coordinate_transformation_mode", AttrString("align_corners")}},
           {x, none, none, I64({1, 1, 3, 3})});
  ExpectTensorNear(y, F({1, 1.5f, 2, 2, 2.5f, 3, 3, 3.5f, 4}, {1, 1, 3, 3}));
  y = Run1("Upsample", {{"scales", testing::AttrFloats({1, 1, 2, 1})}}, {x}, 7);
  ExpectTensorNear(y, F({1, 2, 1, 2, 3, 4, 3, 4}, {1, 1, 4, 2}));
  ExpectFails("Resize", {}, {x, none, F({2}, {1})});
  ExpectFails("Resize", {}, {x, none, F({1, 1, 1e30f, 1}, {4})});
  ExpectFails("Resize", {}, {x, none, F({1, 1, -1, 1}, {4})});
  ExpectFails("Resize", {{"mode", AttrString("bogus")}}, {x, none, scales});
}

}  // namespace
}  // namespace inferd
