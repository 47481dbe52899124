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

// One item of an entry and what becomes of it.
struct Item {
  enum class Outcome {
    kRecord,  // a result record (success or the request's error)
    kDead,    // an error record, and a copy in the dead-letter stream
    kRetry,   // transient failure: the whole entry is left pending, comes back after claim_idle
  };
  JobItem job;
  std::string id_json;
  std::vector<serving::InferInput> inputs;
  Status status;
  serving::InferenceResponse response;
  Outcome outcome = Outcome::kRecord;
  bool submit = false;  // inputs ready for the engine
};

// One stream entry of a batch: a single item or a pack.
struct Slot {
  StreamEntry entry;
  int64_t deliveries = 1;
  bool ack_only = false;  // deleted from the stream while pending: nothing to answer
  Status expired;         // set by the claim: delivered too often, every item is dead-lettered
  Status invalid;         // the entry cannot be decoded: one dead letter and error records
  JobEntry job;           // decoded (items empty when invalid)
  std::vector<Item> items;
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
  void PrepareItem(const batchjob::ModelInputInfo& model, Item& item);
  void RunEngine(std::vector<Slot>& slots);
  // The batch's result, dead-letter, notification and ack commands, added to store_; they are
  // sent with the next read (StoreAndRead) or alone (Flush), acks always after results.
  void BuildStore(std::vector<Slot>& slots);
  void StoreEntry(Slot& s, std::map<std::string, std::string>* replies);
  void AddDeadLetter(const Slot& s, int64_t item, const Status& why, const Fields& fields);
  // Entries per XREADGROUP, so that a read brings about `batch` items: adapted to the items per
  // entry of the last read.
  void AdaptReadCount(const std::vector<Slot>& slots);
  // Counts the store's replies (the first n of `replies`) and clears the store.
  Status AccountStore(const std::vector<RedisValue>& replies, size_t n);
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
    RespBuffer cmds;
    std::vector<size_t> set_index;  // command index of each SET, for the duplicate count
    int64_t records = 0;            // record lines in the SETs
  };
  PendingStore store_;
  int read_count_ = 1;
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
                                   std::to_string(read_count_)};
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
  return ParseReadReply(std::move(reply).value(), o_.stream);
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
  for (int pass = 0; pass < 4 && static_cast<int>(slots->size()) < read_count_; ++pass) {
    std::vector<std::string> args = {
        "XAUTOCLAIM", o_.stream, o_.group, o_.consumer, std::to_string(o_.claim_idle.count()),
        claim_cursor_, "COUNT", std::to_string(read_count_ - static_cast<int>(slots->size()))};
    auto reply = Retry([&] { return redis_->Command(args); });
    if (!reply.ok() && IsRedisError(reply.status(), "NOGROUP")) return EnsureGroup();
    if (!reply.ok()) return reply.status();
    ASSIGN_OR_RETURN(AutoClaimResult r, ParseAutoClaimReply(std::move(reply).value()));
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
      s.expired = FailedPrecondition("not acknowledged after {} deliveries (--max-deliveries {})",
                                     s.deliveries - 1, o_.max_deliveries);
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

void Worker::PrepareItem(const batchjob::ModelInputInfo& model, Item& it) {
  JobItem& job = it.job;
  it.id_json = batchjob::JsonQuote(job.id.empty() ? job.source : job.id);
  batchjob::InputItem item;
  item.source = job.source;
  StatusOr<std::vector<serving::InferInput>> inputs = std::vector<serving::InferInput>{};
  if (job.is_file) {
    item.kind = batchjob::InputItem::Kind::kFile;
    item.path = job.source;
    item.id = job.id.empty() ? job.source : job.id;
    inputs = batchjob::FileItemInputs(item, job.payload, model);  // the bytes stay for a dead letter
  } else {
    item.kind = batchjob::InputItem::Kind::kJsonLine;
    item.text = std::move(job.payload);
    item.line = -1;  // ReadItem's default id is then "line -1": replaced by the entry's id below
    std::string default_id = batchjob::DefaultIdJson(item), id_json;
    inputs = batchjob::ReadItem(item, model, &id_json);
    if (id_json != default_id) it.id_json = std::move(id_json);
    job.payload = std::move(item.text);  // kept for a dead letter
  }
  if (!inputs.ok()) {
    it.outcome = Item::Outcome::kDead;
    it.status = inputs.status();
    return;
  }
  it.inputs = std::move(inputs).value();
  it.submit = true;
}

void Worker::Prepare(Slot& s) {
  if (s.entry.fields.empty()) {
    s.ack_only = true;
    return;
  }
  auto job = DecodeJob(&s.entry.fields);
  if (!job.ok()) {
    s.invalid = job.status().WithContext(fmt::format("entry {}", s.entry.id));
    if (!s.expired.ok()) s.invalid = s.expired;
    return;
  }
  s.job = std::move(job).value();
  s.items.resize(s.job.items.size());
  for (size_t k = 0; k < s.items.size(); ++k) s.items[k].job = std::move(s.job.items[k]);
  s.job.items.clear();  // the items live in s.items; s.job keeps model, reply, packed
  StatusOr<batchjob::ModelInputInfo> model =
      s.expired.ok() ? Model(s.job.model) : StatusOr<batchjob::ModelInputInfo>(s.expired);
  for (Item& it : s.items) {
    if (!model.ok()) {
      it.id_json = batchjob::JsonQuote(it.job.id.empty() ? it.job.source : it.job.id);
      it.outcome = Item::Outcome::kDead;
      it.status = model.status();
    } else {
      PrepareItem(*model, it);
    }
  }
}

void Worker::RunEngine(std::vector<Slot>& slots) {
  int count = 0;
  for (const Slot& s : slots) {
    for (const Item& it : s.items) count += it.submit ? 1 : 0;
  }
  if (count == 0) return;
  Latch latch(count);
  for (Slot& s : slots) {
    for (size_t k = 0; k < s.items.size(); ++k) {
      Item& it = s.items[k];
      if (!it.submit) continue;
      auto request = std::make_unique<serving::InferenceRequest>();
      request->model_name = s.job.model;
      request->id = s.job.packed ? fmt::format("{}#{}", s.entry.id, k) : s.entry.id;
      request->inputs = std::move(it.inputs);
      Item* item = &it;
      o_.manager->Infer(std::move(request),
                        [item, &latch](Status st, serving::InferenceResponse r) {
                          item->status = std::move(st);
                          item->response = std::move(r);
                          latch.CountDown();  // the latch's mutex orders these writes first
                        });
    }
  }
  latch.Wait();
  for (Slot& s : slots) {
    for (Item& it : s.items) {
      if (!it.submit || it.status.ok()) continue;
      it.outcome = IsTransient(it.status) ? Item::Outcome::kRetry : Item::Outcome::kDead;
    }
  }
}

void Worker::AddDeadLetter(const Slot& s, int64_t item, const Status& why,
                           const Fields& fields) {
  RespBuffer& b = store_.cmds;
  b.Begin(11 + (item >= 0 ? 2 : 0) + 2 * fields.size());
  b.Arg("XADD");
  b.Arg(DeadLetterStream(o_.stream));
  b.Arg("*");
  b.Arg("entry");
  b.Arg(s.entry.id);
  if (item >= 0) {
    b.Arg("item");
    b.Arg(item);
  }
  b.Arg("reason");
  b.Arg(why.message());
  b.Arg("consumer");
  b.Arg(o_.consumer);
  b.Arg("deliveries");
  b.Arg(s.deliveries);
  for (const auto& [n, v] : fields) {
    b.Arg(n);
    b.Arg(v);
  }
  ++sum_.dead_lettered;
  Log(fmt::format("dead-lettered {}{}: {}", s.entry.id, item >= 0 ? fmt::format(" item {}", item) : "",
                  why.message()));
}

// The result (one SET of the entry's records), dead letters and notification of one entry.
void Worker::StoreEntry(Slot& s, std::map<std::string, std::string>* replies) {
  std::string records;
  std::string reply;
  if (!s.invalid.ok()) {
    std::vector<std::string> sources = EntrySources(s.entry.fields);
    if (sources.empty() || sources.size() == 1) {
      std::string source = sources.empty() ? "entry " + s.entry.id : sources[0];
      sources = {source};
    }
    for (const std::string& source : sources) {
      records += batchjob::FormatErrorRecord(batchjob::JsonQuote(source), source,
                                             s.invalid.message());
    }
    sum_.errors += static_cast<int64_t>(sources.size());
    store_.records += static_cast<int64_t>(sources.size());
    AddDeadLetter(s, -1, s.invalid, s.entry.fields);
    const std::string* r = FieldOf(s.entry.fields, "reply");
    if (r != nullptr) reply = *r;
  } else {
    for (size_t k = 0; k < s.items.size(); ++k) {
      Item& it = s.items[k];
      bool ok = it.outcome == Item::Outcome::kRecord && it.status.ok();
      records += ok ? batchjob::FormatRecord(it.id_json, it.job.source, it.response)
                    : batchjob::FormatErrorRecord(it.id_json, it.job.source, it.status.message());
      sum_.errors += ok ? 0 : 1;
      if (it.outcome == Item::Outcome::kDead) {
        AddDeadLetter(s, s.job.packed ? static_cast<int64_t>(k) : -1, it.status,
                      ItemFields(s.job, it.job));
      }
    }
    store_.records += static_cast<int64_t>(s.items.size());
    reply = s.job.reply;
  }
  RespBuffer& b = store_.cmds;
  store_.set_index.push_back(b.commands());
  bool ttl = o_.result_ttl.count() > 0;
  b.Begin(ttl ? 6 : 4);
  b.Arg("SET");
  b.Arg(ResultKey(o_.stream, s.entry.id));
  b.Arg(records);
  b.Arg("NX");
  if (ttl) {
    b.Arg("EX");
    b.Arg(static_cast<int64_t>(o_.result_ttl.count()));
  }
  if (!reply.empty()) {
    std::string& ids = (*replies)[reply];
    ids += (ids.empty() ? "" : " ") + s.entry.id;
  }
}

void Worker::BuildStore(std::vector<Slot>& slots) {
  std::vector<const std::string*> acks;
  std::map<std::string, std::string> replies;  // reply stream -> "ID ID ..."
  for (Slot& s : slots) {
    bool retry = false;
    for (const Item& it : s.items) retry = retry || it.outcome == Item::Outcome::kRetry;
    if (retry) continue;  // the whole entry comes back after claim_idle
    acks.push_back(&s.entry.id);
    if (!s.ack_only) StoreEntry(s, &replies);
  }
  RespBuffer& b = store_.cmds;
  for (auto& [stream, ids] : replies) b.Command({"XADD", stream, "*", "ids", ids});
  if (acks.empty()) return;
  b.Begin(3 + acks.size());
  b.Arg("XACK");
  b.Arg(o_.stream);
  b.Arg(o_.group);
  for (const std::string* id : acks) b.Arg(*id);
}

void Worker::AdaptReadCount(const std::vector<Slot>& slots) {
  size_t items = 0;
  for (const Slot& s : slots) items += std::max<size_t>(1, s.items.size());
  if (slots.empty() || items == 0) return;
  double per_entry = static_cast<double>(items) / static_cast<double>(slots.size());
  read_count_ = std::clamp(static_cast<int>(o_.batch / per_entry + 0.5), 1, o_.batch);
}

Status Worker::AccountStore(const std::vector<RedisValue>& out, size_t n) {
  for (size_t i : store_.set_index) {
    if (out[i].is_nil()) ++sum_.duplicates;
  }
  sum_.results += store_.records;
  store_.cmds.Clear();
  store_.set_index.clear();
  store_.records = 0;
  for (size_t i = 0; i < n; ++i) {
    if (out[i].type == RedisValue::Type::kError) {
      return Internal("storing results: Redis replied {}", out[i].str);
    }
  }
  return Status::Ok();
}

Status Worker::Flush() {
  if (store_.cmds.commands() == 0) return Status::Ok();
  TimePoint t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::vector<RedisValue> out,
                   Retry([&] { return redis_->Pipeline(store_.cmds); }));
  sum_.store_s += SecondsSince(t0);
  return AccountStore(out, out.size());
}

StatusOr<std::vector<StreamEntry>> Worker::StoreAndRead() {
  TimePoint t0 = std::chrono::steady_clock::now();
  size_t stores = store_.cmds.commands();
  store_.cmds.Command(ReadArgs(">", Ms(0)));  // the read goes last; AccountStore clears it too
  ASSIGN_OR_RETURN(std::vector<RedisValue> out,
                   Retry([&] { return redis_->Pipeline(store_.cmds); }));
  sum_.store_s += SecondsSince(t0);
  RETURN_IF_ERROR(AccountStore(out, stores));
  RedisValue& read = out.back();
  if (read.type == RedisValue::Type::kError) {
    if (read.str.rfind("NOGROUP", 0) == 0) {  // the stream was deleted
      RETURN_IF_ERROR(EnsureGroup());
      return std::vector<StreamEntry>{};
    }
    return FailedPrecondition("Redis: XREADGROUP replied: {}", read.str);
  }
  return ParseReadReply(std::move(read), o_.stream);
}

Status Worker::Process(std::vector<Slot> slots) {
  if (slots.empty()) return Status::Ok();
  TimePoint t0 = std::chrono::steady_clock::now();
  for (Slot& s : slots) Prepare(s);
  RunEngine(slots);
  for (const Slot& s : slots) {
    for (const Item& it : s.items) sum_.retried += it.outcome == Item::Outcome::kRetry ? 1 : 0;
  }
  sum_.work_s += SecondsSince(t0);
  BuildStore(slots);
  AdaptReadCount(slots);
  sum_.entries += static_cast<int64_t>(slots.size());
  ++sum_.batches;
  return Status::Ok();
}

StatusOr<WorkerSummary> Worker::Run() {
  ASSIGN_OR_RETURN(redis_, RedisClient::Connect(o_.redis, o_.timeout));
  RETURN_IF_ERROR(EnsureGroup());
  read_count_ = o_.batch;
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
    if (slots.empty() && store_.cmds.commands() != 0) {
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
