// Reductions against a plain reference: group every input element by its output position, then
// apply the op to each group's values.
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "session/test_util.h"

namespace inferd {
namespace {

using testing::AttrInt;
using testing::AttrInts;
using testing::ExpectTensorNear;
using testing::RunNode;

using GroupFn = std::function<double(const std::vector<double>&)>;

void Set(Tensor& t, int64_t i, double v) {
  DispatchAll(
      t.dtype(),
      [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
          t.data<T>()[i] = T(static_cast<float>(v));
        } else {
          t.data<T>()[i] = static_cast<T>(v);
        }
      },
      [] {});
}

Tensor Random(DataType dt, Shape shape, double lo, double hi, uint32_t seed = 7) {
  Tensor t = Tensor::Allocate(dt, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    double v = dist(rng);
    if (IsInteger(dt)) v = IsSigned(dt) ? std::round(v) : std::fabs(std::round(v));
    Set(t, i, v);
  }
  return t;
}

// Reference: axes empty = all; out_type defaults to the input's.
Tensor RefReduce(const Tensor& x, std::vector<int64_t> axes, bool keepdims, const GroupFn& f,
                 DataType out_type = DataType::kUndefined) {
  const int64_t rank = x.rank();
  std::vector<bool> red(rank, axes.empty());
  for (int64_t a : axes) red[a < 0 ? a + rank : a] = true;
  Shape out_shape, kept;
  for (int64_t d = 0; d < rank; ++d) {
    if (!red[d]) kept.push_back(x.dim(d));
    if (!red[d] || keepdims) out_shape.push_back(red[d] ? 1 : x.dim(d));
  }
  std::vector<std::vector<double>> groups(static_cast<size_t>(NumElements(kept)));
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    int64_t rem = i, o = 0, scale = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t c = rem % x.dim(d);
      rem /= x.dim(d);
      if (!red[d]) {
        o += c * scale;
        scale *= x.dim(d);
      }
    }
    groups[o].push_back(x.GetAsDouble(i));
  }
  Tensor out = Tensor::Allocate(out_type == DataType::kUndefined ? x.dtype() : out_type, out_shape);
  for (size_t o = 0; o < groups.size(); ++o) Set(out, o, f(groups[o]));
  return out;
}

double Sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

struct ReduceCase {
  const char* op;
  GroupFn ref;
  std::vector<DataType> dtypes;
  double lo, hi;
};

struct AxesCase {
  Shape shape;
  std::vector<int64_t> axes;
};

TEST(Reduce, MatchesReference) {
  const DataType f32 = DataType::kFloat32, f64 = DataType::kFloat64, f16 = DataType::kFloat16,
                 i32 = DataType::kInt32, i64 = DataType::kInt64, u8 = DataType::kUInt8;
  const std::vector<ReduceCase> cases = {
      {"ReduceSum", Sum, {f32, f64, f16, i32, i64}, -5, 5},
      {"ReduceMean", [](const auto& v) { return Sum(v) / v.size(); }, {f32, f64, f16}, -5, 5},
      {"ReduceMax",
       [](const auto& v) { return *std::max_element(v.begin(), v.end()); },
       {f32, i64, u8},
       -9,
       9},
      {"ReduceMin",
       [](const auto& v) { return *std::min_element(v.begin(), v.end()); },
       {f32, i32, f16},
       -9,
       9},
      {"ReduceProd",
       [](const auto& v) { return std::accumulate(v.begin(), v.end(), 1.0, std::multiplies<>()); },
       {f32, f64},
       0.9,
       1.1},
      {"ReduceL1",
       [](const auto& v) {
         double s = 0;
         for (double x : v) s += std::fabs(x);
         return s;
       },
       {f32, i32},
       -5,
       5},
      {"ReduceL2",
       [](const auto& v) {
         double s = 0;
         for (double x : v) s += x * x;
         return std::sqrt(s);
       },
       {f32, f64},
       -5,
       5},
      {"ReduceSumSquare",
       [](const auto& v) {
         double s = 0;
         for (double x : v) s += x * x;
         return s;
       },
       {f32, i64},
       -5,
       5},
      {"ReduceLogSum", [](const auto& v) { return std::log(Sum(v)); }, {f32, f64}, 0.1, 5},
      {"ReduceLogSumExp",
       [](const auto& v) {
         double s = 0;
         for (double x : v) s += std::exp(x);
         return std::log(s);
       },
       {f32, f64},
       -5,
       5},
  };
  const std::vector<AxesCase> layouts = {
      {{2, 3, 4}, {1}},        // middle
      {{2, 3, 4}, {-1}},       // inner, negative axis
      {{2, 3, 4}, {0}},        // leading
      {{2, 3, 4}, {0, 2}},     // general (two reduced groups)
      {{2, 3, 4, 5}, {1, 3}},  // general
      {{2, 3, 4}, {1, 2}},     // merged inner groups
      {{2, 3, 4}, {}},         // all
      {{2, 1, 4}, {1}},        // size-1 axis only
      {{}, {}},                // scalar
      {{300, 130}, {0}},       // middle, parallel
      {{130, 300}, {1}},       // inner, parallel
      {{70000}, {0}},          // one long row split across threads
      {{4, 20, 600}, {1}},     // middle with several column blocks
  };
  for (const ReduceCase& c : cases) {
    for (DataType dt : c.dtypes) {
      for (const AxesCase& l : layouts) {
        for (int keep : {0, 1}) {
          SCOPED_TRACE(fmt::format("{} {} {} axes=[{}] keepdims={}", c.op, DataTypeName(dt),
                                   ShapeToString(l.shape), fmt::join(l.axes, ","), keep));
          Tensor x = Random(dt, l.shape, c.lo, c.hi);
          std::map<std::string, Attribute> attrs = {{"keepdims", AttrInt(keep)}};
          if (!l.axes.empty()) attrs["axes"] = AttrInts(l.axes);
          // ReduceSum takes axes as an input from opset 13; use opset 12 for the attribute form.
          auto out = RunNode(c.op, attrs, {x}, 1, 12);
          ASSERT_TRUE(out.ok()) << out.status().ToString();
          Tensor expect = RefReduce(x, l.axes, keep, c.ref);
          double tol = dt == f16 ? 5e-3 : (l.shape.size() == 1 && l.shape[0] > 1000) ? 1e-4 : 1e-5;
          ExpectTensorNear((*out)[0], expect, tol, tol);
        }
      }
    }
  }
}

TEST(Reduce, AxesAsInputAndNoop) {
  Tensor x = Random(DataType::kFloat32, {2, 3, 4}, -1, 1);
  auto out = RunNode("ReduceSum", {{"keepdims", AttrInt(0)}},
                     {x, Tensor::FromVector<int64_t>({0, -1})}, 1, 13);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectTensorNear((*out)[0], RefReduce(x, {0, -1}, false, Sum));
  // Omitted axes: reduce all, unless noop_with_empty_axes.
  auto all = RunNode("ReduceSum", {}, {x}, 1, 13);
  ASSERT_TRUE(all.ok());
  ExpectTensorNear((*all)[0], RefReduce(x, {}, true, Sum));
  auto noop = RunNode("ReduceSum", {{"noop_with_empty_axes", AttrInt(1)}},
                      {x, Tensor::Allocate(DataType::kInt64, {0})}, 1, 13);
  ASSERT_TRUE(noop.ok());
  ExpectTensorNear((*noop)[0], x);
  // Opset 18 moved axes to an input for the other reductions.
  auto mx = RunNode("ReduceMax", {}, {x, Tensor::FromVector<int64_t>({1})}, 1, 18);
  ASSERT_TRUE(mx.ok()) << mx.status().ToString();
  ExpectTensorNear((*mx)[0], RefReduce(x, {1}, true, [](const auto& v) {
                     return *std::max_element(v.begin(), v.end());
                   }));
}

TEST(Reduce, EdgeValues) {
  // LogSumExp is stable for large inputs.
  auto lse = RunNode("ReduceLogSumExp", {{"keepdims", AttrInt(0)}},
                     {Tensor::FromVector<float>({1000.f, 1000.f})}, 1);
  ASSERT_TRUE(lse.ok());
  EXPECT_NEAR((*lse)[0].GetAsDouble(0), 1000.0 + std::log(2.0), 1e-3);
  // Max propagates NaN.
  float nan = std::numeric_limits<float>::quiet_NaN();
  auto mx = RunNode("ReduceMax", {}, {Tensor::FromVector<float>({1.f, nan, 3.f})}, 1);
  ASSERT_TRUE(mx.ok());
  EXPECT_TRUE(std::isnan((*mx)[0].GetAsDouble(0)));
  // Empty reduced axis: the identity of the op.
  Tensor empty = Tensor::Allocate(DataType::kFloat32, {2, 0});
  auto s =
      RunNode("ReduceSum", {{"axes", AttrInts({1})}, {"keepdims", AttrInt(0)}}, {empty}, 1, 12);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ExpectTensorNear((*s)[0], Tensor::FromVector<float>({0.f, 0.f}));
  // Integer mean truncates like numpy's mean followed by astype.
  auto m = RunNode("ReduceMean", {}, {Tensor::FromVector<int32_t>({1, 2, 4})}, 1);
  ASSERT_TRUE(m.ok());
  ExpectTensorNear((*m)[0], Tensor::FromVector<int32_t>({2}, {1}));
}

TEST(Reduce, BadAxes) {
  Tensor x = Random(DataType::kFloat32, {2, 3}, -1, 1);
  EXPECT_FALSE(RunNode("ReduceSum", {{"axes", AttrInts({2})}}, {x}, 1, 12).ok());
  EXPECT_FALSE(RunNode("ReduceMean", {{"axes", AttrInts({-3})}}, {x}, 1).ok());
  EXPECT_FALSE(RunNode("ReduceSum", {}, {x, Tensor::FromVector<int64_t>({5})}, 1, 13).ok());
  EXPECT_FALSE(RunNode("ReduceSum", {}, {x, Tensor::FromVector<float>({0.f})}, 1, 13).ok());
  EXPECT_FALSE(RunNode("ArgMax", {{"axis", AttrInt(2)}}, {x}, 1).ok());
  EXPECT_FALSE(RunNode("ArgMin", {}, {Tensor::Allocate(DataType::kFloat32, {0, 3})}, 1).ok());
}

// ---- ArgMax / ArgMin -------------------------------------------------------------------------

Tensor RefArg(const Tensor& x, int64_t axis, bool keepdims, bool is_max, bool last) {
  if (axis < 0) axis += x.rank();
  // Reuse RefReduce: group values along `axis` keep their order, so pick the index in the group.
  return RefReduce(
      x, {axis}, keepdims,
      [&](const std::vector<double>& v) {
        size_t best = 0;
        for (size_t i = 1; i < v.size(); ++i) {
          bool better = is_max ? v[i] > v[best] : v[i] < v[best];
          if (better || (last && v[i] == v[best])) best = i;
        }
        return static_cast<double>(best);
      },
      DataType::kInt64);
}

TEST(Reduce, ArgMaxArgMin) {
  for (DataType dt : {DataType::kFloat32, DataType::kInt32, DataType::kFloat16}) {
    // Small integer values make ties common, exercising select_last_index.
    Tensor x = Random(dt, {3, 4, 5}, 0, 3);
    if (!IsInteger(dt)) {
      for (int64_t i = 0; i < x.NumElements(); ++i) Set(x, i, std::round(x.GetAsDouble(i)));
    }
    for (const char* op : {"ArgMax", "ArgMin"}) {
      for (int64_t axis : {0, 1, 2, -1}) {
        for (int keep : {0, 1}) {
          for (int last : {0, 1}) {
            SCOPED_TRACE(fmt::format("{} {} axis={} keepdims={} last={}", op, DataTypeName(dt),
                                     axis, keep, last));
            auto out = RunNode(op,
                               {{"axis", AttrInt(axis)},
                                {"keepdims", AttrInt(keep)},
                                {"select_last_index", AttrInt(last)}},
                               {x}, 1);
            ASSERT_TRUE(out.ok()) << out.status().ToString();
            ExpectTensorNear((*out)[0], RefArg(x, axis, keep, std::string(op) == "ArgMax", last));
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace inferd
