#include "workqueue/worker.h"

#include <algorithm>
#include <map>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "batchjob/records.h"
#include "common/mutex.h"
#include "workqueue/protocol.h"

namespace inferd::workqueue {
namespace {

using Ms = std::chrono::milliseconds;
using TimePoint = std::chrono::steady_clock::time_point;

double SecondsSince(TimePoint t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One entry of a batch and what becomes of it.
struct Slot {
  enum class Outcome {
    kRecord,   // a result record (success or the request's error)
    kDead,     // an error record, and a copy in the dead-letter stream
    kRetry,    // transient failure: left pending, comes back after claim_idle
    kAckOnly,  // deleted from the stream while pending: nothing to answer
  };
  StreamEntry entry;
  JobEntry job;
  int64_t deliveries = 1;
  std::string source, id_json;
  std::vector<serving::InferInput> inputs;
  Status status;
  serving::InferenceResponse response;
  Outcome outcome = Outcome::kRecord;
  bool submit = false;  // inputs ready for the engine
};

// Counts the engine's answers of one batch; the worker thread waits for all of them.
class Latch {
 public:
  explicit Latch(int count) : left_(count) {}
  void CountDown() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    if (--left_ == 0) done_.NotifyAll();  // under mu_: the waiter may destroy *this once unlocked
  }
  void Wait() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    while (left_ > 0) done_.Wait(&mu_);
  }

 private:
  Mutex mu_;
  CondVar done_;
  int left_ GUARDED_BY(mu_);
};

const std::string* FieldOf(const Fields& fields, std::string_view name) {
  for (const auto& [n, v] : fields) {
    if (n == name) return &v;
  }
  return nullptr;
}

class Worker {
 public:
  explicit Worker(const WorkerOptions& o) : o_(o) {}
  StatusOr<WorkerSummary> Run();

 private:
  bool Stopping() const { return o_.stop_signal != nullptr && o_.stop_signal->load() != 0; }
  void Log(const std::string& line) {
    if (o_.log != nullptr) *o_.log << "inferd worker " << o_.consumer << ": " << line << "\n";
  }
  // Runs `op` (one Redis round trip) again after reconnecting while it fails with UNAVAILABLE,
  // for up to reconnect_for.
  template <typename Op>
  auto Retry(Op op) -> decltype(op());
  Status EnsureGroup();
  StatusOr<std::vector<StreamEntry>> Read(const std::string& from, Ms block);
  Status Claim(std::vector<Slot>* slots);
  Status DeliveryCounts(std::vector<Slot>* slots);
  void Prepare(Slot& s);
  void Dead(Slot& s, const Status& why);
  void RunEngine(std::vector<Slot>& slots);
  // The batch's result, dead-letter, notification and ack commands, added to store_; they are
  // sent with the next read (StoreAndRead) or alone (Flush), acks always after results.
  void BuildStore(std::vector<Slot>& slots);
  Status AccountStore(const std::vector<RedisValue>& replies);
  Status Flush();
  StatusOr<std::vector<StreamEntry>> StoreAndRead();
  std::vector<std::string> ReadArgs(const std::string& from, Ms block) const;
  Status Process(std::vector<Slot> slots);
  StatusOr<batchjob::ModelInputInfo> Model(const std::string& name);

  const WorkerOptions& o_;
  std::unique_ptr<RedisClient> redis_;
  std::string claim_cursor_ = "0-0";
  std::map<std::string, StatusOr<batchjob::ModelInputInfo>> models_;
  struct PendingStore {
    std::vector<std::vector<std::string>> cmds;
    std::vector<size_t> set_index;  // cmds index of each SET, for the duplicate count
  };
  PendingStore store_;
  WorkerSummary sum_;
};

template <typename Op>
auto Worker::Retry(Op op) -> decltype(op()) {
  TimePoint first_failure{};
  Ms backoff(100);
  for (;;) {
    auto result = op();
    if (result.ok() || result.status().code() != StatusCode::kUnavailable) return result;
    TimePoint now = std::chrono::steady_clock::now();
    if (first_failure == TimePoint{}) first_failure = now;
    if (now - first_failure > o_.reconnect_for) return result;
    Log(fmt::format("{}; reconnecting in {} ms", result.status().message(), backoff.count()));
    std::this_thread::sleep_for(backoff);  // production back-off, not a test wait
    backoff = std::min(backoff * 2, Ms(2000));
    Status reconnected = redis_->Reconnect();
    if (reconnected.ok()) Log("reconnected");
  }
}

Status Worker::EnsureGroup() {
  auto created = Retry([&] {
    return redis_->Command({"XGROUP", "CREATE", o_.stream, o_.group, "0", "MKSTREAM"});
  });
  if (!created.ok() && !IsRedisError(created.status(), "BUSYGROUP")) return created.status();
  return Status::Ok();
}

std::vector<std::string> Worker::ReadArgs(const std::string& from, Ms block) const {
  std::vector<std::string> args = {"XREADGROUP", "GROUP", o_.group, o_.consumer, "COUNT",
                                   std::to_string(o_.batch)};
  if (block.count() > 0) {
    args.push_back("BLOCK");
    args.push_back(std::to_string(block.count()));
  }
  args.push_back("STREAMS");
  args.push_back(o_.stream);
  args.push_back(from);
  return args;
}

StatusOr<std::vector<StreamEntry>> Worker::Read(const std::string& from, Ms block) {
  std::vector<std::string> args = ReadArgs(from, block);
  auto reply = Retry([&] { return redis_->Command(args, block); });
  if (!reply.ok() && IsRedisError(reply.status(), "NOGROUP")) {  // the stream was deleted
    RETURN_IF_ERROR(EnsureGroup());
    return std::vector<StreamEntry>{};
  }
  if (!reply.ok()) return reply.status();
  return ParseReadReply(*reply, o_.stream);
}

Status Worker::DeliveryCounts(std::vector<Slot>* slots) {
  std::vector<std::vector<std::string>> cmds;
  for (const Slot& s : *slots) {
    cmds.push_back({"XPENDING", o_.stream, o_.group, s.entry.id, s.entry.id, "1"});
  }
  ASSIGN_OR_RETURN(std::vector<RedisValue> replies, Retry([&] { return redis_->Pipeline(cmds); }));
  for (size_t i = 0; i < slots->size(); ++i) {
    auto pending = ParsePendingReply(replies[i]);
    if (!pending.ok()) return pending.status();
    if (!pending->empty()) (*slots)[i].deliveries = pending->front().deliveries;
  }
  return Status::Ok();
}

// XAUTOCLAIM from the cursor until a batch is claimed or the pending list was scanned round.
Status Worker::Claim(std::vector<Slot>* slots) {
  for (int pass = 0; pass < 4 && static_cast<int>(slots->size()) < o_.batch; ++pass) {
    std::vector<std::string> args = {
        "XAUTOCLAIM", o_.stream, o_.group, o_.consumer, std::to_string(o_.claim_idle.count()),
        claim_cursor_, "COUNT", std::to_string(o_.batch - static_cast<int>(slots->size()))};
    auto reply = Retry([&] { return redis_->Command(args); });
    if (!reply.ok() && IsRedisError(reply.status(), "NOGROUP")) return EnsureGroup();
    if (!reply.ok()) return reply.status();
    ASSIGN_OR_RETURN(AutoClaimResult r, ParseAutoClaimReply(*reply));
    for (StreamEntry& e : r.entries) slots->push_back(Slot{std::move(e)});
    bool wrapped = r.next_cursor == "0-0";
    claim_cursor_ = r.next_cursor;
    if (wrapped) break;
  }
  if (slots->empty()) return Status::Ok();
  sum_.claimed += static_cast<int64_t>(slots->size());
  Log(fmt::format("claimed {} entries idle for more than {} ms", slots->size(),
                  o_.claim_idle.count()));
  RETURN_IF_ERROR(DeliveryCounts(slots));
  for (Slot& s : *slots) {
    if (s.deliveries > o_.max_deliveries) {
      Dead(s, FailedPrecondition("not acknowledged after {} deliveries (--max-deliveries {})",
                                 s.deliveries - 1, o_.max_deliveries));
    }
  }
  return Status::Ok();
}

StatusOr<batchjob::ModelInputInfo> Worker::Model(const std::string& name) {
  auto it = models_.find(name);
  if (it == models_.end()) {
    auto loaded = o_.resolve_model(name);
    if (!loaded.ok()) Log(loaded.status().message());  // the resolver's error names the model
    it = models_.emplace(name, std::move(loaded)).first;
  }
  return it->second;
}

void Worker::Dead(Slot& s, const Status& why) {
  s.outcome = Slot::Outcome::kDead;
  s.status = why;
  s.submit = false;
}

void Worker::Prepare(Slot& s) {
  if (s.outcome == Slot::Outcome::kDead) return;  // decided by the claim
  if (s.entry.fields.empty()) {
    s.outcome = Slot::Outcome::kAckOnly;
    return;
  }
  auto job = DecodeJob(s.entry.fields);
  if (!job.ok()) return Dead(s, job.status().WithContext(fmt::format("entry {}", s.entry.id)));
  s.job = std::move(job).value();
  s.source = s.job.source;
  s.id_json = batchjob::JsonQuote(s.job.id.empty() ? s.job.source : s.job.id);
  auto model = Model(s.job.model);
  if (!model.ok()) return Dead(s, model.status());
  batchjob::InputItem item;
  item.source = s.job.source;
  StatusOr<std::vector<serving::InferInput>> inputs = std::vector<serving::InferInput>{};
  if (s.job.is_file) {
    item.kind = batchjob::InputItem::Kind::kFile;
    item.path = s.job.source;
    item.id = s.job.id.empty() ? s.job.source : s.job.id;
    inputs = batchjob::FileItemInputs(item, std::move(s.job.payload), *model);
  } else {
    item.kind = batchjob::InputItem::Kind::kJsonLine;
    item.text = std::move(s.job.payload);
    item.line = -1;  // ReadItem's default id is then "line -1": replaced by the entry's id below
    std::string default_id = batchjob::DefaultIdJson(item), id_json;
    inputs = batchjob::ReadItem(item, *model, &id_json);
    if (id_json != default_id) s.id_json = id_json;
  }
  if (!inputs.ok()) return Dead(s, inputs.status());
  s.inputs = std::move(inputs).value();
  s.submit = true;
}

void Worker::RunEngine(std::vector<Slot>& slots) {
  int count = 0;
  for (const Slot& s : slots) count += s.submit ? 1 : 0;
  if (count == 0) return;
  Latch latch(count);
  for (Slot& s : slots) {
    if (!s.submit) continue;
    auto request = std::make_unique<serving::InferenceRequest>();
    request->model_name = s.job.model;
    request->id = s.entry.id;
    request->inputs = std::move(s.inputs);
    Slot* slot = &s;
    o_.manager->Infer(std::move(request), [slot, &latch](Status st, serving::InferenceResponse r) {
      slot->status = std::move(st);
      slot->response = std::move(r);
      latch.CountDown();  // the latch's mutex orders these writes before the waiter's reads
    });
  }
  latch.Wait();
  for (Slot& s : slots) {
    if (!s.submit || s.status.ok()) continue;
    if (IsTransient(s.status)) {
      s.outcome = Slot::Outcome::kRetry;
    } else {
      Dead(s, s.status);
    }
  }
}

void Worker::BuildStore(std::vector<Slot>& slots) {
  std::vector<std::vector<std::string>>& cmds = store_.cmds;
  std::vector<std::string> ack = {"XACK", o_.stream, o_.group};
  std::map<std::string, std::string> replies;  // reply stream -> "ID ID ..."
  std::vector<size_t>& set_index = store_.set_index;
  for (Slot& s : slots) {
    if (s.outcome == Slot::Outcome::kRetry) continue;
    ack.push_back(s.entry.id);
    if (s.outcome == Slot::Outcome::kAckOnly) continue;
    std::string source = s.source;
    if (source.empty()) {
      const std::string* f = FieldOf(s.entry.fields, "source");
      source = f != nullptr ? *f : "entry " + s.entry.id;
      s.id_json = batchjob::JsonQuote(source);
    }
    bool ok = s.outcome == Slot::Outcome::kRecord && s.status.ok();
    std::string record = ok ? batchjob::FormatRecord(s.id_json, source, s.response)
                            : batchjob::FormatErrorRecord(s.id_json, source, s.status.message());
    std::vector<std::string> set = {"SET", ResultKey(o_.stream, s.entry.id), std::move(record), "NX"};
    if (o_.result_ttl.count() > 0) {
      set.push_back("EX");
      set.push_back(std::to_string(o_.result_ttl.count()));
    }
    set_index.push_back(cmds.size());
    cmds.push_back(std::move(set));
    sum_.errors += ok ? 0 : 1;
    if (s.outcome == Slot::Outcome::kDead) {
      std::vector<std::string> dead = {"XADD", DeadLetterStream(o_.stream), "*", "entry",
                                       s.entry.id, "reason", s.status.message(), "consumer",
                                       o_.consumer, "deliveries", std::to_string(s.deliveries)};
      for (const auto& [n, v] : s.entry.fields) {
        dead.push_back(n);
        dead.push_back(v);
      }
      cmds.push_back(std::move(dead));
      ++sum_.dead_lettered;
      Log(fmt::format("dead-lettered {}: {}", s.entry.id, s.status.message()));
    }
    const std::string* reply = FieldOf(s.entry.fields, "reply");
    if (reply != nullptr && !reply->empty()) {
      std::string& ids = replies[*reply];
      ids += (ids.empty() ? "" : " ") + s.entry.id;
    }
  }
  for (auto& [stream, ids] : replies) cmds.push_back({"XADD", stream, "*", "ids", ids});
  if (ack.size() > 3) cmds.push_back(std::move(ack));
}

Status Worker::AccountStore(const std::vector<RedisValue>& out) {
  for (size_t i : store_.set_index) {
    if (out[i].is_nil()) ++sum_.duplicates;
  }
  sum_.results += static_cast<int64_t>(store_.set_index.size());
  size_t n = store_.cmds.size();
  store_ = PendingStore{};
  for (size_t i = 0; i < n; ++i) {
    if (out[i].type == RedisValue::Type::kError) {
      return Internal("storing results: Redis replied {}", out[i].str);
    }
  }
  return Status::Ok();
}

Status Worker::Flush() {
  if (store_.cmds.empty()) return Status::Ok();
  TimePoint t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::vector<RedisValue> out,
                   Retry([&] { return redis_->Pipeline(store_.cmds); }));
  sum_.store_s += SecondsSince(t0);
  return AccountStore(out);
}

StatusOr<std::vector<StreamEntry>> Worker::StoreAndRead() {
  TimePoint t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<std::string>> cmds = store_.cmds;
  cmds.push_back(ReadArgs(">", Ms(0)));
  ASSIGN_OR_RETURN(std::vector<RedisValue> out, Retry([&] { return redis_->Pipeline(cmds); }));
  sum_.store_s += SecondsSince(t0);
  RETURN_IF_ERROR(AccountStore(out));
  const RedisValue& read = out.back();
  if (read.type == RedisValue::Type::kError) {
    if (read.str.rfind("NOGROUP", 0) == 0) {  // the stream was deleted
      RETURN_IF_ERROR(EnsureGroup());
      return std::vector<StreamEntry>{};
    }
    return FailedPrecondition("Redis: XREADGROUP replied: {}", read.str);
  }
  return ParseReadReply(read, o_.stream);
}

Status Worker::Process(std::vector<Slot> slots) {
  if (slots.empty()) return Status::Ok();
  TimePoint t0 = std::chrono::steady_clock::now();
  for (Slot& s : slots) Prepare(s);
  RunEngine(slots);
  for (const Slot& s : slots) sum_.retried += s.outcome == Slot::Outcome::kRetry ? 1 : 0;
  sum_.work_s += SecondsSince(t0);
  BuildStore(slots);
  sum_.entries += static_cast<int64_t>(slots.size());
  ++sum_.batches;
  return Status::Ok();
}

StatusOr<WorkerSummary> Worker::Run() {
  ASSIGN_OR_RETURN(redis_, RedisClient::Connect(o_.redis, o_.timeout));
  RETURN_IF_ERROR(EnsureGroup());
  TimePoint start = std::chrono::steady_clock::now();
  // Entries this consumer name already had (a restart): from the start of its pending list.
  for (std::string from = "0"; !Stopping();) {
    ASSIGN_OR_RETURN(std::vector<StreamEntry> mine, Read(from, Ms(0)));
    if (mine.empty()) break;
    from = mine.back().id;
    std::vector<Slot> slots;
    for (StreamEntry& e : mine) slots.push_back(Slot{std::move(e)});
    RETURN_IF_ERROR(Process(std::move(slots)));
    RETURN_IF_ERROR(Flush());
  }
  TimePoint next_claim = std::chrono::steady_clock::now();
  while (!Stopping()) {
    std::vector<Slot> slots;
    TimePoint t0 = std::chrono::steady_clock::now();
    if (t0 >= next_claim) {
      RETURN_IF_ERROR(Flush());
      RETURN_IF_ERROR(Claim(&slots));
      next_claim = t0 + o_.claim_interval;
    }
    if (slots.empty() && !store_.cmds.empty()) {
      // The last batch's results and acks, then a read that does not block, in one round trip.
      ASSIGN_OR_RETURN(std::vector<StreamEntry> read, StoreAndRead());
      for (StreamEntry& e : read) slots.push_back(Slot{std::move(e)});
      if (slots.empty()) continue;  // nothing waiting: the next read blocks
    } else if (slots.empty()) {
      auto until_claim = std::chrono::duration_cast<Ms>(next_claim - t0);
      Ms block = std::clamp(until_claim, Ms(1), o_.block);
      ASSIGN_OR_RETURN(std::vector<StreamEntry> read, Read(">", block));
      for (StreamEntry& e : read) slots.push_back(Slot{std::move(e)});
      (slots.empty() ? sum_.idle_s : sum_.read_s) += SecondsSince(t0);
    }
    RETURN_IF_ERROR(Process(std::move(slots)));
  }
  RETURN_IF_ERROR(Flush());  // the batch in flight at the stop
  sum_.seconds = SecondsSince(start);
  Log(fmt::format("stopping: {} entries, {} results ({} already stored), {} dead-lettered",
                  sum_.entries, sum_.results, sum_.duplicates, sum_.dead_lettered));
  return sum_;
}

}  // namespace

StatusOr<WorkerSummary> RunWorker(const WorkerOptions& o) {
  if (o.stream.empty() || o.group.empty() || o.consumer.empty()) {
    return InvalidArgument("a worker needs a stream, a group and a consumer name");
  }
  if (o.manager == nullptr || !o.resolve_model) {
    return InvalidArgument("a worker needs a model manager and a model resolver");
  }
  if (o.batch < 1) return InvalidArgument("--batch must be >= 1, got {}", o.batch);
  if (o.max_deliveries < 1) {
    return InvalidArgument("--max-deliveries must be >= 1, got {}", o.max_deliveries);
  }
  if (o.claim_idle.count() < 1 || o.claim_interval.count() < 1) {
    return InvalidArgument("--claim-idle-ms and --claim-interval-ms must be >= 1");
  }
  Worker worker(o);
  return worker.Run();
}

std::string WorkerSummaryJson(const WorkerSummary& s) {
  return fmt::format(
      "{{\"event\":\"worker_end\",\"entries\":{},\"results\":{},\"duplicates\":{},\"errors\":{},"
      "\"dead_lettered\":{},\"claimed\":{},\"retried\":{},\"batches\":{},\"seconds\":{:.6f},"
      "\"read_s\":{:.6f},\"store_s\":{:.6f},\"idle_s\":{:.6f},\"work_s\":{:.6f}}}",
      s.entries, s.results, s.duplicates, s.errors, s.dead_lettered, s.claimed, s.retried,
      s.batches, s.seconds, s.read_s, s.store_s, s.idle_s, s.work_s);
}

}  // namespace inferd::workqueue
