// Built-in processing models: model folders whose config.pbtxt names backend "inferd_image" (an
// image pre-processor) or "inferd_classify" (a classifier post-processor) and that hold no model
// file — only config.pbtxt, an (empty) version folder and, for the classifier, a labels file.
// ModelVersion builds a one-node graph from the config here instead of reading model.onnx, and runs
// it like any model: batching, instances, statistics and ensembles (docs/serving.md, "Processing
// models").
//
//   name: "preprocess"  backend: "inferd_image"  max_batch_size: 32
//   parameters { key: "resize" value { string_value: "256" } }
//   parameters { key: "crop" value { string_value: "224" } }
//   parameters { key: "mean" value { string_value: "0.485,0.456,0.406" } }
//   parameters { key: "std" value { string_value: "0.229,0.224,0.225" } }
//
// inferd_image: input a BYTES tensor, dims [1] (one encoded JPEG or PNG per batch row), output
// [3, crop_h, crop_w] (NCHW) or [crop_h, crop_w, 3] (NHWC), FP32 or UINT8 — the node
// ai.inferd.DecodeResizeCrop (kernels/cpu/image). Parameters: resize, crop ("224" or "HxW"),
// mean, std (3 numbers each), scale (1/255), layout (NCHW | NHWC), data_type (FP32 | UINT8, else
// the config output's data_type), channel_order (RGB | BGR), max_pixels (64 Mi), dct_scaling
// (true | false).
// inferd_classify: input FP32 scores [C], output BYTES [k] of "score:index:label" — the node
// ai.inferd.ClassifyTopK. Parameters: k (1), softmax (false), labels (a file in the model folder,
// one label per line, like Triton's label_filename).
//
// Tensor names are the config's input and output names (INPUT and OUTPUT when the config lists
// none). A bad or unknown parameter fails the load with INVALID_ARGUMENT naming it.
#pragma once

#include <filesystem>

#include "common/status.h"
#include "graph/graph.h"
#include "model_config.pb.h"

namespace inferd::serving {

inline constexpr char kImageBackend[] = "inferd_image";
inline constexpr char kClassifyBackend[] = "inferd_classify";

// Whether `config` names one of the processing backends.
bool IsProcessingModel(const inference::ModelConfig& config);

// The model of a processing `config`; `model_dir` is the model's folder (for the labels file).
StatusOr<Model> BuildProcessingModel(const inference::ModelConfig& config,
                                     const std::filesystem::path& model_dir);

// Whether the default warmup (zero-filled inputs) means anything for `config`: false for the image
// pre-processor, where a zero is not an image (it would only fail) and there is no per-shape state
// to warm. A model_warmup in the config still runs.
bool DefaultWarmupRuns(const inference::ModelConfig& config);

}  // namespace inferd::serving
