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

StatusOr<JobEntry> Decode(Fields f) { return DecodeJob(&f); }

TEST(JobEntry, RoundTripsRequestsAndFiles) {
  JobEntry job{"cnn", "S:reply:1", {{"req.jsonl:7", false, R"({"inputs":{"x":[1]}})", "line 7"}}};
  Fields fields = EncodeJob(job);
  EXPECT_EQ(fields.size(), 5u);  // model, reply, source, request, id: no `items`
  auto back = Decode(fields);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->model, "cnn");
  EXPECT_FALSE(back->packed);
  ASSERT_EQ(back->items.size(), 1u);
  EXPECT_EQ(back->items[0].source, "req.jsonl:7");
  EXPECT_FALSE(back->items[0].is_file);
  EXPECT_EQ(back->items[0].payload, job.items[0].payload);
  EXPECT_EQ(back->items[0].id, "line 7");
  EXPECT_EQ(back->reply, "S:reply:1");

  JobEntry file{"img", "", {{"imgs/a.jpg", true, std::string("\0\xff\x01", 3), "a.jpg"}}};
  back = Decode(EncodeJob(file));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->items[0].is_file);
  EXPECT_EQ(back->items[0].payload, std::string("\0\xff\x01", 3));
  EXPECT_EQ(back->items[0].id, "a.jpg");
  EXPECT_EQ(back->reply, "");
  // The single-item form takes its fields in any order.
  back = Decode({{"request", "{}"}, {"source", "s"}, {"model", "m"}});
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->items[0].source, "s");
}

TEST(JobEntry, PacksRoundTripInOrder) {
  JobEntry pack{"mlp", "S:reply:2", {}, true};
  pack.items.push_back({"a.jsonl:1", false, "{\"inputs\":{}}", "line 1"});
  pack.items.push_back({"b.npy", true, std::string("\x93NUMPY\0", 7), ""});
  pack.items.push_back({"a.jsonl:3", false, "{}", "line 3"});
  auto back = Decode(EncodeJob(pack));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->packed);
  EXPECT_EQ(back->model, "mlp");
  EXPECT_EQ(back->reply, "S:reply:2");
  ASSERT_EQ(back->items.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(back->items[k].source, pack.items[k].source);
    EXPECT_EQ(back->items[k].is_file, pack.items[k].is_file);
    EXPECT_EQ(back->items[k].payload, pack.items[k].payload);
    EXPECT_EQ(back->items[k].id, pack.items[k].id);
  }
  // A pack of one keeps its `items` field.
  JobEntry one{"m", "", {{"s", false, "{}", ""}}, true};
  EXPECT_EQ(EncodeJob(one).size(), 4u);
  // A dead letter of item 1 is a single-item entry of its own.
  auto item = Decode(ItemFields(pack, pack.items[1]));
  ASSERT_TRUE(item.ok()) << item.status().message();
  EXPECT_FALSE(item->packed);
  EXPECT_EQ(item->model, "mlp");
  EXPECT_EQ(item->reply, "S:reply:2");
  EXPECT_EQ(item->items[0].payload, pack.items[1].payload);
}

TEST(JobEntry, AppendedXaddIsTheEncodedFields) {
  JobEntry pack{"mlp", "R", {{"s1", false, "{}", "line 1"}, {"s2", true, std::string("\0\r\n", 3), ""}},
                true};
  RespBuffer want;
  std::vector<std::string> args = {"XADD", "jobs", "*"};
  for (auto& [n, v] : EncodeJob(pack)) {
    args.push_back(n);
    args.push_back(v);
  }
  want.Command(args);
  RespBuffer got;
  AppendJobXadd("jobs", pack, &got);
  EXPECT_TRUE(got.complete());
  EXPECT_EQ(got.commands(), 1u);
  EXPECT_EQ(got.data(), want.data());
  EXPECT_EQ(want.data().substr(0, 15), "*19\r\n$4\r\nXADD\r\n");
}

TEST(RespBuffer, FormatsCommandsAndCountsArguments) {
  RespBuffer b;
  b.Command({"SET", "k", std::string_view("a\0b", 3)});
  b.Begin(2);
  b.Arg("EXPIRE");
  EXPECT_FALSE(b.complete());
  b.Arg(int64_t{-42});
  EXPECT_TRUE(b.complete());
  EXPECT_EQ(b.commands(), 2u);
  using namespace std::string_literals;
  EXPECT_EQ(b.data(), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\na\0b\r\n"
                      "*2\r\n$6\r\nEXPIRE\r\n$3\r\n-42\r\n"s);
  b.Clear();
  EXPECT_EQ(b.commands(), 0u);
  EXPECT_TRUE(b.data().empty());
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
      // Packs.
      {{{"model", "m"}, {"items", "2"}, {"source", "s"}, {"request", "{}"}}, "says 2"},
      {{{"model", "m"}, {"items", "0"}, {"source", "s"}, {"request", "{}"}}, "1..4096"},
      {{{"model", "m"}, {"items", "x"}, {"source", "s"}, {"request", "{}"}}, "not a count"},
      {{{"model", "m"}, {"items", "1"}, {"request", "{}"}, {"source", "s"}}, "before the first"},
      {{{"model", "m"}, {"items", "2"}, {"source", "s"}, {"request", "{}"}, {"source", "t"}},
       "item 1"},
      {{{"model", "m"}, {"items", "1"}, {"source", "s"}, {"request", "{}"}, {"id", "a"},
        {"id", "b"}},
       "twice"},
      {{{"model", "m"}, {"items", "1"}, {"items", "1"}, {"source", "s"}, {"request", "{}"}},
       "twice"},
      {{{"items", "1"}, {"source", "s"}, {"request", "{}"}}, "'model'"},
  };
  for (const Case& c : cases) {
    Fields f = c.fields;
    auto job = DecodeJob(&f);
    ASSERT_FALSE(job.ok()) << c.want;
    EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(job.status().message().find(c.want), std::string::npos) << job.status().message();
    EXPECT_EQ(f, c.fields) << "a refused entry's fields are left as they were";
  }
  // Unknown fields are ignored.
  EXPECT_TRUE(Decode({{"model", "m"}, {"source", "s"}, {"request", "{}"}, {"v2", "x"}}).ok());
  EXPECT_TRUE(
      Decode({{"model", "m"}, {"items", "1"}, {"source", "s"}, {"v2", "x"}, {"request", "{}"}})
          .ok());
  EXPECT_EQ(EntrySources({{"model", "m"}, {"source", "a"}, {"source", "b"}}),
            (std::vector<std::string>{"a", "b"}));
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
