#include "workqueue/protocol.h"

#include <gtest/gtest.h>

#include "workqueue/redis_client.h"

namespace inferd::workqueue {
namespace {

RedisValue Str(std::string s) {
  RedisValue v;
  v.type = RedisValue::Type::kString;
  v.str = std::move(s);
  return v;
}
RedisValue Int(int64_t i) {
  RedisValue v;
  v.type = RedisValue::Type::kInteger;
  v.integer = i;
  return v;
}
RedisValue Arr(std::vector<RedisValue> e) {
  RedisValue v;
  v.type = RedisValue::Type::kArray;
  v.elements = std::move(e);
  return v;
}
RedisValue Entry(std::string id, std::vector<std::string> kv) {
  std::vector<RedisValue> f;
  for (auto& s : kv) f.push_back(Str(s));
  return Arr({Str(std::move(id)), Arr(std::move(f))});
}

TEST(RedisUrl, ParsesHostPortDbAndCredentials) {
  auto e = ParseRedisUrl("redis://127.0.0.1:7001/3");
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->host, "127.0.0.1");
  EXPECT_EQ(e->port, 7001);
  EXPECT_EQ(e->db, 3);
  EXPECT_EQ(e->Describe(), "127.0.0.1:7001/3");
  e = ParseRedisUrl("redis://alice:s3cret@localhost");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->user, "alice");
  EXPECT_EQ(e->password, "s3cret");
  EXPECT_EQ(e->port, 6379);
  EXPECT_EQ(e->Describe().find("s3cret"), std::string::npos);
  e = ParseRedisUrl("redis://:pw@[::1]:6380/");
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->host, "::1");
  EXPECT_EQ(e->port, 6380);
  EXPECT_EQ(e->password, "pw");
  EXPECT_EQ(e->user, "");
}

TEST(RedisUrl, RejectsBadUrls) {
  for (const char* bad : {"http://x:1", "redis://", "redis://:6379", "redis://h:0", "redis://h:99999",
                          "redis://h:12x", "redis://h/abc", "redis://h/-1", "redis://[::1"}) {
    auto e = ParseRedisUrl(bad);
    EXPECT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(RedisError, MatchesTheFirstWordOfTheServerReply) {
  Status s = FailedPrecondition("Redis at h:1/0: XGROUP replied: BUSYGROUP Consumer Group name "
                                "already exists");
  EXPECT_TRUE(IsRedisError(s, "BUSYGROUP"));
  EXPECT_FALSE(IsRedisError(s, "BUSY"));
  EXPECT_FALSE(IsRedisError(Unavailable("replied: BUSYGROUP"), "BUSYGROUP"));
}

TEST(JobEntry, RoundTripsRequestsAndFiles) {
  JobEntry job{"cnn", "req.jsonl:7", false, R"({"inputs":{"x":[1]}})", "line 7", "S:reply:1"};
  auto back = DecodeJob(EncodeJob(job));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->model, "cnn");
  EXPECT_EQ(back->source, "req.jsonl:7");
  EXPECT_FALSE(back->is_file);
  EXPECT_EQ(back->payload, job.payload);
  EXPECT_EQ(back->reply, "S:reply:1");

  JobEntry file{"img", "imgs/a.jpg", true, std::string("\0\xff\x01", 3), "a.jpg", ""};
  back = DecodeJob(EncodeJob(file));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->is_file);
  EXPECT_EQ(back->payload, std::string("\0\xff\x01", 3));
  EXPECT_EQ(back->id, "a.jpg");
  EXPECT_EQ(back->reply, "");
}

TEST(JobEntry, InvalidEntriesNameTheProblem) {
  struct Case {
    Fields fields;
    const char* want;
  } cases[] = {
      {{{"source", "s"}, {"request", "{}"}}, "'model'"},
      {{{"model", "m"}, {"request", "{}"}}, "'source'"},
      {{{"model", "m"}, {"source", "s"}}, "neither"},
      {{{"model", "m"}, {"source", "s"}, {"request", "{}"}, {"file", "x"}}, "not both"},
      {{{"model", "m"}, {"model", "n"}, {"source", "s"}, {"request", "{}"}}, "twice"},
      {{{"model", ""}, {"source", "s"}, {"request", "{}"}}, "'model'"},
  };
  for (const Case& c : cases) {
    auto job = DecodeJob(c.fields);
    ASSERT_FALSE(job.ok()) << c.want;
    EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(job.status().message().find(c.want), std::string::npos) << job.status().message();
  }
  // Unknown fields are ignored.
  EXPECT_TRUE(DecodeJob({{"model", "m"}, {"source", "s"}, {"request", "{}"}, {"v2", "x"}}).ok());
}

TEST(Keys, AreNamespacedByStream) {
  EXPECT_EQ(ResultKey("jobs", "1-0"), "result:jobs:1-0");
  EXPECT_EQ(DeadLetterStream("jobs"), "jobs:dead");
  EXPECT_EQ(ReplyStream("jobs", "abc"), "jobs:reply:abc");
}

TEST(Replies, ReadGroupReplyGivesTheStreamsEntries) {
  RedisValue nil;
  auto none = ParseReadReply(nil, "jobs");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  RedisValue reply = Arr({Arr({Str("other"), Arr({Entry("9-0", {"a", "b"})})}),
                          Arr({Str("jobs"), Arr({Entry("1-0", {"model", "m", "source", "s"}),
                                                 Arr({Str("2-0"), RedisValue{}})})})});
  auto entries = ParseReadReply(reply, "jobs");
  ASSERT_TRUE(entries.ok()) << entries.status().message();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].id, "1-0");
  ASSERT_EQ((*entries)[0].fields.size(), 2u);
  EXPECT_EQ((*entries)[0].fields[1].second, "s");
  EXPECT_EQ((*entries)[1].id, "2-0");
  EXPECT_TRUE((*entries)[1].fields.empty());  // deleted while pending
}

TEST(Replies, MalformedRepliesAreErrorsNotCrashes) {
  EXPECT_FALSE(ParseReadReply(Str("x"), "jobs").ok());
  EXPECT_FALSE(ParseReadReply(Arr({Str("jobs")}), "jobs").ok());
  EXPECT_FALSE(ParseReadReply(Arr({Arr({Str("jobs"), Arr({Entry("1-0", {"odd"})})})}), "jobs").ok());
  EXPECT_FALSE(ParseEntries(Arr({Arr({Int(1), Arr({})})})).ok());
  EXPECT_FALSE(ParseAutoClaimReply(Arr({Str("0-0")})).ok());
  EXPECT_FALSE(ParsePendingReply(Arr({Arr({Str("1-0"), Str("c"), Int(5)})})).ok());
  EXPECT_FALSE(ParsePendingReply(Arr({Arr({Str("1-0"), Str("c"), Str("x"), Int(5)})})).ok());
}

TEST(Replies, AutoClaimGivesCursorEntriesAndDeletedIds) {
  RedisValue reply = Arr({Str("5-0"), Arr({Entry("3-0", {"model", "m"})}), Arr({Str("4-0")})});
  auto r = ParseAutoClaimReply(reply);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->next_cursor, "5-0");
  ASSERT_EQ(r->entries.size(), 1u);
  EXPECT_EQ(r->entries[0].id, "3-0");
  ASSERT_EQ(r->deleted.size(), 1u);
  EXPECT_EQ(r->deleted[0], "4-0");
}

TEST(Replies, PendingGivesDeliveryCounts) {
  auto p = ParsePendingReply(Arr({Arr({Str("3-0"), Str("w1"), Int(1500), Int(4)})}));
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->size(), 1u);
  EXPECT_EQ((*p)[0].consumer, "w1");
  EXPECT_EQ((*p)[0].idle_ms, 1500);
  EXPECT_EQ((*p)[0].deliveries, 4);
}

TEST(Trim, KeepsWhatAnyGroupHasNotReadOrAcknowledged) {
  // g1 read up to 10-3 with 7-0 still pending; g2 read up to 9-0 with nothing pending.
  EXPECT_EQ(SafeTrimId({{"g1", "10-3", "7-0"}, {"g2", "9-0", ""}}), "7-0");
  EXPECT_EQ(SafeTrimId({{"g1", "10-3", ""}, {"g2", "9-0", ""}}), "9-1");
  EXPECT_EQ(SafeTrimId({{"g1", "0-0", ""}}), "0-1");
  EXPECT_EQ(SafeTrimId({}), "");
  EXPECT_EQ(SafeTrimId({{"g1", "junk", ""}}), "");
  RedisValue groups = Arr({Arr({Str("name"), Str("g1"), Str("consumers"), Int(2), Str("pending"),
                                Int(1), Str("last-delivered-id"), Str("10-3")})});
  auto parsed = ParseGroups(groups);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->size(), 1u);
  EXPECT_EQ((*parsed)[0].name, "g1");
  EXPECT_EQ((*parsed)[0].last_delivered, "10-3");
  EXPECT_FALSE(ParseGroups(Arr({Arr({Str("name")})})).ok());
  EXPECT_FALSE(ParseGroups(Arr({Arr({Str("consumers"), Int(1)})})).ok());
}

TEST(Failures, OnlyOverloadIsRetried) {
  EXPECT_TRUE(IsTransient(Unavailable("shutting down")));
  EXPECT_TRUE(IsTransient(ResourceExhausted("queue full")));
  EXPECT_TRUE(IsTransient(DeadlineExceeded("timeout")));
  EXPECT_FALSE(IsTransient(InvalidArgument("bad shape")));
  EXPECT_FALSE(IsTransient(NotFound("no model")));
  EXPECT_FALSE(IsTransient(Internal("kernel failed")));
}

TEST(EntryIds, ParseOrFail) {
  auto id = ParseEntryId("1700000000000-5");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->first, 1700000000000u);
  EXPECT_EQ(id->second, 5u);
  for (const char* bad : {"", "1", "1-", "-1", "a-1", "1-2-3"}) EXPECT_FALSE(ParseEntryId(bad).ok()) << bad;
}

}  // namespace
}  // namespace inferd::workqueue
