#include "serving/ensemble.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <set>

#include "serving/model_config.h"
#include "serving/model_instance.h"

namespace inferd::serving {
namespace {

using inference::ModelConfig;

bool ShapesAgree(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != -1 && b[i] != -1 && a[i] != b[i]) return false;
  }
  return true;
}

// A tensor as one side of the dataflow sees it: data type and full shape (batch dim included).
struct TensorView {
  DataType dtype = DataType::kUndefined;
  Shape shape;
  std::string who;  // "step 0 ('a') output 'y'", "the ensemble input 'x'"
};

Shape FullShape(const Shape& dims, bool batching) {
  Shape s = dims;
  if (batching) s.insert(s.begin(), -1);
  return s;
}

// Runs queued work on this thread after the current item instead of recursing into it, so a
// chain of steps that complete at once (a step whose model is gone fails synchronously and lets
// the next waiting one in) runs in a loop, not ever deeper.
void RunFlat(std::function<void()> work) {
  thread_local std::deque<std::function<void()>>* queue = nullptr;
  if (queue != nullptr) {
    queue->push_back(std::move(work));
    return;
  }
  std::deque<std::function<void()>> local;
  local.push_back(std::move(work));
  queue = &local;
  while (!local.empty()) {
    std::function<void()> next = std::move(local.front());
    local.pop_front();
    next();
  }
  queue = nullptr;
}

}  // namespace


// ---- creation: the graph and its checks against the composing models ----

void EnsembleHostLink::Reset() {
  MutexLock l(&mu_);
  host_ = nullptr;
}

StatusOr<ModelSignature> EnsembleHostLink::StepSignature(const std::string& name,
                                                         int64_t version) const {
  MutexLock l(&mu_);
  if (host_ == nullptr) return Unavailable("the server is shutting down");
  return host_->StepSignature(name, version);
}

void EnsembleHostLink::InferStep(std::unique_ptr<InferenceRequest> request,
                                 ResponseCallback callback) {
  EnsembleHost* host;
  {
    MutexLock l(&mu_);
    host = host_;
  }
  if (host == nullptr) {
    InferenceResponse r{request->model_name, request->model_version, request->id, {}};
    return callback(Unavailable("the server is shutting down"), std::move(r));
  }
  host->InferStep(std::move(request), std::move(callback));
}

StatusOr<std::shared_ptr<Ensemble>> Ensemble::Create(ModelSignature signature,
                                                     const ModelConfig& config,
                                                     std::shared_ptr<EnsembleHostLink> host) {
  std::shared_ptr<Ensemble> e(new Ensemble(std::move(signature), std::move(host)));
  RETURN_IF_ERROR(e->Build(config));
  const uint32_t cap = config.ensemble_scheduling().max_inflight_requests();
  for (size_t s = 0; s < e->steps_.size(); ++s) {
    e->gates_.push_back(cap > 0 ? std::make_unique<Gate>(static_cast<int>(cap)) : nullptr);
  }
  return e;
}

Status Ensemble::Build(const ModelConfig& config) {
  std::map<std::string, int> ids;
  auto id_of = [&](const std::string& tensor) {
    auto [it, added] = ids.emplace(tensor, static_cast<int>(tensor_names_.size()));
    if (added) tensor_names_.push_back(tensor);
    return it->second;
  };
  for (const auto& in : signature_.inputs) input_ids_.push_back(id_of(in.name));
  const auto& steps = config.ensemble_scheduling().step();
  for (int s = 0; s < steps.size(); ++s) {
    Step step;
    step.model = steps[s].model_name();
    step.version = steps[s].model_version() < 1 ? -1 : steps[s].model_version();  // unset: latest
    step.label = EnsembleStepLabel(s, steps[s]);
    for (const auto& [key, tensor] : SortedMapEntries(steps[s].input_map())) {
      step.inputs.emplace_back(key, id_of(tensor));
    }
    for (const auto& [key, tensor] : SortedMapEntries(steps[s].output_map())) {
      step.outputs.emplace_back(key, id_of(tensor));
    }
    steps_.push_back(std::move(step));
  }
  for (const auto& out : signature_.outputs) output_ids_.push_back(id_of(out.name));
  consumers_.resize(tensor_names_.size());
  std::vector<bool> produced_by_step(tensor_names_.size(), false);
  for (const Step& step : steps_) {
    for (const auto& [_, id] : step.outputs) produced_by_step[id] = true;
  }
  for (int s = 0; s < static_cast<int>(steps_.size()); ++s) {
    std::set<int> reads;
    for (const auto& [_, id] : steps_[s].inputs) reads.insert(id);
    int waits = 0;
    for (int id : reads) {
      consumers_[id].push_back(s);
      waits += produced_by_step[id] ? 1 : 0;
    }
    waits_.push_back(waits);
  }
  return CheckTypes();
}

Status Ensemble::CheckStep(const Step& step, const ModelSignature& model) const {
  auto names = [](const auto& specs) {
    std::string out;
    for (const auto& s : specs) {
      if (!s.internal) out += (out.empty() ? "" : ", ") + s.name;
    }
    return out;
  };
  for (const auto& mapping : step.inputs) {
    const std::string& key = mapping.first;  // clang 14 cannot capture a structured binding
    auto it = std::find_if(model.inputs.begin(), model.inputs.end(),
                           [&](const InputSpec& s) { return s.name == key && !s.internal; });
    if (it == model.inputs.end()) {
      return InvalidArgument("ensemble '{}' {}: input_map key '{}' is not an input of model "
                             "'{}' (inputs: {})",
                             signature_.name, step.label, key, step.model, names(model.inputs));
    }
  }
  for (const InputSpec& in : model.inputs) {
    if (in.internal) continue;
    const bool mapped = std::any_of(step.inputs.begin(), step.inputs.end(),
                                    [&](const auto& m) { return m.first == in.name; });
    if (!mapped) {
      return InvalidArgument("ensemble '{}' {}: input '{}' of model '{}' is not in input_map",
                             signature_.name, step.label, in.name, step.model);
    }
  }
  for (const auto& mapping : step.outputs) {
    const std::string& key = mapping.first;
    auto it = std::find_if(model.outputs.begin(), model.outputs.end(),
                           [&](const OutputSpec& s) { return s.name == key && !s.internal; });
    if (it == model.outputs.end()) {
      return InvalidArgument("ensemble '{}' {}: output_map key '{}' is not an output of model "
                             "'{}' (outputs: {})",
                             signature_.name, step.label, key, step.model, names(model.outputs));
    }
  }
  if (signature_.batching() && model.batching() &&
      model.max_batch_size < signature_.max_batch_size) {
    return InvalidArgument("ensemble '{}' {}: model '{}' has max_batch_size {}, below the "
                           "ensemble's {}",
                           signature_.name, step.label, step.model, model.max_batch_size,
                           signature_.max_batch_size);
  }
  return Status::Ok();
}

Status Ensemble::CheckTypes() {
  // What produces each tensor, then every consumer against it.
  std::vector<TensorView> produced(tensor_names_.size());
  for (size_t i = 0; i < signature_.inputs.size(); ++i) {
    const InputSpec& in = signature_.inputs[i];
    produced[input_ids_[i]] = {in.dtype, FullShape(in.dims, signature_.batching()),
                               fmt::format("ensemble input '{}'", in.name)};
  }
  std::vector<ModelSignature> models;
  for (const Step& step : steps_) {
    auto sig = host_->StepSignature(step.model, step.version);
    if (!sig.ok()) {
      return Status(sig.status().code(), fmt::format("ensemble '{}' {}: {}", signature_.name,
                                                     step.label, sig.status().message()));
    }
    RETURN_IF_ERROR(CheckStep(step, *sig));
    for (const auto& [key, id] : step.outputs) {
      for (const OutputSpec& o : sig->outputs) {
        if (o.name == key) {
          produced[id] = {o.dtype, FullShape(o.dims, sig->batching()),
                          fmt::format("{} output '{}'", step.label, key)};
        }
      }
    }
    models.push_back(std::move(sig).value());
  }
  auto agree = [&](int id, DataType dtype, const Shape& shape, const std::string& who) {
    const TensorView& p = produced[id];
    if (p.dtype != dtype) {
      return InvalidArgument("ensemble '{}': {} (tensor '{}') is {} but {} is {}", signature_.name,
                             who, tensor_names_[id], DataTypeName(dtype), p.who,
                             DataTypeName(p.dtype));
    }
    if (!ShapesAgree(p.shape, shape)) {
      return InvalidArgument("ensemble '{}': {} (tensor '{}') has shape {} but {} has {}",
                             signature_.name, who, tensor_names_[id], ShapeToString(shape), p.who,
                             ShapeToString(p.shape));
    }
    return Status::Ok();
  };
  for (size_t s = 0; s < steps_.size(); ++s) {
    for (const auto& [key, id] : steps_[s].inputs) {
      for (const InputSpec& in : models[s].inputs) {
        if (in.name != key) continue;
        RETURN_IF_ERROR(agree(id, in.dtype, FullShape(in.dims, models[s].batching()),
                              fmt::format("{} input '{}'", steps_[s].label, key)));
      }
    }
  }
  for (size_t i = 0; i < signature_.outputs.size(); ++i) {
    const OutputSpec& out = signature_.outputs[i];
    RETURN_IF_ERROR(agree(output_ids_[i], out.dtype, FullShape(out.dims, signature_.batching()),
                          fmt::format("ensemble output '{}'", out.name)));
  }
  return Status::Ok();
}

// ---- running a request ----

struct Ensemble::RunState {
  std::shared_ptr<Ensemble> ensemble;  // keeps the ensemble alive while the request runs
  InferTask task;                      // the ensemble request, its callback and timing
  Mutex mu;
  std::vector<Tensor> tensors GUARDED_BY(mu);  // by tensor id; undefined until produced
  std::vector<int> waits GUARDED_BY(mu);       // per step: input tensors not produced yet
  int running GUARDED_BY(mu) = 0;              // steps started (or at their gate), not done
  int unfinished GUARDED_BY(mu) = 0;           // steps not done
  Status failure GUARDED_BY(mu);
  std::atomic<bool> failed{false};
};

void Ensemble::Gate::Enter(std::function<void()> start) {
  {
    MutexLock l(&mu_);
    if (in_flight_ >= limit_) {
      waiting_.push_back(std::move(start));
      return;
    }
    ++in_flight_;
  }
  start();
}

void Ensemble::Gate::Leave() {
  std::function<void()> next;
  {
    MutexLock l(&mu_);
    if (waiting_.empty()) {
      --in_flight_;
      return;
    }
    next = std::move(waiting_.front());  // takes over the slot
    waiting_.pop_front();
  }
  RunFlat(std::move(next));
}

void Ensemble::Run(std::unique_ptr<InferenceRequest> request, int64_t rows,
                   ResponseCallback callback) {
  auto run = std::make_shared<RunState>();
  run->ensemble = shared_from_this();
  run->task.rows = rows;
  run->task.enqueued = std::chrono::steady_clock::now();
  run->task.callback = std::move(callback);
  run->task.request = std::move(request);
  stats_.AddPending(1);
  std::vector<int> ready;
  {
    MutexLock l(&run->mu);
    run->tensors.resize(tensor_names_.size());
    for (const InferInput& in : run->task.request->inputs) {
      for (size_t i = 0; i < signature_.inputs.size(); ++i) {
        if (signature_.inputs[i].name == in.name) run->tensors[input_ids_[i]] = in.tensor;
      }
    }
    run->waits = waits_;
    for (size_t s = 0; s < steps_.size(); ++s) {
      if (waits_[s] == 0) ready.push_back(static_cast<int>(s));
    }
    run->unfinished = static_cast<int>(steps_.size());
    run->running = static_cast<int>(ready.size());
  }
  for (int s : ready) Launch(run, s);
}

void Ensemble::Launch(const std::shared_ptr<RunState>& run, int s) {
  if (gates_[s] == nullptr) return Dispatch(run, s);
  gates_[s]->Enter([this, run, s] { Dispatch(run, s); });
}

void Ensemble::Dispatch(const std::shared_ptr<RunState>& run, int s) {
  if (run->failed.load()) return StepDone(run, s, Status::Ok(), {}, /*skipped=*/true);
  const Step& step = steps_[s];
  const InferenceRequest& outer = *run->task.request;
  auto req = std::make_unique<InferenceRequest>();
  req->model_name = step.model;
  req->model_version = step.version;
  req->id = outer.id;
  req->priority = outer.priority;
  req->sequence_id = outer.sequence_id;
  req->sequence_id_string = outer.sequence_id_string;
  req->sequence_start = outer.sequence_start;
  req->sequence_end = outer.sequence_end;
  {
    MutexLock l(&run->mu);
    for (const auto& [name, id] : step.inputs) req->inputs.push_back({name, run->tensors[id]});
  }
  for (const auto& [name, _] : step.outputs) req->requested_outputs.push_back(name);
  req->body = run;  // the inputs share the run's tensors (or view the ensemble request's body)
  host_->InferStep(std::move(req), [run, s](Status status, InferenceResponse response) {
    run->ensemble->StepDone(run, s, std::move(status), std::move(response), false);
  });
}

void Ensemble::StepDone(const std::shared_ptr<RunState>& run, int s, Status status,
                        InferenceResponse response, bool skipped) {
  const Step& step = steps_[s];
  std::vector<int> ready;
  bool done = false;
  {
    MutexLock l(&run->mu);
    --run->running;
    --run->unfinished;
    if (!skipped && status.ok() && !run->failed.load()) {
      for (const auto& mapping : step.outputs) {
        const std::string& name = mapping.first;
        const int id = mapping.second;
        auto it = std::find_if(response.outputs.begin(), response.outputs.end(),
                               [&](const auto& o) { return o.first == name; });
        if (it == response.outputs.end()) {
          status = Internal("model '{}' returned no output '{}'", step.model, name);
          break;
        }
        run->tensors[id] = std::move(it->second);
      }
    }
    if (!skipped && !status.ok() && run->failure.ok()) {
      run->failure = Status(status.code(), fmt::format("ensemble '{}' {}: {}", signature_.name,
                                                       step.label, status.message()));
      run->failed.store(true);
    }
    if (!run->failed.load() && !skipped) {
      for (const auto& [_, id] : step.outputs) {
        for (int c : consumers_[id]) {
          if (--run->waits[c] == 0) ready.push_back(c);
        }
      }
    }
    run->running += static_cast<int>(ready.size());
    done = run->running == 0 && (run->failed.load() || run->unfinished == 0);
  }
  for (int c : ready) RunFlat([this, run, c] { Launch(run, c); });
  if (gates_[s] != nullptr) gates_[s]->Leave();
  if (done) Finish(run);
}

void Ensemble::Finish(const std::shared_ptr<RunState>& run) {
  Status failure;
  NamedTensors outputs;
  {
    MutexLock l(&run->mu);
    failure = run->failure;
    const auto& requested = run->task.request->requested_outputs;
    for (size_t i = 0; i < signature_.outputs.size() && failure.ok(); ++i) {
      const std::string& name = signature_.outputs[i].name;
      if (requested.empty() ||
          std::find(requested.begin(), requested.end(), name) != requested.end()) {
        outputs.emplace_back(name, run->tensors[output_ids_[i]]);
      }
    }
    if (!requested.empty()) {  // in the order asked for
      NamedTensors ordered;
      for (const std::string& n : requested) {
        for (auto& o : outputs) {
          if (o.first == n) ordered.push_back(std::move(o));
        }
      }
      outputs = std::move(ordered);
    }
  }
  if (!failure.ok()) {
    const FailureReason reason = FailureReasonFromCode(failure.code());
    FailTask(signature_, stats_, run->task, reason, std::move(failure));
    return;
  }
  stats_.RecordInference(run->task.rows);
  CompleteTask(signature_, stats_, run->task, std::move(outputs));
}

}  // namespace inferd::serving
