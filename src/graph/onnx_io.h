// ONNX import and export through Debian's libonnx (protobuf).
//
// Import runs the onnx checker and shape inference, resolves external-data initializers relative to
// the model's folder, converts every TensorProto to a Tensor, and topologically sorts the nodes.
// Errors (missing file, truncated or corrupt protobuf, checker failures) come back as Status with a
// one-line message; nothing throws.
#pragma once

#include <filesystem>
#include <string>

#include "common/status.h"
#include "common/tensor.h"
#include "graph/graph.h"

namespace onnx {
class TensorProto;
}

namespace inferd {

struct ImportOptions {
  // Run onnx::checker::check_model (full check) before conversion.
  bool run_checker = true;
  // Run onnx shape inference to fill value_info for intermediate values.
  bool run_shape_inference = true;
};

// Loads a model file. External data files are resolved relative to the model's folder.
StatusOr<Model> LoadOnnxModel(const std::filesystem::path& path, const ImportOptions& options = {});
// Loads a model from serialized bytes. `base_dir` resolves external data (may be empty).
StatusOr<Model> ParseOnnxModel(const std::string& bytes, const std::filesystem::path& base_dir,
                               const ImportOptions& options = {});

// Converts one TensorProto (raw_data, typed fields, or external data under base_dir).
StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& proto,
                                 const std::filesystem::path& base_dir);
// Reads a serialized TensorProto file (the .pb files of the ONNX backend tests).
StatusOr<Tensor> LoadTensorProtoFile(const std::filesystem::path& path, std::string* name = nullptr);

// Serializes a Model back to ONNX (initializers inline as raw_data).
StatusOr<std::string> SerializeOnnxModel(const Model& model);
Status SaveOnnxModel(const Model& model, const std::filesystem::path& path);

}  // namespace inferd
