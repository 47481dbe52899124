#include "batchjob/job.h"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "batchjob/records.h"
#include "common/mutex.h"

namespace inferd::batchjob {
namespace {

using serving::InferenceRequest;
using serving::InferenceResponse;
using TimePoint = Clock::TimePoint;

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A finished item waiting for the writer.
struct Finished {
  size_t index = 0;
  std::string id_json;
  Status status;
  InferenceResponse response;
  bool from_engine = false;
};

std::map<std::string, ModelUse> UsageByModel(serving::ModelManager& manager) {
  std::map<std::string, ModelUse> use;
  for (const auto& s : manager.GetStatistics()) {
    ModelUse& u = use[s.name];
    u.name = s.name;
    u.executions += s.execution_count;
    u.rows += s.inference_count;
    for (const auto& b : s.batch_stats) {
      u.compute_s +=
          1e-9 * static_cast<double>(b.compute_input.ns + b.compute_infer.ns + b.compute_output.ns);
    }
  }
  return use;
}

class Pipeline {
 public:
  Pipeline(const JobOptions& o, const std::vector<InputItem>& items, Clock& clock)
      : o_(o), items_(items), clock_(clock), readers_left_(o.reader_threads) {}

  JobSummary Run() EXCLUDES(mu_);

 private:
  bool ShouldStopLocked() REQUIRES(mu_) {
    if (!stopping_ && o_.stop_signal != nullptr && o_.stop_signal->load() != 0) {
      stopping_ = true;
      stop_ = StopReason::kSignal;
      signal_ = o_.stop_signal->load();
      changed_.NotifyAll();
    }
    return stopping_;
  }
  void ReaderLoop(int reader) EXCLUDES(mu_);
  void Submit(size_t index, std::string id_json, std::vector<serving::InferInput> inputs);
  void OnAnswer(size_t index, const std::string& id_json, TimePoint submitted, Status status,
                InferenceResponse response) EXCLUDES(mu_);
  void Push(Finished f) EXCLUDES(mu_);
  // Takes what is finished; false when nothing is left to come.
  bool TakeFinished(std::deque<Finished>* out) EXCLUDES(mu_);
  void WriteBatch(std::deque<Finished>& batch) EXCLUDES(mu_);
  void DrawEngine() EXCLUDES(mu_);

  const JobOptions& o_;
  const std::vector<InputItem>& items_;
  Clock& clock_;
  TimePoint start_;
  std::atomic<int64_t> reader_busy_ns_{0};
  int64_t writer_busy_ns_ = 0;  // writer thread only
  int64_t records_ = 0, errors_ = 0;  // writer thread only
  std::string last_error_;            // writer thread only
  bool output_failed_ = false;        // writer thread only

  Mutex mu_;
  CondVar changed_;  // with mu_: an item finished, a slot freed, a reader left, stop
  size_t next_ GUARDED_BY(mu_) = 0;
  int in_flight_ GUARDED_BY(mu_) = 0;  // engine requests not yet taken by the writer
  int64_t submitted_ GUARDED_BY(mu_) = 0;
  int readers_left_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  StopReason stop_ GUARDED_BY(mu_) = StopReason::kFinished;
  int signal_ GUARDED_BY(mu_) = 0;
  std::deque<Finished> finished_ GUARDED_BY(mu_);
  std::map<std::thread::id, size_t> threads_ GUARDED_BY(mu_);
  std::vector<Completion> completions_ GUARDED_BY(mu_);
};

void Pipeline::ReaderLoop(int reader) {
  const std::string lane = fmt::format("reader {}", reader);
  for (;;) {
    size_t index;
    {
      MutexLock l(&mu_);
      if (ShouldStopLocked() || next_ >= items_.size()) break;
      index = next_++;
    }
    TimePoint t0 = clock_.Now();
    std::string id_json;
    auto inputs = ReadItem(items_[index], o_.model_inputs, &id_json);
    TimePoint t1 = clock_.Now();
    reader_busy_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    if (o_.timeline != nullptr) o_.timeline->Add(lane, t0, t1, items_[index].id);
    if (!inputs.ok()) {
      Push(Finished{index, std::move(id_json), inputs.status(), {}, false});
      continue;
    }
    {
      MutexLock l(&mu_);
      while (in_flight_ >= o_.max_in_flight && !ShouldStopLocked()) changed_.Wait(&mu_);
      if (stopping_) break;  // read but not submitted: it has no record, a resume redoes it
      ++in_flight_;
      ++submitted_;
    }
    Submit(index, std::move(id_json), std::move(inputs).value());
  }
  MutexLock l(&mu_);
  --readers_left_;
  changed_.NotifyAll();
}

void Pipeline::Submit(size_t index, std::string id_json, std::vector<serving::InferInput> inputs) {
  auto request = std::make_unique<InferenceRequest>();
  request->model_name = o_.model;
  request->id = items_[index].id;
  request->inputs = std::move(inputs);
  TimePoint submitted = clock_.Now();
  o_.manager->Infer(std::move(request), [this, index, id_json = std::move(id_json), submitted](
                                            Status status, InferenceResponse response) {
    OnAnswer(index, id_json, submitted, std::move(status), std::move(response));
  });
}

void Pipeline::OnAnswer(size_t index, const std::string& id_json, TimePoint submitted,
                        Status status, InferenceResponse response) {
  TimePoint answered = clock_.Now();
  if (o_.stats != nullptr) {
    o_.stats->Write(fmt::format("{{\"event\":\"inferred\",\"source\":{},\"ok\":{}}}",
                                JsonQuote(items_[index].source), status.ok()));
  }
  MutexLock l(&mu_);
  if (status.ok()) {  // refusals are answered on the submitting thread: not engine work
    auto [it, added] = threads_.emplace(std::this_thread::get_id(), threads_.size());
    completions_.push_back(Completion{it->second, submitted, answered});
  }
  finished_.push_back(Finished{index, id_json, std::move(status), std::move(response), true});
  changed_.NotifyAll();  // under mu_: once unlocked, the writer may finish and `this` go away
}

void Pipeline::Push(Finished f) {
  MutexLock l(&mu_);
  finished_.push_back(std::move(f));
  changed_.NotifyAll();
}

bool Pipeline::TakeFinished(std::deque<Finished>* out) {
  MutexLock l(&mu_);
  ShouldStopLocked();
  if (finished_.empty()) {
    if (readers_left_ == 0 && in_flight_ == 0) return false;
    // Wakes at least every 100 ms to notice a signal and redraw the progress bar; returns with
    // nothing taken then, and the caller comes back.
    changed_.WaitUntil(&mu_, clock_, clock_.Now() + std::chrono::milliseconds(100));
    ShouldStopLocked();
  }
  for (const Finished& f : finished_) in_flight_ -= f.from_engine ? 1 : 0;
  out->swap(finished_);
  finished_.clear();
  changed_.NotifyAll();
  return true;
}

void Pipeline::WriteBatch(std::deque<Finished>& batch) {
  if (batch.empty() || output_failed_) return;  // after a failed write: redone on resume
  TimePoint t0 = clock_.Now();
  std::string text;
  for (Finished& f : batch) {
    const std::string& source = items_[f.index].source;
    if (f.status.ok()) {
      text += FormatRecord(f.id_json, source, f.response);
    } else {
      last_error_ = f.status.message();
      text += FormatErrorRecord(f.id_json, source, last_error_);
      ++errors_;
    }
  }
  Status written = o_.output->Append(text);
  if (written.ok()) written = o_.output->Sync();
  TimePoint t1 = clock_.Now();
  writer_busy_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
  if (o_.timeline != nullptr) {
    o_.timeline->Add("writer", t0, t1, fmt::format("{} records", batch.size()));
  }
  MutexLock l(&mu_);
  if (!written.ok()) {
    last_error_ = written.message();
    output_failed_ = true;
    stop_ = StopReason::kOutputFailed;
    stopping_ = true;
    changed_.NotifyAll();
    return;
  }
  records_ += static_cast<int64_t>(batch.size());
  if (o_.max_errors > 0 && errors_ >= o_.max_errors && !stopping_) {
    stopping_ = true;
    stop_ = StopReason::kMaxErrors;
    changed_.NotifyAll();
  }
}

void Pipeline::DrawEngine() {
  std::vector<Completion> completions;
  {
    MutexLock l(&mu_);
    completions = completions_;
  }
  for (const EngineBatch& b : GroupBatches(completions, std::chrono::microseconds(2000))) {
    o_.timeline->Add(fmt::format("engine {}", b.thread), b.start, b.end,
                     fmt::format("batch of {}", b.items));
  }
}

JobSummary Pipeline::Run() {
  start_ = clock_.Now();
  std::map<std::string, ModelUse> before = UsageByModel(*o_.manager);
  std::vector<std::thread> readers;
  for (int r = 0; r < o_.reader_threads; ++r) readers.emplace_back([this, r] { ReaderLoop(r); });
  std::deque<Finished> batch;
  while (TakeFinished(&batch)) {
    WriteBatch(batch);
    batch.clear();
    if (o_.progress != nullptr) o_.progress->Update(records_, errors_);
  }
  for (auto& t : readers) t.join();
  JobSummary s;
  s.seconds = Seconds(clock_.Now() - start_);
  s.records = records_;
  s.errors = errors_;
  s.last_error = last_error_;
  s.reader_threads = o_.reader_threads;
  double wall_ns = std::max(1.0, s.seconds * 1e9);
  s.reader_busy = static_cast<double>(reader_busy_ns_.load()) / (wall_ns * o_.reader_threads);
  s.writer_busy = static_cast<double>(writer_busy_ns_) / wall_ns;
  double busiest_s = 0;
  for (auto& [name, after] : UsageByModel(*o_.manager)) {
    ModelUse u = after;
    u.executions -= before[name].executions;
    u.rows -= before[name].rows;
    u.compute_s -= before[name].compute_s;
    // An ensemble's own entry counts requests but no compute (its steps' models have it).
    if (u.executions == 0 || u.compute_s <= 0) continue;
    busiest_s = std::max(busiest_s, u.compute_s);
    s.models.push_back(u);
  }
  {
    MutexLock l(&mu_);
    s.submitted = submitted_;
    s.stop = stop_;
    s.signal = signal_;
    s.engine_threads = static_cast<int>(threads_.size());
  }
  s.engine_busy = busiest_s / std::max(1e-9, s.seconds);
  if (o_.timeline != nullptr) DrawEngine();
  return s;
}

}  // namespace

std::vector<EngineBatch> GroupBatches(std::vector<Completion> completions,
                                      std::chrono::microseconds gap) {
  std::stable_sort(completions.begin(), completions.end(),
                   [](const Completion& a, const Completion& b) {
                     return a.thread != b.thread ? a.thread < b.thread : a.answered < b.answered;
                   });
  std::vector<EngineBatch> batches;
  TimePoint last_answer{};
  for (const Completion& c : completions) {
    bool same = !batches.empty() && batches.back().thread == c.thread &&
                c.answered - last_answer < gap;
    last_answer = c.answered;
    if (same) {
      EngineBatch& b = batches.back();
      ++b.items;
      // A later submission in the same batch means the batch started after it.
      b.start = std::min(b.end, std::max(b.start, c.submitted));
      continue;
    }
    EngineBatch b;
    b.thread = c.thread;
    b.end = c.answered;
    b.start = std::min(c.answered, c.submitted);
    if (!batches.empty() && batches.back().thread == c.thread) {
      b.start = std::min(b.end, std::max(b.start, batches.back().end));
    }
    b.items = 1;
    batches.push_back(b);
  }
  return batches;
}

StatusOr<JobSummary> RunJob(const JobOptions& options, const std::vector<InputItem>& items) {
  if (options.manager == nullptr || options.output == nullptr) {
    return InvalidArgument("a batch job needs a model manager and an output");
  }
  if (options.max_in_flight < 1) {
    return InvalidArgument("max_in_flight must be >= 1, got {}", options.max_in_flight);
  }
  if (options.reader_threads < 1) {
    return InvalidArgument("reader threads must be >= 1, got {}", options.reader_threads);
  }
  if (options.max_errors < 0) {
    return InvalidArgument("--max-errors must be >= 0, got {}", options.max_errors);
  }
  Clock& clock = options.clock != nullptr ? *options.clock : RealClock::Get();
  Pipeline pipeline(options, items, clock);
  return pipeline.Run();
}

std::string FormatSummary(const JobSummary& s) {
  double rate = s.seconds > 0 ? static_cast<double>(s.records) / s.seconds : 0;
  std::string out = fmt::format(
      "{} records ({} errors) in {:.2f} s: {:.1f} items/s\n"
      "utilization: readers {:.0f}% ({} threads), engine {:.0f}% (busiest model), writer "
      "{:.0f}%\n",
      s.records, s.errors, s.seconds, rate, 100 * s.reader_busy, s.reader_threads,
      100 * s.engine_busy, 100 * s.writer_busy);
  for (const ModelUse& m : s.models) {
    out += fmt::format(
        "model {}: {} batches, {} items (mean batch {:.1f}), compute {:.2f} s ({:.0f}% busy)\n",
        m.name, m.executions, m.rows,
        m.executions ? static_cast<double>(m.rows) / m.executions : 0.0, m.compute_s,
        s.seconds > 0 ? 100 * m.compute_s / s.seconds : 0.0);
  }
  return out;
}

std::string SummaryJson(const JobSummary& s) {
  const char* stop = s.stop == StopReason::kFinished   ? "finished"
                     : s.stop == StopReason::kSignal    ? "signal"
                     : s.stop == StopReason::kMaxErrors ? "max_errors"
                                                        : "output_failed";
  std::string models;
  for (const ModelUse& m : s.models) {
    models += fmt::format("{}{{\"name\":{},\"batches\":{},\"items\":{},\"compute_s\":{:.6f}}}",
                          models.empty() ? "" : ",", JsonQuote(m.name), m.executions, m.rows,
                          m.compute_s);
  }
  return fmt::format(
      "{{\"event\":\"end\",\"stop\":\"{}\",\"submitted\":{},\"records\":{},\"errors\":{},"
      "\"seconds\":{:.6f},\"items_per_s\":{:.3f},\"reader_busy\":{:.4f},\"engine_busy\":{:.4f},"
      "\"writer_busy\":{:.4f},\"reader_threads\":{},\"engine_threads\":{},\"models\":[{}]}}",
      stop, s.submitted, s.records, s.errors, s.seconds,
      s.seconds > 0 ? static_cast<double>(s.records) / s.seconds : 0.0, s.reader_busy,
      s.engine_busy, s.writer_busy, s.reader_threads, s.engine_threads, models);
}

}  // namespace inferd::batchjob
