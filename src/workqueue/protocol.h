// The work queue's protocol on Redis Streams: what a job entry holds, where results go, and the
// parsing of the stream commands' replies. Pure functions (no connection), tested without Redis.
//
// Keys, for a stream S and consumer group G:
//   S                  the jobs: one stream entry per item (XADD by `inferd batch --redis`)
//   S:dead             the dead-letter stream: entries that are not valid requests, and entries
//                      delivered more than --max-deliveries times without an acknowledgement
//   result:S:ID        the result of entry ID: one record line of `inferd batch`'s output
//                      (batchjob/records.h), written with SET NX, so a redelivered entry cannot
//                      replace or duplicate the first result
//   S:reply:JOB        one submitter's notifications: the ids whose results are stored
//
// A job entry's fields (binary-safe strings):
//   model     the model (or ensemble) name                                   required
//   source    the item's source, the resume key of its record               required
//   request   a request line in `inferd batch`'s JSONL form:                 one of request/file
//             {"id": ..., "inputs": {"x": [[...]], ...}} (batchjob/item_reader.h)
//   file      the bytes of an input file (BYTES inputs, or a .npy when `source` ends in .npy)
//   id        the record's id for a file item (a file's relative path); default: source
//   reply     the stream to notify (XADD reply * ids "ID ID ..."); optional
// Unknown fields are ignored (forward compatibility); a missing or duplicated field is an invalid
// entry, which is dead-lettered with the reason and answered with an error record.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "workqueue/redis_client.h"

namespace inferd::workqueue {

using Fields = std::vector<std::pair<std::string, std::string>>;

struct StreamEntry {
  std::string id;  // "1700000000000-0"
  Fields fields;
};

struct JobEntry {
  std::string model;
  std::string source;
  bool is_file = false;
  std::string payload;  // the request line, or the file's bytes
  std::string id;       // file items: the record id ("" = source)
  std::string reply;    // "" = no notification
};

Fields EncodeJob(const JobEntry& job);
// INVALID_ARGUMENT naming the missing, duplicated or conflicting field.
StatusOr<JobEntry> DecodeJob(const Fields& fields);

std::string ResultKey(std::string_view stream, std::string_view entry_id);
std::string DeadLetterStream(std::string_view stream);
std::string ReplyStream(std::string_view stream, std::string_view job);

// Stream replies. Each is INVALID_ARGUMENT (naming the command) when the reply has an
// unexpected shape, so a protocol surprise is an error, not a crash.
// XREADGROUP / XREAD: nil (timeout) = no entries; otherwise the entries of `stream`.
// Entries whose fields are nil (deleted while pending) come back with an empty field list.
StatusOr<std::vector<StreamEntry>> ParseReadReply(const RedisValue& reply, std::string_view stream);
// XRANGE / one stream's entry list.
StatusOr<std::vector<StreamEntry>> ParseEntries(const RedisValue& list);

struct AutoClaimResult {
  std::string next_cursor;  // "0-0" = the scan went round the whole pending list
  std::vector<StreamEntry> entries;
  std::vector<std::string> deleted;  // pending ids no longer in the stream (Redis >= 7)
};
StatusOr<AutoClaimResult> ParseAutoClaimReply(const RedisValue& reply);

struct PendingEntry {
  std::string id;
  std::string consumer;
  int64_t idle_ms = 0;
  int64_t deliveries = 0;
};
// XPENDING key group [IDLE ms] start end count [consumer] (the extended form).
StatusOr<std::vector<PendingEntry>> ParsePendingReply(const RedisValue& reply);

// Where a consumer group stands on a stream (XINFO GROUPS, XPENDING's summary).
struct GroupPosition {
  std::string name;
  std::string last_delivered;  // "0-0" = nothing read yet
  std::string oldest_pending;  // "" = nothing pending
};
// XINFO GROUPS (RESP2: per group a flat list of name/value pairs).
StatusOr<std::vector<GroupPosition>> ParseGroups(const RedisValue& reply);
// The MINID below which every group has read and acknowledged every entry: entries with smaller
// ids can be trimmed (XTRIM S MINID id) without losing work. "" when nothing can be.
std::string SafeTrimId(const std::vector<GroupPosition>& groups);

// Whether an inference failure is worth another delivery: the engine was overloaded or shutting
// down (UNAVAILABLE, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED). Anything else is the request's fault
// and is answered with an error record like a local job's.
bool IsTransient(const Status& status);

// "1700000000000-5" → (1700000000000, 5); INVALID_ARGUMENT for anything else.
StatusOr<std::pair<uint64_t, uint64_t>> ParseEntryId(std::string_view id);

}  // namespace inferd::workqueue
