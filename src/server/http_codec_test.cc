#include "server/http_codec.h"

#include <google/protobuf/stubs/logging.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <rapidjson/document.h>

#include "server/bytes_codec.h"
#include "server/grpc_codec.h"

namespace inferd::server {
namespace {

using serving::InferenceResponse;

std::shared_ptr<std::string> Body(std::string s) { return std::make_shared<std::string>(std::move(s)); }

StatusOr<DecodedHttpRequest> Decode(const std::string& json, std::optional<size_t> header = {}) {
  return DecodeHttpInferRequest("m", -1, Body(json), header);
}

void ExpectInvalid(const std::string& json, const std::string& needle,
                   std::optional<size_t> header = {}) {
  auto r = Decode(json, header);
  ASSERT_FALSE(r.ok()) << json;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_NE(r.status().message().find(needle), std::string::npos)
      << "message '" << r.status().message() << "' lacks '" << needle << "'";
}

TEST(HttpCodec, DecodesFlatAndNestedJson) {
  auto r = Decode(R"({"id":"r1","parameters":{"priority":2,"timeout":1500},
    "inputs":[{"name":"x","datatype":"FP32","shape":[2,2],"data":[[1,2],[3,4.5]]},
              {"name":"y","datatype":"INT64","shape":[3],"data":[1,-2,3]},
              {"name":"b","datatype":"BOOL","shape":[2],"data":[true,false]},
              {"name":"h","datatype":"FP16","shape":[1],"data":[0.5]}],
    "outputs":[{"name":"z","parameters":{"binary_data":true}}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& req = *r->request;
  EXPECT_EQ(req.model_name, "m");
  EXPECT_EQ(req.id, "r1");
  EXPECT_EQ(req.priority, 2u);
  EXPECT_EQ(req.timeout.count(), 1500);
  ASSERT_EQ(req.inputs.size(), 4u);
  EXPECT_EQ(req.inputs[0].tensor.shape(), (Shape{2, 2}));
  EXPECT_FLOAT_EQ(req.inputs[0].tensor.data<float>()[3], 4.5f);
  EXPECT_EQ(req.inputs[1].tensor.data<int64_t>()[1], -2);
  EXPECT_TRUE(req.inputs[2].tensor.data<bool>()[0]);
  EXPECT_FLOAT_EQ(static_cast<float>(req.inputs[3].tensor.data<Float16>()[0]), 0.5f);
  ASSERT_EQ(req.requested_outputs.size(), 1u);
  EXPECT_TRUE(r->output_options.IsBinary("z"));
  EXPECT_FALSE(r->output_options.IsBinary("other"));
}

TEST(HttpCodec, BinaryInputIsAViewIntoTheBody) {
  std::string json =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[4],"parameters":{"binary_data_size":16}}],"parameters":{"binary_data_output":true}})";
  // Pad the JSON so the binary part starts 4-byte aligned relative to the string's buffer.
  while (json.size() % 8 != 0) json += ' ';
  float values[4] = {1, 2, 3, 4};
  auto body = Body(json + std::string(reinterpret_cast<char*>(values), sizeof(values)));
  auto r = DecodeHttpInferRequest("m", 3, body, json.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Tensor& t = r->request->inputs[0].tensor;
  EXPECT_EQ(t.raw_data(), body->data() + json.size());  // no copy
  EXPECT_EQ(t.data<float>()[2], 3.0f);
  EXPECT_EQ(r->request->model_version, 3);
  EXPECT_TRUE(r->output_options.IsBinary("anything"));
}

TEST(HttpCodec, RejectsBadRequests) {
  ExpectInvalid("{", "malformed JSON");
  ExpectInvalid("[]", "JSON object");
  ExpectInvalid("{} junk", "malformed JSON");
  ExpectInvalid("{}", "missing 'inputs'");
  ExpectInvalid(R"({"inputs":[]})", "empty");
  ExpectInvalid(R"({"inputs":[{"datatype":"FP32","shape":[1],"data":[1]}]})", "missing 'name'");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FLOAT","shape":[1],"data":[1]}]})", "x");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[-1],"data":[1]}]})",
                "non-negative");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[3],"data":[1,2]}]})",
                "holds 2 elements");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1,2]}]})",
                "more elements");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[300]}]})",
                "not a valid INT8");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":["1"]}]})",
                "string");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[[[1]]]}]})",
                "nested deeper");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[100000000],"data":[1]}]})",
                "body is only");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]},
                              {"name":"x","datatype":"FP32","shape":[1],"data":[1]}]})",
                "more than once");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1]}]})", "needs 'data'");
  ExpectInvalid(R"({"parameters":{"priority":-1},"inputs":[]})", "priority");
  ExpectInvalid(R"({"parameters":{"binary_data_output":1},"inputs":[]})", "binary_data_output");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"BYTES","shape":[2],"data":["a",1]}]})",
                "element 1 (number) is not a valid BYTES value");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"BYTES","shape":[2],"data":["a"]}]})",
                "holds 1 elements");
  // Binary extension.
  const std::string bin =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]})";
  ExpectInvalid(bin + "1234", "truncated", bin.size());
  ExpectInvalid(bin + "123456789", "binary data", bin.size());
  ExpectInvalid(bin, "exceeds the body", bin.size() + 1);
  ExpectInvalid(
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":4}}]})",
      "needs 8");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}]})", "empty",
                size_t{0});
}

TEST(HttpCodec, DeepNestingDoesNotOverflowTheStack) {
  std::string deep(200000, '[');
  ExpectInvalid(deep, "malformed");
  std::string data = R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":)" +
                     std::string(100000, '[') + "1" + std::string(100000, ']') + "}]}";
  ExpectInvalid(data, "nested deeper");
}

TEST(HttpCodec, EncodesJsonAndBinaryOutputs) {
  InferenceResponse resp;
  resp.model_name = "m";
  resp.model_version = 2;
  resp.id = "r";
  resp.outputs.emplace_back("a", Tensor::FromVector<float>({0.1f, 2.5f}));
  resp.outputs.emplace_back("b", Tensor::FromVector<int32_t>({7, 8, 9}));
  HttpOutputOptions opts;
  auto json = EncodeHttpInferResponse(resp, opts);
  ASSERT_TRUE(json.ok());
  EXPECT_FALSE(json->has_binary());
  EXPECT_EQ(json->body,
            R"({"model_name":"m","model_version":"2","id":"r","outputs":[)"
            R"({"name":"a","datatype":"FP32","shape":[2],"data":[0.1,2.5]},)"
            R"({"name":"b","datatype":"INT32","shape":[3],"data":[7,8,9]}]})");
  opts.binary["b"] = true;
  auto bin = EncodeHttpInferResponse(resp, opts);
  ASSERT_TRUE(bin.ok());
  ASSERT_TRUE(bin->has_binary());
  EXPECT_EQ(bin->body.size(), bin->json_length + 12);
  EXPECT_NE(bin->body.substr(0, bin->json_length).find(R"("binary_data_size":12)"),
            std::string::npos);
  int32_t back[3];
  std::memcpy(back, bin->body.data() + bin->json_length, 12);
  EXPECT_EQ(back[2], 9);
}

TEST(HttpCodec, StatusMapping) {
  EXPECT_EQ(HttpStatusFor(InvalidArgument("x")), 400);
  EXPECT_EQ(HttpStatusFor(NotFound("x")), 404);
  EXPECT_EQ(HttpStatusFor(Unavailable("x")), 503);
  EXPECT_EQ(HttpStatusFor(Internal("x")), 500);
  EXPECT_EQ(JsonError("bad \"x\""), R"({"error":"bad \"x\""})");
  EXPECT_TRUE(ParseModelVersion("12").ok());
  EXPECT_FALSE(ParseModelVersion("0").ok());
  EXPECT_FALSE(ParseModelVersion("1x").ok());
  EXPECT_FALSE(ParseModelVersion("").ok());
  EXPECT_FALSE(ParseModelVersion("99999999999999999999").ok());
}

// Fuzz: mutate valid bodies (byte flips, truncation, splices, random header lengths) and random
// bytes. Decoding must never crash and every failure must be INVALID_ARGUMENT.
TEST(HttpCodec, FuzzDecoderNeverCrashes) {
  const std::vector<std::string> seeds = {
      R"({"id":"a","parameters":{"priority":1,"timeout":5,"binary_data_output":true},"inputs":[{"name":"x","datatype":"FP32","shape":[2,2],"data":[[1,2],[3,4]]}],"outputs":[{"name":"y","parameters":{"binary_data":true}}]})",
      R"({"inputs":[{"name":"x","datatype":"INT64","shape":[3],"data":[1,2,3]},{"name":"b","datatype":"BOOL","shape":[1],"data":[true]}]})",
      R"({"inputs":[{"name":"x","datatype":"UINT8","shape":[4],"parameters":{"binary_data_size":4}}]})" "ABCD",
  };
  std::mt19937 rng(1234);
  int ok = 0, invalid = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s = seeds[rng() % seeds.size()];
    std::optional<size_t> header;
    if (s.back() == 'D') header = s.size() - 4;
    int mutations = 1 + static_cast<int>(rng() % 4);
    for (int m = 0; m < mutations && !s.empty(); ++m) {
      size_t pos = rng() % s.size();
      switch (rng() % 6) {
        case 0: s[pos] = static_cast<char>(rng()); break;
        case 1: s.erase(pos, 1 + rng() % 8); break;
        case 2: s.insert(pos, 1, "[]{}\",:0-9e."[rng() % 13]); break;
        case 3: s.resize(pos); break;
        case 4: s.insert(pos, s.substr(rng() % s.size(), rng() % 16)); break;
        case 5: header = rng() % (s.size() + 4); break;
      }
    }
    if (iter % 10 == 0) {  // pure noise
      s.resize(rng() % 64);
      for (char& c : s) c = static_cast<char>(rng());
    }
    auto r = Decode(s, header);
    if (r.ok()) {
      ++ok;
    } else {
      ++invalid;
      ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
      ASSERT_FALSE(r.status().message().empty());
    }
  }
  EXPECT_GT(invalid, 1000);
  EXPECT_GT(ok, 10);  // some mutations stay valid (e.g. digit changes)
}

TEST(GrpcCodec, DecodesTypedAndRawContents) {
  inference::ModelInferRequest msg;
  msg.set_model_name("m");
  msg.set_model_version("2");
  (*msg.mutable_parameters())["priority"].set_int64_param(3);
  auto* in = msg.add_inputs();
  in->set_name("x");
  in->set_datatype("INT8");
  in->add_shape(2);
  in->mutable_contents()->add_int_contents(-5);
  in->mutable_contents()->add_int_contents(7);
  auto r = DecodeGrpcInferRequest(msg, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->model_version, 2);
  EXPECT_EQ((*r)->priority, 3u);
  EXPECT_EQ((*r)->inputs[0].tensor.data<int8_t>()[0], -5);

  in->mutable_contents()->set_int_contents(0, 1000);
  EXPECT_EQ(DecodeGrpcInferRequest(msg, nullptr).status().code(), StatusCode::kInvalidArgument);

  in->clear_contents();
  in->set_datatype("FP32");
  float v[2] = {1.5f, 2.5f};
  msg.add_raw_input_contents(std::string(reinterpret_cast<char*>(v), 8));
  r = DecodeGrpcInferRequest(msg, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->inputs[0].tensor.data<float>()[1], 2.5f);
  msg.set_raw_input_contents(0, "123");
  EXPECT_EQ(DecodeGrpcInferRequest(msg, nullptr).status().code(), StatusCode::kInvalidArgument);
  msg.set_model_version("x");
  EXPECT_EQ(DecodeGrpcInferRequest(msg, nullptr).status().code(), StatusCode::kInvalidArgument);
}

TEST(GrpcCodec, FuzzDecoderNeverCrashes) {
  inference::ModelInferRequest seed;
  seed.set_model_name("m");
  auto* in = seed.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(2);
  seed.add_raw_input_contents(std::string(8, '\0'));
  const std::string bytes = seed.SerializeAsString();
  google::protobuf::LogSilencer quiet;  // mutated strings are often invalid UTF-8
  std::mt19937 rng(99);
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s = bytes;
    for (int m = 0; m < 3; ++m) s[rng() % s.size()] = static_cast<char>(rng());
    inference::ModelInferRequest msg;
    if (!msg.ParseFromString(s)) continue;
    auto r = DecodeGrpcInferRequest(msg, nullptr);
    if (!r.ok()) {
      ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

// Strings with the awkward cases: empty, an embedded NUL, non-ASCII UTF-8.
const std::vector<std::string>& Awkward() {
  static const std::vector<std::string> v = {"", std::string("a\0b", 3),
                                             "h\xc3\xa9llo \xe2\x82\xac"};
  return v;
}

std::string LengthPrefixed(const std::vector<std::string>& v) {
  Tensor t = *Tensor::FromStrings(v, {static_cast<int64_t>(v.size())});
  std::string out;
  AppendLengthPrefixed(t, &out);
  return out;
}

TEST(BytesCodec, LengthPrefixedRoundTripsAndRejectsTruncation) {
  const std::string wire = LengthPrefixed(Awkward());
  EXPECT_EQ(wire.size(), 3 * 4 + 0 + 3 + 10u);
  EXPECT_EQ(wire.substr(0, 8), std::string("\0\0\0\0\3\0\0\0", 8));
  auto t = DecodeLengthPrefixed(wire, {3}, "x");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(t->data<std::string>()[i], Awkward()[i]);
  EXPECT_NE(DecodeLengthPrefixed(wire.substr(0, 13), {3}, "x").status().message().find(
                "element 2 has a truncated 4-byte length prefix"),
            std::string::npos);
  EXPECT_NE(DecodeLengthPrefixed(wire.substr(0, wire.size() - 1), {3}, "x")
                .status().message().find("claims 10 bytes"),
            std::string::npos);
  EXPECT_NE(DecodeLengthPrefixed(wire + "z", {3}, "x").status().message().find("after its"),
            std::string::npos);
  // A length prefix of 4 GiB on a tiny buffer is refused, not allocated.
  EXPECT_FALSE(DecodeLengthPrefixed(std::string("\xff\xff\xff\xff", 4), {1}, "x").ok());
  EXPECT_FALSE(DecodeLengthPrefixed(wire, {1000}, "x").ok());
}

TEST(HttpCodec, BytesJsonAndBinaryInputs) {
  auto r = Decode(R"({"inputs":[{"name":"s","datatype":"BYTES","shape":[1,3],)"
                  R"("data":[["", "a\u0000b", "h\u00e9llo \u20ac"]]}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Tensor& s = r->request->inputs[0].tensor;
  ASSERT_EQ(s.dtype(), DataType::kString);
  ASSERT_EQ(s.shape(), (Shape{1, 3}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(s.data<std::string>()[i], Awkward()[i]);

  const std::string wire = LengthPrefixed(Awkward());
  const std::string json = fmt::format(
      R"({{"inputs":[{{"name":"s","datatype":"BYTES","shape":[3],)"
      R"("parameters":{{"binary_data_size":{}}}}}]}})", wire.size());
  r = Decode(json + wire, json.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r->request->inputs[0].tensor.data<std::string>()[i], Awkward()[i]);
  }
  // A body cut inside a length prefix or an element: the size no longer matches.
  ExpectInvalid(json + wire.substr(0, wire.size() - 2), "truncated", json.size());
  const std::string short_json = fmt::format(
      R"({{"inputs":[{{"name":"s","datatype":"BYTES","shape":[3],)"
      R"("parameters":{{"binary_data_size":{}}}}}]}})", 6);
  ExpectInvalid(short_json + wire.substr(0, 6), "truncated", short_json.size());
}

TEST(HttpCodec, EncodesBytesOutputsAsJsonStringsAndLengthPrefixed) {
  InferenceResponse resp;
  resp.model_name = "m";
  resp.model_version = 1;
  resp.outputs.emplace_back("s", *Tensor::FromStrings(Awkward(), {3}));
  HttpOutputOptions opts;
  auto json = EncodeHttpInferResponse(resp, opts);
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  EXPECT_NE(json->body.find(R"("datatype":"BYTES","shape":[3],"data":["","a\u0000b","h)"),
            std::string::npos)
      << json->body;
  opts.binary_by_default = true;
  auto bin = EncodeHttpInferResponse(resp, opts);
  ASSERT_TRUE(bin.ok());
  const std::string wire = LengthPrefixed(Awkward());
  EXPECT_EQ(bin->body.substr(bin->json_length), wire);
  EXPECT_NE(bin->body.find(fmt::format(R"("binary_data_size":{})", wire.size())),
            std::string::npos);
}

TEST(GrpcCodec, BytesContentsRawAndOutputs) {
  inference::ModelInferRequest msg;
  msg.set_model_name("m");
  auto* in = msg.add_inputs();
  in->set_name("s");
  in->set_datatype("BYTES");
  in->add_shape(3);
  for (const std::string& v : Awkward()) in->mutable_contents()->add_bytes_contents(v);
  auto r = DecodeGrpcInferRequest(msg, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ((*r)->inputs[0].tensor.data<std::string>()[i], Awkward()[i]);
  }
  in->mutable_contents()->add_bytes_contents("extra");
  EXPECT_EQ(DecodeGrpcInferRequest(msg, nullptr).status().code(), StatusCode::kInvalidArgument);

  in->clear_contents();
  msg.add_raw_input_contents(LengthPrefixed(Awkward()));
  r = DecodeGrpcInferRequest(msg, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->inputs[0].tensor.data<std::string>()[2], Awkward()[2]);
  msg.set_raw_input_contents(0, std::string("\5\0", 2));  // truncated length prefix
  auto bad = DecodeGrpcInferRequest(msg, nullptr);
  ASSERT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("truncated"), std::string::npos);

  InferenceResponse resp;
  resp.model_name = "m";
  resp.outputs.emplace_back("s", *Tensor::FromStrings(Awkward(), {3}));
  inference::ModelInferResponse out;
  ASSERT_TRUE(EncodeGrpcInferResponse(resp, &out).ok());
  EXPECT_EQ(out.outputs(0).datatype(), "BYTES");
  EXPECT_EQ(out.raw_output_contents(0), LengthPrefixed(Awkward()));
}

}  // namespace
}  // namespace inferd::server

namespace inferd::server {
namespace {

TEST(HttpCodec, DecodesSequenceParameters) {
  const std::string in = R"("inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}])";
  auto r = Decode(R"({"parameters":{"sequence_id":18446744073709551615,"sequence_start":true,)"
                  R"("sequence_end":false},)" + in + "}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->request->sequence_id, 18446744073709551615ull);
  EXPECT_TRUE(r->request->sequence_start);
  EXPECT_FALSE(r->request->sequence_end);
  r = Decode(R"({"parameters":{"sequence_id":"abc","sequence_end":true},)" + in + "}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->request->sequence_id_string, "abc");
  EXPECT_EQ(r->request->sequence_id, 0u);
  EXPECT_TRUE(r->request->sequence_end);
  ExpectInvalid(R"({"parameters":{"sequence_id":-1},)" + in + "}", "sequence_id");
  ExpectInvalid(R"({"parameters":{"sequence_id":1.5},)" + in + "}", "sequence_id");
  ExpectInvalid(R"({"parameters":{"sequence_start":1},)" + in + "}", "sequence_start");
}

TEST(GrpcCodec, DecodesSequenceParameters) {
  inference::ModelInferRequest msg;
  msg.set_model_name("m");
  auto* in = msg.add_inputs();
  in->set_name("x");
  in->set_datatype("INT32");
  in->add_shape(1);
  in->mutable_contents()->add_int_contents(1);
  auto& params = *msg.mutable_parameters();
  params["sequence_id"].set_int64_param(42);
  params["sequence_start"].set_bool_param(true);
  auto r = DecodeGrpcInferRequest(msg, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->sequence_id, 42u);
  EXPECT_TRUE((*r)->sequence_start);
  EXPECT_FALSE((*r)->sequence_end);
  params["sequence_id"].set_uint64_param(18446744073709551615ull);
  params["sequence_end"].set_bool_param(true);
  r = DecodeGrpcInferRequest(msg, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->sequence_id, 18446744073709551615ull);
  EXPECT_TRUE((*r)->sequence_end);
  params["sequence_id"].set_string_param("corr-1");
  r = DecodeGrpcInferRequest(msg, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->sequence_id_string, "corr-1");
  params["sequence_id"].set_int64_param(-4);
  EXPECT_EQ(DecodeGrpcInferRequest(msg, nullptr).status().code(), StatusCode::kInvalidArgument);
  params["sequence_id"].set_int64_param(4);
  params["sequence_start"].set_int64_param(1);
  auto bad = DecodeGrpcInferRequest(msg, nullptr);
  EXPECT_NE(bad.status().message().find("sequence_start"), std::string::npos);
}

}  // namespace
}  // namespace inferd::server

namespace inferd::server {
namespace {

// Issue 15: JSON out is always valid JSON; non-finite values are protobuf-JSON strings.
TEST(HttpCodecHardening, NonFiniteFloatsAreStringsNotLiterals) {
  InferenceResponse resp;
  resp.model_name = "m";
  resp.outputs.emplace_back(
      "f", Tensor::FromVector<float>({std::numeric_limits<float>::quiet_NaN(),
                                      std::numeric_limits<float>::infinity(),
                                      -std::numeric_limits<float>::infinity(), 1.5f}));
  resp.outputs.emplace_back("d", Tensor::FromVector<double>({std::numeric_limits<double>::infinity()}));
  auto json = EncodeHttpInferResponse(resp, HttpOutputOptions{});
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->body.find(R"("data":["NaN","Infinity","-Infinity",1.5])"), std::string::npos)
      << json->body;
  EXPECT_NE(json->body.find(R"("data":["Infinity"])"), std::string::npos) << json->body;
  rapidjson::Document doc;
  doc.Parse(json->body.data(), json->body.size());  // strict: no NaN/Infinity literals
  EXPECT_FALSE(doc.HasParseError()) << json->body;
}

TEST(HttpCodecHardening, NonFiniteStringsInAndFiniteOverflowRejected) {
  auto r = Decode(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[3],
                      "data":["NaN","Infinity","-Infinity"]}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const float* x = r->request->inputs[0].tensor.data<float>();
  EXPECT_TRUE(std::isnan(x[0]));
  EXPECT_EQ(x[1], std::numeric_limits<float>::infinity());
  EXPECT_EQ(x[2], -std::numeric_limits<float>::infinity());
  // The literals Python's json.dumps writes are read too (never written).
  r = Decode(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"data":[NaN,-Infinity]}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(std::isnan(r->request->inputs[0].tensor.data<float>()[0]));
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[NaN]}]})",
                "not a valid INT32");
  // 3.5e38 does not fit FP32 (it used to become Infinity); 70000 does not fit FP16.
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[3.5e38]}]})",
                "element 0 (number) is not a valid FP32 value");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP16","shape":[1],"data":[70000]}]})",
                "not a valid FP16 value");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":["nan"]}]})",
                "element 0 (string) is not a valid FP32 value");
  // FP64 holds 3.5e38.
  EXPECT_TRUE(Decode(R"({"inputs":[{"name":"x","datatype":"FP64","shape":[1],"data":[3.5e38]}]})").ok());
}

TEST(HttpCodecHardening, InvalidUtf8IsRejectedInAndReplacedOut) {
  ExpectInvalid("{\"id\":\"\xff\xfe\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],"
                "\"data\":[1]}]}",
                "Invalid encoding");
  ExpectInvalid("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"BYTES\",\"shape\":[1],"
                "\"data\":[\"\xc3\"]}]}",
                "Invalid encoding");
  InferenceResponse resp;
  resp.model_name = "m\xff";
  resp.id = "\xc3(";
  resp.outputs.emplace_back("s", *Tensor::FromStrings({"ok", std::string("a\xffz")}, {2}));
  auto json = EncodeHttpInferResponse(resp, HttpOutputOptions{});
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->body.find("\"a\xEF\xBF\xBDz\""), std::string::npos) << json->body;
  EXPECT_NE(json->body.find("\"id\":\"\xEF\xBF\xBD(\""), std::string::npos) << json->body;
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseValidateEncodingFlag>(json->body.data(), json->body.size());
  EXPECT_FALSE(doc.HasParseError()) << json->body;
  const std::string err = JsonError("bad \xff name");
  doc.Parse<rapidjson::kParseValidateEncodingFlag>(err.data(), err.size());
  EXPECT_FALSE(doc.HasParseError()) << err;
}

// `data` arrays are counted before the tensor is allocated and parsed straight into it.
TEST(HttpCodecHardening, DataIsCountedBeforeItIsAllocated) {
  // Fewer, more, deeper: the same messages as the DOM path.
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2,2],"data":[[1,2],[3]]}]})",
                "holds 3 elements but shape [2, 2] needs 4");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"INT32","shape":[2],"data":[1,2,3]}]})",
                "more elements than the shape's 2");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"INT32","shape":[2],"data":[[[1]],2]}]})",
                "nested deeper");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"INT32","shape":[2],"data":[1,{"a":[1,2]}]}]})",
                "element 1 (object) is not a valid INT32 value");
  // A data array before the datatype and shape, and keys named like the filtered ones elsewhere.
  auto r = Decode(R"({"data":[9],"inputs":[{"data":[[1,2],[3,4]],"name":"x","shape":[2,2],
                      "datatype":"INT64","parameters":{"data":[5]}},
                     {"name":"y","datatype":"BYTES","shape":[2],"data":["a","b\u0000c"]}],
                      "outputs":[{"name":"z"}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& inputs = r->request->inputs;
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[0].tensor.data<int64_t>()[3], 4);
  EXPECT_EQ(inputs[1].tensor.data<std::string>()[1], std::string("b\0c", 3));
  EXPECT_EQ(r->request->requested_outputs, std::vector<std::string>{"z"});
  // Values outside `data` are bounded: a million-element junk array is refused.
  std::string junk = R"({"junk":[)";
  for (int i = 0; i < (1 << 20) + 8; ++i) junk += "0,";
  junk += R"(0],"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}]})";
  ExpectInvalid(junk, "values outside input 'data'");
}

}  // namespace
}  // namespace inferd::server
