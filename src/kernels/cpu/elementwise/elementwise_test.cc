// Element-wise kernels against plain reference implementations written here (double math,
// numpy broadcasting by multi-index), plus hand-computed edge cases and bad-input checks.
#include <cmath>
#include <functional>
#include <limits>

#include "session/test_util.h"

namespace inferd {
namespace {

using testing::AttrFloat;
using testing::AttrInt;
using testing::AttrString;
using testing::ExpectTensorNear;
using testing::RunNode;

using Fn1 = std::function<double(double)>;
using Fn2 = std::function<double(double, double)>;

void SetFromDouble(Tensor& t, int64_t i, double v) {
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

// Random values in [lo, hi]; integers for integer types; representable for half types.
Tensor MakeTensor(DataType dtype, Shape shape, double lo, double hi, uint32_t seed = 1) {
  Tensor t = Tensor::Allocate(dtype, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    double v = dist(rng);
    if (IsInteger(dtype) || dtype == DataType::kBool) v = std::round(v);
    if (IsInteger(dtype) && !IsSigned(dtype)) v = std::fabs(v);
    SetFromDouble(t, i, v);
  }
  return t;
}

template <typename T>
Tensor Vec(std::vector<T> v, Shape shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(v.size())};
  return Tensor::FromVector(v, shape);
}

Shape RefBroadcast(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const Shape& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - s.size() + i];
      if (s[i] != 1) o = s[i];
    }
  }
  return out;
}

// Flat index into `in` for the output multi-index of flat position `o` in `out`.
int64_t RefIndex(const Shape& in, const Shape& out, int64_t o) {
  int64_t idx = 0, stride = 1;
  for (int64_t d = static_cast<int64_t>(out.size()) - 1; d >= 0; --d) {
    int64_t coord = o % out[d];
    o /= out[d];
    int64_t id = d - static_cast<int64_t>(out.size() - in.size());
    if (id < 0) continue;
    if (in[id] != 1) idx += coord * stride;
    stride *= in[id];
  }
  return idx;
}

Tensor RefNary(const std::vector<Tensor>& ins, DataType out_type,
               const std::function<double(const std::vector<double>&)>& f) {
  std::vector<Shape> shapes;
  for (const Tensor& t : ins) shapes.push_back(t.shape());
  Shape out_shape = RefBroadcast(shapes);
  Tensor out = Tensor::Allocate(out_type, out_shape);
  std::vector<double> args(ins.size());
  for (int64_t o = 0; o < out.NumElements(); ++o) {
    for (size_t k = 0; k < ins.size(); ++k) {
      args[k] = ins[k].GetAsDouble(RefIndex(ins[k].shape(), out_shape, o));
    }
    SetFromDouble(out, o, f(args));
  }
  return out;
}

double Tol(DataType t) {
  return t == DataType::kFloat16 ? 2e-3 : t == DataType::kBFloat16 ? 1e-2 : 1e-5;
}

// ---- binary ops: every op × every broadcast pattern × its dtypes -----------------------------

struct BinaryCase {
  const char* op;
  Fn2 ref;
  std::vector<DataType> dtypes;
  double lo, hi;  // input range
  bool bool_out = false;
};

const std::vector<std::pair<Shape, Shape>>& BroadcastPatterns() {
  static const std::vector<std::pair<Shape, Shape>> p = {
      {{2, 3}, {2, 3}},           // same shape
      {{2, 3}, {}},               // scalar right
      {{}, {3, 4}},               // scalar left
      {{2, 3, 4}, {4}},           // row, rank mismatch
      {{3, 4}, {3, 1}},           // column
      {{3, 1}, {1, 4}},           // both sides
      {{2, 3, 4, 5}, {3, 1, 1}},  // channel
      {{1, 4}, {2, 3, 4}},        // left broadcast, rank mismatch
      {{0, 3}, {3}},              // empty
      {{64, 1000}, {1000}},       // large: parallel row split
      {{70000}, {70000}},         // large same-shape
  };
  return p;
}

const DataType kF32 = DataType::kFloat32, kF64 = DataType::kFloat64, kF16 = DataType::kFloat16,
               kBF16 = DataType::kBFloat16, kI8 = DataType::kInt8, kI32 = DataType::kInt32,
               kI64 = DataType::kInt64, kU8 = DataType::kUInt8, kU64 = DataType::kUInt64,
               kBool = DataType::kBool;

double PyMod(double a, double b) {
  double r = std::fmod(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

TEST(ElementwiseBinary, MatchesReference) {
  const std::vector<BinaryCase> cases = {
      {"Add",
       [](double a, double b) { return a + b; },
       {kF32, kF64, kF16, kBF16, kI8, kI32, kI64, kU8},
       -50,
       50},
      {"Sub", [](double a, double b) { return a - b; }, {kF32, kF64, kI32, kI64}, -50, 50},
      {"Mul", [](double a, double b) { return a * b; }, {kF32, kF16, kI32, kU64}, 0, 10},
      {"Div", [](double a, double b) { return a / b; }, {kF32, kF64}, 1, 10},
      {"Div", [](double a, double b) { return std::trunc(a / b); }, {kI32, kI64, kU8}, 1, 100},
      {"Equal", [](double a, double b) { return a == b; }, {kI32, kBool, kF32}, 0, 2, true},
      {"Less", [](double a, double b) { return a < b; }, {kF32, kI64, kU8}, 0, 3, true},
      {"LessOrEqual", [](double a, double b) { return a <= b; }, {kF32, kI64}, 0, 3, true},
      {"Greater", [](double a, double b) { return a > b; }, {kF32, kF16, kI8}, 0, 3, true},
      {"GreaterOrEqual", [](double a, double b) { return a >= b; }, {kF64, kI32}, 0, 3, true},
      {"And", [](double a, double b) { return a && b; }, {kBool}, 0, 1, true},
      {"Or", [](double a, double b) { return a || b; }, {kBool}, 0, 1, true},
      {"Xor", [](double a, double b) { return (a != 0) != (b != 0); }, {kBool}, 0, 1, true},
      {"Pow", [](double a, double b) { return std::pow(a, b); }, {kF32, kF64}, 0.5, 2},
      {"Mod", PyMod, {kI32, kI64}, 1, 20},
      {"Max", [](double a, double b) { return std::max(a, b); }, {kF32, kI32, kU8}, 0, 9},
      {"Min", [](double a, double b) { return std::min(a, b); }, {kF32, kI64, kF16}, 0, 9},
      {"Sum", [](double a, double b) { return a + b; }, {kF32, kF64}, -9, 9},
      {"Mean", [](double a, double b) { return (a + b) / 2; }, {kF32}, -9, 9},
      {"PRelu", [](double a, double b) { return a < 0 ? a * b : a; }, {kF32, kF16}, -2, 2},
  };
  for (const BinaryCase& c : cases) {
    for (DataType dt : c.dtypes) {
      for (const auto& [sa, sb] : BroadcastPatterns()) {
        bool prelu = std::string(c.op) == "PRelu";
        if (prelu && RefBroadcast({sa, sb}) != sa) continue;  // slope must broadcast to X
        SCOPED_TRACE(fmt::format("{} {} {} {}", c.op, DataTypeName(dt), ShapeToString(sa),
                                 ShapeToString(sb)));
        Tensor a = MakeTensor(dt, sa, c.lo, c.hi, 1);
        Tensor b = MakeTensor(dt, sb, c.lo, c.hi, 2);
        auto out = RunNode(c.op, {}, {a, b}, 1);
        ASSERT_TRUE(out.ok()) << out.status().ToString();
        Tensor expect = RefNary({a, b}, c.bool_out ? kBool : dt,
                                [&](const std::vector<double>& v) { return c.ref(v[0], v[1]); });
        ExpectTensorNear((*out)[0], expect, Tol(dt), Tol(dt));
      }
    }
  }
}

TEST(ElementwiseBinary, IntegerDivisionAndMod) {
  auto div =
      RunNode("Div", {},
              {Vec<int32_t>({-7, 7, -7, 7, 5, INT32_MIN}), Vec<int32_t>({2, 2, -2, -2, 0, -1})}, 1);
  ASSERT_TRUE(div.ok()) << div.status().ToString();
  // Truncation toward zero; x/0 gives 0 instead of trapping; MIN/-1 wraps.
  ExpectTensorNear((*div)[0], Vec<int32_t>({-3, 3, 3, -3, 0, INT32_MIN}));

  auto mod = RunNode("Mod", {}, {Vec<int64_t>({-4, 7, 5, -5}), Vec<int64_t>({3, -3, 3, -3})}, 1);
  ASSERT_TRUE(mod.ok());
  ExpectTensorNear((*mod)[0], Vec<int64_t>({2, -2, 2, -2}));
  auto fmod = RunNode("Mod", {{"fmod", AttrInt(1)}},
                      {Vec<float>({-4.5f, 7.f, 5.5f}), Vec<float>({3.f, -3.f, 2.f})}, 1);
  ASSERT_TRUE(fmod.ok());
  ExpectTensorNear((*fmod)[0], Vec<float>({-1.5f, 1.f, 1.5f}));
  auto ifmod =
      RunNode("Mod", {{"fmod", AttrInt(1)}}, {Vec<int32_t>({-4, 7}), Vec<int32_t>({3, -3})}, 1);
  ASSERT_TRUE(ifmod.ok());
  ExpectTensorNear((*ifmod)[0], Vec<int32_t>({-1, 1}));
}

TEST(ElementwiseBinary, PowMixedTypes) {
  auto f = RunNode("Pow", {}, {Vec<float>({2.f, 3.f, -2.f}), Vec<int64_t>({3, 2, 3})}, 1);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ExpectTensorNear((*f)[0], Vec<float>({8.f, 9.f, -8.f}));
  auto i = RunNode("Pow", {}, {Vec<int64_t>({2, 3, -2, 5}), Vec<int64_t>({10, 3, 3, -1})}, 1);
  ASSERT_TRUE(i.ok());
  ExpectTensorNear((*i)[0], Vec<int64_t>({1024, 27, -8, 0}));
  auto ifl = RunNode("Pow", {}, {Vec<int32_t>({4, 9}), Vec<float>({0.5f, 0.5f})}, 1);
  ASSERT_TRUE(ifl.ok());
  ExpectTensorNear((*ifl)[0], Vec<int32_t>({2, 3}));
  auto sq = RunNode("Pow", {}, {Vec<float>({-3.f, 1.5f}), Tensor::Scalar(2.0f)}, 1);
  ASSERT_TRUE(sq.ok());
  ExpectTensorNear((*sq)[0], Vec<float>({9.f, 2.25f}));
}

TEST(ElementwiseBinary, BitShift) {
  auto l = RunNode("BitShift", {{"direction", AttrString("LEFT")}},
                   {Vec<uint8_t>({1, 3, 255}), Vec<uint8_t>({2, 1, 9})}, 1);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ExpectTensorNear((*l)[0], Vec<uint8_t>({4, 6, 0}));
  auto r = RunNode("BitShift", {{"direction", AttrString("RIGHT")}},
                   {Vec<uint64_t>({16, 5}), Tensor::Scalar<uint64_t>(2)}, 1);
  ASSERT_TRUE(r.ok());
  ExpectTensorNear((*r)[0], Vec<uint64_t>({4, 1}));
}

TEST(ElementwiseBinary, VariadicThreeInputsBroadcast) {
  Tensor a = MakeTensor(kF32, {2, 3, 4}, -5, 5, 1);
  Tensor b = MakeTensor(kF32, {3, 1}, -5, 5, 2);
  Tensor c = MakeTensor(kF32, {4}, -5, 5, 3);
  struct V {
    const char* op;
    std::function<double(const std::vector<double>&)> f;
  };
  for (const V& v : std::vector<V>{{"Sum", [](const auto& x) { return x[0] + x[1] + x[2]; }},
                                   {"Mean", [](const auto& x) { return (x[0] + x[1] + x[2]) / 3; }},
                                   {"Max",
                                    [](const auto& x) {
                                      return std::max({x[0], x[1], x[2]});
                                    }},
                                   {"Min", [](const auto& x) {
                                      return std::min({x[0], x[1], x[2]});
                                    }}}) {
    SCOPED_TRACE(v.op);
    auto out = RunNode(v.op, {}, {a, b, c}, 1);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ExpectTensorNear((*out)[0], RefNary({a, b, c}, kF32, v.f));
  }
  auto one = RunNode("Sum", {}, {a}, 1);
  ASSERT_TRUE(one.ok());
  ExpectTensorNear((*one)[0], a);
  float nan = std::numeric_limits<float>::quiet_NaN();
  auto mx = RunNode("Max", {}, {Vec<float>({1.f, nan}), Vec<float>({nan, 2.f})}, 1);
  ASSERT_TRUE(mx.ok());
  EXPECT_TRUE(std::isnan((*mx)[0].data<float>()[0]));
  EXPECT_TRUE(std::isnan((*mx)[0].data<float>()[1]));
}

TEST(ElementwiseBinary, Where) {
  Tensor cond = MakeTensor(kBool, {3, 1}, 0, 1, 5);
  for (DataType dt : {kF32, kI64, kF16, kU8}) {
    Tensor x = MakeTensor(dt, {2, 3, 4}, -9, 9, 6);
    Tensor y = MakeTensor(dt, {4}, -9, 9, 7);
    auto out = RunNode("Where", {}, {cond, x, y}, 1);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ExpectTensorNear((*out)[0],
                     RefNary({cond, x, y}, dt, [](const auto& v) { return v[0] ? v[1] : v[2]; }));
  }
  Tensor big_c = MakeTensor(kBool, {50000}, 0, 1, 8);
  Tensor big_x = MakeTensor(kF32, {50000}, -1, 1, 9);
  auto out = RunNode("Where", {}, {big_c, big_x, Tensor::Scalar(0.f)}, 1);
  ASSERT_TRUE(out.ok());
  ExpectTensorNear((*out)[0], RefNary({big_c, big_x, Tensor::Scalar(0.f)}, kF32,
                                      [](const auto& v) { return v[0] ? v[1] : v[2]; }));
}

TEST(ElementwiseBinary, BadInputs) {
  Tensor a = MakeTensor(kF32, {2, 3}, 0, 1);
  EXPECT_FALSE(RunNode("Add", {}, {a, MakeTensor(kF32, {4}, 0, 1)}, 1).ok());
  EXPECT_FALSE(RunNode("Mul", {}, {a, MakeTensor(kF64, {3}, 0, 1)}, 1).ok());
  EXPECT_FALSE(RunNode("Sum", {}, {a, a, MakeTensor(kF32, {5}, 0, 1)}, 1).ok());
  EXPECT_FALSE(RunNode("Where", {}, {MakeTensor(kBool, {4}, 0, 1), a, a}, 1).ok());
  EXPECT_FALSE(RunNode("PRelu", {}, {MakeTensor(kF32, {3}, 0, 1), a}, 1).ok());
  EXPECT_FALSE(RunNode("BitShift", {{"direction", AttrString("UP")}},
                       {Vec<uint8_t>({1}), Vec<uint8_t>({1})}, 1)
                   .ok());
  EXPECT_FALSE(RunNode("Mod", {{"fmod", AttrInt(2)}}, {a, a}, 1).ok());
  EXPECT_FALSE(RunNode("And", {}, {a, a}, 1).ok());  // And needs bool
}

// ---- unary ops -------------------------------------------------------------------------------

struct UnaryCase {
  const char* op;
  std::map<std::string, Attribute> attrs;
  Fn1 ref;
  std::vector<DataType> dtypes;
  double lo, hi;
  bool bool_out = false;
};

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double Softplus(double x) { return std::log1p(std::exp(x)); }

TEST(ElementwiseUnary, MatchesReference) {
  const std::vector<UnaryCase> cases = {
      {"Abs", {}, [](double x) { return std::fabs(x); }, {kF32, kF16, kI8, kI64}, -9, 9},
      {"Neg", {}, [](double x) { return -x; }, {kF32, kI32, kBF16}, -9, 9},
      {"Reciprocal", {}, [](double x) { return 1 / x; }, {kF32, kF64}, 0.5, 9},
      {"Floor", {}, [](double x) { return std::floor(x); }, {kF32, kF16}, -9, 9},
      {"Ceil", {}, [](double x) { return std::ceil(x); }, {kF32, kF64}, -9, 9},
      {"Round", {}, [](double x) { return std::nearbyint(x); }, {kF32}, -9, 9},
      {"Sqrt", {}, [](double x) { return std::sqrt(x); }, {kF32, kF64, kF16}, 0, 9},
      {"Exp", {}, [](double x) { return std::exp(x); }, {kF32, kF64, kBF16}, -5, 5},
      {"Log", {}, [](double x) { return std::log(x); }, {kF32, kF64}, 0.1, 9},
      {"Sin", {}, [](double x) { return std::sin(x); }, {kF32}, -3, 3},
      {"Cos", {}, [](double x) { return std::cos(x); }, {kF32}, -3, 3},
      {"Tan", {}, [](double x) { return std::tan(x); }, {kF32}, -1, 1},
      {"Asin", {}, [](double x) { return std::asin(x); }, {kF32}, -0.9, 0.9},
      {"Acos", {}, [](double x) { return std::acos(x); }, {kF32}, -0.9, 0.9},
      {"Atan", {}, [](double x) { return std::atan(x); }, {kF32}, -9, 9},
      {"Sinh", {}, [](double x) { return std::sinh(x); }, {kF32}, -3, 3},
      {"Cosh", {}, [](double x) { return std::cosh(x); }, {kF32}, -3, 3},
      {"Asinh", {}, [](double x) { return std::asinh(x); }, {kF32}, -3, 3},
      {"Acosh", {}, [](double x) { return std::acosh(x); }, {kF32}, 1, 5},
      {"Atanh", {}, [](double x) { return std::atanh(x); }, {kF32}, -0.9, 0.9},
      {"Erf", {}, [](double x) { return std::erf(x); }, {kF32, kF64, kI32}, -3, 3},
      {"Erf", {}, [](double x) { return std::erf(x); }, {kF32}, -0.01, 0.01},
      {"Erf", {}, [](double x) { return std::erf(x); }, {kF32}, -6, 6},
      {"Sign", {}, [](double x) { return (x > 0) - (x < 0); }, {kF32, kI32, kU8}, -3, 3},
      {"Not", {}, [](double x) { return x == 0; }, {kBool}, 0, 1, true},
      {"IsNaN", {}, [](double x) { return std::isnan(x); }, {kF32}, -1, 1, true},
      {"Relu", {}, [](double x) { return std::max(x, 0.0); }, {kF32, kF16, kI32, kI8}, -9, 9},
      {"LeakyRelu", {}, [](double x) { return x < 0 ? 0.01 * x : x; }, {kF32}, -9, 9},
      {"LeakyRelu",
       {{"alpha", AttrFloat(0.2f)}},
       [](double x) { return x < 0 ? 0.2 * x : x; },
       {kF32, kF64},
       -9,
       9},
      {"Elu",
       {{"alpha", AttrFloat(0.5f)}},
       [](double x) { return x < 0 ? 0.5 * (std::exp(x) - 1) : x; },
       {kF32},
       -5,
       5},
      {"Selu",
       {},
       [](double x) {
         const double a = 1.67326319217681884765625, g = 1.05070102214813232421875;
         return x > 0 ? g * x : g * (a * std::exp(x) - a);
       },
       {kF32},
       -5,
       5},
      {"Celu",
       {{"alpha", AttrFloat(2.f)}},
       [](double x) { return std::max(0.0, x) + std::min(0.0, 2 * (std::exp(x / 2) - 1)); },
       {kF32},
       -5,
       5},
      {"Sigmoid", {}, Sigmoid, {kF32, kF64, kF16}, -20, 20},
      {"HardSigmoid",
       {{"alpha", AttrFloat(0.3f)}},
       [](double x) { return std::clamp(0.3 * x + 0.5, 0.0, 1.0); },
       {kF32},
       -5,
       5},
      {"HardSwish",
       {},
       [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); },
       {kF32},
       -5,
       5},
      {"Tanh", {}, [](double x) { return std::tanh(x); }, {kF32, kF64}, -5, 5},
      {"Softplus", {}, Softplus, {kF32}, -20, 20},
      {"Softsign", {}, [](double x) { return x / (1 + std::fabs(x)); }, {kF32}, -5, 5},
      {"ThresholdedRelu",
       {{"alpha", AttrFloat(0.5f)}},
       [](double x) { return x > 0.5 ? x : 0; },
       {kF32},
       -2,
       2},
      {"Shrink",
       {{"lambd", AttrFloat(1.5f)}, {"bias", AttrFloat(0.5f)}},
       [](double x) { return x < -1.5  ? x + 0.5
                             : x > 1.5 ? x - 0.5
                                       : 0; },
       {kF32, kI32},
       -5,
       5},
      {"Clip", {}, [](double x) { return x; }, {kF32}, -5, 5},
  };
  for (const UnaryCase& c : cases) {
    for (DataType dt : c.dtypes) {
      for (const Shape& shape : std::vector<Shape>{{}, {2, 3, 5}, {0}, {40000}}) {
        SCOPED_TRACE(fmt::format("{} {} {}", c.op, DataTypeName(dt), ShapeToString(shape)));
        Tensor x = MakeTensor(dt, shape, c.lo, c.hi, 3);
        auto out = RunNode(c.op, c.attrs, {x}, 1);
        ASSERT_TRUE(out.ok()) << out.status().ToString();
        Tensor expect = RefNary({x}, c.bool_out ? kBool : dt,
                                [&](const std::vector<double>& v) { return c.ref(v[0]); });
        ExpectTensorNear((*out)[0], expect, Tol(dt) * 2, Tol(dt));
      }
    }
  }
}

TEST(ElementwiseUnary, EdgeValues) {
  auto r = RunNode("Round", {}, {Vec<float>({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f, -2.6f})}, 1);
  ASSERT_TRUE(r.ok());
  ExpectTensorNear((*r)[0], Vec<float>({0.f, 2.f, 2.f, -0.f, -2.f, 2.f, -3.f}));
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = Vec<float>({inf, -inf, nan, 1.f});
  auto both = RunNode("IsInf", {}, {x}, 1);
  ASSERT_TRUE(both.ok());
  ExpectTensorNear((*both)[0], Vec<bool>({true, true, false, false}));
  auto pos = RunNode("IsInf", {{"detect_negative", AttrInt(0)}}, {x}, 1);
  ASSERT_TRUE(pos.ok());
  ExpectTensorNear((*pos)[0], Vec<bool>({true, false, false, false}));
  auto neg = RunNode("IsInf", {{"detect_positive", AttrInt(0)}}, {x}, 1);
  ASSERT_TRUE(neg.ok());
  ExpectTensorNear((*neg)[0], Vec<bool>({false, true, false, false}));
  auto sig = RunNode("Sigmoid", {}, {Vec<float>({-1000.f, 1000.f, 0.f})}, 1);
  ASSERT_TRUE(sig.ok());
  ExpectTensorNear((*sig)[0], Vec<float>({0.f, 1.f, 0.5f}));
  auto sp = RunNode("Softplus", {}, {Vec<float>({-1000.f, 1000.f})}, 1);
  ASSERT_TRUE(sp.ok());
  ExpectTensorNear((*sp)[0], Vec<float>({0.f, 1000.f}));
}

TEST(ElementwiseUnary, MishOpset18) {
  // Large enough for the oneDNN path and small for the portable loop.
  for (int64_t n : {int64_t{7}, int64_t{5000}}) {
    Tensor x = MakeTensor(kF32, {n}, -6, 6, 4);
    auto out = RunNode("Mish", {}, {x}, 1, 18);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ExpectTensorNear(
        (*out)[0],
        RefNary({x}, kF32, [](const auto& v) { return v[0] * std::tanh(Softplus(v[0])); }), 1e-5,
        1e-6);
  }
}

TEST(ElementwiseUnary, ClipAcrossOpsets) {
  Tensor x = Vec<float>({-3.f, -1.f, 0.f, 2.f, 5.f});
  auto v6 = RunNode("Clip", {{"min", AttrFloat(-1.5f)}, {"max", AttrFloat(2.5f)}}, {x}, 1, 6);
  ASSERT_TRUE(v6.ok()) << v6.status().ToString();
  ExpectTensorNear((*v6)[0], Vec<float>({-1.5f, -1.f, 0.f, 2.f, 2.5f}));
  auto v11 = RunNode("Clip", {}, {x, Tensor::Scalar(-1.5f), Tensor::Scalar(2.5f)}, 1, 11);
  ASSERT_TRUE(v11.ok()) << v11.status().ToString();
  ExpectTensorNear((*v11)[0], Vec<float>({-1.5f, -1.f, 0.f, 2.f, 2.5f}));
  auto max_only = RunNode("Clip", {}, {x, Tensor(), Tensor::Scalar(1.f)}, 1, 13);
  ASSERT_TRUE(max_only.ok()) << max_only.status().ToString();
  ExpectTensorNear((*max_only)[0], Vec<float>({-3.f, -1.f, 0.f, 1.f, 1.f}));
  auto ints = RunNode(
      "Clip", {},
      {Vec<int32_t>({-7, 3, 9}), Tensor::Scalar<int32_t>(0), Tensor::Scalar<int32_t>(5)}, 1, 13);
  ASSERT_TRUE(ints.ok()) << ints.status().ToString();
  ExpectTensorNear((*ints)[0], Vec<int32_t>({0, 3, 5}));
  // Bounds must be scalars of the input's type.
  EXPECT_FALSE(RunNode("Clip", {}, {x, Vec<float>({0.f, 1.f})}, 1, 13).ok());
  EXPECT_FALSE(RunNode("Clip", {}, {x, Tensor::Scalar(0.0)}, 1, 13).ok());
}

TEST(ElementwiseUnary, BadInputs) {
  EXPECT_FALSE(RunNode("Sqrt", {}, {Vec<int32_t>({4})}, 1).ok());  // float only
  EXPECT_FALSE(RunNode("Not", {}, {Vec<float>({1.f})}, 1).ok());
}

// ---- Cast ------------------------------------------------------------------------------------

TEST(ElementwiseCast, AllTypePairs) {
  const std::vector<DataType> types = {kF32,
                                       kF64,
                                       kF16,
                                       kBF16,
                                       kI8,
                                       DataType::kInt16,
                                       kI32,
                                       kI64,
                                       kU8,
                                       DataType::kUInt16,
                                       DataType::kUInt32,
                                       kU64,
                                       kBool};
  for (DataType from : types) {
    for (DataType to : types) {
      SCOPED_TRACE(fmt::format("{} -> {}", DataTypeName(from), DataTypeName(to)));
      // Non-negative integers below 100 are exact in every type.
      Tensor x = MakeTensor(from, {3, 7}, 0, from == kBool ? 1 : 100, 11);
      if (from != kBool && !IsInteger(from)) {
        for (int64_t i = 0; i < x.NumElements(); ++i) {
          SetFromDouble(x, i, std::round(x.GetAsDouble(i)));
        }
      }
      auto out = RunNode("Cast", {{"to", AttrInt(static_cast<int64_t>(to))}}, {x}, 1);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      Tensor expect = RefNary(
          {x}, to, [&](const std::vector<double>& v) { return to == kBool ? (v[0] != 0) : v[0]; });
      ExpectTensorNear((*out)[0], expect);
      auto like = RunNode("CastLike", {}, {x, Tensor::Allocate(to, {1})}, 1);
      ASSERT_TRUE(like.ok()) << like.status().ToString();
      ExpectTensorNear((*like)[0], expect);
    }
  }
}

TEST(ElementwiseCast, Rounding) {
  auto trunc = RunNode("Cast", {{"to", AttrInt(6)}}, {Vec<float>({1.7f, -1.7f, 0.2f})}, 1);
  ASSERT_TRUE(trunc.ok());
  ExpectTensorNear((*trunc)[0], Vec<int32_t>({1, -1, 0}));
  auto half = RunNode("Cast", {{"to", AttrInt(10)}}, {Vec<float>({1.0f / 3, 65504.f, 1e6f})}, 1);
  ASSERT_TRUE(half.ok());
  Tensor h = (*half)[0];
  EXPECT_NEAR(h.GetAsDouble(0), 1.0 / 3, 1e-3);
  EXPECT_EQ(h.GetAsDouble(1), 65504.0);
  EXPECT_TRUE(std::isinf(h.GetAsDouble(2)));
  auto b = RunNode("Cast", {{"to", AttrInt(9)}}, {Vec<float>({0.f, -0.5f, 2.f})}, 1);
  ASSERT_TRUE(b.ok());
  ExpectTensorNear((*b)[0], Vec<bool>({false, true, true}));
}

TEST(ElementwiseCast, BadInputs) {
  Tensor x = Vec<float>({1.f});
  EXPECT_TRUE(RunNode("Cast", {{"to", AttrInt(8)}}, {x}, 1).ok());    // string (text/ tests)
  EXPECT_FALSE(RunNode("Cast", {{"to", AttrInt(99)}}, {x}, 1).ok());  // unknown
  EXPECT_FALSE(RunNode("Cast", {}, {x}, 1).ok());                     // missing 'to'
}

}  // namespace
}  // namespace inferd
