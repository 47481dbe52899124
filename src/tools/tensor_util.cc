#include "tools/tensor_util.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>

namespace inferd::tools {

StatusOr<Shape> ConcreteInputShape(const ValueInfo& info) {
  if (!info.shape) {
    return InvalidArgument("input '{}' has no declared shape; pass it with --input {}=FILE.npy",
                           info.name, info.name);
  }
  Shape shape;
  for (const Dim& d : *info.shape) shape.push_back(d.known() ? d.value : 1);
  return shape;
}

StatusOr<Tensor> RandomInput(const ValueInfo& info, std::mt19937_64& rng, int64_t int_limit) {
  if (!IsSupportedDataType(info.dtype)) {
    return Unimplemented("input '{}' has type {}, which cannot be generated; pass it with --input",
                         info.name, DataTypeName(info.dtype));
  }
  ASSIGN_OR_RETURN(Shape shape, ConcreteInputShape(info));
  if (NumElements(shape) > (int64_t{1} << 31)) {
    return InvalidArgument("input '{}': declared shape {} is too large to generate", info.name,
                           ShapeToString(shape));
  }
  Tensor t = Tensor::Allocate(info.dtype, shape);
  int64_t n = t.NumElements();
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int64_t> integer(0, std::max<int64_t>(1, int_limit) - 1);
  DispatchAll(
      info.dtype,
      [&](auto tag) {
        using T = decltype(tag);
        T* p = t.data<T>();
        for (int64_t i = 0; i < n; ++i) {
          if constexpr (std::is_same_v<T, bool>) {
            p[i] = (rng() & 1) != 0;
          } else if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
            p[i] = T(static_cast<float>(real(rng)));
          } else if constexpr (std::is_floating_point_v<T>) {
            p[i] = static_cast<T>(real(rng));
          } else {
            p[i] = static_cast<T>(integer(rng));
          }
        }
      },
      [] {});
  return t;
}

int64_t IntegerInputLimit(const Graph& graph, const std::string& input, int64_t fallback) {
  int64_t limit = std::numeric_limits<int64_t>::max();
  for (const auto& node : graph.nodes) {
    if (node->op_type != "Gather" || !node->domain.empty() || node->inputs.size() < 2 ||
        node->inputs[1] != input) {
      continue;
    }
    auto it = graph.initializers.find(node->inputs[0]);
    if (it == graph.initializers.end()) continue;
    int64_t rank = it->second.rank();
    int64_t axis = node->GetInt("axis", 0);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) continue;
    limit = std::min(limit, it->second.dim(axis));
  }
  return limit == std::numeric_limits<int64_t>::max() ? fallback : std::max<int64_t>(1, limit);
}

TensorStats ComputeStats(const Tensor& t) {
  TensorStats s;
  int64_t n = t.NumElements();
  double sum = 0;
  int64_t count = 0;
  s.min = std::numeric_limits<double>::infinity();
  s.max = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    double v = t.GetAsDouble(i);
    if (std::isnan(v)) {
      ++s.nan_count;
      continue;
    }
    s.min = std::min(s.min, v);
    s.max = std::max(s.max, v);
    sum += v;
    ++count;
  }
  if (count == 0) {
    s.min = s.max = s.mean = 0;
  } else {
    s.mean = sum / static_cast<double>(count);
  }
  return s;
}

std::string SummaryLine(const std::string& name, const Tensor& t) {
  std::string line = fmt::format("{}  {}", name, t.DebugString());
  if (t.NumElements() == 0) return line + "  (empty)";
  TensorStats s = ComputeStats(t);
  line += fmt::format("  min={:.6g} max={:.6g} mean={:.6g}", s.min, s.max, s.mean);
  if (s.nan_count > 0) line += fmt::format(" nan={}", s.nan_count);
  return line;
}

std::string SanitizeFileName(const std::string& name) {
  std::string out;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    out.push_back(ok ? c : '_');
  }
  if (out.empty() || out == "." || out == "..") out = "output";
  if (out.size() > 200) out.resize(200);
  return out;
}

std::vector<std::string> UniqueFileNames(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  std::set<std::string> used;
  for (const std::string& name : names) {
    std::string base = SanitizeFileName(name);
    std::string candidate = base;
    for (int k = 1; used.count(candidate) > 0; ++k) candidate = base + "_" + std::to_string(k);
    used.insert(candidate);
    out.push_back(candidate);
  }
  return out;
}

Status ParseNamedPath(const std::string& arg, std::string* name, std::string* path) {
  size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size()) {
    return InvalidArgument("--input expects NAME=FILE.npy, got '{}'", arg);
  }
  *name = arg.substr(0, eq);
  *path = arg.substr(eq + 1);
  return Status::Ok();
}

}  // namespace inferd::tools
