#include "serving/processing_models.h"

#include <charconv>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "serving/model_config.h"
#include "serving/repository.h"

namespace inferd::serving {
namespace {

namespace fs = std::filesystem;
using Params = std::map<std::string, std::string>;

constexpr char kDomain[] = "ai.inferd";

// The config's parameters; one the backend does not know fails, naming the known ones.
StatusOr<Params> ReadParams(const inference::ModelConfig& config,
                            const std::set<std::string>& known) {
  Params p;
  for (const auto& entry : config.parameters()) {
    if (known.count(entry.first) == 0) {
      return InvalidArgument("unknown parameter '{}' (known: {})", entry.first,
                             fmt::join(known, ", "));
    }
    p[entry.first] = entry.second.string_value();
  }
  return p;
}

Status BadParam(const std::string& key, const std::string& value, std::string_view want) {
  return InvalidArgument("parameter '{}': '{}' is not {}", key, value, want);
}

template <typename T>
bool Parse(std::string_view s, T* v) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

StatusOr<int64_t> IntParam(const Params& p, const std::string& key, int64_t def, int64_t min) {
  auto it = p.find(key);
  if (it == p.end()) return def;
  int64_t v = 0;
  if (!Parse(it->second, &v) || v < min) {
    return BadParam(key, it->second, fmt::format("an integer >= {}", min));
  }
  return v;
}

StatusOr<bool> BoolParam(const Params& p, const std::string& key, bool def) {
  auto it = p.find(key);
  if (it == p.end()) return def;
  if (it->second == "true" || it->second == "1") return true;
  if (it->second == "false" || it->second == "0") return false;
  return BadParam(key, it->second, "true or false");
}

StatusOr<std::string> ChoiceParam(const Params& p, const std::string& key, std::string def,
                                  const std::set<std::string>& choices) {
  auto it = p.find(key);
  if (it == p.end()) return def;
  if (choices.count(it->second) == 0) {
    return BadParam(key, it->second, fmt::format("one of {}", fmt::join(choices, ", ")));
  }
  return it->second;
}

// `count` numbers separated by commas.
StatusOr<std::vector<float>> FloatsParam(const Params& p, const std::string& key,
                                         std::vector<float> def, size_t count) {
  auto it = p.find(key);
  if (it == p.end()) return def;
  std::vector<float> out;
  std::string_view rest = it->second;
  while (true) {
    const size_t comma = rest.find(',');
    float v = 0;
    if (!Parse(rest.substr(0, comma), &v)) break;
    out.push_back(v);
    if (comma == std::string_view::npos) {
      if (out.size() == count) return out;
      break;
    }
    rest.remove_prefix(comma + 1);
  }
  return BadParam(key, it->second, fmt::format("{} comma-separated numbers", count));
}

// "224" (square) or "224x192" (height x width).
StatusOr<std::pair<int64_t, int64_t>> SizeParam(const Params& p, const std::string& key) {
  auto it = p.find(key);
  if (it == p.end()) return InvalidArgument("parameter '{}' is required", key);
  const std::string& s = it->second;
  const size_t x = s.find('x');
  int64_t h = 0, w = 0;
  const bool ok = x == std::string::npos
                      ? Parse(std::string_view(s), &h) && (w = h, true)
                      : Parse(std::string_view(s).substr(0, x), &h) &&
                            Parse(std::string_view(s).substr(x + 1), &w);
  if (!ok || h < 1 || w < 1) return BadParam(key, s, "a size (224, or HxW as 224x192)");
  return std::pair{h, w};
}

Attribute IntAttr(int64_t v) {
  Attribute a;
  a.type = Attribute::Type::kInt;
  a.i = v;
  return a;
}
Attribute IntsAttr(std::vector<int64_t> v) {
  Attribute a;
  a.type = Attribute::Type::kInts;
  a.ints = std::move(v);
  return a;
}
Attribute FloatAttr(float v) {
  Attribute a;
  a.type = Attribute::Type::kFloat;
  a.f = v;
  return a;
}
Attribute FloatsAttr(std::vector<float> v) {
  Attribute a;
  a.type = Attribute::Type::kFloats;
  a.floats = std::move(v);
  return a;
}
Attribute StringAttr(std::string v) {
  Attribute a;
  a.type = Attribute::Type::kString;
  a.s = std::move(v);
  return a;
}

// The config's one input and one output name (defaults INPUT and OUTPUT); both processing models
// batch, so max_batch_size must allow it when the config lists tensors.
Status TensorNames(const inference::ModelConfig& config, std::string* in, std::string* out) {
  if (config.input_size() > 1 || config.output_size() > 1) {
    return InvalidArgument("it has one input and one output, the config lists {} and {}",
                           config.input_size(), config.output_size());
  }
  if (config.max_batch_size() < 1 && (config.input_size() > 0 || config.output_size() > 0)) {
    return InvalidArgument("it batches: max_batch_size must be >= 1");
  }
  *in = config.input_size() > 0 ? config.input(0).name() : "INPUT";
  *out = config.output_size() > 0 ? config.output(0).name() : "OUTPUT";
  return Status::Ok();
}

ValueInfo Value(std::string name, DataType dtype, const std::vector<int64_t>& dims) {
  ValueInfo v{std::move(name), dtype, std::vector<Dim>{Dim{-1, "batch"}}};
  for (int64_t d : dims) v.shape->push_back(Dim{d, ""});
  return v;
}

// The node is named after the model, so a kernel error reads "DecodeResizeCrop 'preprocess': ...".
Model OneNodeModel(const std::string& name, const std::string& op, ValueInfo in, ValueInfo out,
                   std::map<std::string, Attribute> attributes) {
  Model m;
  m.producer_name = "inferd processing model";
  m.opsets[""] = 17;
  m.opsets[kDomain] = 1;
  m.graph.name = op;
  Node* n = m.graph.AddNode(op, {in.name}, {out.name}, name);
  n->domain = kDomain;
  n->attributes = std::move(attributes);
  m.graph.inputs.push_back(std::move(in));
  m.graph.outputs.push_back(std::move(out));
  return m;
}

// The output element type: the data_type parameter, else the config output's, else FP32.
StatusOr<bool> ImageOutputIsUint8(const inference::ModelConfig& config, const Params& p) {
  if (p.count("data_type") != 0) {
    ASSIGN_OR_RETURN(std::string t, ChoiceParam(p, "data_type", "FP32", {"FP32", "UINT8"}));
    return t == "UINT8";
  }
  if (config.output_size() == 0 || config.output(0).data_type() == inference::TYPE_INVALID) {
    return false;
  }
  const inference::DataType t = config.output(0).data_type();
  if (t != inference::TYPE_FP32 && t != inference::TYPE_UINT8) {
    return InvalidArgument("output '{}': it writes TYPE_FP32 or TYPE_UINT8",
                           config.output(0).name());
  }
  return t == inference::TYPE_UINT8;
}

StatusOr<Model> BuildImageModel(const inference::ModelConfig& config) {
  ASSIGN_OR_RETURN(Params p, ReadParams(config, {"resize", "crop", "mean", "std", "scale",
                                                 "layout", "data_type", "channel_order",
                                                 "max_pixels", "dct_scaling"}));
  std::string in, out;
  RETURN_IF_ERROR(TensorNames(config, &in, &out));
  if (config.input_size() > 0) {
    const auto& dims = config.input(0).dims();
    if (!(dims.empty() || (dims.size() == 1 && dims[0] == 1))) {
      return InvalidArgument("input '{}': one image per batch row (dims [1])", in);
    }
  }
  ASSIGN_OR_RETURN(auto crop, SizeParam(p, "crop"));
  const int64_t largest = std::max(crop.first, crop.second);
  ASSIGN_OR_RETURN(int64_t resize, IntParam(p, "resize", largest, 1));
  if (resize < largest) {
    return InvalidArgument("parameter 'resize': {} is smaller than the crop {}x{}", resize,
                           crop.first, crop.second);
  }
  ASSIGN_OR_RETURN(bool uint8, ImageOutputIsUint8(config, p));
  ASSIGN_OR_RETURN(auto mean, FloatsParam(p, "mean", {0, 0, 0}, 3));
  ASSIGN_OR_RETURN(auto stdv, FloatsParam(p, "std", {1, 1, 1}, 3));
  for (float s : stdv) {
    if (s == 0) return BadParam("std", p["std"], "three non-zero numbers");
  }
  ASSIGN_OR_RETURN(auto scale, FloatsParam(p, "scale", {1.0f / 255.0f}, 1));
  if (uint8 && (p.count("mean") || p.count("std") || p.count("scale"))) {
    return InvalidArgument("parameters 'mean', 'std' and 'scale' apply to FP32 output only");
  }
  ASSIGN_OR_RETURN(std::string layout, ChoiceParam(p, "layout", "NCHW", {"NCHW", "NHWC"}));
  ASSIGN_OR_RETURN(std::string order, ChoiceParam(p, "channel_order", "RGB", {"RGB", "BGR"}));
  ASSIGN_OR_RETURN(int64_t max_pixels, IntParam(p, "max_pixels", int64_t{64} << 20, 1));
  ASSIGN_OR_RETURN(bool dct, BoolParam(p, "dct_scaling", true));
  const std::vector<int64_t> dims = layout == "NCHW"
                                        ? std::vector<int64_t>{3, crop.first, crop.second}
                                        : std::vector<int64_t>{crop.first, crop.second, 3};
  return OneNodeModel(config.name(), "DecodeResizeCrop", Value(in, DataType::kString, {1}),
                      Value(out, uint8 ? DataType::kUInt8 : DataType::kFloat32, dims),
                      {{"resize", IntAttr(resize)},
                       {"crop", IntsAttr({crop.first, crop.second})},
                       {"mean", FloatsAttr(mean)},
                       {"std", FloatsAttr(stdv)},
                       {"scale", FloatAttr(scale[0])},
                       {"layout", StringAttr(layout)},
                       {"output_type", StringAttr(uint8 ? "UINT8" : "FP32")},
                       {"channel_order", StringAttr(order)},
                       {"max_pixels", IntAttr(max_pixels)},
                       {"dct_scaling", IntAttr(dct ? 1 : 0)}});
}

// The labels file: a plain name inside the model folder, one label per line.
StatusOr<std::vector<std::string>> ReadLabels(const Params& p, const fs::path& model_dir) {
  auto it = p.find("labels");
  if (it == p.end()) return std::vector<std::string>{};
  const fs::path name(it->second);
  if (it->second.empty() || name.is_absolute() ||
      name.lexically_normal().string().rfind("..", 0) == 0) {
    return BadParam("labels", it->second, "a file name inside the model folder");
  }
  std::string text;
  if (!ReadRepositoryFile(model_dir / name, &text)) {
    return InvalidArgument("parameter 'labels': cannot read '{}' in the model folder", it->second);
  }
  std::vector<std::string> labels;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    labels.push_back(std::move(line));
    start = end + 1;
  }
  return labels;
}

StatusOr<Model> BuildClassifyModel(const inference::ModelConfig& config,
                                   const fs::path& model_dir) {
  ASSIGN_OR_RETURN(Params p, ReadParams(config, {"k", "softmax", "labels"}));
  std::string in, out;
  RETURN_IF_ERROR(TensorNames(config, &in, &out));
  std::vector<int64_t> dims = {-1};
  if (config.input_size() > 0 && config.input(0).dims_size() > 0) {
    dims.assign(config.input(0).dims().begin(), config.input(0).dims().end());
  }
  ASSIGN_OR_RETURN(int64_t k, IntParam(p, "k", 1, 1));
  int64_t classes = 1;
  for (int64_t d : dims) classes = d < 0 || classes < 0 ? -1 : classes * d;
  if (classes >= 0 && k > classes) {
    return InvalidArgument("parameter 'k': {} is more than the {} classes of input '{}'", k,
                           classes, in);
  }
  ASSIGN_OR_RETURN(bool softmax, BoolParam(p, "softmax", false));
  ASSIGN_OR_RETURN(std::vector<std::string> labels, ReadLabels(p, model_dir));
  Attribute label_attr;
  label_attr.type = Attribute::Type::kStrings;
  label_attr.strings = std::move(labels);
  return OneNodeModel(config.name(), "ClassifyTopK", Value(in, DataType::kFloat32, dims),
                      Value(out, DataType::kString, {k}),
                      {{"k", IntAttr(k)}, {"softmax", IntAttr(softmax ? 1 : 0)},
                       {"labels", std::move(label_attr)}});
}

}  // namespace

bool IsProcessingModel(const inference::ModelConfig& config) {
  return config.backend() == kImageBackend || config.backend() == kClassifyBackend;
}

StatusOr<Model> BuildProcessingModel(const inference::ModelConfig& config,
                                     const fs::path& model_dir) {
  inference::ModelConfig named = config;  // the node takes the model's name, which may be unset
  if (named.name().empty()) named.set_name(model_dir.filename().string());
  auto model = named.backend() == kImageBackend ? BuildImageModel(named)
                                                : BuildClassifyModel(named, model_dir);
  if (!model.ok()) return model.status().WithContext(fmt::format("backend '{}'", config.backend()));
  return model;
}

bool DefaultWarmupRuns(const inference::ModelConfig& config) {
  return config.backend() != kImageBackend;
}

}  // namespace inferd::serving
