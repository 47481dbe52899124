#include "serving/sequence_batcher.h"

#include <algorithm>
#include <cstring>

#include "serving/model_config.h"

namespace inferd::serving {
namespace {

using Control = inference::ModelSequenceBatching::Control;

constexpr std::chrono::microseconds kDefaultIdle{1'000'000};  // Triton's default

// A control tensor of `dtype` holding `value`: [1, 1] when the model batches, else [1].
Tensor ControlTensor(DataType dtype, bool batching, double value, uint64_t corrid) {
  Tensor t = Tensor::Allocate(dtype, batching ? Shape{1, 1} : Shape{1});
  switch (dtype) {
    case DataType::kInt32: *t.data<int32_t>() = static_cast<int32_t>(corrid ? corrid : value); break;
    case DataType::kUInt32: *t.data<uint32_t>() = static_cast<uint32_t>(corrid); break;
    case DataType::kInt64: *t.data<int64_t>() = static_cast<int64_t>(corrid); break;
    case DataType::kUInt64: *t.data<uint64_t>() = corrid; break;
    case DataType::kFloat32: *t.data<float>() = static_cast<float>(value); break;
    case DataType::kBool: *t.data<bool>() = value != 0; break;
    default: std::memset(t.raw_data(), 0, t.ByteSize()); break;
  }
  return t;
}

// The config's false (flag = false) or true value of a START/END/READY control.
double FlagValue(const Control& c, bool flag) {
  const int i = flag ? 1 : 0;
  if (c.int32_false_true_size() == 2) return c.int32_false_true(i);
  if (c.fp32_false_true_size() == 2) return c.fp32_false_true(i);
  if (c.bool_false_true_size() == 2) return c.bool_false_true(i) ? 1 : 0;
  return flag;
}

const InputSpec* FindInput(const ModelSignature& sig, const std::string& name) {
  for (const InputSpec& s : sig.inputs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

}  // namespace

StatusOr<std::unique_ptr<SequenceBatcher>> SequenceBatcher::Create(
    const ModelSignature& signature, const inference::ModelConfig& config, int instances,
    Clock& clock, ScheduleFn schedule, FailFn fail) {
  if (!config.has_sequence_batching()) return InvalidArgument("the config has no sequence_batching");
  const auto& sb = config.sequence_batching();
  size_t slots = static_cast<size_t>(std::max(1, config.max_batch_size())) *
                 static_cast<size_t>(std::max(1, instances));
  if (sb.has_oldest() && sb.oldest().max_candidate_sequences() > 0) {
    slots = static_cast<size_t>(sb.oldest().max_candidate_sequences());
  }
  if (!schedule || !fail) return InvalidArgument("schedule and fail callbacks are required");
  return std::unique_ptr<SequenceBatcher>(new SequenceBatcher(
      signature, config, slots, clock, std::move(schedule), std::move(fail)));
}

SequenceBatcher::SequenceBatcher(const ModelSignature& signature,
                                 const inference::ModelConfig& config, size_t slots, Clock& clock,
                                 ScheduleFn schedule, FailFn fail)
    : signature_(signature),
      config_(config.sequence_batching()),
      slots_(slots),
      idle_(config.sequence_batching().max_sequence_idle_microseconds() > 0
                ? std::chrono::microseconds(
                      config.sequence_batching().max_sequence_idle_microseconds())
                : kDefaultIdle),
      clock_(clock),
      schedule_(std::move(schedule)),
      fail_(std::move(fail)) {
  reaper_ = std::thread([this] { ReaperLoop(); });
}

SequenceBatcher::~SequenceBatcher() { Shutdown(); }

Clock::TimePoint SequenceBatcher::NextIdleLocked() const {
  Clock::TimePoint next = Clock::kForever;
  for (const auto& [key, seq] : sequences_) {
    if (seq.has_slot && !seq.in_flight && seq.pending.empty()) {
      next = std::min(next, seq.last + idle_ + std::chrono::microseconds(1));
    }
  }
  return next;
}

void SequenceBatcher::ReaperLoop() {
  ReleasableMutexLock l(&mu_);
  while (!stopping_) {
    const Clock::TimePoint next = NextIdleLocked();
    const Clock::TimePoint now = clock_.Now();
    if (now < next) {
      reaper_cv_.WaitUntil(&mu_, clock_, next);
      continue;
    }
    Actions actions;
    ExpireIdleLocked(now, &actions);
    l.Unlock();
    Run(std::move(actions));
    l.Lock();
  }
}

std::string SequenceBatcher::Key(const InferenceRequest& r) {
  if (!r.sequence_id_string.empty()) return "s:" + r.sequence_id_string;
  if (r.sequence_id != 0) return "u:" + std::to_string(r.sequence_id);
  return "";
}

Status SequenceBatcher::CheckRequest(const InferenceRequest& r) const {
  if (Key(r).empty()) {
    return InvalidArgument("inference request to model '{}' must specify a non-zero or non-empty "
                           "correlation ID",
                           signature_.name);
  }
  for (const auto& ci : config_.control_input()) {
    if (ci.control(0).kind() == Control::CONTROL_SEQUENCE_CORRID &&
        !r.sequence_id_string.empty()) {
      return InvalidArgument("inference request to model '{}': the CORRID control '{}' is {} but "
                             "the correlation ID is a string",
                             signature_.name, ci.name(),
                             inference::DataType_Name(ci.control(0).data_type()));
    }
  }
  return Status::Ok();
}

void SequenceBatcher::Enqueue(std::unique_ptr<InferTask> task) {
  const InferenceRequest& r = *task->request;
  Status bad = CheckRequest(r);
  if (bad.ok() && task->rows != 1) {
    bad = InvalidArgument("inference request to model '{}' must specify batch-size 1 due to "
                          "requirements of sequence batcher",
                          signature_.name);
  }
  if (!bad.ok()) return fail_(*task, FailureReason::kInvalidInput, std::move(bad));
  const std::string key = Key(r);
  Actions actions;
  {
    MutexLock l(&mu_);
    const Clock::TimePoint now = clock_.Now();
    ExpireIdleLocked(now, &actions);
    AddLocked(key, std::move(task), now, &actions);
  }
  Run(std::move(actions));
}

void SequenceBatcher::AddLocked(const std::string& key, std::unique_ptr<InferTask> task,
                                Clock::TimePoint now, Actions* actions) {
  const InferenceRequest& r = *task->request;
  auto it = sequences_.find(key);
  if (stopping_) {
    actions->fail.emplace_back(std::move(task),
                               Unavailable("model '{}' is shutting down", signature_.name));
    return;
  }
  if (it == sequences_.end() && !r.sequence_start) {
    const std::string label =
        r.sequence_id_string.empty() ? std::to_string(r.sequence_id) : r.sequence_id_string;
    actions->fail.emplace_back(
        std::move(task),
        InvalidArgument("inference request for sequence {} to model '{}' must specify the "
                        "START flag on the first request of the sequence",
                        label, signature_.name));
    return;
  }
  if (it == sequences_.end()) {
    Sequence seq;
    seq.string_id = !r.sequence_id_string.empty();
    seq.id = r.sequence_id;
    seq.label = seq.string_id ? r.sequence_id_string : std::to_string(r.sequence_id);
    it = sequences_.emplace(key, std::move(seq)).first;
  }
  Sequence& seq = it->second;
  seq.last = now;
  seq.pending.push_back(std::move(task));
  if (!seq.has_slot && std::find(backlog_.begin(), backlog_.end(), key) == backlog_.end()) {
    if (used_slots_ < slots_) {
      seq.has_slot = true;
      ++used_slots_;
    } else {
      backlog_.push_back(key);
    }
  }
  AdvanceLocked(key, seq, actions);
}

void SequenceBatcher::ExpireIdleLocked(Clock::TimePoint now, Actions* actions) {
  std::vector<std::string> idle;
  for (const auto& [key, seq] : sequences_) {
    if (seq.has_slot && !seq.in_flight && seq.pending.empty() && now - seq.last > idle_) {
      idle.push_back(key);
    }
  }
  for (const std::string& key : idle) ReleaseLocked(key, actions);
}

void SequenceBatcher::ReleaseLocked(const std::string& key, Actions* actions) {
  auto it = sequences_.find(key);
  if (it == sequences_.end()) return;
  const bool had_slot = it->second.has_slot;
  for (auto& t : it->second.pending) {
    actions->fail.emplace_back(std::move(t), Unavailable("sequence {} of model '{}' was released",
                                                         it->second.label, signature_.name));
  }
  sequences_.erase(it);
  if (!had_slot) return;
  --used_slots_;
  // The oldest backlogged sequence takes the freed slot.
  while (!backlog_.empty() && used_slots_ < slots_) {
    const std::string next = backlog_.front();
    backlog_.pop_front();
    auto n = sequences_.find(next);
    if (n == sequences_.end()) continue;
    n->second.has_slot = true;
    ++used_slots_;
    AdvanceLocked(next, n->second, actions);
  }
}

void SequenceBatcher::AdvanceLocked(const std::string& key, Sequence& seq, Actions* actions) {
  while (seq.has_slot && !seq.in_flight && !seq.pending.empty()) {
    std::unique_ptr<InferTask> task = std::move(seq.pending.front());
    seq.pending.pop_front();
    if (stopping_) {
      actions->fail.emplace_back(std::move(task), Unavailable("model '{}' is shutting down",
                                                              signature_.name));
      continue;
    }
    Status s = PrepareLocked(key, seq, *task);
    if (!s.ok()) {
      actions->fail.emplace_back(std::move(task), std::move(s));
      continue;
    }
    seq.in_flight = true;
    actions->run.push_back(std::move(task));
  }
}

Status SequenceBatcher::PrepareLocked(const std::string& key, Sequence& seq, InferTask& task) {
  InferenceRequest& r = *task.request;
  const bool batching = signature_.batching();
  for (const auto& ci : config_.control_input()) {
    const InputSpec* spec = FindInput(signature_, ci.name());
    if (spec == nullptr) return Internal("control input '{}' has no spec", ci.name());
    const Control& c = ci.control(0);
    double value = 0;
    uint64_t corrid = 0;
    switch (c.kind()) {
      case Control::CONTROL_SEQUENCE_START: value = FlagValue(c, r.sequence_start); break;
      case Control::CONTROL_SEQUENCE_END: value = FlagValue(c, r.sequence_end); break;
      case Control::CONTROL_SEQUENCE_READY: value = FlagValue(c, true); break;
      case Control::CONTROL_SEQUENCE_CORRID: corrid = seq.id; break;
      default: return Internal("unknown control kind {}", static_cast<int>(c.kind()));
    }
    r.inputs.push_back({ci.name(), ControlTensor(spec->dtype, batching, value, corrid)});
  }
  if (r.sequence_start) seq.state.clear();  // a START begins from the initial state
  for (const auto& st : config_.state()) {
    const InputSpec* spec = FindInput(signature_, st.input_name());
    if (spec == nullptr) return Internal("state input '{}' has no spec", st.input_name());
    auto it = std::find_if(seq.state.begin(), seq.state.end(),
                           [&](const auto& p) { return p.first == st.input_name(); });
    if (it != seq.state.end()) {
      r.inputs.push_back({st.input_name(), it->second});
      continue;
    }
    Shape shape = spec->dims;
    if (batching) shape.insert(shape.begin(), 1);
    Tensor zero = Tensor::Allocate(spec->dtype, shape);
    std::memset(zero.raw_data(), 0, zero.ByteSize());
    r.inputs.push_back({st.input_name(), std::move(zero)});
  }
  ResponseCallback client = std::move(task.callback);
  const bool end = r.sequence_end;
  task.callback = [this, key, end, client = std::move(client)](Status s,
                                                               InferenceResponse response) {
    OnDone(key, end, s, &response);
    client(std::move(s), std::move(response));
  };
  return Status::Ok();
}

void SequenceBatcher::OnDone(const std::string& key, bool end, const Status& status,
                             InferenceResponse* response) {
  // The state outputs never reach the client.
  NamedTensors state;
  for (const auto& st : config_.state()) {
    auto it = std::find_if(response->outputs.begin(), response->outputs.end(),
                           [&](const auto& p) { return p.first == st.output_name(); });
    if (it == response->outputs.end()) continue;
    state.emplace_back(st.input_name(), std::move(it->second));
    response->outputs.erase(it);
  }
  Actions actions;
  {
    MutexLock l(&mu_);
    auto it = sequences_.find(key);
    if (it != sequences_.end()) {
      Sequence& seq = it->second;
      seq.in_flight = false;
      seq.last = clock_.Now();
      if (status.ok() && state.size() == static_cast<size_t>(config_.state_size())) {
        seq.state = std::move(state);
      }
      if (end) {
        // END frees the slot. Requests that arrived meanwhile (with the same ID) are taken
        // again as new requests: they need a START.
        std::deque<std::unique_ptr<InferTask>> later = std::move(seq.pending);
        seq.pending.clear();
        ReleaseLocked(key, &actions);
        for (auto& t : later) AddLocked(key, std::move(t), clock_.Now(), &actions);
      } else {
        AdvanceLocked(key, seq, &actions);
      }
    }
    ExpireIdleLocked(clock_.Now(), &actions);
  }
  reaper_cv_.NotifyOne();  // the sequence may now be idle: the reaper times it
  Run(std::move(actions));
}

void SequenceBatcher::Run(Actions actions) {
  for (auto& [task, status] : actions.fail) {
    fail_(*task, FailureReasonFromCode(status.code()), std::move(status));
  }
  for (auto& task : actions.run) {
    Status s = schedule_(&task);
    // The wrapped callback (OnDone) frees the sequence's turn for its next request.
    if (!s.ok() && task != nullptr) {
      const FailureReason reason = s.code() == StatusCode::kUnavailable
                                       ? FailureReason::kQueueFull
                                       : FailureReasonFromCode(s.code());
      fail_(*task, reason, std::move(s));
    }
  }
}

void SequenceBatcher::Shutdown() {
  Actions actions;
  {
    MutexLock l(&mu_);
    stopping_ = true;
    for (auto& [key, seq] : sequences_) {
      for (auto& t : seq.pending) {
        actions.fail.emplace_back(std::move(t), Unavailable("model '{}' is shutting down",
                                                            signature_.name));
      }
      seq.pending.clear();
    }
  }
  reaper_cv_.NotifyAll();
  if (reaper_.joinable() && reaper_.get_id() != std::this_thread::get_id()) reaper_.join();
  Run(std::move(actions));
}

size_t SequenceBatcher::ActiveSequences() const {
  MutexLock l(&mu_);
  return used_slots_;
}

size_t SequenceBatcher::BackloggedSequences() const {
  MutexLock l(&mu_);
  return backlog_.size();
}

}  // namespace inferd::serving
