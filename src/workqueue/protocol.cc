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

StatusOr<StreamEntry> ParseEntry(RedisValue& e) {
  if (!e.is_array() || e.elements.size() != 2 || !e.elements[0].is_string()) {
    return InvalidArgument("a stream entry is not [id, fields]");
  }
  StreamEntry entry;
  entry.id = std::move(e.elements[0].str);
  RedisValue& f = e.elements[1];
  if (f.is_nil()) return entry;  // deleted while pending
  if (!f.is_array() || f.elements.size() % 2 != 0) {
    return InvalidArgument("entry {}: fields are not name/value pairs", entry.id);
  }
  entry.fields.reserve(f.elements.size() / 2);
  for (size_t i = 0; i < f.elements.size(); i += 2) {
    if (!f.elements[i].is_string() || !f.elements[i + 1].is_string()) {
      return InvalidArgument("entry {}: a field is not a string", entry.id);
    }
    entry.fields.emplace_back(std::move(f.elements[i].str), std::move(f.elements[i + 1].str));
  }
  return entry;
}

// Where an item's fields are in an entry's field list (-1: absent).
struct ItemIndex {
  int source = -1, payload = -1, id = -1;
  bool is_file = false;
};

// Sets *slot to field i, or fails when the field was already seen.
Status Take(int* slot, int i, std::string_view name) {
  if (*slot >= 0) return InvalidArgument("field '{}' appears twice", name);
  *slot = i;
  return Status::Ok();
}

Status TakeItemField(ItemIndex* item, int i, const std::string& name) {
  if (name == "source") return Take(&item->source, i, name);
  if (name == "id") return Take(&item->id, i, name);
  if (item->payload >= 0) return InvalidArgument("an item has one of 'request' or 'file', not both");
  item->is_file = name == "file";
  return Take(&item->payload, i, name);
}

bool IsItemField(const std::string& name) {
  return name == "source" || name == "request" || name == "file" || name == "id";
}

Status CheckItem(const Fields& fields, const ItemIndex& item) {
  if (item.source < 0 || fields[item.source].second.empty()) {
    return InvalidArgument("the entry has no 'source' field");
  }
  if (item.payload < 0) return InvalidArgument("the entry has neither a 'request' nor a 'file' field");
  return Status::Ok();
}

// The single-item form: the fields in any order.
Status IndexSingle(const Fields& fields, int* model, int* reply, std::vector<ItemIndex>* items) {
  ItemIndex item;
  for (int i = 0; i < static_cast<int>(fields.size()); ++i) {
    const std::string& name = fields[i].first;
    if (name == "model") {
      RETURN_IF_ERROR(Take(model, i, name));
    } else if (name == "reply") {
      RETURN_IF_ERROR(Take(reply, i, name));
    } else if (IsItemField(name)) {
      RETURN_IF_ERROR(TakeItemField(&item, i, name));
    }
  }
  if (*model < 0 || fields[*model].second.empty()) {
    return InvalidArgument("the entry has no 'model' field");
  }
  RETURN_IF_ERROR(CheckItem(fields, item));
  items->push_back(item);
  return Status::Ok();
}

// A pack: header fields anywhere, each `source` starts the next item.
Status IndexPack(const Fields& fields, int* model, int* reply, std::vector<ItemIndex>* items) {
  int count_at = -1;
  for (int i = 0; i < static_cast<int>(fields.size()); ++i) {
    const std::string& name = fields[i].first;
    if (name == "model") {
      RETURN_IF_ERROR(Take(model, i, name));
    } else if (name == "reply") {
      RETURN_IF_ERROR(Take(reply, i, name));
    } else if (name == "items") {
      RETURN_IF_ERROR(Take(&count_at, i, name));
    } else if (name == "source") {
      items->emplace_back();
      items->back().source = i;
    } else if (IsItemField(name)) {
      if (items->empty()) return InvalidArgument("field '{}' comes before the first 'source'", name);
      Status s = TakeItemField(&items->back(), i, name);
      if (!s.ok()) return s.WithContext(fmt::format("item {}", items->size() - 1));
    }
  }
  if (*model < 0 || fields[*model].second.empty()) {
    return InvalidArgument("the entry has no 'model' field");
  }
  uint64_t count = 0;
  if (!ParseU64(fields[count_at].second, &count) || count < 1 || count > kMaxPackItems) {
    return InvalidArgument("'items' is '{}', not a count in 1..{}", fields[count_at].second,
                           kMaxPackItems);
  }
  if (count != items->size()) {
    return InvalidArgument("'items' says {} but the entry has {} items", count, items->size());
  }
  for (size_t k = 0; k < items->size(); ++k) {
    Status s = CheckItem(fields, (*items)[k]);
    if (!s.ok()) return s.WithContext(fmt::format("item {}", k));
  }
  return Status::Ok();
}

bool HasField(const Fields& fields, std::string_view name) {
  for (const auto& f : fields) {
    if (f.first == name) return true;
  }
  return false;
}

size_t ItemArgs(const JobItem& item) { return item.id.empty() ? 4 : 6; }

}  // namespace

Fields EncodeJob(const JobEntry& job) {
  Fields f;
  f.emplace_back("model", job.model);
  if (!job.reply.empty()) f.emplace_back("reply", job.reply);
  if (job.packed || job.items.size() != 1) {
    f.emplace_back("items", std::to_string(job.items.size()));
  }
  for (const JobItem& item : job.items) {
    f.emplace_back("source", item.source);
    f.emplace_back(item.is_file ? "file" : "request", item.payload);
    if (!item.id.empty()) f.emplace_back("id", item.id);
  }
  return f;
}

void AppendJobXadd(std::string_view stream, const JobEntry& job, RespBuffer* out) {
  bool packed = job.packed || job.items.size() != 1;
  size_t argc = 5 + (job.reply.empty() ? 0 : 2) + (packed ? 2 : 0);
  for (const JobItem& item : job.items) argc += ItemArgs(item);
  out->Begin(argc);
  out->Arg("XADD");
  out->Arg(stream);
  out->Arg("*");
  out->Arg("model");
  out->Arg(job.model);
  if (!job.reply.empty()) {
    out->Arg("reply");
    out->Arg(job.reply);
  }
  if (packed) {
    out->Arg("items");
    out->Arg(static_cast<int64_t>(job.items.size()));
  }
  for (const JobItem& item : job.items) {
    out->Arg("source");
    out->Arg(item.source);
    out->Arg(item.is_file ? "file" : "request");
    out->Arg(item.payload);
    if (!item.id.empty()) {
      out->Arg("id");
      out->Arg(item.id);
    }
  }
}

StatusOr<JobEntry> DecodeJob(Fields* fields) {
  Fields& f = *fields;
  JobEntry job;
  job.packed = HasField(f, "items");
  int model = -1, reply = -1;
  std::vector<ItemIndex> index;
  RETURN_IF_ERROR(job.packed ? IndexPack(f, &model, &reply, &index)
                             : IndexSingle(f, &model, &reply, &index));
  // Valid: now the values move out.
  job.model = std::move(f[model].second);
  if (reply >= 0) job.reply = std::move(f[reply].second);
  job.items.resize(index.size());
  for (size_t k = 0; k < index.size(); ++k) {
    JobItem& item = job.items[k];
    item.source = std::move(f[index[k].source].second);
    item.payload = std::move(f[index[k].payload].second);
    item.is_file = index[k].is_file;
    if (index[k].id >= 0) item.id = std::move(f[index[k].id].second);
  }
  return job;
}

std::vector<std::string> EntrySources(const Fields& fields) {
  std::vector<std::string> out;
  for (const auto& [name, value] : fields) {
    if (name == "source") out.push_back(value);
  }
  return out;
}

Fields ItemFields(const JobEntry& job, const JobItem& item) {
  JobEntry one;
  one.model = job.model;
  one.reply = job.reply;
  one.items.push_back(item);
  return EncodeJob(one);
}

std::string ResultKey(std::string_view stream, std::string_view entry_id) {
  return fmt::format("result:{}:{}", stream, entry_id);
}
std::string DeadLetterStream(std::string_view stream) { return fmt::format("{}:dead", stream); }
std::string ReplyStream(std::string_view stream, std::string_view job) {
  return fmt::format("{}:reply:{}", stream, job);
}

StatusOr<std::vector<StreamEntry>> ParseEntries(RedisValue list) {
  if (list.is_nil()) return std::vector<StreamEntry>{};
  if (!list.is_array()) return InvalidArgument("an entry list is not an array");
  std::vector<StreamEntry> out;
  out.reserve(list.elements.size());
  for (RedisValue& e : list.elements) {
    ASSIGN_OR_RETURN(StreamEntry entry, ParseEntry(e));
    out.push_back(std::move(entry));
  }
  return out;
}

StatusOr<std::vector<StreamEntry>> ParseReadReply(RedisValue reply, std::string_view stream) {
  if (reply.is_nil()) return std::vector<StreamEntry>{};
  if (!reply.is_array()) return InvalidArgument("XREADGROUP reply is not an array");
  for (RedisValue& s : reply.elements) {
    if (!s.is_array() || s.elements.size() != 2 || !s.elements[0].is_string()) {
      return InvalidArgument("XREADGROUP reply: a stream is not [name, entries]");
    }
    if (s.elements[0].str != stream) continue;
    auto entries = ParseEntries(std::move(s.elements[1]));
    if (!entries.ok()) return entries.status().WithContext("XREADGROUP reply");
    return entries;
  }
  return std::vector<StreamEntry>{};
}

StatusOr<AutoClaimResult> ParseAutoClaimReply(RedisValue reply) {
  if (!reply.is_array() || reply.elements.size() < 2 || !reply.elements[0].is_string()) {
    return InvalidArgument("XAUTOCLAIM reply is not [cursor, entries, ...]");
  }
  AutoClaimResult r;
  r.next_cursor = reply.elements[0].str;
  auto entries = ParseEntries(std::move(reply.elements[1]));
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
