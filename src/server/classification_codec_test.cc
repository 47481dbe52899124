// The classification extension on the wire: the `classification` parameter of a requested output
// (HTTP JSON, gRPC int64_param) and classified outputs encoded as BYTES (JSON strings, the binary
// extension's length-prefixed elements, gRPC raw contents).
#include <gtest/gtest.h>

#include "grpc_service.pb.h"
#include "server/grpc_codec.h"
#include "server/http_codec.h"

namespace inferd::server {
namespace {

serving::InferenceResponse Classified() {
  serving::InferenceResponse r{"m", 1, "id", {}, {}};
  r.classified.push_back({"y", {1, 2}, {"0.900000:3:cat", "0.100000:0"}});
  return r;
}

TEST(ClassificationCodecTest, HttpRequestParameter) {
  auto body = [](const std::string& params) {
    return std::make_shared<std::string>(
        R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1]}],
            "outputs": [{"name": "y", "parameters": )" + params + "}]}");
  };
  auto ok = DecodeHttpInferRequest("m", -1, body(R"({"classification": 3})"), std::nullopt);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->request->classification.at("y"), 3);
  for (const char* bad : {R"({"classification": 0})", R"({"classification": "3"})",
                          R"({"classification": 1.5})"}) {
    auto r = DecodeHttpInferRequest("m", -1, body(bad), std::nullopt);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("classification"), std::string::npos);
  }
}

TEST(ClassificationCodecTest, HttpResponseAsBytes) {
  HttpOutputOptions json_options;
  auto json = EncodeHttpInferResponse(Classified(), json_options);
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->body.find(R"({"name":"y","datatype":"BYTES","shape":[1,2],)"
                            R"("data":["0.900000:3:cat","0.100000:0"]})"),
            std::string::npos)
      << json->body;
  HttpOutputOptions binary_options;
  binary_options.binary_by_default = true;
  auto binary = EncodeHttpInferResponse(Classified(), binary_options);
  ASSERT_TRUE(binary.ok());
  const std::string tail = binary->body.substr(binary->json_length);
  EXPECT_EQ(tail, std::string("\x0e\0\0\0" "0.900000:3:cat" "\x0a\0\0\0" "0.100000:0", 32));
  EXPECT_NE(binary->body.find("\"binary_data_size\":32"), std::string::npos) << binary->body;
}

TEST(ClassificationCodecTest, Grpc) {
  inference::ModelInferRequest req;
  req.set_model_name("m");
  auto* in = req.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->mutable_contents()->add_fp32_contents(1);
  auto* out = req.add_outputs();
  out->set_name("y");
  (*out->mutable_parameters())["classification"].set_int64_param(2);
  auto decoded = DecodeGrpcInferRequest(req, nullptr);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ((*decoded)->classification.at("y"), 2);
  (*out->mutable_parameters())["classification"].set_string_param("2");
  EXPECT_FALSE(DecodeGrpcInferRequest(req, nullptr).ok());

  inference::ModelInferResponse res;
  ASSERT_TRUE(EncodeGrpcInferResponse(Classified(), &res).ok());
  ASSERT_EQ(res.outputs_size(), 1);
  EXPECT_EQ(res.outputs(0).datatype(), "BYTES");
  EXPECT_EQ(res.outputs(0).shape_size(), 2);
  EXPECT_EQ(res.raw_output_contents(0),
            std::string("\x0e\0\0\0" "0.900000:3:cat" "\x0a\0\0\0" "0.100000:0", 32));
}

}  // namespace
}  // namespace inferd::server
