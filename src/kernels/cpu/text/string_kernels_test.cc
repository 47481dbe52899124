// String tensors through the CPU kernels: the data-movement ops (util/string_index.h), Cast to and
// from string, Equal on strings and StringNormalizer, each against hand-checked results, plus bad
// input that must fail with a status.
#include <string>
#include <vector>

#include "session/test_util.h"

namespace inferd {
namespace string_kernels_test {
namespace {

using testing::AttrInt;
using testing::AttrInts;
using testing::AttrString;
using testing::RunNode;

Tensor S(std::vector<std::string> v, Shape shape) {
  StatusOr<Tensor> t = Tensor::FromStrings(std::move(v), std::move(shape));
  EXPECT_TRUE(t.ok());
  return *t;
}
Tensor I64(std::vector<int64_t> v) {
  return Tensor::FromVector<int64_t>(v, {static_cast<int64_t>(v.size())});
}

std::vector<std::string> Values(const Tensor& t) {
  EXPECT_EQ(t.dtype(), DataType::kString);
  if (!t.is_string()) return {};
  return {t.data<std::string>(), t.data<std::string>() + t.NumElements()};
}

using V = std::vector<std::string>;
const std::string kNul("n\0l", 3);

Tensor Run1(const std::string& op, std::map<std::string, Attribute> attrs,
            const std::vector<Tensor>& inputs, int64_t opset = 17) {
  auto r = RunNode(op, std::move(attrs), inputs, 1, opset);
  EXPECT_TRUE(r.ok()) << op << ": " << r.status().ToString();
  return r.ok() ? (*r)[0] : Tensor();
}

TEST(StringKernels, ViewsShareStrings) {
  Tensor x = S({"", kNul, "\xc3\xa9", "d", "e", "f"}, {2, 3});
  Tensor id = Run1("Identity", {}, {x});
  EXPECT_EQ(Values(id), Values(x));
  Tensor r = Run1("Reshape", {}, {x, I64({3, 2})});
  EXPECT_EQ(r.shape(), Shape({3, 2}));
  EXPECT_EQ(Values(r)[1], kNul);
  EXPECT_EQ(Run1("Flatten", {{"axis", AttrInt(0)}}, {x}).shape(), Shape({1, 6}));
  EXPECT_EQ(Run1("Unsqueeze", {}, {x, I64({0})}).shape(), Shape({1, 2, 3}));
}

TEST(StringKernels, DataMovementThroughIndices) {
  Tensor x = S({"a", "b", "c", "d", "e", "f"}, {2, 3});
  EXPECT_EQ(Values(Run1("Transpose", {}, {x})), V({"a", "d", "b", "e", "c", "f"}));
  EXPECT_EQ(Values(Run1("Gather", {{"axis", AttrInt(1)}}, {x, I64({2, 0})})),
            V({"c", "a", "f", "d"}));
  EXPECT_EQ(Values(Run1("Slice", {}, {x, I64({1}), I64({3}), I64({1})})),
            V({"b", "c", "e", "f"}));
  Tensor y = S({kNul, ""}, {2, 1});
  Tensor cat = Run1("Concat", {{"axis", AttrInt(1)}}, {x, y});
  EXPECT_EQ(cat.shape(), Shape({2, 4}));
  EXPECT_EQ(Values(cat), V({"a", "b", "c", kNul, "d", "e", "f", ""}));
  EXPECT_EQ(Values(Run1("Expand", {}, {S({"p", "q"}, {2}), I64({2, 2})})),
            V({"p", "q", "p", "q"}));
  EXPECT_EQ(Values(Run1("Tile", {}, {S({"p", "q"}, {2}), I64({2})})), V({"p", "q", "p", "q"}));
  auto split = RunNode("Split", {{"axis", AttrInt(1)}}, {x, I64({1, 2})}, 2, 13);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  EXPECT_EQ(Values((*split)[0]), V({"a", "d"}));
  EXPECT_EQ(Values((*split)[1]), V({"b", "c", "e", "f"}));
  Tensor cond = Tensor::FromVector<bool>({true, false}, {2});
  EXPECT_EQ(Values(Run1("Where", {}, {cond, S({"t1", "t2"}, {2}), S({"f1", "f2"}, {2})})),
            V({"t1", "f2"}));
}

TEST(StringKernels, CastNumbersToStringAndBack) {
  Tensor f = Tensor::FromVector<float>({0.039187793f, 1e-05f, -2.5f, 100.f}, {4});
  EXPECT_EQ(Values(Run1("Cast", {{"to", AttrInt(8)}}, {f})),
            V({"0.039187793", "1e-05", "-2.5", "100"}));
  Tensor special = Tensor::FromVector<float>(
      {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
       -std::numeric_limits<float>::infinity()}, {3});
  EXPECT_EQ(Values(Run1("Cast", {{"to", AttrInt(8)}}, {special})), V({"NaN", "INF", "-INF"}));
  Tensor i = Tensor::FromVector<int64_t>({-7, 0, 9007199254740993}, {3});
  EXPECT_EQ(Values(Run1("Cast", {{"to", AttrInt(8)}}, {i})), V({"-7", "0", "9007199254740993"}));
  EXPECT_EQ(Values(Run1("Cast", {{"to", AttrInt(8)}}, {Tensor::FromVector<bool>({true, false})})),
            V({"1", "0"}));

  Tensor text = S({" 3.5", "1E2", "-inf", "NaN", "+INF", "100.5"}, {6});
  Tensor back = Run1("Cast", {{"to", AttrInt(1)}}, {text});
  ASSERT_EQ(back.dtype(), DataType::kFloat32);
  EXPECT_EQ(back.data<float>()[0], 3.5f);
  EXPECT_EQ(back.data<float>()[1], 100.f);
  EXPECT_TRUE(std::isinf(back.data<float>()[2]) && back.data<float>()[2] < 0);
  EXPECT_TRUE(std::isnan(back.data<float>()[3]));
  EXPECT_TRUE(std::isinf(back.data<float>()[4]) && back.data<float>()[4] > 0);
  Tensor ints = Run1("Cast", {{"to", AttrInt(7)}}, {S({"9007199254740993", "100.5"}, {2})});
  EXPECT_EQ(ints.data<int64_t>()[0], 9007199254740993);  // exact, not through double
  EXPECT_EQ(ints.data<int64_t>()[1], 100);
  // String to string copies.
  EXPECT_EQ(Values(Run1("Cast", {{"to", AttrInt(8)}}, {S({kNul}, {1})})), V({kNul}));
  // Text that is no number is an error naming it.
  auto bad = RunNode("Cast", {{"to", AttrInt(1)}}, {S({"1", "abc"}, {2})}, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'abc') is not a number"), std::string::npos)
      << bad.status().ToString();
  EXPECT_FALSE(RunNode("Cast", {{"to", AttrInt(1)}}, {S({""}, {1})}, 1).ok());
  EXPECT_FALSE(RunNode("Cast", {{"to", AttrInt(1)}}, {S({kNul}, {1})}, 1).ok());
}

TEST(StringKernels, EqualBroadcasts) {
  Tensor a = S({"x", kNul, ""}, {3});
  Tensor b = S({kNul}, {1});
  Tensor eq = Run1("Equal", {}, {a, b});
  ASSERT_EQ(eq.dtype(), DataType::kBool);
  EXPECT_EQ(eq.shape(), Shape({3}));
  EXPECT_FALSE(eq.data<bool>()[0]);
  EXPECT_TRUE(eq.data<bool>()[1]);
  EXPECT_FALSE(eq.data<bool>()[2]);
  Tensor col = S({"x", ""}, {2, 1});
  Tensor eq2 = Run1("Equal", {}, {col, a});
  ASSERT_EQ(eq2.shape(), Shape({2, 3}));
  EXPECT_TRUE(eq2.data<bool>()[0]);
  EXPECT_TRUE(eq2.data<bool>()[5]);
  EXPECT_FALSE(RunNode("Equal", {}, {a, S({"a", "b"}, {2})}, 1).ok());  // shapes do not broadcast
}

TEST(StringKernels, StringNormalizer) {
  auto stop = [](std::vector<std::string> w) {
    Attribute a;
    a.type = Attribute::Type::kStrings;
    a.strings = std::move(w);
    return a;
  };
  Tensor x = S({"Monday", "tuesday", "MONDAY", "\xc3\x89t\xc3\xa9"}, {1, 4});
  Tensor up = Run1("StringNormalizer",
                   {{"case_change_action", AttrString("UPPER")}, {"stopwords", stop({"monday"})}},
                   {x}, 10);
  EXPECT_EQ(up.shape(), Shape({1, 2}));
  EXPECT_EQ(Values(up), V({"TUESDAY", "\xc3\x89T\xc3\xa9"}));  // non-ASCII bytes unchanged
  Tensor sensitive = Run1("StringNormalizer",
                          {{"is_case_sensitive", AttrInt(1)}, {"stopwords", stop({"monday"})}},
                          {S({"monday", "Monday"}, {2})}, 10);
  EXPECT_EQ(Values(sensitive), V({"Monday"}));
  Tensor empty = Run1("StringNormalizer", {{"stopwords", stop({"a"})}}, {S({"a", "A"}, {2})}, 10);
  EXPECT_EQ(empty.shape(), Shape({1}));
  EXPECT_EQ(Values(empty), V({""}));
  EXPECT_FALSE(RunNode("StringNormalizer", {{"case_change_action", AttrString("TITLE")}},
                       {S({"a"}, {1})}, 1, 10).ok());
  EXPECT_FALSE(RunNode("StringNormalizer", {}, {S({"a", "b", "c", "d"}, {2, 2})}, 1, 10).ok());
}

}  // namespace
}  // namespace string_kernels_test
}  // namespace inferd
