// Turning one input (inputs.h) into the tensors of one inference request.
//
// Files:
//   - a model whose single input is BYTES gets the file's bytes as its one element (images for
//     an image pre-processor, text, ...), shaped [1, 1, ...] to the input's rank (plus the
//     batch dim when the model batches);
//   - a model with a single numeric input gets a `.npy` file's tensor; when its rank is the
//     input's rank without the batch dim and the model batches, a batch dim of 1 is prepended;
//   - anything else is an error naming the file and what the model expects.
// JSONL lines (one object per line):
//   {"id": "cat-7", "inputs": {"x": [[0.5, 1.0], [2, 3]], "mask": 1, "text": "hello"}}
//   - "id": a string or a number, echoed in the output record; default "line N";
//   - "inputs": an object with one member per model input: a scalar or nested lists
//     (rectangular), numbers for numeric inputs (integers must be integral and in range), true /
//     false for BOOL, strings for BYTES. The shape is the nesting; when the model batches and the
//     nesting's rank is the input's rank without the batch dim, a batch dim of 1 is prepended.
//   Malformed JSON, a missing "inputs", an unknown input name, ragged lists or a value of the
//   wrong kind are INVALID_ARGUMENT naming the line (they become error records, not a crash).
//   Missing inputs, wrong shapes and batch sizes are left to the model's request validation.
#pragma once

#include <string>
#include <vector>

#include "batchjob/inputs.h"
#include "common/data_type.h"
#include "common/status.h"
#include "serving/inference.h"

namespace inferd::batchjob {

// What the reader needs to know of the model's inputs (from ModelManager metadata and config).
struct ModelInputInfo {
  struct Input {
    std::string name;
    DataType dtype = DataType::kUndefined;
    std::vector<int64_t> dims;  // without the batch dim; -1 = variable
  };
  std::vector<Input> inputs;
  bool batching = false;  // max_batch_size > 0: requests carry a leading batch dim
};

// The request's inputs for `item`; `*id` gets the record's id as JSON text (a JSON string or
// number), also when reading fails (the JSONL line's id if it could be parsed, else the default).
StatusOr<std::vector<serving::InferInput>> ReadItem(const InputItem& item,
                                                    const ModelInputInfo& model,
                                                    std::string* id);

// A file item's inputs from its bytes, given rather than read from `item.path` (a queue worker
// receives them in the stream entry); `item.path`'s extension still says whether it is a .npy.
StatusOr<std::vector<serving::InferInput>> FileItemInputs(const InputItem& item, std::string bytes,
                                                          const ModelInputInfo& model);

// The default id of an item as JSON text: a file's id, or "line N" for a JSONL line.
std::string DefaultIdJson(const InputItem& item);

}  // namespace inferd::batchjob
