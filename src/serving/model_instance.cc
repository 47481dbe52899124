#include "serving/model_instance.h"

#include <algorithm>

#include "batching/batch_assembly.h"

namespace inferd::serving {
namespace {

void Answer(const ModelSignature& sig, ModelStats& stats, InferTask& task, Status s,
            NamedTensors outputs, std::vector<ClassifiedOutput> classified = {}) {
  InferenceResponse response = EmptyResponse(sig, *task.request);
  if (s.ok()) {
    response.outputs = std::move(outputs);
    response.classified = std::move(classified);
  }
  stats.AddPending(-1);
  ResponseCallback cb = std::move(task.callback);
  cb(std::move(s), std::move(response));
}

// Orders a task's outputs as it requested them (all outputs in config order when none was named).
// Implicit-state outputs (`internal`) stay, after the requested ones, for the sequence batcher.
void OrderAsRequested(const ModelSignature& sig, const std::vector<std::string>& requested,
                      NamedTensors* outs) {
  if (requested.empty()) return;
  NamedTensors ordered;
  for (const std::string& n : requested) {
    for (auto& o : *outs) {
      if (o.first == n) ordered.push_back(o);
    }
  }
  for (const OutputSpec& spec : sig.outputs) {
    for (auto& o : *outs) {
      if (spec.internal && o.first == spec.name) ordered.push_back(o);
    }
  }
  *outs = std::move(ordered);
}

bool Wanted(const OutputSpec& spec, std::span<std::unique_ptr<InferTask>> tasks) {
  bool wanted = spec.internal;
  for (auto& t : tasks) {
    const auto& req = t->request->requested_outputs;
    wanted |= req.empty() || std::find(req.begin(), req.end(), spec.name) != req.end();
  }
  return wanted;
}

// `piece` as the task may own it: never a view into the request body (an Identity output may
// alias its input) nor into memory the session keeps.
Tensor Detached(Tensor piece, const InferenceRequest& request) {
  if (!piece.owns_data()) piece = piece.Clone();
  for (const InferInput& in : request.inputs) {
    const auto* p = static_cast<const uint8_t*>(piece.raw_data());
    const auto* b = static_cast<const uint8_t*>(in.tensor.raw_data());
    if (b != nullptr && p >= b && p < b + in.tensor.ByteSize()) piece = piece.Clone();
  }
  return piece;
}

// The model's output `out` (batch + reshape) in the shape the config's dims give the client
// (batch + dims); a single -1 in dims takes the remaining elements.
StatusOr<Tensor> ToConfigDims(const OutputSpec& spec, const Tensor& out, bool batching) {
  Shape shape = spec.dims;
  if (batching) shape.insert(shape.begin(), out.rank() > 0 ? out.dim(0) : 0);
  auto variable = std::find(shape.begin(), shape.end(), -1);
  if (variable != shape.end()) {
    int64_t known = 1;
    for (int64_t d : shape) known *= d == -1 ? 1 : d;
    *variable = known > 0 && out.NumElements() % known == 0 ? out.NumElements() / known : -1;
  }
  auto r = out.Reshaped(shape);
  if (!r.ok()) {
    return Internal("output '{}': the model's shape {} cannot be reshaped to the config's dims {}",
                    spec.name, ShapeToString(out.shape()), ShapeToString(spec.dims));
  }
  return r;
}

}  // namespace

InferenceResponse EmptyResponse(const ModelSignature& sig, const InferenceRequest& r) {
  return InferenceResponse{sig.name, sig.version, r.id, {}};
}

void CompleteTask(const ModelSignature& sig, ModelStats& stats, InferTask& task,
                  NamedTensors outputs) {
  // Outputs requested with `classification` are answered as their top-k strings instead.
  std::vector<ClassifiedOutput> classified;
  for (const auto& entry : task.request->classification) {
    const std::string& name = entry.first;  // clang 14 cannot capture a structured binding
    const int64_t k = entry.second;
    auto it = std::find_if(outputs.begin(), outputs.end(),
                           [&](const auto& o) { return o.first == name; });
    auto spec = std::find_if(sig.outputs.begin(), sig.outputs.end(),
                             [&](const OutputSpec& s) { return s.name == name; });
    if (it == outputs.end() || spec == sig.outputs.end()) continue;
    auto c = Classify(*spec, it->second, sig.batching(), k);
    if (!c.ok()) return FailTask(sig, stats, task, FailureReason::kInvalidInput, c.status());
    classified.push_back(std::move(c).value());
    outputs.erase(it);
  }
  stats.RecordSuccess(NsBetween(task.enqueued, std::chrono::steady_clock::now()));
  Answer(sig, stats, task, Status::Ok(), std::move(outputs), std::move(classified));
}

void FailTask(const ModelSignature& sig, ModelStats& stats, InferTask& task, FailureReason reason,
              Status status) {
  stats.RecordFailure(reason, NsBetween(task.enqueued, std::chrono::steady_clock::now()));
  Answer(sig, stats, task, std::move(status), {});
}

ModelInstance::ModelInstance(int index, const ModelSignature& signature, const Session& session,
                             ModelStats& stats)
    : index_(index), signature_(signature), session_(session), stats_(stats) {}

void ModelInstance::ProcessBatch(std::vector<std::unique_ptr<InferTask>> batch) {
  const SteadyTime start = std::chrono::steady_clock::now();
  for (auto& t : batch) stats_.RecordQueue(NsBetween(t->enqueued, start));
  Execute(std::span(batch), start);
}

void ModelInstance::FailAll(std::span<std::unique_ptr<InferTask>> tasks, FailureReason reason,
                            const Status& status) const {
  for (auto& t : tasks) FailTask(signature_, stats_, *t, reason, status);
}

void ModelInstance::Execute(std::span<std::unique_ptr<InferTask>> tasks, SteadyTime start) {
  std::vector<int64_t> rows;
  int64_t total_rows = 0;
  for (auto& t : tasks) {
    rows.push_back(t->rows);
    total_rows += t->rows;
  }
  NamedTensors feeds;
  bool unbatchable = false;
  if (Status s = MergeInputs(tasks, total_rows, &feeds, &unbatchable); !s.ok()) {
    if (!unbatchable) return FailAll(tasks, FailureReasonFromCode(s.code()), s);
    for (size_t i = 0; i < tasks.size(); ++i) Execute(tasks.subspan(i, 1), start);
    return;
  }
  BatchTimes times{start, std::chrono::steady_clock::now(), {}, {}};

  std::vector<Tensor> results;
  Status run = session_.Run(feeds, &results);
  times.inferred = std::chrono::steady_clock::now();
  if (!run.ok()) {
    if (run.code() == StatusCode::kInvalidArgument && tasks.size() > 1) {
      // The data of some request is bad (an image that does not decode, say) and the kernel can
      // only fail the whole run; the others' requests are fine and must not fail with it. Each is
      // re-run alone, so exactly the bad ones fail, each with its own reason. This costs one
      // extra run per request of the failed batch, only when a batch fails.
      stats_.RecordBatchSplit();
      for (size_t i = 0; i < tasks.size(); ++i) Execute(tasks.subspan(i, 1), start);
      return;
    }
    if (run.code() == StatusCode::kInvalidArgument) {
      return FailAll(tasks, FailureReason::kInvalidInput, run);
    }
    return FailAll(tasks, FailureReason::kInternal, Internal("{}", run.ToString()));
  }
  std::vector<NamedTensors> per_task(tasks.size());
  if (Status s = SplitOutputs(tasks, rows, total_rows, results, &per_task); !s.ok()) {
    return FailAll(tasks, FailureReason::kInternal, s);
  }
  times.outputs_ready = std::chrono::steady_clock::now();
  stats_.RecordExecution(total_rows, tasks.size(), times);

  for (size_t i = 0; i < tasks.size(); ++i) {
    OrderAsRequested(signature_, tasks[i]->request->requested_outputs, &per_task[i]);
    CompleteTask(signature_, stats_, *tasks[i], std::move(per_task[i]));
  }
}

Status ModelInstance::MergeInputs(std::span<std::unique_ptr<InferTask>> tasks, int64_t total_rows,
                                  NamedTensors* feeds, bool* unbatchable) const {
  const bool batching = signature_.batching();
  // Pointers to the requests' tensors where they lie (a Tensor copy is a shape vector and a
  // reference count: 64 of each per input per batch).
  std::vector<const Tensor*> parts;
  parts.reserve(tasks.size());
  for (const InputSpec& spec : signature_.inputs) {
    parts.clear();
    for (auto& t : tasks) {
      for (const InferInput& in : t->request->inputs) {
        if (in.name == spec.name) parts.push_back(&in.tensor);
      }
    }
    Tensor fed;
    if (batching) {
      auto concat = batching::ConcatBatch(
          std::span<const Tensor* const>(parts),
          {.allow_ragged = spec.ragged, .pad_value = signature_.pad_value});
      if (!concat.ok()) {
        // Requests whose shapes cannot share a batch run one by one.
        *unbatchable = tasks.size() > 1;
        return concat.status();
      }
      fed = std::move(concat).value();
    } else {
      if (parts.empty()) return Internal("input '{}' is missing", spec.name);
      fed = *parts[0];
    }
    if (spec.reshape) {
      Shape shape = *spec.reshape;
      if (batching) shape.insert(shape.begin(), total_rows);
      auto r = fed.Reshaped(shape);
      if (!r.ok()) {
        return InvalidArgument("input '{}': cannot reshape {} to {}", spec.name,
                               ShapeToString(fed.shape()), ShapeToString(shape));
      }
      fed = std::move(r).value();
    }
    feeds->emplace_back(spec.name, std::move(fed));
  }
  return Status::Ok();
}

bool ModelInstance::CropShapes(const OutputSpec& spec, const Tensor& out,
                               std::span<std::unique_ptr<InferTask>> tasks,
                               const std::vector<int64_t>& rows,
                               std::vector<Shape>* shapes) const {
  bool crop = false;
  for (size_t i = 0; i < tasks.size(); ++i) {
    Shape s(out.rank(), -1);
    s[0] = rows[i];
    for (size_t d = 1; d < spec.follows.size() && d < s.size(); ++d) {
      auto [k, e] = spec.follows[d];
      if (k < 0) continue;
      for (const InferInput& in : tasks[i]->request->inputs) {
        if (in.name == signature_.inputs[k].name && e < in.tensor.rank()) s[d] = in.tensor.dim(e);
      }
      crop |= s[d] != out.dim(d);
    }
    shapes->push_back(std::move(s));
  }
  return crop;
}

Status ModelInstance::SplitOutputs(std::span<std::unique_ptr<InferTask>> tasks,
                                   const std::vector<int64_t>& rows, int64_t total_rows,
                                   const std::vector<Tensor>& results,
                                   std::vector<NamedTensors>* per_task) const {
  for (const OutputSpec& spec : signature_.outputs) {
    if (!Wanted(spec, tasks)) continue;
    if (spec.model_index >= results.size()) {
      return Internal("model '{}' produced no output '{}'", signature_.name, spec.name);
    }
    Tensor out = results[spec.model_index];
    if (spec.reshape) {
      if (signature_.batching() && (out.rank() < 1 || out.dim(0) != total_rows)) {
        return Internal("output '{}' has shape {}, expected a batch of {}", spec.name,
                        ShapeToString(out.shape()), total_rows);
      }
      ASSIGN_OR_RETURN(out, ToConfigDims(spec, out, signature_.batching()));
    }
    std::vector<Tensor> pieces;
    if (signature_.batching()) {
      if (out.rank() < 1 || out.dim(0) != total_rows) {
        return Internal("output '{}' has shape {}, expected a batch of {}", spec.name,
                        ShapeToString(out.shape()), total_rows);
      }
      std::vector<Shape> shapes;
      const bool crop = CropShapes(spec, out, tasks, rows, &shapes);
      // Uncropped pieces are views of the batch's output sharing its buffer (no allocation or
      // copy per request); cropped ones are copies of their corner.
      auto split = crop || !out.owns_data() || out.is_string()
                       ? batching::SplitBatch(out, rows, crop ? std::span<const Shape>(shapes)
                                                              : std::span<const Shape>())
                       : batching::SplitBatchShared(out, rows);
      if (!split.ok()) return Internal("output '{}': {}", spec.name, split.status().message());
      pieces = std::move(split).value();
    } else {
      pieces.push_back(out);
    }
    for (size_t i = 0; i < tasks.size(); ++i) {
      (*per_task)[i].emplace_back(spec.name, Detached(pieces[i], *tasks[i]->request));
    }
  }
  return Status::Ok();
}

}  // namespace inferd::serving
