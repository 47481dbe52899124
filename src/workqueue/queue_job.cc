#include "workqueue/queue_job.h"

#include <algorithm>
#include <random>
#include <unordered_map>

#include <fmt/format.h>

#include "batchjob/item_reader.h"
#include "batchjob/records.h"
#include "workqueue/protocol.h"

namespace inferd::workqueue {
namespace {

using batchjob::InputItem;
using batchjob::JobSummary;
using batchjob::StopReason;
using TimePoint = std::chrono::steady_clock::time_point;

constexpr size_t kSubmitChunk = 1024;  // items per round trip of XADDs

std::string NewJobId() {
  std::random_device rd;
  std::mt19937_64 rng((static_cast<uint64_t>(rd()) << 32) ^ rd());
  return fmt::format("{:016x}", rng());
}

std::vector<std::string> SplitIds(const std::string& ids) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < ids.size()) {
    size_t end = ids.find(' ', start);
    if (end == std::string::npos) end = ids.size();
    if (end > start) out.push_back(ids.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

class QueueJob {
 public:
  QueueJob(const QueueJobOptions& o, const std::vector<InputItem>& items) : o_(o), items_(items) {}
  StatusOr<JobSummary> Run();

 private:
  bool StopRequested() {
    if (!stopping_ && o_.stop_signal != nullptr && o_.stop_signal->load() != 0) {
      stopping_ = true;
      s_.stop = StopReason::kSignal;
      s_.signal = o_.stop_signal->load();
    }
    return stopping_;
  }
  Status Submit();
  Status Collect();
  Status Write(const std::string& lines, int64_t records, int64_t errors);
  StatusOr<std::string> TrimPoint();
  void Cleanup();

  const QueueJobOptions& o_;
  const std::vector<InputItem>& items_;
  // Adds item next_ to `pack` (or its error record to *local when it cannot be read here).
  void AddItem(JobEntry* pack, std::vector<size_t>* index, size_t* bytes, std::string* local,
               int64_t* local_errors);
  // The records of one answered entry (`value` is its result key's value) appended to *lines.
  void TakeResult(const std::string& entry_id, const RedisValue& value, std::string* lines,
                  int64_t* records, int64_t* errors);

  std::unique_ptr<RedisClient> redis_;
  std::string reply_;
  std::string reply_cursor_ = "0-0";
  size_t next_ = 0;
  // entry id -> the indexes of its items, in the entry's order
  std::unordered_map<std::string, std::vector<size_t>> outstanding_;
  size_t outstanding_items_ = 0;
  bool stopping_ = false;
  JobSummary s_;
};

Status QueueJob::Write(const std::string& lines, int64_t records, int64_t errors) {
  if (lines.empty()) return Status::Ok();
  Status written = o_.output->Append(lines);
  if (written.ok()) written = o_.output->Sync();
  if (!written.ok()) {
    s_.stop = StopReason::kOutputFailed;
    s_.last_error = written.message();
    stopping_ = true;
    return written;
  }
  s_.records += records;
  s_.errors += errors;
  if (o_.max_errors > 0 && s_.errors >= o_.max_errors && !stopping_) {
    stopping_ = true;
    s_.stop = StopReason::kMaxErrors;
  }
  return Status::Ok();
}

void QueueJob::AddItem(JobEntry* pack, std::vector<size_t>* index, size_t* bytes,
                       std::string* local, int64_t* local_errors) {
  const InputItem& item = items_[next_];
  JobItem job;
  job.source = item.source;
  if (item.kind == InputItem::Kind::kJsonLine) {
    job.payload = item.text;  // the line's bytes as they are: the worker parses them
    job.id = fmt::format("line {}", item.line);
  } else {
    auto read = batchjob::ReadFileBytes(item.path);
    if (!read.ok()) {
      s_.last_error = read.status().message();
      *local += batchjob::FormatErrorRecord(batchjob::DefaultIdJson(item), item.source,
                                            s_.last_error);
      ++*local_errors;
      ++next_;
      return;
    }
    job.is_file = true;
    job.payload = std::move(read).value();
    job.id = item.id;
  }
  *bytes += job.payload.size() + job.source.size();
  pack->items.push_back(std::move(job));
  index->push_back(next_++);
}

Status QueueJob::Submit() {
  RespBuffer cmds;
  std::vector<std::vector<size_t>> index;  // per XADD: its items
  std::string local;  // error records of items that cannot be read here
  int64_t local_errors = 0;
  size_t queued = 0;
  auto room = [&] {
    return queued < kSubmitChunk && next_ < items_.size() &&
           outstanding_items_ + queued < static_cast<size_t>(o_.max_queued);
  };
  while (room()) {
    JobEntry pack;
    pack.model = o_.model;
    pack.reply = reply_;
    pack.packed = o_.pack > 1;
    std::vector<size_t> items;
    size_t bytes = 0;
    while (room() && items.size() < static_cast<size_t>(o_.pack) &&
           (items.empty() || bytes < o_.pack_bytes)) {
      size_t before = items.size();
      AddItem(&pack, &items, &bytes, &local, &local_errors);
      queued += items.size() - before;
    }
    if (items.empty()) continue;
    AppendJobXadd(o_.stream, pack, &cmds);
    index.push_back(std::move(items));
  }
  RETURN_IF_ERROR(Write(local, local_errors, local_errors));
  if (cmds.commands() == 0) return Status::Ok();
  ASSIGN_OR_RETURN(std::vector<RedisValue> ids, redis_->Pipeline(cmds));
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!ids[i].is_string()) {
      return Internal("XADD to {} failed: {}", o_.stream, ids[i].str);
    }
    s_.submitted += static_cast<int64_t>(index[i].size());
    outstanding_items_ += index[i].size();
    outstanding_.emplace(std::move(ids[i].str), std::move(index[i]));
  }
  return Status::Ok();
}

// A record line of an error (batchjob/records.h writes "error" and never "outputs" for one).
bool IsErrorRecord(std::string_view line) {
  return line.find("\"error\":") != std::string_view::npos &&
         line.find("\"outputs\":") == std::string_view::npos;
}

void QueueJob::TakeResult(const std::string& entry_id, const RedisValue& v, std::string* lines,
                          int64_t* records, int64_t* errors) {
  const std::vector<size_t>& items = outstanding_[entry_id];
  std::vector<std::string_view> got;
  if (v.is_string()) {
    std::string_view rest = v.str;
    while (!rest.empty()) {
      size_t nl = rest.find('\n');
      if (nl == std::string_view::npos) break;  // a torn value: not a record
      got.push_back(rest.substr(0, nl + 1));
      rest = rest.substr(nl + 1);
    }
    if (!rest.empty()) got.clear();
  }
  if (got.size() == items.size()) {
    lines->append(v.str);
    for (std::string_view line : got) *errors += IsErrorRecord(line) ? 1 : 0;
  } else {  // expired (result TTL), removed by hand, or not one record per item
    std::string why = got.empty() ? "is missing"
                                  : fmt::format("has {} records for {} items", got.size(),
                                                items.size());
    for (size_t i : items) {
      const InputItem& item = items_[i];
      s_.last_error = fmt::format("{}: result {} {}", item.source, ResultKey(o_.stream, entry_id),
                                  why);
      *lines += batchjob::FormatErrorRecord(batchjob::DefaultIdJson(item), item.source,
                                            s_.last_error);
      ++*errors;
    }
  }
  *records += static_cast<int64_t>(items.size());
  outstanding_items_ -= items.size();
  outstanding_.erase(entry_id);
}

Status QueueJob::Collect() {
  ASSIGN_OR_RETURN(RedisValue reply,
                   redis_->Command({"XREAD", "COUNT", "1000", "BLOCK", "100", "STREAMS", reply_,
                                    reply_cursor_},
                                   std::chrono::milliseconds(100)));
  ASSIGN_OR_RETURN(std::vector<StreamEntry> notes, ParseReadReply(std::move(reply), reply_));
  std::vector<std::string> ready;
  for (const StreamEntry& n : notes) {
    reply_cursor_ = n.id;
    for (const auto& [name, value] : n.fields) {
      if (name != "ids") continue;
      for (std::string& id : SplitIds(value)) {
        if (outstanding_.count(id)) ready.push_back(std::move(id));  // else: a repeat
      }
    }
  }
  if (ready.empty()) return Status::Ok();
  std::sort(ready.begin(), ready.end());
  ready.erase(std::unique(ready.begin(), ready.end()), ready.end());
  RespBuffer cmds;
  // Read and delete in one round trip: a result deleted but not yet written (this process dies
  // in between) is not lost work, since --resume submits every input without a record again.
  for (const char* verb : {"MGET", "DEL"}) {
    cmds.Begin(1 + ready.size());
    cmds.Arg(verb);
    for (const std::string& id : ready) cmds.Arg(ResultKey(o_.stream, id));
  }
  ASSIGN_OR_RETURN(std::vector<RedisValue> replies, redis_->Pipeline(cmds));
  const RedisValue& values = replies[0];
  if (!values.is_array() || values.elements.size() != ready.size()) {
    return Internal("MGET of {} results: unexpected reply", ready.size());
  }
  std::string lines;
  int64_t records = 0, errors = 0;
  for (size_t i = 0; i < ready.size(); ++i) {
    TakeResult(ready[i], values.elements[i], &lines, &records, &errors);
  }
  return Write(lines, records, errors);
}

StatusOr<std::string> QueueJob::TrimPoint() {
  ASSIGN_OR_RETURN(RedisValue groups, redis_->Command({"XINFO", "GROUPS", o_.stream}));
  ASSIGN_OR_RETURN(std::vector<GroupPosition> positions, ParseGroups(groups));
  std::vector<std::vector<std::string>> cmds;
  for (const GroupPosition& g : positions) cmds.push_back({"XPENDING", o_.stream, g.name});
  ASSIGN_OR_RETURN(std::vector<RedisValue> pending, redis_->Pipeline(cmds));
  for (size_t i = 0; i < positions.size(); ++i) {
    const RedisValue& p = pending[i];
    if (p.is_array() && p.elements.size() >= 2 && p.elements[1].is_string()) {
      positions[i].oldest_pending = p.elements[1].str;
    }
  }
  return SafeTrimId(positions);
}

void QueueJob::Cleanup() {
  // Entries every group has read and acknowledged are trimmed in one XTRIM MINID: far cheaper
  // for Redis than an XDEL of each id (which cost more than all other commands of a job).
  auto trim = TrimPoint();
  std::vector<std::vector<std::string>> cmds = {{"DEL", reply_}};
  if (trim.ok() && !trim->empty()) cmds.push_back({"XTRIM", o_.stream, "MINID", *trim});
  auto ignored = redis_->Pipeline(cmds);  // best effort: leftovers are acknowledged entries
  (void)ignored;
}

StatusOr<JobSummary> QueueJob::Run() {
  TimePoint start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(redis_, RedisClient::Connect(o_.redis, o_.timeout));
  auto created = redis_->Command({"XGROUP", "CREATE", o_.stream, o_.group, "0", "MKSTREAM"});
  if (!created.ok() && !IsRedisError(created.status(), "BUSYGROUP")) return created.status();
  reply_ = ReplyStream(o_.stream, NewJobId());
  TimePoint last_result = start;
  for (;;) {
    StopRequested();
    if (!stopping_) RETURN_IF_ERROR(Submit());
    if (outstanding_.empty() && (stopping_ || next_ >= items_.size())) break;
    int64_t before = s_.records;
    Status collected = Collect();
    if (!collected.ok() && s_.stop == StopReason::kOutputFailed) break;
    RETURN_IF_ERROR(collected);
    TimePoint now = std::chrono::steady_clock::now();
    if (s_.records != before) last_result = now;
    if (o_.progress != nullptr) o_.progress->Update(s_.records, s_.errors);
    if (o_.idle_timeout.count() > 0 && now - last_result > o_.idle_timeout) {
      return DeadlineExceeded(
          "no result from the workers of {} (group {}) for {} s; {} entries unanswered: are "
          "workers running? (the records so far are written; --resume submits the rest again)",
          o_.stream, o_.group, o_.idle_timeout.count(), outstanding_.size());
    }
  }
  Cleanup();
  s_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s_;
}

}  // namespace

StatusOr<JobSummary> RunQueueJob(const QueueJobOptions& o, const std::vector<InputItem>& items) {
  if (o.stream.empty() || o.group.empty() || o.model.empty() || o.output == nullptr) {
    return InvalidArgument("a queue job needs a stream, a group, a model and an output");
  }
  if (o.max_queued < 1) return InvalidArgument("max_queued must be >= 1, got {}", o.max_queued);
  if (o.pack < 1 || o.pack > kMaxPackItems) {
    return InvalidArgument("--pack must be in 1..{}, got {}", kMaxPackItems, o.pack);
  }
  QueueJob job(o, items);
  return job.Run();
}

std::string FormatQueueSummary(const JobSummary& s, const QueueJobOptions& o) {
  double rate = s.seconds > 0 ? static_cast<double>(s.records) / s.seconds : 0;
  return fmt::format("{} records ({} errors) in {:.2f} s: {:.1f} items/s (on the workers of {}, "
                     "group {})\n",
                     s.records, s.errors, s.seconds, rate, o.stream, o.group);
}

}  // namespace inferd::workqueue
