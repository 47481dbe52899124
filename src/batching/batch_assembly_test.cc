#include "batching/batch_assembly.h"

#include <gtest/gtest.h>

#include <numeric>

namespace inferd::batching {
namespace {

Tensor Iota(Shape shape, float start = 0) {
  Tensor t = Tensor::Allocate(DataType::kFloat32, shape);
  std::iota(t.data<float>(), t.data<float>() + t.NumElements(), start);
  return t;
}

// Reference: element at (b, i, j) of a rank-3 tensor, or `pad` when out of range.
float At(const Tensor& t, int64_t b, int64_t i, int64_t j, float pad) {
  if (i >= t.dim(1) || j >= t.dim(2)) return pad;
  return t.data<float>()[(b * t.dim(1) + i) * t.dim(2) + j];
}

TEST(BatchAssemblyTest, ConcatSameShape) {
  std::vector<Tensor> parts = {Iota({2, 3}), Iota({1, 3}, 100)};
  auto r = ConcatBatch(parts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->shape(), (Shape{3, 3}));
  std::vector<float> expect = {0, 1, 2, 3, 4, 5, 100, 101, 102};
  EXPECT_EQ(std::vector<float>(r->values<float>().begin(), r->values<float>().end()), expect);
}

TEST(BatchAssemblyTest, SinglePartIsShared) {
  std::vector<Tensor> parts = {Iota({2, 3})};
  auto r = ConcatBatch(parts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->raw_data(), parts[0].raw_data());
}

TEST(BatchAssemblyTest, RaggedPadsToMaxAndSplitUnpads) {
  std::vector<Tensor> parts = {Iota({2, 3, 2}), Iota({1, 5, 1}, 50), Iota({1, 1, 4}, 80)};
  ConcatOptions opts;
  opts.allow_ragged = true;
  opts.pad_value = -1;
  auto r = ConcatBatch(parts, opts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->shape(), (Shape{4, 5, 4}));
  int64_t row = 0;
  for (const Tensor& p : parts) {
    for (int64_t b = 0; b < p.dim(0); ++b, ++row) {
      for (int64_t i = 0; i < 5; ++i) {
        for (int64_t j = 0; j < 4; ++j) {
          EXPECT_EQ(At(*r, row, i, j, 0), At(p, b, i, j, -1)) << row << "," << i << "," << j;
        }
      }
    }
  }
  std::vector<int64_t> rows = {2, 1, 1};
  std::vector<Shape> shapes = {{2, 3, 2}, {1, 5, 1}, {1, 1, -1}};
  auto pieces = SplitBatch(*r, rows, shapes);
  ASSERT_TRUE(pieces.ok()) << pieces.status().ToString();
  for (size_t k = 0; k < 3; ++k) {
    ASSERT_EQ((*pieces)[k].shape(), parts[k].shape());
    for (int64_t e = 0; e < parts[k].NumElements(); ++e) {
      EXPECT_EQ((*pieces)[k].data<float>()[e], parts[k].data<float>()[e]);
    }
  }
}

TEST(BatchAssemblyTest, PadValueForOtherTypes) {
  std::vector<Tensor> parts = {Tensor::FromVector<int64_t>({1, 2}, {1, 2}),
                               Tensor::FromVector<int64_t>({3}, {1, 1})};
  auto r = ConcatBatch(parts, {.allow_ragged = true, .pad_value = 7});
  ASSERT_TRUE(r.ok());
  std::vector<int64_t> expect = {1, 2, 3, 7};
  EXPECT_EQ(std::vector<int64_t>(r->values<int64_t>().begin(), r->values<int64_t>().end()),
            expect);
  std::vector<Tensor> halves = {Tensor::Allocate(DataType::kFloat16, {1, 1}),
                                Tensor::Allocate(DataType::kFloat16, {1, 2})};
  auto h = ConcatBatch(halves, {.allow_ragged = true, .pad_value = 1.5});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(static_cast<float>(h->data<Float16>()[1]), 1.5f);
}

TEST(BatchAssemblyTest, SplitPlain) {
  Tensor t = Iota({5, 2});
  std::vector<int64_t> rows = {2, 3};
  auto pieces = SplitBatch(t, rows);
  ASSERT_TRUE(pieces.ok());
  EXPECT_EQ((*pieces)[0].shape(), (Shape{2, 2}));
  EXPECT_EQ((*pieces)[1].shape(), (Shape{3, 2}));
  EXPECT_EQ((*pieces)[1].data<float>()[0], 4.0f);
  EXPECT_NE((*pieces)[0].raw_data(), t.raw_data());  // copies
}

TEST(BatchAssemblyTest, ConcatThenSplitRank3RoundTrips) {
  // Whole-row copies (the unpadded fast path) against the element-wise reference.
  std::vector<Tensor> parts = {Iota({1, 8, 4}), Iota({3, 8, 4}, 1000), Iota({2, 8, 4}, 5000)};
  auto batch = ConcatBatch(parts);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  ASSERT_EQ(batch->shape(), (Shape{6, 8, 4}));
  int64_t row = 0;
  for (const Tensor& p : parts) {
    for (int64_t b = 0; b < p.dim(0); ++b, ++row) {
      for (int64_t i = 0; i < 8; ++i) {
        for (int64_t j = 0; j < 4; ++j) {
          ASSERT_EQ(At(*batch, row, i, j, -1), At(p, b, i, j, -1)) << row << " " << i << " " << j;
        }
      }
    }
  }
  std::vector<int64_t> rows = {1, 3, 2};
  auto pieces = SplitBatch(*batch, rows);
  ASSERT_TRUE(pieces.ok()) << pieces.status().ToString();
  for (size_t k = 0; k < parts.size(); ++k) {
    ASSERT_EQ((*pieces)[k].shape(), parts[k].shape());
    EXPECT_EQ(std::vector<float>((*pieces)[k].values<float>().begin(),
                                 (*pieces)[k].values<float>().end()),
              std::vector<float>(parts[k].values<float>().begin(), parts[k].values<float>().end()));
  }
}

TEST(BatchAssemblyTest, BadInputs) {
  std::vector<Tensor> none;
  EXPECT_FALSE(ConcatBatch(none).ok());
  std::vector<Tensor> scalar = {Tensor::Scalar<float>(1)};
  EXPECT_FALSE(ConcatBatch(scalar).ok());
  std::vector<Tensor> mixed = {Iota({1, 2}), Tensor::FromVector<int64_t>({1, 2}, {1, 2})};
  EXPECT_FALSE(ConcatBatch(mixed).ok());
  std::vector<Tensor> ranks = {Iota({1, 2}), Iota({1, 2, 1})};
  EXPECT_FALSE(ConcatBatch(ranks, {.allow_ragged = true}).ok());
  std::vector<Tensor> ragged = {Iota({1, 2}), Iota({1, 3})};
  EXPECT_EQ(ConcatBatch(ragged).status().code(), StatusCode::kInvalidArgument);

  Tensor t = Iota({4, 2});
  std::vector<int64_t> bad_rows = {1, 2};
  EXPECT_FALSE(SplitBatch(t, bad_rows).ok());
  std::vector<int64_t> neg = {5, -1};
  EXPECT_FALSE(SplitBatch(t, neg).ok());
  std::vector<int64_t> rows = {2, 2};
  std::vector<Shape> too_big = {{2, 3}, {2, 2}};
  EXPECT_FALSE(SplitBatch(t, rows, too_big).ok());
  std::vector<Shape> wrong_rank = {{2}, {2, 2}};
  EXPECT_FALSE(SplitBatch(t, rows, wrong_rank).ok());
  std::vector<Shape> one = {{2, 2}};
  EXPECT_FALSE(SplitBatch(t, rows, one).ok());
}

Tensor Strings(std::vector<std::string> v, Shape shape) {
  StatusOr<Tensor> t = Tensor::FromStrings(std::move(v), std::move(shape));
  EXPECT_TRUE(t.ok());
  return *t;
}

TEST(BatchAssemblyTest, StringsConcatAndSplit) {
  const std::string nul("a\0b", 3);
  Tensor a = Strings({"", nul}, {1, 2});
  Tensor b = Strings({"\xc3\xa9", "x", "yy", "zzz"}, {2, 2});
  Tensor parts[] = {a, b};
  StatusOr<Tensor> batch = ConcatBatch(parts);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  ASSERT_EQ(batch->shape(), Shape({3, 2}));
  const std::string* s = batch->data<std::string>();
  EXPECT_EQ(s[0], "");
  EXPECT_EQ(s[1], nul);
  EXPECT_EQ(s[2], "\xc3\xa9");
  EXPECT_EQ(s[5], "zzz");
  const int64_t rows[] = {1, 2};
  StatusOr<std::vector<Tensor>> pieces = SplitBatch(*batch, rows);
  ASSERT_TRUE(pieces.ok());
  EXPECT_EQ((*pieces)[0].data<std::string>()[1], nul);
  EXPECT_EQ((*pieces)[1].data<std::string>()[3], "zzz");
  // The pieces own copies: changing the batch leaves them alone.
  batch->data<std::string>()[5] = "changed";
  EXPECT_EQ((*pieces)[1].data<std::string>()[3], "zzz");
}

TEST(BatchAssemblyTest, RaggedStringsPadWithEmptyAndCrop) {
  Tensor a = Strings({"p", "q", "r"}, {1, 3});
  Tensor b = Strings({"s"}, {1, 1});
  Tensor parts[] = {a, b};
  StatusOr<Tensor> batch = ConcatBatch(parts, {.allow_ragged = true, .pad_value = 7});
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  ASSERT_EQ(batch->shape(), Shape({2, 3}));
  const std::string* s = batch->data<std::string>();
  EXPECT_EQ(s[3], "s");
  EXPECT_EQ(s[4], "");  // padding is the empty string
  EXPECT_EQ(s[5], "");
  const int64_t rows[] = {1, 1};
  const Shape shapes[] = {{1, 3}, {1, 1}};
  StatusOr<std::vector<Tensor>> pieces = SplitBatch(*batch, rows, shapes);
  ASSERT_TRUE(pieces.ok());
  ASSERT_EQ((*pieces)[1].shape(), Shape({1, 1}));
  EXPECT_EQ((*pieces)[1].data<std::string>()[0], "s");
  EXPECT_EQ((*pieces)[0].data<std::string>()[2], "r");
  // Mixed element types are refused.
  Tensor mixed[] = {a, Iota({1, 3})};
  EXPECT_FALSE(ConcatBatch(mixed).ok());
}

TEST(BatchAssemblyTest, ConcatOverPointersMatchesConcatOverTensors) {
  std::vector<Tensor> parts = {Iota({2, 3}), Iota({1, 3}, 100), Iota({3, 3}, 200)};
  std::vector<const Tensor*> ptrs = {&parts[0], &parts[1], &parts[2]};
  auto a = ConcatBatch(parts);
  auto b = ConcatBatch(std::span<const Tensor* const>(ptrs));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(b->shape(), (Shape{6, 3}));
  EXPECT_EQ(std::vector<float>(a->values<float>().begin(), a->values<float>().end()),
            std::vector<float>(b->values<float>().begin(), b->values<float>().end()));
  // A wrong rank among the pointers is still an error naming the shapes.
  Tensor bad = Iota({1, 3, 1});
  ptrs.push_back(&bad);
  auto c = ConcatBatch(std::span<const Tensor* const>(ptrs));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("different rank"), std::string::npos);
}

TEST(BatchAssemblyTest, SplitSharedViewsTheBatchAndKeepsItAlive) {
  std::vector<Tensor> pieces;
  const void* base = nullptr;
  {
    Tensor batched = Iota({5, 2});
    base = batched.raw_data();
    auto r = SplitBatchShared(batched, std::vector<int64_t>{2, 0, 3});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    pieces = std::move(r).value();
  }  // the batch's own handle is gone; the pieces keep its buffer
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(pieces[1].shape(), (Shape{0, 2}));
  EXPECT_EQ(pieces[2].shape(), (Shape{3, 2}));
  EXPECT_EQ(pieces[0].raw_data(), base);
  EXPECT_EQ(pieces[2].raw_data(), static_cast<const float*>(base) + 4);
  EXPECT_TRUE(pieces[2].owns_data());
  EXPECT_EQ(std::vector<float>(pieces[2].values<float>().begin(), pieces[2].values<float>().end()),
            (std::vector<float>{4, 5, 6, 7, 8, 9}));
  // Same values as the copying split.
  Tensor again = Iota({5, 2});
  auto copies = SplitBatch(again, std::vector<int64_t>{2, 0, 3});
  ASSERT_TRUE(copies.ok());
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(std::vector<float>(pieces[i].values<float>().begin(), pieces[i].values<float>().end()),
              std::vector<float>((*copies)[i].values<float>().begin(),
                                 (*copies)[i].values<float>().end()));
  }
}

TEST(BatchAssemblyTest, SplitSharedRejectsBadInput) {
  Tensor batched = Iota({4, 2});
  EXPECT_EQ(SplitBatchShared(batched, std::vector<int64_t>{1, 2}).status().code(),
            StatusCode::kInvalidArgument);  // rows sum to 3
  EXPECT_EQ(SplitBatchShared(batched, std::vector<int64_t>{5, -1}).status().code(),
            StatusCode::kInvalidArgument);
  Tensor view = Tensor::View(DataType::kFloat32, {4, 2}, batched.raw_data());
  auto r = SplitBatchShared(view, std::vector<int64_t>{2, 2});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("does not own"), std::string::npos);
  EXPECT_FALSE(SplitBatchShared(Tensor::Scalar(1.0f), std::vector<int64_t>{1}).ok());
}

}  // namespace
}  // namespace inferd::batching
