#include "workqueue/protocol.h"

#include <charconv>

#include <fmt/format.h>

namespace inferd::workqueue {
namespace {

bool ParseU64(std::string_view s, uint64_t* out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

StatusOr<int64_t> IntegerOf(const RedisValue& v, std::string_view what) {
  if (v.type == RedisValue::Type::kInteger) return v.integer;
  uint64_t u = 0;
  if (v.is_string() && ParseU64(v.str, &u)) return static_cast<int64_t>(u);
  return InvalidArgument("{}: expected an integer", what);
}

StatusOr<StreamEntry> ParseEntry(const RedisValue& e) {
  if (!e.is_array() || e.elements.size() != 2 || !e.elements[0].is_string()) {
    return InvalidArgument("a stream entry is not [id, fields]");
  }
  StreamEntry entry;
  entry.id = e.elements[0].str;
  const RedisValue& f = e.elements[1];
  if (f.is_nil()) return entry;  // deleted while pending
  if (!f.is_array() || f.elements.size() % 2 != 0) {
    return InvalidArgument("entry {}: fields are not name/value pairs", entry.id);
  }
  for (size_t i = 0; i < f.elements.size(); i += 2) {
    if (!f.elements[i].is_string() || !f.elements[i + 1].is_string()) {
      return InvalidArgument("entry {}: a field is not a string", entry.id);
    }
    entry.fields.emplace_back(f.elements[i].str, f.elements[i + 1].str);
  }
  return entry;
}

}  // namespace

Fields EncodeJob(const JobEntry& job) {
  Fields f;
  f.emplace_back("model", job.model);
  f.emplace_back("source", job.source);
  f.emplace_back(job.is_file ? "file" : "request", job.payload);
  if (job.is_file && !job.id.empty()) f.emplace_back("id", job.id);
  if (!job.reply.empty()) f.emplace_back("reply", job.reply);
  return f;
}

StatusOr<JobEntry> DecodeJob(const Fields& fields) {
  JobEntry job;
  bool seen_model = false, seen_source = false, seen_payload = false, seen_id = false,
       seen_reply = false;
  auto take = [&](bool* seen, std::string* into, const std::string& name,
                  const std::string& value) -> Status {
    if (*seen) return InvalidArgument("field '{}' appears twice", name);
    *seen = true;
    *into = value;
    return Status::Ok();
  };
  for (const auto& [name, value] : fields) {
    if (name == "model") {
      RETURN_IF_ERROR(take(&seen_model, &job.model, name, value));
    } else if (name == "source") {
      RETURN_IF_ERROR(take(&seen_source, &job.source, name, value));
    } else if (name == "request" || name == "file") {
      if (seen_payload) return InvalidArgument("an entry has one of 'request' or 'file', not both");
      RETURN_IF_ERROR(take(&seen_payload, &job.payload, name, value));
      job.is_file = name == "file";
    } else if (name == "id") {
      RETURN_IF_ERROR(take(&seen_id, &job.id, name, value));
    } else if (name == "reply") {
      RETURN_IF_ERROR(take(&seen_reply, &job.reply, name, value));
    }
  }
  if (!seen_model || job.model.empty()) return InvalidArgument("the entry has no 'model' field");
  if (!seen_source || job.source.empty()) return InvalidArgument("the entry has no 'source' field");
  if (!seen_payload) return InvalidArgument("the entry has neither a 'request' nor a 'file' field");
  return job;
}

std::string ResultKey(std::string_view stream, std::string_view entry_id) {
  return fmt::format("result:{}:{}", stream, entry_id);
}
std::string DeadLetterStream(std::string_view stream) { return fmt::format("{}:dead", stream); }
std::string ReplyStream(std::string_view stream, std::string_view job) {
  return fmt::format("{}:reply:{}", stream, job);
}

StatusOr<std::vector<StreamEntry>> ParseEntries(const RedisValue& list) {
  if (list.is_nil()) return std::vector<StreamEntry>{};
  if (!list.is_array()) return InvalidArgument("an entry list is not an array");
  std::vector<StreamEntry> out;
  out.reserve(list.elements.size());
  for (const RedisValue& e : list.elements) {
    ASSIGN_OR_RETURN(StreamEntry entry, ParseEntry(e));
    out.push_back(std::move(entry));
  }
  return out;
}

StatusOr<std::vector<StreamEntry>> ParseReadReply(const RedisValue& reply,
                                                  std::string_view stream) {
  if (reply.is_nil()) return std::vector<StreamEntry>{};
  if (!reply.is_array()) return InvalidArgument("XREADGROUP reply is not an array");
  for (const RedisValue& s : reply.elements) {
    if (!s.is_array() || s.elements.size() != 2 || !s.elements[0].is_string()) {
      return InvalidArgument("XREADGROUP reply: a stream is not [name, entries]");
    }
    if (s.elements[0].str != stream) continue;
    auto entries = ParseEntries(s.elements[1]);
    if (!entries.ok()) return entries.status().WithContext("XREADGROUP reply");
    return entries;
  }
  return std::vector<StreamEntry>{};
}

StatusOr<AutoClaimResult> ParseAutoClaimReply(const RedisValue& reply) {
  if (!reply.is_array() || reply.elements.size() < 2 || !reply.elements[0].is_string()) {
    return InvalidArgument("XAUTOCLAIM reply is not [cursor, entries, ...]");
  }
  AutoClaimResult r;
  r.next_cursor = reply.elements[0].str;
  auto entries = ParseEntries(reply.elements[1]);
  if (!entries.ok()) return entries.status().WithContext("XAUTOCLAIM reply");
  r.entries = std::move(entries).value();
  if (reply.elements.size() >= 3 && reply.elements[2].is_array()) {
    for (const RedisValue& id : reply.elements[2].elements) {
      if (!id.is_string()) return InvalidArgument("XAUTOCLAIM reply: a deleted id is not a string");
      r.deleted.push_back(id.str);
    }
  }
  return r;
}

StatusOr<std::vector<PendingEntry>> ParsePendingReply(const RedisValue& reply) {
  if (reply.is_nil()) return std::vector<PendingEntry>{};
  if (!reply.is_array()) return InvalidArgument("XPENDING reply is not an array");
  std::vector<PendingEntry> out;
  for (const RedisValue& e : reply.elements) {
    if (!e.is_array() || e.elements.size() != 4 || !e.elements[0].is_string() ||
        !e.elements[1].is_string()) {
      return InvalidArgument("XPENDING reply: an entry is not [id, consumer, idle, deliveries]");
    }
    PendingEntry p;
    p.id = e.elements[0].str;
    p.consumer = e.elements[1].str;
    ASSIGN_OR_RETURN(p.idle_ms, IntegerOf(e.elements[2], "XPENDING idle time"));
    ASSIGN_OR_RETURN(p.deliveries, IntegerOf(e.elements[3], "XPENDING delivery count"));
    out.push_back(std::move(p));
  }
  return out;
}

StatusOr<std::vector<GroupPosition>> ParseGroups(const RedisValue& reply) {
  if (!reply.is_array()) return InvalidArgument("XINFO GROUPS reply is not an array");
  std::vector<GroupPosition> out;
  for (const RedisValue& g : reply.elements) {
    if (!g.is_array() || g.elements.size() % 2 != 0) {
      return InvalidArgument("XINFO GROUPS reply: a group is not name/value pairs");
    }
    GroupPosition p;
    for (size_t i = 0; i + 1 < g.elements.size(); i += 2) {
      const RedisValue& k = g.elements[i];
      const RedisValue& v = g.elements[i + 1];
      if (!k.is_string() || !v.is_string()) continue;
      if (k.str == "name") p.name = v.str;
      if (k.str == "last-delivered-id") p.last_delivered = v.str;
    }
    if (p.name.empty() || p.last_delivered.empty()) {
      return InvalidArgument("XINFO GROUPS reply: a group without name or last-delivered-id");
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::string SafeTrimId(const std::vector<GroupPosition>& groups) {
  if (groups.empty()) return "";
  std::pair<uint64_t, uint64_t> safe{UINT64_MAX, UINT64_MAX};
  for (const GroupPosition& g : groups) {
    // Entries up to last_delivered are read; the oldest pending one must stay.
    std::pair<uint64_t, uint64_t> limit;
    if (!g.oldest_pending.empty()) {
      auto id = ParseEntryId(g.oldest_pending);
      if (!id.ok()) return "";
      limit = *id;
    } else {
      auto id = ParseEntryId(g.last_delivered);
      if (!id.ok()) return "";
      limit = id->second == UINT64_MAX ? std::make_pair(id->first + 1, uint64_t{0})
                                       : std::make_pair(id->first, id->second + 1);
    }
    safe = std::min(safe, limit);
  }
  if (safe == std::make_pair(uint64_t{0}, uint64_t{0}) || safe.first == UINT64_MAX) return "";
  return fmt::format("{}-{}", safe.first, safe.second);
}

bool IsTransient(const Status& status) {
  return status.code() == StatusCode::kUnavailable ||
         status.code() == StatusCode::kResourceExhausted ||
         status.code() == StatusCode::kDeadlineExceeded;
}

StatusOr<std::pair<uint64_t, uint64_t>> ParseEntryId(std::string_view id) {
  size_t dash = id.find('-');
  uint64_t ms = 0, seq = 0;
  if (dash == std::string_view::npos || !ParseU64(id.substr(0, dash), &ms) ||
      !ParseU64(id.substr(dash + 1), &seq)) {
    return InvalidArgument("'{}' is not a stream entry id (MS-SEQ)", id);
  }
  return std::make_pair(ms, seq);
}

}  // namespace inferd::workqueue
