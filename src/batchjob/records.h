// The output records of a batch job: one JSON object per line (JSONL), one per input.
//
//   {"id":"cat.jpg","source":"imgs/cat.jpg","outputs":{"logits":{"datatype":"FP32",
//    "shape":[1,1000],"data":[0.12,-3.5,...]}}}
//   {"id":"line 7","source":"req.jsonl:7","error":"req.jsonl:7: malformed JSON at column 3: ..."}
//
// `source` is the resume key (inputs.h); `id` is the input's id (a JSON string or number).
// Outputs are KServe-like: datatype, shape (as the engine returned it, batch dim included) and
// the elements flattened in row-major order. Floating-point numbers are written in their shortest
// form that reads back to the same value; NaN and infinities, which JSON cannot hold, are null.
// Classification outputs (InferenceResponse::classified) are BYTES outputs of strings.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "serving/inference.h"

namespace inferd::batchjob {

// A JSON string literal for `text` (quoted and escaped; bytes that are not valid UTF-8 are
// written as \u00XX of each byte, so any file name stays one valid JSON string).
std::string JsonQuote(std::string_view text);

// One record line, newline included. `id_json` is JSON text (item_reader.h's ReadItem).
std::string FormatRecord(std::string_view id_json, std::string_view source,
                         const serving::InferenceResponse& response);
std::string FormatErrorRecord(std::string_view id_json, std::string_view source,
                              std::string_view reason);

// What resume needs of a record line (without its newline).
struct RecordKey {
  std::string source;
  bool is_error = false;
};
// INVALID_ARGUMENT when the line is not a JSON object with a string "source".
// `source` reads back as SourceKey(the input's source).
StatusOr<RecordKey> ParseRecordKey(std::string_view line);
// The source as a record reads back: equal to `source` unless it has bytes that are not UTF-8
// (JsonQuote writes each as the code point U+00XX).
std::string SourceKey(std::string_view source);

}  // namespace inferd::batchjob
