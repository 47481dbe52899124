// Einsum. The equation is parsed once; a two-operand float32 contraction without diagonals or
// broadcasting maps to batched GEMM (oneDNN sgemm) after permuting the operands to
// [batch, M, K] x [batch, K, N]; everything else (traces, diagonals, broadcast ellipsis, three or
// more operands, integer types) runs a direct loop over all labels.
#include <dnnl.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/math/register.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

constexpr int kEllipsisBase = 52;  // labels 0..51 are letters; ellipsis dims follow

int LetterLabel(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= 'A' && c <= 'Z') return c - 'A';
  return -1;
}

struct Term {
  std::vector<int> letters;  // labels in order, -2 marks the ellipsis position
  bool has_ellipsis = false;
};

StatusOr<Term> ParseTerm(const std::string& s) {
  Term t;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '.') {
      if (s.compare(i, 3, "...") != 0 || t.has_ellipsis) {
        return InvalidArgument("Einsum term '{}' has a malformed ellipsis", s);
      }
      t.has_ellipsis = true;
      t.letters.push_back(-2);
      i += 2;
      continue;
    }
    int l = LetterLabel(s[i]);
    if (l < 0) return InvalidArgument("Einsum term '{}' has invalid character '{}'", s, s[i]);
    t.letters.push_back(l);
  }
  return t;
}

struct Equation {
  std::vector<Term> inputs;
  Term output;
  bool explicit_output = false;
};

StatusOr<Equation> ParseEquation(std::string eq) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  Equation e;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  if (arrow != std::string::npos) {
    e.explicit_output = true;
    ASSIGN_OR_RETURN(e.output, ParseTerm(eq.substr(arrow + 2)));
  }
  size_t start = 0;
  while (true) {
    size_t comma = lhs.find(',', start);
    ASSIGN_OR_RETURN(Term t, ParseTerm(lhs.substr(start, comma - start)));
    e.inputs.push_back(std::move(t));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return e;
}

// The equation bound to concrete input shapes.
struct Bound {
  std::vector<std::vector<int>> operand_labels;  // label per input dim
  std::vector<int> out_labels;
  std::vector<int> sum_labels;
  std::array<int64_t, 64> size{};
  Shape out_shape;
  bool broadcasts = false;  // some ellipsis dim is 1 in one operand and > 1 in another
};

StatusOr<Bound> Bind(const Equation& e, const std::vector<Shape>& shapes) {
  if (e.inputs.size() != shapes.size()) {
    return InvalidArgument("Einsum equation has {} operands but {} inputs were given",
                           e.inputs.size(), shapes.size());
  }
  Bound b;
  b.size.fill(-1);
  int64_t ell = 0;
  std::vector<int64_t> ell_count(shapes.size(), 0);
  for (size_t i = 0; i < shapes.size(); ++i) {
    int64_t letters = static_cast<int64_t>(e.inputs[i].letters.size()) - (e.inputs[i].has_ellipsis ? 1 : 0);
    int64_t rank = static_cast<int64_t>(shapes[i].size());
    if (rank < letters || (!e.inputs[i].has_ellipsis && rank != letters)) {
      return InvalidArgument("Einsum operand {} has rank {} but its term has {} labels", i, rank,
                             letters);
    }
    ell_count[i] = rank - letters;
    ell = std::max(ell, ell_count[i]);
  }
  if (ell > 64 - kEllipsisBase) return InvalidArgument("Einsum: too many ellipsis dimensions");
  std::array<int, 64> count{};
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::vector<int>& labels = b.operand_labels.emplace_back();
    for (int l : e.inputs[i].letters) {
      if (l == -2) {
        for (int64_t j = 0; j < ell_count[i]; ++j) {
          labels.push_back(static_cast<int>(kEllipsisBase + ell - ell_count[i] + j));
        }
      } else {
        labels.push_back(l);
      }
    }
    for (size_t d = 0; d < labels.size(); ++d) {
      int l = labels[d];
      int64_t s = shapes[i][d];
      ++count[l];
      if (b.size[l] < 0 || b.size[l] == s) {
        b.size[l] = s;
      } else if (l >= kEllipsisBase && (s == 1 || b.size[l] == 1)) {
        b.broadcasts = true;
        b.size[l] = std::max(b.size[l], s);
      } else {
        return InvalidArgument("Einsum label size mismatch: {} vs {} in operand {}", b.size[l], s, i);
      }
    }
  }
  std::array<bool, 64> in_out{};
  if (e.explicit_output) {
    for (int l : e.output.letters) {
      if (l == -2) {
        for (int64_t j = 0; j < ell; ++j) b.out_labels.push_back(static_cast<int>(kEllipsisBase + j));
        continue;
      }
      if (count[l] == 0) return InvalidArgument("Einsum output label does not appear in the inputs");
      if (in_out[l]) return InvalidArgument("Einsum output repeats a label");
      b.out_labels.push_back(l);
      in_out[l] = true;
    }
    for (int l : b.out_labels) in_out[l] = true;
  } else {
    for (int64_t j = 0; j < ell; ++j) b.out_labels.push_back(static_cast<int>(kEllipsisBase + j));
    for (int l = 0; l < kEllipsisBase; ++l) {
      if (count[l] == 1) b.out_labels.push_back(l);
    }
    for (int l : b.out_labels) in_out[l] = true;
  }
  for (int l = 0; l < 64; ++l) {
    if (count[l] > 0 && !in_out[l]) b.sum_labels.push_back(l);
  }
  for (int l : b.out_labels) b.out_shape.push_back(b.size[l]);
  return b;
}

// Direct evaluation over every (output, summed) label combination.
template <typename T>
void EinsumLoop(const Bound& b, const std::vector<const Tensor*>& in, Tensor* out) {
  using Acc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
  std::vector<int> all = b.out_labels;
  all.insert(all.end(), b.sum_labels.begin(), b.sum_labels.end());
  size_t nl = all.size();
  // strides[op][k]: element stride of label all[k] in operand op (summed for diagonals, 0 when
  // absent or broadcast).
  std::vector<std::vector<int64_t>> strides(in.size(), std::vector<int64_t>(nl, 0));
  for (size_t op = 0; op < in.size(); ++op) {
    std::vector<int64_t> st = StridesOf(in[op]->shape());
    for (size_t d = 0; d < b.operand_labels[op].size(); ++d) {
      if (in[op]->dim(d) == 1 && b.size[b.operand_labels[op][d]] != 1) continue;
      size_t k = std::find(all.begin(), all.end(), b.operand_labels[op][d]) - all.begin();
      strides[op][k] += st[d];
    }
  }
  int64_t out_n = NumElements(b.out_shape);
  int64_t sum_n = 1;
  for (int l : b.sum_labels) sum_n *= b.size[l];
  size_t no = b.out_labels.size();
  T* dst = out->data<T>();
  ParallelFor(out_n, 64, [&](int64_t o0, int64_t o1) {
    std::vector<int64_t> idx(nl, 0);
    for (int64_t o = o0; o < o1; ++o) {
      int64_t rem = o;
      for (int64_t k = static_cast<int64_t>(no) - 1; k >= 0; --k) {
        idx[k] = rem % b.size[all[k]];
        rem /= b.size[all[k]];
      }
      for (size_t k = no; k < nl; ++k) idx[k] = 0;
      Acc acc = 0;
      for (int64_t s = 0; s < sum_n; ++s) {
        Acc prod = 1;
        for (size_t op = 0; op < in.size(); ++op) {
          int64_t off = 0;
          for (size_t k = 0; k < nl; ++k) off += idx[k] * strides[op][k];
          prod *= static_cast<Acc>(in[op]->data<T>()[off]);
        }
        acc += prod;
        for (int64_t k = static_cast<int64_t>(nl) - 1; k >= static_cast<int64_t>(no); --k) {
          if (++idx[k] < b.size[all[k]]) break;
          idx[k] = 0;
        }
      }
      dst[o] = FromFloat<T>(acc);
    }
  });
}

// Copies `src` (shape `shape`) permuted so that dst dim i is src dim perm[i].
std::vector<float> Permute(const float* src, const Shape& shape, const std::vector<int64_t>& perm) {
  int64_t n = NumElements(shape);
  std::vector<float> dst(n);
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
  if (identity) {
    if (n > 0) std::memcpy(dst.data(), src, n * sizeof(float));
    return dst;
  }
  std::vector<int64_t> st = StridesOf(shape);
  size_t r = perm.size();
  Shape dshape(r);
  std::vector<int64_t> sst(r);
  for (size_t i = 0; i < r; ++i) {
    dshape[i] = shape[perm[i]];
    sst[i] = st[perm[i]];
  }
  int64_t inner = r ? dshape[r - 1] : 1, inner_stride = r ? sst[r - 1] : 1;
  int64_t outer = inner ? n / inner : 0;
  ParallelFor(outer, 256, [&](int64_t b0, int64_t b1) {
    for (int64_t o = b0; o < b1; ++o) {
      int64_t rem = o, off = 0;
      for (int64_t d = static_cast<int64_t>(r) - 2; d >= 0; --d) {
        off += (rem % dshape[d]) * sst[d];
        rem /= dshape[d];
      }
      float* out = dst.data() + o * inner;
      for (int64_t i = 0; i < inner; ++i) out[i] = src[off + i * inner_stride];
    }
  });
  return dst;
}

// Two operands, float32, no diagonal, no broadcast, no label private to one operand and summed.
bool GemmApplicable(const Bound& b, const std::vector<const Tensor*>& in) {
  if (in.size() != 2 || b.broadcasts || in[0]->dtype() != DataType::kFloat32 ||
      in[1]->dtype() != DataType::kFloat32) {
    return false;
  }
  for (const auto& labels : b.operand_labels) {
    std::array<bool, 64> seen{};
    for (int l : labels) {
      if (seen[l]) return false;
      seen[l] = true;
    }
  }
  for (int l : b.sum_labels) {
    for (const auto& labels : b.operand_labels) {
      if (std::find(labels.begin(), labels.end(), l) == labels.end()) return false;
    }
  }
  return true;
}

Status EinsumGemm(const Bound& b, const std::vector<const Tensor*>& in, Tensor* out) {
  const auto& la = b.operand_labels[0];
  const auto& lb = b.operand_labels[1];
  auto has = [](const std::vector<int>& v, int l) { return std::find(v.begin(), v.end(), l) != v.end(); };
  std::vector<int> batch, ms, ns;
  for (int l : b.out_labels) {
    bool a = has(la, l), bb = has(lb, l);
    (a && bb ? batch : a ? ms : ns).push_back(l);
  }
  const std::vector<int>& ks = b.sum_labels;
  auto prod = [&](const std::vector<int>& v) {
    int64_t p = 1;
    for (int l : v) p *= b.size[l];
    return p;
  };
  int64_t nb = prod(batch), m = prod(ms), n = prod(ns), k = prod(ks);
  auto perm_for = [](const std::vector<int>& labels, std::initializer_list<const std::vector<int>*> groups) {
    std::vector<int64_t> perm;
    for (const auto* g : groups) {
      for (int l : *g) perm.push_back(std::find(labels.begin(), labels.end(), l) - labels.begin());
    }
    return perm;
  };
  std::vector<float> a = Permute(in[0]->data<float>(), in[0]->shape(), perm_for(la, {&batch, &ms, &ks}));
  std::vector<float> bm = Permute(in[1]->data<float>(), in[1]->shape(), perm_for(lb, {&batch, &ks, &ns}));
  std::vector<float> c(nb * m * n);
  for (int64_t i = 0; i < nb; ++i) {
    if (m == 0 || n == 0) break;
    if (k == 0) continue;  // c stays zero
    dnnl::status st = dnnl::sgemm('N', 'N', m, n, k, 1.f, a.data() + i * m * k, k,
                                  bm.data() + i * k * n, n, 0.f, c.data() + i * m * n, n);
    if (st != dnnl::status::success) return Internal("Einsum: oneDNN sgemm failed");
  }
  // c is laid out as [batch..., ms..., ns...]; permute to the output order.
  std::vector<int> c_labels = batch;
  c_labels.insert(c_labels.end(), ms.begin(), ms.end());
  c_labels.insert(c_labels.end(), ns.begin(), ns.end());
  Shape c_shape;
  for (int l : c_labels) c_shape.push_back(b.size[l]);
  std::vector<float> res = Permute(c.data(), c_shape, perm_for(c_labels, {&b.out_labels}));
  std::copy(res.begin(), res.end(), out->data<float>());
  return Status::Ok();
}

class EinsumKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    std::string eq = info.node().GetString("equation", "");
    if (eq.empty()) return InvalidArgument("Einsum needs an 'equation' attribute");
    ASSIGN_OR_RETURN(eq_, ParseEquation(eq));
    if (eq_.inputs.size() != info.NumInputs()) {
      return InvalidArgument("Einsum equation '{}' has {} operands but the node has {} inputs", eq,
                             eq_.inputs.size(), info.NumInputs());
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    std::vector<const Tensor*> in;
    std::vector<Shape> shapes;
    for (size_t i = 0; i < ctx.NumInputs(); ++i) {
      if (ctx.Input(i) == nullptr) return InvalidArgument("Einsum input {} is missing", i);
      if (ctx.Input(i)->dtype() != ctx.Input(0)->dtype()) {
        return InvalidArgument("Einsum inputs must share one element type");
      }
      in.push_back(ctx.Input(i));
      shapes.push_back(ctx.Input(i)->shape());
    }
    if (in.empty()) return InvalidArgument("Einsum needs at least one input");
    ASSIGN_OR_RETURN(Bound b, Bind(eq_, shapes));
    DataType dt = in[0]->dtype();
    Tensor* out = ctx.AllocateOutput(0, dt, b.out_shape);
    if (GemmApplicable(b, in)) return EinsumGemm(b, in, out);
    if (dt == DataType::kFloat16 || dt == DataType::kBFloat16) {
      // Compute in float32 and round once.
      std::vector<Tensor> f;
      std::vector<const Tensor*> fp;
      for (const Tensor* t : in) {
        Tensor c = Tensor::Allocate(DataType::kFloat32, t->shape());
        for (int64_t i = 0; i < t->NumElements(); ++i) c.data<float>()[i] = static_cast<float>(t->GetAsDouble(i));
        f.push_back(std::move(c));
      }
      for (const Tensor& t : f) fp.push_back(&t);
      Tensor tmp = Tensor::Allocate(DataType::kFloat32, b.out_shape);
      EinsumLoop<float>(b, fp, &tmp);
      for (int64_t i = 0; i < tmp.NumElements(); ++i) {
        if (dt == DataType::kFloat16) out->data<Float16>()[i] = Float16(tmp.data<float>()[i]);
        else out->data<BFloat16>()[i] = BFloat16(tmp.data<float>()[i]);
      }
      return Status::Ok();
    }
    return DispatchNumeric(
        dt,
        [&](auto tag) -> Status {
          EinsumLoop<decltype(tag)>(b, in, out);
          return Status::Ok();
        },
        [&]() -> Status { return InvalidArgument("Einsum: unsupported type {}", DataTypeName(dt)); });
  }

 private:
  Equation eq_;
};

}  // namespace

void RegisterEinsumKernels(KernelRegistry& r) {
  r.Add("Einsum", 12, kOpsetMax, NumericTypes(), MakeKernel<EinsumKernel>());
}

}  // namespace inferd::cpu
