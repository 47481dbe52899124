// The work queue's protocol on Redis Streams: what a job entry holds, where results go, and the
// parsing of the stream commands' replies. Pure functions (no connection), tested without Redis.
//
// Keys, for a stream S and consumer group G:
//   S                  the jobs: one stream entry per item, or per pack of items (XADD by
//                      `inferd batch --redis`, which packs --pack items into one entry)
//   S:dead             the dead-letter stream: items that are not valid requests, and items of
//                      entries delivered more than --max-deliveries times without an
//                      acknowledgement; one dead-letter entry per item
//   result:S:ID        the result of entry ID: the record lines of `inferd batch`'s output
//                      (batchjob/records.h), one per item in the entry's item order, written with
//                      SET NX, so a redelivered entry cannot replace or duplicate the first result
//   S:reply:JOB        one submitter's notifications: the ids whose results are stored
//
// A job entry's fields (binary-safe strings). A single item:
//   model     the model (or ensemble) name                                   required
//   source    the item's source, the resume key of its record               required
//   request   a request line in `inferd batch`'s JSONL form:                 one of request/file
//             {"id": ..., "inputs": {"x": [[...]], ...}} (batchjob/item_reader.h)
//   file      the bytes of an input file (BYTES inputs, or a .npy when `source` ends in .npy)
//   id        the record's id for an item whose request has none; default: source
//   reply     the stream to notify (XADD reply * ids "ID ID ..."); optional
// A pack of N items (one XADD, one delivery, one result key and one ack for all N): the fields
// model, [reply], items N, then per item in order: source, request|file, [id] — each `source`
// starts the next item. Packing is what makes the queue cheap: Redis, hiredis and the kernel's
// per-entry costs (the PEL, the ack, a key, a command) are paid once per pack.
// Unknown fields are ignored (forward compatibility); a missing or duplicated field, or a pack
// whose item count is wrong, is an invalid entry: it is dead-lettered with the reason and
// answered with error records.
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

struct JobItem {
  std::string source;
  bool is_file = false;
  std::string payload;  // the request line, or the file's bytes
  std::string id;       // the record id when the request has none ("" = source)
};

struct JobEntry {
  std::string model;
  std::string reply;  // "" = no notification
  std::vector<JobItem> items;
  bool packed = false;  // encoded with an `items` count (a pack), even of one item
};

// At most this many items in one pack (a bound on what one entry makes a worker allocate).
inline constexpr int kMaxPackItems = 4096;

// The entry's fields (one item and !packed: the single-item form).
Fields EncodeJob(const JobEntry& job);
// Appends `XADD stream * FIELDS` of `job` to `out`, as EncodeJob's fields, without building them.
void AppendJobXadd(std::string_view stream, const JobEntry& job, RespBuffer* out);
// INVALID_ARGUMENT naming the missing, duplicated or conflicting field (and the item of a pack).
// On success the values are moved out of *fields; on error *fields is left as it was.
StatusOr<JobEntry> DecodeJob(Fields* fields);
// The sources an entry names, in order (for the error records of an entry DecodeJob refused).
std::vector<std::string> EntrySources(const Fields& fields);
// `item` of `job` (its model and reply) as the fields of a single-item entry (model, [reply],
// source, request|file, [id]): what a dead letter carries, so it can be XADDed again as it is.
Fields ItemFields(const JobEntry& job, const JobItem& item);

std::string ResultKey(std::string_view stream, std::string_view entry_id);
std::string DeadLetterStream(std::string_view stream);
std::string ReplyStream(std::string_view stream, std::string_view job);

// Stream replies. Each is INVALID_ARGUMENT (naming the command) when the reply has an
// unexpected shape, so a protocol surprise is an error, not a crash.
// XREADGROUP / XREAD: nil (timeout) = no entries; otherwise the entries of `stream`.
// Entries whose fields are nil (deleted while pending) come back with an empty field list.
// The replies are taken by value: their strings are moved into the entries (std::move a reply
// that is not needed afterwards).
StatusOr<std::vector<StreamEntry>> ParseReadReply(RedisValue reply, std::string_view stream);
// XRANGE / one stream's entry list.
StatusOr<std::vector<StreamEntry>> ParseEntries(RedisValue list);

struct AutoClaimResult {
  std::string next_cursor;  // "0-0" = the scan went round the whole pending list
  std::vector<StreamEntry> entries;
  std::vector<std::string> deleted;  // pending ids no longer in the stream (Redis >= 7)
};
StatusOr<AutoClaimResult> ParseAutoClaimReply(RedisValue reply);

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
