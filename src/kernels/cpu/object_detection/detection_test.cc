// NonMaxSuppression, RoiAlign against hand-computed values.
#include <gtest/gtest.h>

#include "session/test_util.h"

namespace inferd {
namespace {

using testing::AttrInt;
using testing::AttrString;
using testing::ExpectTensorNear;
using testing::RandomFloat;
using testing::RunNode;

TEST(NonMaxSuppressionTest, SuppressesByIouPerClass) {
  // Boxes as [y1, x1, y2, x2]; 0 and 1 overlap heavily, 2 is separate, 3 flipped copy of 2.
  Tensor boxes = Tensor::FromVector<float>(
      {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 10, 1, 11, 1, 11, 0, 10}, {1, 4, 4});
  Tensor scores = Tensor::FromVector<float>({0.9f, 0.95f, 0.5f, 0.4f, /**/ 0.1f, 0.2f, 0.3f, 0.05f},
                                            {1, 2, 4});
  auto r = RunNode("NonMaxSuppression", {},
                   {boxes, scores, Tensor::FromVector<int64_t>({3}), Tensor::FromVector<float>({0.5f}),
                    Tensor::FromVector<float>({0.15f})},
                   1, 11);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // Class 0: 1 (0.95) suppresses 0; 2 kept; 3 identical to 2 → suppressed.
  // Class 1: scores > 0.15 are boxes 2 (0.3) and 1 (0.2).
  ExpectTensorNear((*r)[0], Tensor::FromVector<int64_t>({0, 0, 1, 0, 0, 2, 0, 1, 2, 0, 1, 1}, {4, 3}));
  // max_output_boxes_per_class = 1, no thresholds.
  r = RunNode("NonMaxSuppression", {}, {boxes, scores, Tensor::FromVector<int64_t>({1})}, 1, 11);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], Tensor::FromVector<int64_t>({0, 0, 1, 0, 1, 2}, {2, 3}));
  EXPECT_FALSE(RunNode("NonMaxSuppression", {}, {boxes, RandomFloat({1, 2, 3})}, 1, 11).ok());
}

TEST(RoiAlignTest, AverageOfConstantAndRampImages) {
  // X[0,0] = x coordinate (a ramp), so the average over any roi is its x-center (half_pixel off).
  Tensor x = Tensor::Allocate(DataType::kFloat32, {1, 1, 8, 8});
  for (int64_t i = 0; i < 64; ++i) x.data<float>()[i] = static_cast<float>(i % 8);
  Tensor rois = Tensor::FromVector<float>({1, 1, 5, 5}, {1, 4});
  Tensor bidx = Tensor::FromVector<int64_t>({0}, {1});
  auto r = RunNode("RoiAlign",
                   {{"output_height", AttrInt(2)}, {"output_width", AttrInt(2)},
                    {"sampling_ratio", AttrInt(2)},
                    {"coordinate_transformation_mode", AttrString("output_half_pixel")}},
                   {x, rois, bidx}, 1, 16);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // Bins cover x in [1,3] and [3,5]; samples at 1.5, 2.5 and 3.5, 4.5 → means 2 and 4.
  ExpectTensorNear((*r)[0], Tensor::FromVector<float>({2, 4, 2, 4}, {1, 1, 2, 2}));
  // Bad batch index.
  EXPECT_FALSE(RunNode("RoiAlign", {}, {x, rois, Tensor::FromVector<int64_t>({3}, {1})}, 1, 16).ok());
  EXPECT_FALSE(RunNode("RoiAlign", {{"mode", AttrString("median")}}, {x, rois, bidx}, 1, 16).ok());
}

}  // namespace
}  // namespace inferd
