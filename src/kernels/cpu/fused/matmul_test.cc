// ai.inferd.FusedMatMul with a constant B on every GemmWeights path (PanelGemm with its
// bias/residual epilogue, oneDNN on the plain weights, by rows, the CPU's choice) against a double
// reference; with an activation it stays on oneDNN's packed layout. The fusion passes that write
// it: optimizer tests.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/onednn/gemm_weights.h"
#include "session/test_util.h"

namespace inferd::cpu {
namespace {

using testing::AttrString;
using testing::ExpectTensorNear;
using testing::RandomFloat;
using testing::RunNode;

// act(A [rows, K] · B + bias + R), in double; act "Relu" or none.
Tensor Reference(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& r, bool relu) {
  const int64_t k = b.dim(0), n = b.dim(1), rows = a.NumElements() / k;
  Shape out = a.shape();
  out.back() = n;
  Tensor y = Tensor::Allocate(DataType::kFloat32, out);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias.data<float>()[j] + r.data<float>()[i * n + j];
      for (int64_t q = 0; q < k; ++q)
        acc += double(a.data<float>()[i * k + q]) * b.data<float>()[q * n + j];
      y.data<float>()[i * n + j] = static_cast<float>(relu ? std::max(acc, 0.0) : acc);
    }
  }
  return y;
}

TEST(FusedMatMul, ConstantWeightsOnEveryGemmPath) {
  const Tensor b = RandomFloat({96, 40}, -1, 1, 1), bias = RandomFloat({40}, -1, 1, 2);
  for (GemmPath path : {GemmPath::kPanel, GemmPath::kOneDnn, GemmPath::kByRows, GemmPath::kAuto}) {
    ScopedGemmPathForTesting scoped(path);
    for (const Shape& as : std::vector<Shape>{{1, 96}, {5, 96}, {2, 70, 96}}) {
      for (bool relu : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "path " << static_cast<int>(path) << ", A "
                                        << ShapeToString(as) << ", relu " << relu);
        const Tensor a = RandomFloat(as, -1, 1, 3);
        Shape ys = as;
        ys.back() = 40;
        const Tensor r = RandomFloat(ys, -1, 1, 4);
        std::map<std::string, Attribute> attrs;
        if (relu) attrs["activation"] = AttrString("Relu");
        auto out = RunNode("FusedMatMul", attrs, {a, b, bias, r}, 1, 17, {1}, "ai.inferd");
        ASSERT_TRUE(out.ok()) << out.status().ToString();
        ExpectTensorNear((*out)[0], Reference(a, b, bias, r, relu), 1e-4, 1e-5);
      }
    }
  }
}

}  // namespace
}  // namespace inferd::cpu
