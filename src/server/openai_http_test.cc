// The generation API against a scripted generator: parsing and validation (OpenAI's error JSON),
// responses, SSE framing, cancellation, the KServe rows of generative models, metrics.
#include "server/openai_http.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "server/fake_text_generator.h"
#include "server/metrics.h"
#include "server/openai_codec.h"

namespace inferd::server {
namespace {

class GenerationApiTest : public ::testing::Test {
 protected:
  GenerationApiTest() {
    auto models = std::make_shared<GenerativeModels>();
    models->ready.push_back({"tiny", fake_, ChatTemplate::Default()});
    models->unavailable["broken"] = "tokenizer.model is corrupt";
    models_ = models;
    handler_ = MakeGenerationHttpHandler(models_, nullptr, nullptr);
  }

  // Runs the handler; the reply must come synchronously unless `pending` is given.
  HttpReply Call(const std::string& method, const std::string& path, const std::string& body,
                 bool* answered = nullptr) {
    HttpRequest req;
    req.method = method;
    req.path = path;
    req.body = std::make_shared<std::string>(body);
    auto out = std::make_shared<HttpReply>();
    auto done = std::make_shared<bool>(false);
    handler_(std::move(req), [out, done](HttpReply r) {
      *out = std::move(r);
      *done = true;
    });
    last_reply_ = out;
    last_done_ = done;
    if (answered != nullptr) {
      *answered = *done;
    } else {
      EXPECT_TRUE(*done) << method << " " << path;
    }
    return *out;
  }
  // The reply of the last Call once it arrived (after Emit), rendered.
  HttpReply Finished() {
    EXPECT_TRUE(*last_done_);
    HttpReply r = *last_reply_;
    if (r.render) r.render(&r);
    return r;
  }

  static rapidjson::Document Json(const std::string& body) {
    rapidjson::Document d;
    d.Parse(body.c_str());
    EXPECT_FALSE(d.HasParseError()) << body;
    return d;
  }
  // Checks OpenAI's error shape and returns "param".
  static std::string ExpectOpenAiError(const HttpReply& r, int status) {
    EXPECT_EQ(r.status, status) << r.body;
    auto d = Json(r.body);
    EXPECT_TRUE(d.IsObject() && d.HasMember("error") && d["error"].IsObject()) << r.body;
    if (!d.IsObject() || !d.HasMember("error")) return "";
    const auto& e = d["error"];
    EXPECT_TRUE(e["message"].IsString() && e["message"].GetStringLength() > 0);
    EXPECT_TRUE(e["type"].IsString());
    EXPECT_TRUE(e.HasMember("code"));
    return e["param"].IsString() ? e["param"].GetString() : "";
  }
  static std::string Drain(HttpStream& s, bool* finished = nullptr) {
    std::vector<std::string> chunks;
    bool f = s.Take(&chunks);
    if (finished != nullptr) *finished = f;
    std::string all;
    for (const auto& c : chunks) all += c;
    return all;
  }

  std::shared_ptr<FakeTextGenerator> fake_ = std::make_shared<FakeTextGenerator>(64);
  std::shared_ptr<const GenerativeModels> models_;
  HttpHandler handler_;
  std::shared_ptr<HttpReply> last_reply_;
  std::shared_ptr<bool> last_done_;
};

TEST_F(GenerationApiTest, BadRequestsGetOpenAiErrors) {
  struct Case {
    std::string body;
    int status;
    std::string param;
  };
  const Case cases[] = {
      {"{not json", 400, ""},
      {"[1,2]", 400, ""},
      {R"({"prompt": "hi"})", 400, "model"},
      {R"({"model": "tiny"})", 400, "prompt"},
      {R"({"model": "tiny", "prompt": "hi", "max_tokens": 0})", 400, "max_tokens"},
      {R"({"model": "tiny", "prompt": "hi", "max_tokens": -3})", 400, "max_tokens"},
      {R"({"model": "tiny", "prompt": "hi", "max_tokens": "5"})", 400, "max_tokens"},
      {R"({"model": "tiny", "prompt": "hi", "max_tokens": 65})", 400, "max_tokens"},
      {R"({"model": "tiny", "prompt": "hi", "max_tokens": 62})", 400, "max_tokens"},
      {R"({"model": "tiny", "prompt": "hi", "temperature": -0.5})", 400, "temperature"},
      {R"({"model": "tiny", "prompt": "hi", "top_p": 0})", 400, "top_p"},
      {R"({"model": "tiny", "prompt": "hi", "top_p": 1.5})", 400, "top_p"},
      {R"({"model": "tiny", "prompt": "hi", "n": 2})", 400, "n"},
      {R"({"model": "tiny", "prompt": "hi", "stop": [1]})", 400, "stop"},
      {R"({"model": "tiny", "prompt": "hi", "stream_options": {"include_usage": true}})", 400,
       "stream_options"},
      {R"({"model": "tiny", "prompt": ["a", "b"]})", 400, "prompt"},
      {R"({"model": "tiny", "prompt": ")" + std::string(70, 'x') + R"("})", 400, "prompt"},
      {R"({"model": "nope", "prompt": "hi"})", 404, "model"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    EXPECT_EQ(ExpectOpenAiError(Call("POST", "/v1/completions", c.body), c.status), c.param);
  }
  EXPECT_TRUE(fake_->ids().empty()) << "no bad request reaches the engine";
  auto nf = Json(Call("POST", "/v1/completions", R"({"model": "nope", "prompt": "x"})").body);
  EXPECT_STREQ(nf["error"]["code"].GetString(), "model_not_found");
  EXPECT_STREQ(nf["error"]["type"].GetString(), "not_found_error");
}

TEST_F(GenerationApiTest, ChatBadRequests) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"model": "tiny"})", "messages"},
      {R"({"model": "tiny", "messages": []})", "messages"},
      {R"({"model": "tiny", "messages": [{"role": "wizard", "content": "x"}]})", "messages"},
      {R"({"model": "tiny", "messages": [{"role": "user", "content": 3}]})", "messages"},
      {R"({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})",
       "top_logprobs"},
      {R"({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "n": 3})", "n"},
  };
  for (const auto& [body, param] : cases) {
    SCOPED_TRACE(body);
    EXPECT_EQ(ExpectOpenAiError(Call("POST", "/v1/chat/completions", body), 400), param);
  }
  EXPECT_EQ(Call("GET", "/v1/chat/completions", "").status, 405);
  ExpectOpenAiError(Call("POST", "/v1/embeddings", "{}"), 404);
}

TEST_F(GenerationApiTest, CompletionAccumulatesEvents) {
  bool answered = true;
  Call("POST", "/v1/completions",
       R"({"model": "tiny", "prompt": "ab", "max_tokens": 7, "temperature": 0, "top_p": 1,
           "seed": 42, "stop": "\n", "top_k": -1, "logprobs": 1, "user": "ignored"})",
       &answered);
  EXPECT_FALSE(answered) << "the reply waits for the last event";
  ASSERT_EQ(fake_->ids().size(), 1u);
  const std::string id = fake_->ids()[0];
  EXPECT_EQ(fake_->prompts()[0], (std::vector<int32_t>{1, 'a' + 3, 'b' + 3}));
  const GenParams p = fake_->params()[0];
  EXPECT_EQ(p.max_tokens, 7);
  EXPECT_EQ(p.temperature, 0.0f);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.seed, uint64_t{42});
  EXPECT_EQ(p.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(p.logprobs, 1);
  GenEvent first = TextEvent("He");
  first.logprobs = {{'H' + 3, -0.5f, {{'H' + 3, -0.5f}}}, {'e' + 3, -1.0f, {{'x' + 3, -0.25f}}}};
  fake_->Emit(id, first);
  EXPECT_FALSE(*last_done_);
  fake_->Emit(id, TextEvent("llo", "length"));
  HttpReply r = Finished();
  ASSERT_EQ(r.status, 200) << r.body;
  auto d = Json(r.body);
  EXPECT_STREQ(d["object"].GetString(), "text_completion");
  EXPECT_STREQ(d["model"].GetString(), "tiny");
  EXPECT_EQ(d["id"].GetString(), id);
  const auto& choice = d["choices"][0];
  EXPECT_STREQ(choice["text"].GetString(), "Hello");
  EXPECT_STREQ(choice["finish_reason"].GetString(), "length");
  EXPECT_STREQ(choice["logprobs"]["tokens"][1].GetString(), "e");
  EXPECT_DOUBLE_EQ(choice["logprobs"]["token_logprobs"][0].GetDouble(), -0.5);
  EXPECT_DOUBLE_EQ(choice["logprobs"]["top_logprobs"][1]["x"].GetDouble(), -0.25);
  EXPECT_EQ(d["usage"]["prompt_tokens"].GetInt(), 5);
  EXPECT_EQ(d["usage"]["completion_tokens"].GetInt(), 7);
  EXPECT_EQ(d["usage"]["total_tokens"].GetInt(), 12);
  EXPECT_EQ(d["usage"]["prompt_tokens_details"]["cached_tokens"].GetInt(), 2);
}

TEST_F(GenerationApiTest, DefaultMaxTokensFitTheContext) {
  bool answered;
  Call("POST", "/v1/completions", R"({"model": "tiny", "prompt": "abc"})", &answered);
  Call("POST", "/v1/chat/completions",
       R"({"model": "tiny", "messages": [{"role": "user", "content": "hi"}]})", &answered);
  ASSERT_EQ(fake_->params().size(), 2u);
  EXPECT_EQ(fake_->params()[0].max_tokens, 16);
  // Chat: the rest of the context. Prompt = BOS + "User: hi\nAssistant:".
  const int prompt = 1 + static_cast<int>(std::string("User: hi\nAssistant:").size());
  EXPECT_EQ(fake_->params()[1].max_tokens, 64 - prompt);
  EXPECT_EQ(fake_->params()[1].stop, std::vector<std::string>{"\nUser:"}) << "template stop";
}

TEST_F(GenerationApiTest, EngineRejectionAndFailure) {
  fake_->FailSubmits(InvalidArgument("duplicate request id"));
  EXPECT_EQ(
      ExpectOpenAiError(Call("POST", "/v1/completions", R"({"model":"tiny","prompt":"a"})"), 400),
      "");
  fake_->FailSubmits(Status::Ok());
  bool answered;
  Call("POST", "/v1/completions", R"({"model":"tiny","prompt":"a"})", &answered);
  GenEvent e = TextEvent("", "error");
  e.error = Internal("runner failed");
  fake_->Emit(fake_->ids().back(), e);
  HttpReply r = Finished();
  ExpectOpenAiError(r, 500);
  EXPECT_NE(r.body.find("runner failed"), std::string::npos);
}

TEST_F(GenerationApiTest, ChatStreamFramesServerSentEvents) {
  HttpReply r = Call("POST", "/v1/chat/completions",
                     R"({"model": "tiny", "stream": true, "stream_options": {"include_usage": true},
                         "messages": [{"role": "system", "content": "Be brief."},
                                      {"role": "user", "content": [{"type": "text", "text": "hi"}]}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "text/event-stream");
  ASSERT_NE(r.stream, nullptr);
  const std::string rendered = "Be brief.\n\nUser: hi\nAssistant:";
  EXPECT_EQ(fake_->prompts()[0], fake_->Encode(rendered));
  const std::string id = fake_->ids()[0];
  fake_->Emit(id, TextEvent("Yes"));
  fake_->Emit(id, TextEvent(""));  // a withheld stop-string prefix: no chunk
  fake_->Emit(id, TextEvent(".", "stop"));
  bool finished = false;
  std::string sse = Drain(*r.stream, &finished);
  EXPECT_TRUE(finished);
  // Split into events: each "data: <payload>\n\n".
  std::vector<std::string> events;
  for (size_t pos = 0; pos < sse.size();) {
    ASSERT_EQ(sse.compare(pos, 6, "data: "), 0) << sse.substr(pos);
    size_t end = sse.find("\n\n", pos);
    ASSERT_NE(end, std::string::npos);
    events.push_back(sse.substr(pos + 6, end - pos - 6));
    pos = end + 2;
  }
  ASSERT_EQ(events.size(), 4u) << sse;  // "Yes" (with role), ".", usage, [DONE]
  auto c0 = Json(events[0]);
  EXPECT_STREQ(c0["object"].GetString(), "chat.completion.chunk");
  EXPECT_STREQ(c0["choices"][0]["delta"]["role"].GetString(), "assistant");
  EXPECT_STREQ(c0["choices"][0]["delta"]["content"].GetString(), "Yes");
  EXPECT_TRUE(c0["choices"][0]["finish_reason"].IsNull());
  EXPECT_TRUE(c0["usage"].IsNull());
  auto c1 = Json(events[1]);
  EXPECT_FALSE(c1["choices"][0]["delta"].HasMember("role"));
  EXPECT_STREQ(c1["choices"][0]["finish_reason"].GetString(), "stop");
  auto usage = Json(events[2]);
  EXPECT_EQ(usage["choices"].Size(), 0u);
  EXPECT_EQ(usage["usage"]["total_tokens"].GetInt(), 12);
  EXPECT_EQ(events[3], "[DONE]");
}

TEST_F(GenerationApiTest, CancelledStreamCancelsTheSequence) {
  HttpReply r =
      Call("POST", "/v1/completions", R"({"model": "tiny", "prompt": "a", "stream": true})");
  ASSERT_NE(r.stream, nullptr);
  const std::string id = fake_->ids()[0];
  fake_->Emit(id, TextEvent("x"));
  EXPECT_NE(Drain(*r.stream).find("\"text\":\"x\""), std::string::npos);
  r.stream->Cancel();  // what the connection does when the client goes away
  EXPECT_EQ(fake_->cancelled(), std::vector<std::string>{id});
  fake_->Emit(id, TextEvent("", "cancelled"));
  EXPECT_EQ(Drain(*r.stream), "") << "nothing is written after a cancel";
}

TEST_F(GenerationApiTest, TritonGenerate) {
  bool answered;
  Call("POST", "/v2/models/tiny/generate",
       R"({"text_input": "ab", "parameters": {"max_tokens": 3, "temperature": 0}})", &answered);
  EXPECT_EQ(fake_->params()[0].max_tokens, 3);
  fake_->Emit(fake_->ids()[0], TextEvent("cd", "length"));
  auto d = Json(Finished().body);
  EXPECT_STREQ(d["text_output"].GetString(), "cd");
  EXPECT_STREQ(d["model_name"].GetString(), "tiny");

  HttpReply s = Call("POST", "/v2/models/tiny/generate_stream", R"({"text_input": "ab"})");
  ASSERT_NE(s.stream, nullptr);
  fake_->Emit(fake_->ids()[1], TextEvent("e"));
  fake_->Emit(fake_->ids()[1], TextEvent("f", "stop"));
  bool finished = false;
  EXPECT_EQ(Drain(*s.stream, &finished),
            "data: {\"model_name\":\"tiny\",\"model_version\":\"1\",\"text_output\":\"e\"}\n\n"
            "data: {\"model_name\":\"tiny\",\"model_version\":\"1\",\"text_output\":\"f\"}\n\n");
  EXPECT_TRUE(finished);

  HttpReply bad = Call("POST", "/v2/models/tiny/generate", R"({"text_input": "a", "top_p": 2})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_TRUE(Json(bad.body)["error"].IsString()) << "KServe's error shape on /v2";
  EXPECT_EQ(Call("POST", "/v2/models/tiny/generate", R"({"parameters": {}})").status, 400);
  EXPECT_EQ(Call("POST", "/v2/models/tiny/infer", "{}").status, 400);
}

TEST_F(GenerationApiTest, ModelsIndexAndReadiness) {
  auto list = Json(Call("GET", "/v1/models", "").body);
  ASSERT_EQ(list["data"].Size(), 1u);
  EXPECT_STREQ(list["data"][0]["id"].GetString(), "tiny");
  EXPECT_EQ(Call("GET", "/v1/models/tiny", "").status, 200);
  ExpectOpenAiError(Call("GET", "/v1/models/other", ""), 404);
  EXPECT_EQ(Call("GET", "/v2/models/tiny/ready", "").status, 200);
  auto md = Json(Call("GET", "/v2/models/tiny", "").body);
  EXPECT_STREQ(md["platform"].GetString(), "inferd_generate");
  auto index = Json(Call("POST", "/v2/repository/index", "").body);
  ASSERT_EQ(index.Size(), 2u);
  EXPECT_STREQ(index[0]["state"].GetString(), "READY");
  EXPECT_STREQ(index[1]["name"].GetString(), "broken");
  EXPECT_STREQ(index[1]["state"].GetString(), "UNAVAILABLE");
  EXPECT_STREQ(index[1]["reason"].GetString(), "tokenizer.model is corrupt");
  EXPECT_EQ(Call("GET", "/v2/models/broken/ready", "").status, 503);
  HttpReply broken = Call("POST", "/v1/completions", R"({"model": "broken", "prompt": "x"})");
  ExpectOpenAiError(broken, 503);
  EXPECT_NE(broken.body.find("tokenizer.model is corrupt"), std::string::npos);
  EXPECT_EQ(Call("GET", "/v2/models/other/ready", "").status, 404) << "no fallback: 404";
}

TEST(ChatTemplate, ParsesAndRejects) {
  auto t = ChatTemplate::Parse(R"({"roles": {"user": {"prefix": "<u>", "suffix": "</u>"}},
                                   "generation_prompt": "<a>", "stop": ["</a>"]})");
  ASSERT_TRUE(t.ok()) << t.status().message();
  auto text = t->Render({{"user", "x"}, {"user", "y"}});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "<u>x</u><u>y</u><a>");
  EXPECT_EQ(t->stop(), std::vector<std::string>{"</a>"});
  EXPECT_FALSE(t->Render({{"system", "x"}}).ok());
  for (const char* bad :
       {"", "[]", "{}", R"({"roles": {"user": 1}})", R"({"roles": {"user": {"prefix": 1}}})",
        R"({"roles": {"user": {}}, "stop": "x"})"}) {
    EXPECT_FALSE(ChatTemplate::Parse(bad).ok()) << bad;
  }
}

TEST(GenerationMetricsText, RendersFamilies) {
  GenerationMetrics m;
  m.model = "tiny";
  m.running = 2;
  m.waiting = 1;
  m.kv_blocks_used = 3;
  m.kv_blocks_total = 12;
  m.kv_block_bytes = 9216;  // an INT8 block of tiny-llama
  m.prefix_queries = 100;
  m.prefix_hits = 64;
  m.preemptions = 4;
  m.spec_draft_tokens = 40;
  m.spec_accepted_tokens = 30;
  m.ttft.bounds = {0.01, 0.1};
  m.ttft.counts = {1, 2, 0};
  m.ttft.count = 3;
  m.ttft.sum = 0.2;
  std::string text = RenderGenerationMetrics({m});
  for (const char* line :
       {"inferd_num_requests_running{model=\"tiny\"} 2\n",
        "inferd_kv_cache_usage_perc{model=\"tiny\"} 0.25\n",
        "inferd_kv_cache_bytes{model=\"tiny\"} 110592\n",
        "inferd_kv_cache_bytes_used{model=\"tiny\"} 27648\n",
        "inferd_prefix_cache_hits_total{model=\"tiny\"} 64\n",
        "inferd_num_preemptions_total{model=\"tiny\"} 4\n",
        "inferd_spec_decode_num_draft_tokens_total{model=\"tiny\"} 40\n",
        "inferd_spec_decode_num_accepted_tokens_total{model=\"tiny\"} 30\n",
        "inferd_spec_decode_draft_acceptance_rate{model=\"tiny\"} 0.75\n",
        "inferd_time_to_first_token_seconds_bucket{model=\"tiny\",le=\"0.1\"} 3\n",
        "inferd_time_to_first_token_seconds_count{model=\"tiny\"} 3\n",
        "# TYPE inferd_inter_token_latency_seconds histogram\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  EXPECT_EQ(RenderGenerationMetrics({}), "");
  EXPECT_EQ(text.find("inferd_moe_expert_tokens_total"), std::string::npos) << "dense model";
}

// Router load per expert: one series per (model, MoE layer, expert); a dense model beside an
// MoE one gets none.
TEST(GenerationMetricsText, RendersTheExpertLoadOfMixtureOfExpertsModels) {
  GenerationMetrics moe, dense;
  moe.model = "moe";
  moe.moe_expert_tokens = {{5, 0, 3}, {1, 7, 0}};
  dense.model = "dense";
  const std::string text = RenderGenerationMetrics({dense, moe});
  for (const char* line : {"# TYPE inferd_moe_expert_tokens_total counter\n",
                           "inferd_moe_expert_tokens_total{model=\"moe\",layer=\"0\",expert=\"0\"} 5\n",
                           "inferd_moe_expert_tokens_total{model=\"moe\",layer=\"0\",expert=\"2\"} 3\n",
                           "inferd_moe_expert_tokens_total{model=\"moe\",layer=\"1\",expert=\"1\"} 7\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  EXPECT_EQ(text.find("inferd_moe_expert_tokens_total{model=\"dense\""), std::string::npos);
  size_t series = 0;
  for (size_t at = text.find("\ninferd_moe_expert_tokens_total{"); at != std::string::npos;
       at = text.find("\ninferd_moe_expert_tokens_total{", at + 1)) {
    ++series;
  }
  EXPECT_EQ(series, 6u);
}

}  // namespace
}  // namespace inferd::server
