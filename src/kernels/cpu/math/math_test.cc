// TopK, Einsum, Det against hand-computed values or naive loops.
#include <gtest/gtest.h>

#include <map>

#include "session/test_util.h"

namespace inferd {
namespace {

using testing::AttrFloat;
using testing::AttrInt;
using testing::AttrString;
using testing::ExpectTensorNear;
using testing::RandomFloat;
using testing::RunNode;

TEST(TopKTest, TiesKeepLowerIndexFirst) {
  Tensor x = Tensor::FromVector<float>({3, 1, 3, 2, 3, 1}, {1, 6});
  auto r = RunNode("TopK", {}, {x, Tensor::FromVector<int64_t>({4})}, 2, 11);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], Tensor::FromVector<float>({3, 3, 3, 2}, {1, 4}));
  ExpectTensorNear((*r)[1], Tensor::FromVector<int64_t>({0, 2, 4, 3}, {1, 4}));
  // Smallest.
  r = RunNode("TopK", {{"largest", AttrInt(0)}}, {x, Tensor::FromVector<int64_t>({3})}, 2, 11);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], Tensor::FromVector<float>({1, 1, 2}, {1, 3}));
  ExpectTensorNear((*r)[1], Tensor::FromVector<int64_t>({1, 5, 3}, {1, 3}));
}

TEST(TopKTest, AxisAttributeFormAndIntegers) {
  Tensor x = Tensor::FromVector<int32_t>({5, 1, 7, 2, 9, 0}, {3, 2});
  // Opset 1: k attribute, along axis 0.
  auto r = RunNode("TopK", {{"k", AttrInt(2)}, {"axis", AttrInt(0)}}, {x}, 2, 9);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], Tensor::FromVector<int32_t>({9, 2, 7, 1}, {2, 2}));
  ExpectTensorNear((*r)[1], Tensor::FromVector<int64_t>({2, 1, 1, 0}, {2, 2}));
  // Random rows vs std::sort reference.
  Tensor y = RandomFloat({4, 50});
  r = RunNode("TopK", {}, {y, Tensor::FromVector<int64_t>({7})}, 2, 11);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (int64_t row = 0; row < 4; ++row) {
    std::vector<float> v(y.data<float>() + row * 50, y.data<float>() + row * 50 + 50);
    std::sort(v.begin(), v.end(), std::greater<>());
    for (int j = 0; j < 7; ++j) EXPECT_EQ((*r)[0].data<float>()[row * 7 + j], v[j]);
  }
}

TEST(TopKTest, BadKFails) {
  Tensor x = RandomFloat({2, 3});
  EXPECT_FALSE(RunNode("TopK", {}, {x, Tensor::FromVector<int64_t>({4})}, 2, 11).ok());
  EXPECT_FALSE(RunNode("TopK", {}, {x, Tensor::FromVector<int64_t>({-1})}, 2, 11).ok());
  EXPECT_FALSE(RunNode("TopK", {{"axis", AttrInt(2)}}, {x, Tensor::FromVector<int64_t>({1})}, 2, 11).ok());
  EXPECT_FALSE(RunNode("TopK", {}, {x, Tensor::FromVector<int64_t>({1, 2})}, 2, 11).ok());
}

// Naive einsum for explicit equations without ellipsis: enumerate every label assignment.
Tensor NaiveEinsum(const std::string& eq, const std::vector<Tensor>& in) {
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow), out = eq.substr(arrow + 2);
  std::vector<std::string> terms;
  size_t s = 0;
  for (size_t c; (c = lhs.find(',', s)) != std::string::npos; s = c + 1) terms.push_back(lhs.substr(s, c - s));
  terms.push_back(lhs.substr(s));
  std::map<char, int64_t> size;
  for (size_t i = 0; i < terms.size(); ++i)
    for (size_t d = 0; d < terms[i].size(); ++d) size[terms[i][d]] = in[i].dim(d);
  std::vector<char> labels;
  for (auto& [c, n] : size) labels.push_back(c);
  Shape oshape;
  for (char c : out) oshape.push_back(size[c]);
  Tensor res = Tensor::Allocate(DataType::kFloat32, oshape);
  std::map<char, int64_t> idx;
  for (char c : labels) idx[c] = 0;
  while (true) {
    double p = 1;
    for (size_t i = 0; i < terms.size(); ++i) {
      int64_t off = 0;
      for (size_t d = 0; d < terms[i].size(); ++d) off = off * in[i].dim(d) + idx[terms[i][d]];
      p *= in[i].data<float>()[off];
    }
    int64_t o = 0;
    for (char c : out) o = o * size[c] + idx[c];
    res.data<float>()[o] += static_cast<float>(p);
    size_t k = labels.size();
    while (k > 0 && ++idx[labels[k - 1]] == size[labels[k - 1]]) idx[labels[--k]] = 0;
    if (k == 0) break;
  }
  return res;
}

struct EinsumCase {
  std::string eq;
  std::vector<Shape> shapes;
};

TEST(EinsumTest, MatchesNaiveLoop) {
  std::vector<EinsumCase> cases = {
      {"ij,jk->ik", {{3, 4}, {4, 5}}},
      {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}},
      {"bhqd,bhkd->bhqk", {{2, 3, 4, 8}, {2, 3, 5, 8}}},
      {"bhqk,bhkd->bhqd", {{2, 2, 4, 5}, {2, 2, 5, 3}}},
      {"ij->ji", {{3, 4}}},
      {"ii->i", {{4, 4}}},
      {"ii->", {{4, 4}}},
      {"ij->", {{3, 4}}},
      {"i,j->ij", {{3}, {4}}},
      {"i,i->", {{5}, {5}}},
      {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}},
      {"bii->bi", {{2, 3, 3}}},
      {"ij,ij->ij", {{3, 4}, {3, 4}}},
      {"ijk,ikl->jl", {{2, 3, 4}, {2, 4, 5}}},
      {"abc,cd->dba", {{2, 3, 4}, {4, 5}}},
      {"ij,jk->ki", {{3, 4}, {4, 2}}},
      {"ik,jk->", {{3, 4}, {2, 4}}},
  };
  uint32_t seed = 1;
  for (const auto& c : cases) {
    std::vector<Tensor> in;
    for (const Shape& s : c.shapes) in.push_back(RandomFloat(s, -1, 1, seed++));
    auto r = RunNode("Einsum", {{"equation", AttrString(c.eq)}}, in, 1, 12);
    ASSERT_TRUE(r.ok()) << c.eq << ": " << r.status().ToString();
    SCOPED_TRACE(c.eq);
    ExpectTensorNear((*r)[0], NaiveEinsum(c.eq, in), 1e-4, 1e-5);
  }
}

TEST(EinsumTest, ImplicitOutputEllipsisAndBroadcast) {
  Tensor a = RandomFloat({2, 3, 4}, -1, 1, 1), b = RandomFloat({2, 4, 5}, -1, 1, 2);
  Tensor expected = NaiveEinsum("bij,bjk->bik", {a, b});
  auto r = RunNode("Einsum", {{"equation", AttrString("...ij,...jk->...ik")}}, {a, b}, 1, 12);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], expected, 1e-4, 1e-5);
  // Implicit output: "...ij,...jk" → "...ik" (labels alphabetical, ellipsis first).
  r = RunNode("Einsum", {{"equation", AttrString("...ij,...jk")}}, {a, b}, 1, 12);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], expected, 1e-4, 1e-5);
  // Implicit "ji" is a transpose of ij? No: implicit output sorts labels, so "ji" → "ij" = transpose.
  Tensor m = RandomFloat({3, 4}, -1, 1, 3);
  r = RunNode("Einsum", {{"equation", AttrString("ji")}}, {m}, 1, 12);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], NaiveEinsum("ji->ij", {m}));
  // Broadcast ellipsis dims: [1, 3, 4] x [2, 4, 5].
  Tensor a1 = RandomFloat({1, 3, 4}, -1, 1, 4);
  r = RunNode("Einsum", {{"equation", AttrString("...ij,...jk->...ik")}}, {a1, b}, 1, 12);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Tensor a_rep = Tensor::Allocate(DataType::kFloat32, {2, 3, 4});
  for (int64_t i = 0; i < 24; ++i) a_rep.data<float>()[i] = a1.data<float>()[i % 12];
  ExpectTensorNear((*r)[0], NaiveEinsum("bij,bjk->bik", {a_rep, b}), 1e-4, 1e-5);
  // Integer inputs take the loop path.
  Tensor ia = Tensor::FromVector<int32_t>({1, 2, 3, 4}, {2, 2});
  r = RunNode("Einsum", {{"equation", AttrString("ij,jk->ik")}}, {ia, ia}, 1, 12);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], Tensor::FromVector<int32_t>({7, 10, 15, 22}, {2, 2}));
}

TEST(EinsumTest, BadEquationsFail) {
  Tensor a = RandomFloat({2, 3}), b = RandomFloat({4, 5});
  EXPECT_FALSE(RunNode("Einsum", {{"equation", AttrString("ij,jk->ik")}}, {a, b}, 1, 12).ok());
  EXPECT_FALSE(RunNode("Einsum", {{"equation", AttrString("ijk->i")}}, {a}, 1, 12).ok());
  EXPECT_FALSE(RunNode("Einsum", {{"equation", AttrString("ij->iz")}}, {a}, 1, 12).ok());
  EXPECT_FALSE(RunNode("Einsum", {{"equation", AttrString("i1->i")}}, {a}, 1, 12).ok());
  EXPECT_FALSE(RunNode("Einsum", {{"equation", AttrString("ij,jk->ik")}}, {a}, 1, 12).ok());
  EXPECT_FALSE(RunNode("Einsum", {}, {a}, 1, 12).ok());
}

TEST(DetTest, SmallMatrices) {
  Tensor x = Tensor::FromVector<float>({1, 2, 3, 4, /**/ 0, 1, 1, 0, /**/ 2, 4, 1, 2}, {3, 2, 2});
  auto r = RunNode("Det", {}, {x}, 1, 11);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear((*r)[0], Tensor::FromVector<float>({-2, -1, 0}), 1e-5, 1e-5);
  Tensor y = Tensor::FromVector<float>({2, 0, 1, 1, 3, 2, 1, 1, 1}, {3, 3});
  r = RunNode("Det", {}, {y}, 1, 11);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // 2*(3-2) - 0 + 1*(1-3) = 0.
  ExpectTensorNear((*r)[0], Tensor::Scalar<float>(0.f), 1e-5, 1e-5);
  EXPECT_FALSE(RunNode("Det", {}, {RandomFloat({2, 3})}, 1, 11).ok());
}

}  // namespace
}  // namespace inferd
