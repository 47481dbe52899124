#include "batchjob/item_reader.h"

#include <cmath>
#include <limits>

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include "batchjob/records.h"
#include "common/npy.h"

namespace inferd::batchjob {
namespace {

using serving::InferInput;

std::string ModelInputNames(const ModelInputInfo& model) {
  std::string names;
  for (const auto& in : model.inputs) names += (names.empty() ? "" : ", ") + in.name;
  return names.empty() ? "none" : names;
}

// The shape a request gives a value of `rank` dims for `input`: a batch dim of 1 is prepended
// when the model batches and the value lacks it.
Shape WithBatchDim(Shape shape, const ModelInputInfo::Input& input, bool batching) {
  if (batching && shape.size() == input.dims.size()) shape.insert(shape.begin(), 1);
  return shape;
}

Status CheckOneInput(const InputItem& item, const ModelInputInfo& model) {
  if (model.inputs.size() != 1) {
    return InvalidArgument("{}: a file feeds a model with one input; this one has {} ({}); use a "
                           "JSONL input",
                           item.source, model.inputs.size(), ModelInputNames(model));
  }
  return Status::Ok();
}

StatusOr<std::vector<InferInput>> ReadFileItem(const InputItem& item, const ModelInputInfo& model) {
  RETURN_IF_ERROR(CheckOneInput(item, model));
  ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(item.path));
  return FileItemInputs(item, std::move(bytes), model);
}

}  // namespace

StatusOr<std::vector<InferInput>> FileItemInputs(const InputItem& item, std::string bytes,
                                                 const ModelInputInfo& model) {
  RETURN_IF_ERROR(CheckOneInput(item, model));
  const ModelInputInfo::Input& input = model.inputs[0];
  InferInput in;
  in.name = input.name;
  if (input.dtype == DataType::kString) {
    Shape shape = WithBatchDim(Shape(input.dims.size(), 1), input, model.batching);
    ASSIGN_OR_RETURN(in.tensor, Tensor::FromStrings({std::move(bytes)}, shape));
  } else if (item.path.extension() == ".npy") {
    auto parsed = ParseNpy(bytes, item.source);
    if (!parsed.ok()) return parsed.status();
    Tensor t = std::move(parsed).value();
    Shape shape = WithBatchDim(t.shape(), input, model.batching);
    ASSIGN_OR_RETURN(in.tensor, t.Reshaped(shape));
  } else {
    return InvalidArgument("{}: input '{}' is {}; a file feeds it only as a .npy file (raw bytes "
                           "need a BYTES input)",
                           item.source, input.name, DataTypeName(input.dtype));
  }
  std::vector<InferInput> inputs;
  inputs.push_back(std::move(in));
  return inputs;
}

namespace {

// Walks nested lists: the shape (from the first element at each level) and the leaves in
// row-major order; ragged lists are an error.
Status Flatten(const rapidjson::Value& v, size_t depth, Shape* shape,
               std::vector<const rapidjson::Value*>* leaves) {
  if (!v.IsArray()) {
    if (depth != shape->size()) return InvalidArgument("ragged nested lists");
    leaves->push_back(&v);
    return Status::Ok();
  }
  int64_t n = static_cast<int64_t>(v.Size());
  if (depth == shape->size() && leaves->empty()) {
    shape->push_back(n);
  } else if (depth >= shape->size() || (*shape)[depth] != n) {
    return InvalidArgument("ragged nested lists");
  }
  for (const auto& e : v.GetArray()) RETURN_IF_ERROR(Flatten(e, depth + 1, shape, leaves));
  // An empty list fixes the depth below it: nothing deeper may appear later.
  if (n == 0 && depth + 1 != shape->size()) return InvalidArgument("ragged nested lists");
  return Status::Ok();
}

template <typename T>
Status StoreLeaf(const rapidjson::Value& v, T* out) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.IsBool()) return InvalidArgument("expected true or false");
    *out = v.GetBool();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.IsString()) return InvalidArgument("expected a string");
    out->assign(v.GetString(), v.GetStringLength());
  } else if constexpr (std::is_integral_v<T>) {
    bool in_range = std::is_signed_v<T>
                        ? v.IsInt64() && v.GetInt64() >= std::numeric_limits<T>::min() &&
                              v.GetInt64() <= std::numeric_limits<T>::max()
                        : v.IsUint64() && v.GetUint64() <= std::numeric_limits<T>::max();
    if (!in_range) return InvalidArgument("expected an integer that fits the input's type");
    *out = std::is_signed_v<T> ? static_cast<T>(v.GetInt64()) : static_cast<T>(v.GetUint64());
  } else {
    if (!v.IsNumber()) return InvalidArgument("expected a number");
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      *out = static_cast<T>(v.GetDouble());
    } else {
      *out = T(static_cast<float>(v.GetDouble()));  // Float16, BFloat16
    }
  }
  return Status::Ok();
}

template <typename T>
StatusOr<Tensor> FillTensor(Tensor t, const std::vector<const rapidjson::Value*>& leaves) {
  T* data = t.data<T>();
  for (size_t i = 0; i < leaves.size(); ++i) {
    Status s = StoreLeaf<T>(*leaves[i], &data[i]);
    if (!s.ok()) return s.WithContext(fmt::format("element {}", i));
  }
  return t;
}

StatusOr<Tensor> JsonToTensor(const rapidjson::Value& v, const ModelInputInfo::Input& input,
                              bool batching) {
  Shape shape;
  std::vector<const rapidjson::Value*> leaves;
  RETURN_IF_ERROR(Flatten(v, 0, &shape, &leaves));
  Tensor t = Tensor::Allocate(input.dtype, WithBatchDim(shape, input, batching));
  if (input.dtype == DataType::kString) return FillTensor<std::string>(std::move(t), leaves);
  return DispatchAll(
      input.dtype,
      [&](auto tag) -> StatusOr<Tensor> {
        return FillTensor<decltype(tag)>(std::move(t), leaves);
      },
      [&]() -> StatusOr<Tensor> {
        return InvalidArgument("input type {} cannot be given in JSON", DataTypeName(input.dtype));
      });
}

const ModelInputInfo::Input* FindInput(const ModelInputInfo& model, std::string_view name) {
  for (const auto& in : model.inputs) {
    if (in.name == name) return &in;
  }
  return nullptr;
}

StatusOr<std::vector<InferInput>> ReadJsonItem(const InputItem& item, const ModelInputInfo& model,
                                               std::string* id) {
  rapidjson::Document doc;
  doc.Parse(item.text.data(), item.text.size());
  if (doc.HasParseError()) {
    return InvalidArgument("{}: malformed JSON at column {}: {}", item.source,
                           doc.GetErrorOffset() + 1, rapidjson::GetParseError_En(doc.GetParseError()));
  }
  if (!doc.IsObject()) return InvalidArgument("{}: a line must be a JSON object", item.source);
  auto id_it = doc.FindMember("id");
  if (id_it != doc.MemberEnd()) {
    const rapidjson::Value& v = id_it->value;
    if (v.IsString()) {
      *id = JsonQuote(std::string_view(v.GetString(), v.GetStringLength()));
    } else if (v.IsInt64() || v.IsUint64()) {
      *id = v.IsInt64() ? std::to_string(v.GetInt64()) : std::to_string(v.GetUint64());
    } else {
      return InvalidArgument("{}: \"id\" must be a string or an integer", item.source);
    }
  }
  auto inputs_it = doc.FindMember("inputs");
  if (inputs_it == doc.MemberEnd() || !inputs_it->value.IsObject()) {
    return InvalidArgument("{}: a line needs an \"inputs\" object", item.source);
  }
  std::vector<InferInput> inputs;
  for (const auto& m : inputs_it->value.GetObject()) {
    std::string name(m.name.GetString(), m.name.GetStringLength());
    const ModelInputInfo::Input* input = FindInput(model, name);
    if (input == nullptr) {
      return InvalidArgument("{}: unknown input '{}' (model inputs: {})", item.source, name,
                             ModelInputNames(model));
    }
    auto tensor = JsonToTensor(m.value, *input, model.batching);
    if (!tensor.ok()) {
      return tensor.status().WithContext(fmt::format("{}: input '{}'", item.source, name));
    }
    inputs.push_back(InferInput{name, std::move(tensor).value()});
  }
  return inputs;
}

}  // namespace

std::string DefaultIdJson(const InputItem& item) {
  if (item.kind == InputItem::Kind::kJsonLine) return JsonQuote(fmt::format("line {}", item.line));
  return JsonQuote(item.id);
}

StatusOr<std::vector<InferInput>> ReadItem(const InputItem& item, const ModelInputInfo& model,
                                           std::string* id) {
  *id = DefaultIdJson(item);
  if (item.kind == InputItem::Kind::kJsonLine) return ReadJsonItem(item, model, id);
  return ReadFileItem(item, model);
}

}  // namespace inferd::batchjob
